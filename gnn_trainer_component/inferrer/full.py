"""GraphInferrer's ``mode: "full_graph"``: the model over the whole graph, every node's exact state.

The graph's tables are loaded as for the in-memory engine, then the whole graph
becomes one GraphTensor with TF-GNN's structured readout (``_readout/seed``)
from every node inferred, and the export's whole-graph functions
(:mod:`gnn_trainer_component.trainer.whole_graph`) run the model on it once:
each node sees its whole neighbourhood, at any depth, as in full-batch
training, and each edge carries one message per layer (O(layers × edges))
instead of one sampled subgraph per node. For models whose messages do not
depend on a sender's degree, this equals the sampled engine at fan-outs that
take every neighbour.

A graph with more edges than ``inference_config`` ``chunk_edges`` runs layer by
layer over chunks of nodes (:mod:`layerwise`), its memory bounded by a chunk,
where the export has the steps and a sample of the graph shows the two ways
agree; otherwise in one pass, as above (logged why).
"""

from __future__ import annotations

import re
import time
from typing import Any, Mapping, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from gnn_trainer_component import errors
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import readout
from gnn_trainer_component.in_memory import blocks as blocks_lib
from gnn_trainer_component.in_memory import store as store_lib
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import layerwise
from gnn_trainer_component.inferrer import signatures as signatures_lib
from gnn_trainer_component.model import embeddings_table as table
from gnn_trainer_component.inferrer.signatures import InferenceInputError
from gnn_trainer_component.inferrer.signatures import WHO
from gnn_trainer_component.model import embeddings as embeddings_lib
from gnn_trainer_component.model import loading
from gnn_trainer_component.model import whole_graph

#: Rows per row group of the table.
WRITE_ROWS = 65536


def functions(model_dir: str, signatures: loading.Signatures, node_set: str
              ) -> tuple[dict[str, Any], dict[str, Any]]:
  """The export's whole-graph function of each requested signature, and its description.

  The description is :func:`whole_graph.read`'s (its ``layers``: the steps to
  run layer by layer).

  Raises:
    InferenceInputError: the export has none (it predates them, or its model
      cannot run on the whole graph: why), or it reads another node set.
  """
  described = loading.whole_graph_description(model_dir)
  sampled = 'Use inference_config mode "sampled" (the default) for this model.'
  if described is None:
    raise InferenceInputError(
        f"{WHO} mode 'full_graph': the model at {model_dir} has no whole-graph functions "
        f"(GnnTrainer exports them since this release). Retrain it, or: {sampled}")
  if described.get("refused"):
    raise InferenceInputError(
        f"{WHO} mode 'full_graph': the model at {model_dir} cannot run on the whole graph: "
        f"{described['refused']}. {sampled}")
  if described["node_set"] != node_set:
    raise InferenceInputError(
        f"{WHO} mode 'full_graph': the model at {model_dir} reads node set "
        f"{described['node_set']!r}, not {node_set!r}: set the sampling config's seed node "
        "set to it.")
  missing = [s for s in signatures.functions if s not in described["functions"]]
  if missing:
    raise InferenceInputError(
        f"{WHO} mode 'full_graph': the model at {model_dir} runs {sorted(described['functions'])} "
        f"on the whole graph, not {missing} (only a model trained on the graph in memory "
        "reads its predictions from every node at once). Ask for signatures "
        f"{sorted(described['functions'])}, or: {sampled}")
  return {s: getattr(signatures.saved_model, described["functions"][s])
          for s in signatures.functions}, described


def _features(have: Mapping[str, np.ndarray], want: Mapping[str, tf.TensorSpec], size: int,
              where: str, model_dir: str) -> dict[str, tf.Tensor]:
  want = {k: v for k, v in want.items() if not k.startswith("#")}
  missing = sorted(set(want) - set(have))
  if missing:
    raise InferenceInputError(
        f"{WHO} mode 'full_graph': {where} has no feature {missing}, which the model at "
        f"{model_dir} reads: give the graph the features the model was trained on.")
  return {name: tf.convert_to_tensor(have[name], spec.dtype) if size else
          tf.zeros([0, *spec.shape[1:]], spec.dtype) for name, spec in want.items()}


def _readout(want: Mapping[str, Any], rows: np.ndarray) -> dict[str, Any]:
  """The seed readout pieces of ``rows`` (its features, which models do not read: zeros)."""
  nodes, edges = want["nodes"][readout.READOUT], want["edges"][readout.READOUT_SEED]
  dtype, count = edges[whole_graph.SOURCE].dtype, len(rows)
  sizes = tf.constant([count], dtype)
  zeros = {k: tf.zeros([count, *s.shape[1:]], s.dtype) for k, s in nodes.items()
           if not k.startswith("#")}
  return {"nodes": {whole_graph.SIZE: sizes, **zeros},
          "edges": {whole_graph.SIZE: sizes, whole_graph.SOURCE: tf.constant(rows, dtype),
                    whole_graph.TARGET: tf.range(count, dtype=dtype)}}


def tensors(graph: store_lib.InMemoryGraph, want: Mapping[str, Any], rows: np.ndarray,
            model_dir: str) -> dict[str, Any]:
  """The whole graph as the input ``want`` of a whole-graph function, read out at ``rows``.

  ``want``: :func:`whole_graph.tensors_spec` of the model's graph.
  """
  out = {"context": {k: tf.zeros([1, *s.shape[1:]], s.dtype)  # context labels: not read
                     for k, s in want["context"].items()},
         "nodes": {}, "edges": {}}
  aux = _readout(want, rows)
  out["nodes"][readout.READOUT], out["edges"][readout.READOUT_SEED] = aux["nodes"], aux["edges"]
  for kind, pieces in (("nodes", graph.node_sets), ("edges", graph.edge_sets)):
    for name, fields in want[kind].items():
      if name in out[kind]:
        continue
      if name not in pieces:
        raise InferenceInputError(f"{WHO} mode 'full_graph': the graph has no {kind[:-1]} set "
                                  f"{name!r}, which the model at {model_dir} reads.")
      ours, dtype = pieces[name], fields[whole_graph.SIZE].dtype
      out[kind][name] = {whole_graph.SIZE: tf.constant([ours.size], dtype), **_features(
          ours.features, fields, ours.size, f"{kind[:-1]} set {name!r} ({ours.table})",
          model_dir)}
      if kind == "edges":
        out[kind][name][whole_graph.SOURCE] = tf.constant(ours.source, dtype)
        out[kind][name][whole_graph.TARGET] = tf.constant(ours.target, dtype)
  return out


def _xla_cause(e: tf.errors.OpError) -> str:
  """What XLA could not do: the ops it has no kernel for, else the error's cause line."""
  unsupported = re.search(r"Detected unsupported operations[^\n]*?JIT: ([^\n]*)", e.message)
  if unsupported:
    return f"no XLA kernel for: {unsupported.group(1).strip()[:300]}"
  return errors.op_error_cause(e.message) or type(e).__name__


def run_pass(function: Any, whole: Mapping[str, Any], jit_compile: Optional[bool],
             what: str, where: str) -> Mapping[str, tf.Tensor]:
  """``function(whole)``: with XLA unless ``jit_compile`` is False (None: where it compiles).

  XLA fuses each layer's per-edge steps (gather, message, pooling), so the pass
  holds fewer ``[edges, units]`` tensors at once than TensorFlow's op-by-op run.

  Args:
    function: A whole-graph function of a loaded export.
    whole: Its input (:func:`tensors`).
    jit_compile: :attr:`config_lib.InferenceConfig.jit_compile`.
    what: The function in messages ("the model at DIR ('embeddings')").
    where: The graph, for messages.

  Raises:
    InferenceInputError: the model rejects the graph, or (``jit_compile``
      True) XLA cannot run the pass.
  """
  if jit_compile is not False:
    try:
      return tf.function(function, jit_compile=True)(whole)
    except tf.errors.OpError as e:
      reason = _xla_cause(e)
      if jit_compile:
        raise InferenceInputError(
            f"{WHO} mode 'full_graph': XLA cannot run the pass of {what} on the graph {where}: "
            f"{reason}. Set inference_config jit_compile null (XLA where it compiles) or "
            "false.") from e
      logging.warning("%s mode 'full_graph': XLA cannot run the pass of %s (%s); running it "
                      "without XLA, which holds more memory at once.", WHO, what, reason)
  try:
    return function(whole)
  except tf.errors.InvalidArgumentError as e:
    raise InferenceInputError(
        f"{WHO} mode 'full_graph': {what} rejects the graph {where}: "
        f"{errors.op_error_cause(e.message)}") from e


def _agree(one: Mapping[str, Any], other: Mapping[str, np.ndarray]) -> str:
  """"" if both passes give the same outputs (to float rounding), else the first that differs."""
  for key, value in one.items():
    value = np.asarray(value)
    if not np.allclose(other[key], value, rtol=1e-5, atol=1e-5):
      return (f"output {key!r} differs by up to {np.max(np.abs(other[key] - value)):.3g} "
              "on a sample of the graph")
  return ""


def _agreeing_ends(model: Any, layers: Mapping[str, Any], embed: Any,
                   graph: store_lib.InMemoryGraph, cut: blocks_lib.Blocks, node_set: str,
                   model_dir: str) -> tuple[Optional[tuple[str, ...]], str]:
  """The fewest ends of an edge attaching it to a chunk that give the one pass's outputs.

  Returns ``(ends, "")`` (:mod:`~gnn_trainer_component.in_memory.blocks`) where the
  steps over chunks agree with the one pass on a sample of the graph, else
  ``(None, why)``. The sample: the first nodes of ``node_set`` with their edges and those
  edges' other ends, cut into chunks of a quarter of its edges.
  """
  small = layerwise.sample(graph, cut, node_set)
  rows, small_cut = np.arange(small.node_sets[node_set].size), layerwise.blocks(small)
  one = _numpy(run_pass(embed, tensors(small, whole_graph.input_spec(embed), rows, model_dir),
                        False, f"the model at {model_dir}", "a sample of the graph"))
  prepared = _prepare_input(model, layers, small, model_dir)
  max_edges = max(1, sum(piece.size for piece in small.edge_sets.values()) // 4)
  why = ""
  # Most models pool the edges a node is the target of: the least work, tried first.
  for ends in ((blocks_lib.TARGET,), (blocks_lib.SOURCE,), blocks_lib.BOTH):
    try:
      why = _agree(one, layerwise.run(model, layers, prepared, small_cut, node_set, rows,
                                      max_edges, ends))
    except tf.errors.InvalidArgumentError as e:  # e.g. a layer asserting on its graph
      why = f"its layers reject a part of the graph: {errors.op_error_cause(e.message)}"
    if not why:
      return ends, ""
  return None, why


def _layer_by_layer(model: Any, run: Mapping[str, Any], layers: Optional[Mapping[str, Any]],
                    graph: store_lib.InMemoryGraph, node_set: str, rows: np.ndarray,
                    cfg: config_lib.InferenceConfig, model_dir: str
                    ) -> Optional[dict[str, np.ndarray]]:
  """The ``embeddings`` outputs layer by layer, or None: run the one pass (logged why).

  Layer by layer where the graph has more edges than ``cfg.chunk_edges``, the
  export has the steps, only ``embeddings`` is asked for, and the steps agree
  with the one pass on a sample of the graph (:func:`_agreeing_ends`). ``layers``:
  the export description's (None: it predates them).
  """
  edges = sum(piece.size for piece in graph.edge_sets.values())
  if edges <= cfg.chunk_edges:
    return None
  why = ("the export has no layer-by-layer steps (it predates them)" if not layers
         else layers.get("refused", ""))
  if not why and set(run) != {embeddings_lib.SIGNATURE}:
    why = f"only the {embeddings_lib.SIGNATURE!r} signature runs layer by layer, not {sorted(run)}"
  ends, cut = None, None
  if not why:
    cut = layerwise.blocks(graph)
    ends, why = _agreeing_ends(model, layers, run[embeddings_lib.SIGNATURE], graph, cut,
                               node_set, model_dir)
  if why:
    logging.warning("%s mode 'full_graph': the graph's %d edges are more than chunk_edges %d, "
                    "but the model runs in one pass (which holds every edge's messages at "
                    "once): %s.", WHO, edges, cfg.chunk_edges, why)
    return None
  start = time.monotonic()
  out = layerwise.run(model, layers, _prepare_input(model, layers, graph, model_dir), cut,
                      node_set, rows, cfg.chunk_edges, ends)
  logging.info("%s mode 'full_graph': layer by layer in chunks of up to %d edges (%d edges; an "
               "edge in the blocks of its %s) in %.1f s", WHO, cfg.chunk_edges, edges,
               " and ".join(ends), time.monotonic() - start)
  return out


def _prepare_input(model: Any, layers: Mapping[str, Any], graph: store_lib.InMemoryGraph,
                   model_dir: str) -> dict[str, Any]:
  """The input of the export's ``graph_prepare``: the whole graph, no node read out."""
  spec = whole_graph.input_spec(getattr(model, layers["prepare"]))
  return tensors(graph, spec, np.zeros([0], np.int64), model_dir)


def _numpy(outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
  return {key: np.asarray(value) for key, value in outputs.items()}


def infer(schema_dir: str, model_dir: str, path: str, *, cfg: config_lib.InferenceConfig,
          sampling_spec: Optional[str] = None,
          sampling_config: Optional[Mapping[str, Any]] = None,
          nodes: Optional[str] = None) -> signatures_lib.Result:
  """Writes the signatures' outputs for every node into ``path``, from one whole-graph pass.

  Args: as :func:`gnn_trainer_component.inferrer.in_memory.infer`.

  Raises:
    InferenceInputError, GraphInputError: naming the model, table, row or id.
  """
  start = time.monotonic()
  schema, plan, signatures = signatures_lib.prepare(schema_dir, model_dir, cfg, sampling_spec,
                                                    sampling_config)
  node_set = plan.seed_node_set
  run, described = functions(model_dir, signatures, node_set)
  load_start = time.monotonic()
  graph, seeds, _ = store_lib.load_for(schema, schema_dir, plan,
                                       {"nodes": nodes} if nodes else {}, seed_times=False,
                                       who=WHO)
  rows = seeds["nodes"] if nodes else np.arange(graph.node_sets[node_set].size, dtype=np.int64)
  ids = np.asarray(graph.node_sets[node_set].ids)[rows]  # int64 or bytes objects
  loaded = time.monotonic()
  outputs = {}
  by_layer = _layer_by_layer(signatures.saved_model, run, described.get("layers"), graph,
                             node_set, rows, cfg, model_dir)
  if by_layer is not None:
    outputs = {signatures.columns[(embeddings_lib.SIGNATURE, key)]: value
               for key, value in by_layer.items()
               if signatures.columns[(embeddings_lib.SIGNATURE, key)]}
  else:
    spec = whole_graph.input_spec(next(iter(run.values())))  # one for every signature
    whole = tensors(graph, spec, rows, model_dir)
    for name, function in run.items():
      got = run_pass(function, whole, cfg.jit_compile,
                     f"the model at {model_dir} ({name!r})", schema_dir)
      for key, value in got.items():
        column = signatures.columns[(name, key)]
        if column:
          outputs[column] = value.numpy()
  logging.info("%s: %d nodes of %r on the whole graph in %.1f s (loading the tables %.1f s)",
               WHO, len(rows), node_set, time.monotonic() - start, loaded - load_start)
  writer = table.Writer(path, table.id_type(ids))
  try:
    for first in range(0, len(rows), WRITE_ROWS):
      part = slice(first, first + WRITE_ROWS)
      writer.write(graph_ids.id_bytes(ids[part]), {c: v[part] for c, v in outputs.items()})
  finally:
    writer.close()
  return signatures_lib.Result(node_set=node_set, rows=writer.rows, columns=writer.columns,
                               seconds=time.monotonic() - start,
                               load_seconds=loaded - load_start)
