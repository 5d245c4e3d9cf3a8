"""GraphInferrer's whole-graph ``embeddings`` pass one layer at a time, over chunks of nodes.

The export's step functions (:func:`gnn_trainer_component.model.whole_graph.layer_functions`)
run as PyG's and DGL's layer-wise inference does: the graph is prepared once,
then each layer updates every node set a chunk of nodes at a time, on the
chunk's :class:`~gnn_trainer_component.in_memory.blocks.Block` (its nodes,
their incident edges, the other ends), and the embeddings are read out of the
last layer's states. Memory holds the node states of two layers and one
chunk's edges, instead of every edge's messages at once.

This equals the one-pass model where each layer's new state of a node reads
only its own state, its incident edges and their other ends' states (mean,
sum or attention over neighbours); a layer that reads further (a sender's
degree, as GCN's normalisation; context pooling; edge states a layer updates)
does not: GraphInferrer runs both ways on a :func:`sample` of the graph first
(:mod:`~gnn_trainer_component.inferrer.full`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import tensorflow as tf

from gnn_trainer_component.graph import csr
from gnn_trainer_component.graph import readout
from gnn_trainer_component.in_memory import blocks as blocks_lib
from gnn_trainer_component.in_memory import store as store_lib
from gnn_trainer_component.model import whole_graph

#: Nodes per call of the readout.
READOUT_ROWS = 65536
#: Nodes whose neighbourhood is the :func:`sample`.
SAMPLE_NODES = 64
_SIZE, _SOURCE, _TARGET = whole_graph.SIZE, whole_graph.SOURCE, whole_graph.TARGET


def _numpy(nested: Any) -> Any:
  return tf.nest.map_structure(lambda t: t.numpy(), nested)


def _block_input(state: Mapping[str, Any], block: blocks_lib.Block, want: Mapping[str, Any]
                 ) -> dict[str, Any]:
  """The block's part of ``state`` (node and edge rows), as ``want`` takes it.

  ``state``'s features are tensors: TensorFlow gathers the block's rows (one
  copy, where NumPy's indexing and the conversion of its result make two).
  """
  empty = np.zeros([0], np.int64)
  out = {"context": {k: state["context"][k] for k in want["context"]}, "nodes": {}, "edges": {}}
  for name, fields in want["nodes"].items():
    rows = block.nodes.get(name, empty)
    out["nodes"][name] = {k: tf.gather(state["nodes"][name][k], rows) for k in fields
                          if k != _SIZE}
    out["nodes"][name][_SIZE] = np.array([len(rows)], fields[_SIZE].dtype.as_numpy_dtype)
  for name, fields in want["edges"].items():
    rows, src, tgt = block.edges.get(name, (empty, empty, empty))
    dtype = fields[_SIZE].dtype.as_numpy_dtype
    out["edges"][name] = {k: tf.gather(state["edges"][name][k], rows) for k in fields
                          if not k.startswith("#")}
    out["edges"][name].update({_SIZE: np.array([len(rows)], dtype), _SOURCE: src.astype(dtype),
                               _TARGET: tgt.astype(dtype)})
  return out


def _step(function: Any, node_wise: bool, state: dict[str, Any], cut: blocks_lib.Blocks,
          max_edges: int, ends: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
  """One layer's new node features of every node set, chunk by chunk."""
  want = whole_graph.input_spec(function)
  new = {}
  for name in want["nodes"]:
    if name not in cut.sizes:  # the readout's node set: no node to update there
      continue
    size = cut.sizes[name]
    chunks = ([(a, min(a + max_edges, size)) for a in range(0, size, max_edges)] if node_wise
              else cut.chunks(name, max_edges, ends))
    for first, stop in chunks:
      block = cut.block(name, first, stop, ends=() if node_wise else ends)
      got = function(_block_input(state, block, want))["nodes"][name]
      for feature, value in got.items():
        value = tf.gather(value, block.rows).numpy()  # the chunk's rows only
        if feature not in new.setdefault(name, {}):
          new[name][feature] = np.empty([size, *value.shape[1:]], value.dtype)
        new[name][feature][first:stop] = value
  return new


def run(model: Any, layers: Mapping[str, Any], prepared_input: Mapping[str, Any],
        cut: blocks_lib.Blocks, node_set: str, rows: np.ndarray, max_edges: int,
        ends: Sequence[str] = blocks_lib.BOTH) -> dict[str, np.ndarray]:
  """The ``embeddings`` outputs of ``rows`` of ``node_set``, layer by layer in chunks.

  Args:
    model: The loaded export.
    layers: The ``layers`` of its whole-graph description.
    prepared_input: The input of ``graph_prepare``: the whole graph (no node
      read out).
    cut: The graph's :func:`blocks`.
    node_set: The node set read out.
    rows: Its rows to read out, in order.
    max_edges: The most edges of a chunk of a layer (nodes of a chunk of a
      node-wise layer).
    ends: The ends of an edge that attach it to a chunk (:mod:`blocks`).
  """
  state = getattr(model, layers["prepare"])(prepared_input)  # features stay tensors
  for name, kind in layers["steps"]:
    new = _step(getattr(model, name), kind == whole_graph.NODE_WISE, state, cut, max_edges, ends)
    for set_name, features in new.items():
      state["nodes"][set_name] = {_SIZE: state["nodes"][set_name][_SIZE],
                                  **{k: tf.convert_to_tensor(v) for k, v in features.items()}}
  read = getattr(model, layers["readout"])
  want, outputs = whole_graph.input_spec(read), {}
  for first in range(0, len(rows), READOUT_ROWS):
    chunk = rows[first:first + READOUT_ROWS]
    block = blocks_lib.Block(nodes={node_set: chunk}, edges={}, rows=chunk)
    inputs = _block_input(state, block, {**want, "nodes": {
        k: v for k, v in want["nodes"].items() if k != readout.READOUT}, "edges": {
        k: v for k, v in want["edges"].items() if k != readout.READOUT_SEED}})
    seed = _seed_readout(want, len(chunk))
    inputs["nodes"][readout.READOUT], inputs["edges"][readout.READOUT_SEED] = seed
    for key, value in _numpy(read(inputs)).items():
      outputs.setdefault(key, []).append(value)
  return {key: np.concatenate(parts) for key, parts in outputs.items()}


def _seed_readout(want: Mapping[str, Any], count: int) -> tuple[dict, dict]:
  """The seed readout of the first ``count`` nodes (its node features, not read: zeros)."""
  nodes, edges = want["nodes"][readout.READOUT], want["edges"][readout.READOUT_SEED]
  dtype = edges[_SIZE].dtype.as_numpy_dtype
  size, index = np.array([count], dtype), np.arange(count, dtype=dtype)
  return ({_SIZE: size, **{k: np.zeros([count, *s.shape[1:]], s.dtype.as_numpy_dtype)
                           for k, s in nodes.items() if not k.startswith("#")}},
          {_SIZE: size, _SOURCE: index, _TARGET: index})


def blocks(graph: store_lib.InMemoryGraph) -> blocks_lib.Blocks:
  """The blocks of the graph's own node and edge sets."""
  return blocks_lib.Blocks(
      {name: piece.size for name, piece in graph.node_sets.items()},
      {name: (graph.schema.edge_sets[name].source, graph.schema.edge_sets[name].target,
              piece.source, piece.target) for name, piece in graph.edge_sets.items()})


def sample(graph: store_lib.InMemoryGraph, cut: blocks_lib.Blocks, node_set: str
           ) -> store_lib.InMemoryGraph:
  """The first :data:`SAMPLE_NODES` nodes of ``node_set`` with their incident edges and ends."""
  # A scan: the pass then sorts the edges only by the ends it attaches them by, if at all.
  block = cut.block(node_set, 0, min(SAMPLE_NODES, cut.sizes[node_set]), scan=True)
  node_sets = {name: store_lib.NodeSet(
      ids=piece.ids[block.nodes[name]], table=piece.table,
      features={k: v[block.nodes[name]] for k, v in piece.features.items()})
      for name, piece in graph.node_sets.items()}
  edge_sets = {}
  for name, piece in graph.edge_sets.items():
    rows, src, tgt = block.edges[name]
    # The store's order: by source.
    indptr, order = csr.by_row(src, len(block.nodes[graph.schema.edge_sets[name].source]))
    edge_sets[name] = store_lib.EdgeSet(
        source=src[order], target=tgt[order], indptr=indptr, table=piece.table,
        features={k: v[rows[order]] for k, v in piece.features.items()})
  return store_lib.InMemoryGraph(schema=graph.schema, node_sets=node_sets, edge_sets=edge_sets)
