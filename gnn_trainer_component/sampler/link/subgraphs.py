"""LinkSampler's own logic: the pair's exclusion, example assembly, keys and counts.

The link rules (config, split, negatives, readout) are the graph core's
(:mod:`~gnn_trainer_component.graph.link_config`,
:mod:`~gnn_trainer_component.graph.links`,
:mod:`~gnn_trainer_component.graph.negatives`); this is what the Beam pipeline
(:mod:`pipeline`) adds: each example is the union of a subgraph sampled
around the source and one around the target of one supervised pair, plus the
pair's readout (:mod:`gnn_trainer_component.graph.readout`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np
import tensorflow_gnn as tfgnn

from gnn_trainer_component.beam import sampling as beam_sampling
from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import links
from gnn_trainer_component.graph import readout

Pair = links.Pair


def is_supervised_edge(src: bytes, tgt: bytes, pair: Pair, undirected: bool) -> bool:
  """Whether message edge ``src -> tgt`` is the example's supervised pair."""
  if (src, tgt) == tuple(pair):
    return True
  return undirected and (tgt, src) == tuple(pair)


def excluded(link_edge_set: str, reverse_edge_set: Optional[str], undirected: bool,
             edge_set: str, node: bytes, tgt: bytes, root: Any) -> bool:
  """Whether a subgraph grown from ``root`` (``(pair, ...)``) must not sample ``node -> tgt``.

  Its own pair, in the link's edge set or (reversed) its reverse edge set: the
  :data:`beam_sampling.Exclude` of LinkSampler (bind the first three with ``functools.partial``).
  """
  pair = root[0]
  if edge_set == link_edge_set:
    return is_supervised_edge(node, tgt, pair, undirected)
  if edge_set == reverse_edge_set:
    return is_supervised_edge(tgt, node, pair, undirected)
  return False


def build_example(schema: tfgnn.GraphSchema, link: link_config_lib.LinkConfig, pair: Pair,
                  label: float, nodes: Mapping[str, Sequence[tuple[bytes, Any]]],
                  edges: Mapping[str, Iterable[tuple[bytes, bytes, Any]]],
                  features: Optional[Mapping[str, Any]] = None):
  """The tf.Example of one link-prediction subgraph (GraphTensor encoding).

  Args:
    schema: Input graph schema (its features are written).
    link: The config (for the edge set's endpoint node sets).
    pair: The supervised (source id, target id).
    label: 1.0 or 0.0 (``edge_label``: the edge's value).
    nodes: Node set -> ``(id, tf.Example)`` of its sampled nodes. The
      endpoints come first in their node set (source first).
    edges: Edge set -> ``(source id, target id, tf.Example)`` of the sampled
      edges (duplicates count once).
    features: ``edge_features``: the pair's own edge's values, by feature.

  Returns:
    The ``tf.train.Example``.
  """
  example, index = beam_sampling.subgraph_example(schema, nodes, edges, who="LinkSampler")
  link_edge_set = schema.edge_sets[link.edge_set]
  readout.add_pair_readout(example, index[link_edge_set.source][pair[0]],
                           index[link_edge_set.target][pair[1]], label=label,
                           features={name: np.asarray(value)[np.newaxis]
                                     for name, value in (features or {}).items()})
  return example


def ordered_nodes(node_set: str, ids: Iterable[bytes], link_edge_set: tfgnn.proto.EdgeSet,
                  pair: Pair) -> list[bytes]:
  """The node ids of one node set in example order: endpoints first, then sorted."""
  first = []
  if node_set == link_edge_set.source:
    first.append(pair[0])
  if node_set == link_edge_set.target:
    first.append(pair[1])
  return beam_sampling.ordered_nodes(ids, first)


def example_key(split: str, index: int) -> bytes:
  """The id of the ``index``-th supervised pair of ``split``."""
  return f"{split}/{index:09d}".encode()


def split_of(key: bytes) -> str:
  return key.decode("utf-8").split("/", 1)[0]


#: A supervised pair as the Beam pipeline gets it: ``(example key, pair, label, time,
#: features)`` (the time is the pair's query time with ``time_split``, else 0.0; the
#: features its own edge's ``edge_features``, else empty).
Row = tuple[bytes, Pair, float, float, dict]


def supervision(positives: Mapping[str, Sequence[Pair]],
                negatives: Mapping[str, Sequence[Pair]], link: link_config_lib.LinkConfig,
                times: Optional[Mapping[str, Sequence[float]]] = None,
                negative_times: Optional[Mapping[str, Sequence[float]]] = None,
                values: Optional[Mapping[str, np.ndarray]] = None,
                features: Optional[Mapping[str, Mapping[str, np.ndarray]]] = None
                ) -> dict[str, list[Row]]:
  """Split -> rows (:data:`Row`), positives and negatives in a seeded random order.

  ``times`` / ``negative_times``: ``time_split``: split -> each positive's /
  negative's time; ``values``: ``edge_label``: split -> each positive's label;
  ``features``: ``edge_features``: split -> feature -> each positive's values
  (:class:`links.Supervision`; a pair with them is a positive: no negatives).

  The order is the order the examples are written in (on the DirectRunner;
  other Beam runners do not keep any): a file of all positives and then all
  negatives would give a trainer with a shuffle buffer smaller than the split
  one-label batches.
  """
  out = {}
  for split in sorted(positives):
    pos, neg = positives[split], negatives.get(split, ())
    pos_t = (times or {}).get(split, np.zeros(len(pos)))
    neg_t = (negative_times or {}).get(split, np.zeros(len(neg)))
    labels = links.pair_labels(pos, neg, (values or {}).get(split)).tolist()
    own = (features or {}).get(split, {})
    rows = [(p, label, float(t), {name: v[i] for name, v in own.items()}) for i, (p, label, t)
            in enumerate(zip(list(pos) + list(neg), labels, np.r_[pos_t, neg_t], strict=True))]
    order = links.split_rng(link.seed, "order", split).permutation(len(rows))
    out[split] = [(example_key(split, i),) + rows[j] for i, j in enumerate(order)]
  return out


def counts(positives: Mapping[str, Sequence[Pair]], negatives: Mapping[str, Sequence[Pair]]
           ) -> dict[str, dict[str, int]]:
  """Split -> {"positives": n, "negatives": n} for logging and artifact properties."""
  return {s: {"positives": len(positives[s]), "negatives": len(negatives.get(s, ()))}
          for s in positives}
