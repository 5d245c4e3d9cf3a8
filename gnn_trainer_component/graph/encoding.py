"""Subgraphs as tf.Examples in TF-GNN's GraphTensor encoding: the one writer.

A subgraph's tf.Example holds ``nodes/<set>.#size`` and ``nodes/<set>.<feature>``
per node set, ``edges/<set>.#size``, ``edges/<set>.#source``,
``edges/<set>.#target`` and ``edges/<set>.<feature>`` per edge set (what
``tfgnn.parse_example`` reads and ``tfgnn.write_example`` writes), plus the
readout structure (:mod:`readout`). :func:`write_nodes` and :func:`write_edges`
write a batch of subgraphs at once from flat arrays: the items of every
subgraph in order, and how many each has. The in-memory engine writes its
sampled subgraphs this way (``SubgraphSampler.examples``: GraphInferrer and
retrieval), LinkSampler its one subgraph per pair. Every set of the schema is
in every example, empty where the sampling does not reach it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import graph_schema

NODES, EDGES = "nodes", "edges"
SIZE, SOURCE, TARGET = "#size", "#source", "#target"

#: The numpy dtype that holds the values of each ``tf.train.Feature`` kind.
_NUMPY_DTYPE = {graph_schema.FLOAT: np.float32, graph_schema.INT64: np.int64,
                graph_schema.BYTES: object}


def key(kind: str, set_name: str, feature: str) -> str:
  """The tf.Example key of ``feature`` (or ``#size`` ...) of a node or edge set."""
  return f"{kind}/{set_name}.{feature}"


def values_array(values: Sequence, dtype) -> np.ndarray:
  """``values`` of a schema feature of ``dtype`` as the array :func:`write_nodes` takes."""
  return np.asarray(values, dtype=_NUMPY_DTYPE[graph_schema.example_kind(dtype)])


def _kind(values: np.ndarray) -> str:
  if values.dtype.kind == "f":
    return graph_schema.FLOAT
  return graph_schema.INT64 if values.dtype.kind in "iub" else graph_schema.BYTES


def _put(examples: Sequence[tf.train.Example], name: str, values: np.ndarray,
         sizes: np.ndarray) -> None:
  """Each example's items of ``values`` (items in example order, ``sizes`` per example)."""
  kind = _kind(values)
  ends = np.cumsum(sizes)
  for example, start, end in zip(examples, (ends - sizes).tolist(), ends.tolist(), strict=True):
    getattr(example.features.feature[name], kind).value.extend(
        values[start:end].reshape(-1).tolist())


def _put_sizes(examples: Sequence[tf.train.Example], name: str, sizes: np.ndarray) -> None:
  for example, size in zip(examples, np.asarray(sizes).tolist(), strict=True):
    example.features.feature[name].int64_list.value.append(size)


def write_nodes(examples: Sequence[tf.train.Example], set_name: str, sizes: np.ndarray,
                features: Mapping[str, np.ndarray]) -> None:
  """Writes node set ``set_name`` of each example: ``sizes[i]`` nodes, then their features.

  Args:
    examples: One tf.Example per subgraph.
    set_name: The node set.
    sizes: ``[len(examples)]`` nodes per subgraph.
    features: Name -> ``[sum(sizes), ...]`` values, subgraph by subgraph.
  """
  _put_sizes(examples, key(NODES, set_name, SIZE), sizes)
  for name, values in features.items():
    _put(examples, key(NODES, set_name, name), values, sizes)


def write_edges(examples: Sequence[tf.train.Example], set_name: str, sizes: np.ndarray,
                source: np.ndarray, target: np.ndarray,
                features: Mapping[str, np.ndarray]) -> None:
  """Writes edge set ``set_name`` of each example: sizes, endpoints, features.

  Args:
    examples: One tf.Example per subgraph.
    set_name: The edge set.
    sizes: ``[len(examples)]`` edges per subgraph.
    source: ``[sum(sizes)]`` source endpoints, as indices into the subgraph's
      own source node set.
    target: The same for the target endpoints.
    features: Name -> ``[sum(sizes), ...]`` values, subgraph by subgraph.
  """
  _put_sizes(examples, key(EDGES, set_name, SIZE), sizes)
  for name, values in ((SOURCE, source), (TARGET, target), *features.items()):
    _put(examples, key(EDGES, set_name, name), np.asarray(values), sizes)


#: A node feature's layout in an example: ``(name, tf.train.Feature kind, values per node)``.
FeatureLayout = tuple[str, str, int]


def node_layout(node_set: tfgnn.proto.NodeSet) -> tuple[FeatureLayout, ...]:
  """The layout of each feature of ``node_set`` (sorted by name).

  Raises:
    ValueError: a feature with a dimension of unknown size (ragged).
  """
  out = []
  for name, spec in sorted(node_set.features.items()):
    dims = [d.size for d in spec.shape.dim]
    if any(d < 0 for d in dims):
      raise ValueError(f"feature {name!r} has a ragged shape {dims}")
    out.append((name, graph_schema.example_kind(spec.dtype), int(np.prod(dims)) if dims else 1))
  return tuple(out)


def append_node(example: tf.train.Example, set_name: str,
                layout: Sequence[FeatureLayout]) -> int:
  """Appends one node without edges to ``set_name`` of ``example``; returns its index.

  Its features are zeros (empty strings): with no edge it sends and receives
  no message, so a message-passing model computes the same for every other node.
  """
  feature = example.features.feature
  sizes = feature[key(NODES, set_name, SIZE)].int64_list.value
  if not sizes:
    sizes.append(0)
  index = sizes[0]
  sizes[0] = index + 1
  for name, kind, width in layout:
    zero = b"" if kind == graph_schema.BYTES else 0
    getattr(feature[key(NODES, set_name, name)], kind).value.extend([zero] * width)
  return index
