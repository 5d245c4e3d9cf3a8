"""Pure logic of link-prediction sampling: config, edge splits, negatives, examples.

Nothing here builds a Beam pipeline (that is :mod:`pipeline`). The output
follows TF-GNN's link-prediction convention
(``tensorflow_gnn/runner/tasks/link_prediction.py``,
``tensorflow_gnn/experimental/sampler/link_samplers.py``): each example is the
union of a subgraph sampled around the source and one around the target of one
supervised pair, plus

* node set ``_readout`` with one node and a float ``label`` (1.0: the edge
  exists, 0.0: a sampled negative);
* edge sets ``_readout/source`` and ``_readout/target`` from the two endpoints
  to that node (read by ``tfgnn.keras.layers.StructuredReadout("source")``
  and ``("target")``).

Leakage rules (tested exactly in ``tests/test_link_sampler.py``):

* a positive of a held-out split (every split but ``message_split``) is not
  an edge of the message-passing graph of any example (both directions when
  ``undirected``);
* the supervised pair of an example is never a message edge of that example
  (so a training positive is not handed to the model as input).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
import tensorflow_gnn.sampler as sampler_lib

from gnn_trainer_component import graph_schema
from gnn_trainer_component.sampler import inputs
from gnn_trainer_component.sampler.inputs import GraphInputError

READOUT = "_readout"
READOUT_SOURCE = "_readout/source"
READOUT_TARGET = "_readout/target"
LABEL = "label"

#: Tries per wanted negative before giving up (a graph too dense for the ratio).
NEGATIVE_TRIES_PER_PAIR = 50

Pair = tuple[bytes, bytes]


@dataclasses.dataclass(frozen=True)
class LinkConfig:
  """What LinkSampler samples (``link_config``, validated by :func:`parse_link_config`).

  Attributes:
    edge_set: The edge set whose edges are predicted.
    splits: Split name -> fraction of the (deduplicated, self-loop-free) edges.
    negatives_per_positive: Split name -> negatives sampled per positive.
    hops: One ``{edge_set: fan_out}`` per hop, from each endpoint.
    message_split: The split whose positives stay in the message-passing graph
      (the others are held out of it).
    undirected: ``(u, v)`` and ``(v, u)`` are one edge: split together, held
      out together, and a negative is neither.
    seed: Seeds the split, the negatives and every neighbour sample.
  """
  edge_set: str
  splits: Mapping[str, float]
  negatives_per_positive: Mapping[str, float]
  hops: Sequence[Mapping[str, int]]
  message_split: str = "train"
  undirected: bool = False
  seed: int = 0

  @property
  def held_out_splits(self) -> list[str]:
    return sorted(s for s in self.splits if s != self.message_split)


_KEYS = ("edge_set", "splits", "negatives_per_positive", "hops", "message_split",
         "undirected", "seed")


def _positive_number(value: Any) -> bool:
  return (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value) and value > 0)


def parse_link_config(schema: tfgnn.GraphSchema, config: Mapping[str, Any]) -> LinkConfig:
  """Checks ``link_config`` against the graph schema.

  Example::

    {"edge_set": "cites",
     "splits": {"train": 0.85, "eval": 0.05, "test": 0.10},
     "negatives_per_positive": 1,             # or {"train": 1, "eval": 1, "test": 1}
     "hops": [{"cites": 10}, {"cites": 5}],
     "undirected": true, "seed": 0}

  Raises:
    GraphInputError: naming the key, the allowed values and what was given.
  """
  where = "LinkSampler link_config"
  if not isinstance(config, Mapping):
    raise GraphInputError(f"{where} must be a JSON object, got {type(config).__name__}.")
  unknown = sorted(set(config) - set(_KEYS))
  if unknown:
    raise GraphInputError(f"{where}: unknown keys {unknown}; allowed: {list(_KEYS)}.")
  edge_set = config.get("edge_set")
  if edge_set not in schema.edge_sets:
    raise GraphInputError(f"{where}: edge_set {edge_set!r} is not in the graph schema "
                          f"(edge sets: {sorted(schema.edge_sets)}).")
  splits = config.get("splits")
  if not isinstance(splits, Mapping) or not splits:
    raise GraphInputError(f"{where}: splits must be {{split_name: fraction}}, e.g. "
                          '{"train": 0.85, "eval": 0.05, "test": 0.1}; got ' f"{splits!r}.")
  for name, fraction in splits.items():
    if not isinstance(name, str) or not name or "/" in name:
      raise GraphInputError(f"{where}: split name {name!r} must be a non-empty string "
                            "without '/'.")
    if not _positive_number(fraction):
      raise GraphInputError(f"{where}: splits[{name!r}] must be a fraction > 0, "
                            f"got {fraction!r}.")
  if abs(sum(splits.values()) - 1.0) > 1e-6:
    raise GraphInputError(f"{where}: the split fractions must add up to 1, they add up to "
                          f"{sum(splits.values()):g} ({dict(splits)}).")
  message_split = config.get("message_split", "train")
  if message_split not in splits:
    raise GraphInputError(f"{where}: message_split {message_split!r} (the split whose edges "
                          f"the GNN passes messages over) is not one of the splits "
                          f"{sorted(splits)}.")
  ratio = config.get("negatives_per_positive", 1)
  if not isinstance(ratio, Mapping) and not _positive_number(ratio):
    raise GraphInputError(f"{where}: negatives_per_positive must be > 0 (negatives sampled "
                          f"per positive edge), or one such number per split; got {ratio!r}.")
  ratios = dict(ratio) if isinstance(ratio, Mapping) else {s: ratio for s in splits}
  if set(ratios) != set(splits):
    raise GraphInputError(f"{where}: negatives_per_positive names splits {sorted(ratios)}, "
                          f"the splits are {sorted(splits)}.")
  for name, r in ratios.items():
    if not _positive_number(r):
      raise GraphInputError(f"{where}: negatives_per_positive for split {name!r} must be > 0 "
                            f"(negatives sampled per positive edge), got {r!r}.")
  undirected = config.get("undirected", False)
  if not isinstance(undirected, bool):
    raise GraphInputError(f"{where}: undirected must be true or false, got {undirected!r}.")
  edge_set_pb = schema.edge_sets[edge_set]
  if undirected and edge_set_pb.source != edge_set_pb.target:
    raise GraphInputError(f"{where}: undirected needs an edge set within one node set; "
                          f"{edge_set!r} goes from {edge_set_pb.source!r} to "
                          f"{edge_set_pb.target!r}.")
  seed = config.get("seed", 0)
  if not isinstance(seed, int) or isinstance(seed, bool):
    raise GraphInputError(f"{where}: seed must be an int, got {seed!r}.")
  hops = config.get("hops")
  if not isinstance(hops, Sequence) or isinstance(hops, str):
    raise GraphInputError(f"{where}: hops must be a list of {{edge_set: fan_out}}, one per "
                          f"hop, e.g. [{{{edge_set!r}: 10}}, {{{edge_set!r}: 5}}]; got {hops!r}.")
  link = LinkConfig(edge_set=edge_set, splits=dict(splits), negatives_per_positive=ratios,
                    hops=[dict(h) for h in hops], message_split=message_split,
                    undirected=undirected, seed=seed)
  sampling_specs(schema, link)  # checks the hops from both endpoints
  return link


def sampling_specs(schema: tfgnn.GraphSchema, link: LinkConfig
                   ) -> dict[str, sampler_lib.SamplingSpec]:
  """``{"source": spec, "target": spec}``: the hops from each endpoint's node set."""
  edge_set = schema.edge_sets[link.edge_set]
  return {
      "source": inputs.build_sampling_spec(schema, edge_set.source, link.hops,
                                                  who="LinkSampler"),
      "target": inputs.build_sampling_spec(schema, edge_set.target, link.hops,
                                                  who="LinkSampler"),
  }


def output_graph_schema(schema: tfgnn.GraphSchema, link: LinkConfig) -> tfgnn.GraphSchema:
  """The schema of the link examples: the input's, plus the readout sets."""
  out = inputs.output_graph_schema(schema)
  for name in (READOUT, READOUT_SOURCE, READOUT_TARGET):
    if name in out.node_sets or name in out.edge_sets:
      raise GraphInputError(f"LinkSampler: the graph schema already has a set named {name!r}, "
                            "which the link-prediction examples add.")
  edge_set = schema.edge_sets[link.edge_set]
  out.node_sets[READOUT].features[LABEL].dtype = tf.float32.as_datatype_enum
  out.node_sets[READOUT].description = (
      f"One node per example: the supervised pair of edge set {link.edge_set!r}; "
      f"{LABEL} 1.0 for an edge, 0.0 for a sampled negative.")
  out.edge_sets[READOUT_SOURCE].source = edge_set.source
  out.edge_sets[READOUT_SOURCE].target = READOUT
  out.edge_sets[READOUT_TARGET].source = edge_set.target
  out.edge_sets[READOUT_TARGET].target = READOUT
  return out


def add_pair_readout(example: tf.train.Example, source: int, target: int) -> None:
  """Adds the readout of one pair to a subgraph's example (without its label).

  ``source`` / ``target``: the ends' indices in their node sets. With
  ``(0, 0)`` on GraphSampler's example of one node, the pair (seed, seed):
  what a link-prediction model reads as that node's embedding.
  """
  feature = example.features.feature
  feature[f"nodes/{READOUT}.#size"].int64_list.value.append(1)
  for name, index in ((READOUT_SOURCE, source), (READOUT_TARGET, target)):
    feature[f"edges/{name}.#size"].int64_list.value.append(1)
    feature[f"edges/{name}.#source"].int64_list.value.append(index)
    feature[f"edges/{name}.#target"].int64_list.value.append(0)


# ----------------------------------------------------------------------------
# Splits and negatives.


def _rng(seed: int, *parts: Any) -> np.random.Generator:
  """A generator seeded by ``seed`` and ``parts`` (stable across processes)."""
  digest = hashlib.sha256(repr((seed,) + parts).encode("utf-8")).digest()
  return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def edge_key(u: bytes, v: bytes, undirected: bool) -> Pair:
  """The key of edge ``(u, v)``: the ordered pair, or the sorted one if undirected."""
  return (min(u, v), max(u, v)) if undirected else (u, v)


def split_links(pairs: Iterable[Pair], link: LinkConfig) -> dict[str, list[Pair]]:
  """The positives of each split: a seeded permutation of the distinct edges, cut by fraction.

  Self loops are dropped (they cannot be held out of a GNN that adds them) and
  duplicates (and, if undirected, reverse duplicates) count once. Split sizes
  are the fractions rounded down, the rest going to the largest split, so
  every split gets its share to within one edge.

  Raises:
    GraphInputError: if some split would get no edge.
  """
  keys = sorted({edge_key(u, v, link.undirected) for u, v in pairs if u != v})
  order = _rng(link.seed, "split").permutation(len(keys))
  names = sorted(link.splits)
  sizes = {s: int(math.floor(link.splits[s] * len(keys))) for s in names}
  largest = max(names, key=lambda s: (link.splits[s], s))
  sizes[largest] += len(keys) - sum(sizes.values())
  empty = [s for s in names if sizes[s] == 0]
  if empty:
    raise GraphInputError(
        f"LinkSampler: edge set {link.edge_set!r} has {len(keys)} distinct edges (no self "
        f"loops), too few to give split(s) {empty} any edge with fractions {dict(link.splits)}.")
  out, start = {}, 0
  for s in names:
    out[s] = [keys[i] for i in sorted(order[start:start + sizes[s]])]
    start += sizes[s]
  return out


def sample_negatives(positives: Mapping[str, Sequence[Pair]], all_edges: set[Pair],
                     source_ids: Sequence[bytes], target_ids: Sequence[bytes],
                     link: LinkConfig) -> dict[str, list[Pair]]:
  """Negatives per split: uniform pairs (source node, target node) that are not edges.

  A negative is no edge of the whole graph (any split; with ``undirected``
  in neither direction), no self pair, and no other negative (of any split).

  Args:
    positives: Split -> its positive pairs (for the counts).
    all_edges: Keys (:func:`edge_key`) of every edge of ``link.edge_set``.
    source_ids: Ids of the edge set's source node set.
    target_ids: Ids of its target node set.
    link: The config (ratios, seed, undirected).

  Raises:
    GraphInputError: if the graph is too dense to find that many non-edges.
  """
  taken = set(all_edges)
  out = {}
  for split in sorted(positives):
    want = int(round(link.negatives_per_positive[split] * len(positives[split])))
    rng = _rng(link.seed, "negatives", split)
    found: list[Pair] = []
    tries = 0
    while len(found) < want:
      if tries > NEGATIVE_TRIES_PER_PAIR * max(want, 1):
        raise GraphInputError(
            f"LinkSampler: found only {len(found)} of {want} negatives for split {split!r} "
            f"of edge set {link.edge_set!r} after {tries} random pairs: the graph is too dense "
            f"for negatives_per_positive={link.negatives_per_positive[split]}.")
      batch = max(64, 2 * (want - len(found)))
      us = rng.integers(len(source_ids), size=batch)
      vs = rng.integers(len(target_ids), size=batch)
      tries += batch
      for i, j in zip(us, vs):
        u, v = source_ids[i], target_ids[j]
        key = edge_key(u, v, link.undirected)
        if u == v or key in taken:
          continue
        taken.add(key)
        found.append((u, v))
        if len(found) == want:
          break
    out[split] = found
  return out


def held_out_keys(positives: Mapping[str, Sequence[Pair]], link: LinkConfig) -> set[Pair]:
  """Keys of the edges no example may pass messages over (held-out splits' positives)."""
  return {edge_key(u, v, link.undirected)
          for s in link.held_out_splits for u, v in positives[s]}


# ----------------------------------------------------------------------------
# Neighbour sampling of one (example, node, op).


def sample_neighbours(candidates: Sequence[Any], fan_out: int, *, seed: int,
                      example: bytes, op_name: str, node: bytes) -> list[Any]:
  """Up to ``fan_out`` of ``candidates`` uniformly without replacement, seeded
  by (seed, example, op, node): the same call always picks the same ones."""
  if len(candidates) <= fan_out:
    return list(candidates)
  picked = _rng(seed, example, op_name, node).choice(len(candidates), fan_out, replace=False)
  return [candidates[i] for i in sorted(picked)]


def is_supervised_edge(src: bytes, tgt: bytes, pair: Pair, undirected: bool) -> bool:
  """Whether message edge ``src -> tgt`` is the example's supervised pair."""
  if (src, tgt) == tuple(pair):
    return True
  return undirected and (tgt, src) == tuple(pair)


# ----------------------------------------------------------------------------
# Example assembly.


def _put_features(example, prefix: str, features: Mapping[str, Any], items: Sequence[Any],
                  what: str) -> None:
  """Concatenates each schema feature over ``items`` (tf.Examples) into ``example``."""
  for name, feature_pb in features.items():
    kind = graph_schema.example_kind(feature_pb.dtype)
    width = int(np.prod([d.size for d in feature_pb.shape.dim])) if feature_pb.shape.dim else 1
    out = getattr(example.features.feature[f"{prefix}.{name}"], kind)
    for item_id, item in items:
      values = (getattr(item.features.feature[name], kind).value
                if name in item.features.feature else ())
      if width > 0 and len(values) != width:
        raise GraphInputError(
            f"LinkSampler: {what} {item_id!r}: feature {name!r} has {len(values)} values, "
            f"the graph schema says {width}.")
      out.value.extend(values)


def build_example(schema: tfgnn.GraphSchema, link: LinkConfig, pair: Pair, label: float,
                  nodes: Mapping[str, Sequence[tuple[bytes, Any]]],
                  edges: Mapping[str, Iterable[tuple[bytes, bytes, Any]]]):
  """The tf.Example of one link-prediction subgraph (GraphTensor encoding).

  Args:
    schema: Input graph schema (its features are written).
    link: The config (for the edge set's endpoint node sets).
    pair: The supervised (source id, target id).
    label: 1.0 or 0.0.
    nodes: Node set -> ``(id, tf.Example)`` of its sampled nodes. The
      endpoints come first in their node set (source first).
    edges: Edge set -> ``(source id, target id, tf.Example)`` of the sampled
      edges (duplicates count once).

  Returns:
    The ``tf.train.Example``.
  """
  example = tf.train.Example()
  f = example.features.feature
  index: dict[str, dict[bytes, int]] = {}
  for set_name in schema.node_sets:
    items = list(nodes.get(set_name, ()))
    index[set_name] = {node_id: i for i, (node_id, _) in enumerate(items)}
    if len(index[set_name]) != len(items):
      raise ValueError(f"duplicate nodes in node set {set_name!r}")
    f[f"nodes/{set_name}.#size"].int64_list.value.append(len(items))
    _put_features(example, f"nodes/{set_name}", schema.node_sets[set_name].features, items,
                  f"node {set_name!r}")
  for set_name, edge_set in schema.edge_sets.items():
    unique = {}
    for src, tgt, ex in edges.get(set_name, ()):
      unique.setdefault((src, tgt), ex)
    ordered = sorted(unique.items(), key=lambda kv: (index[edge_set.source][kv[0][0]],
                                                     index[edge_set.target][kv[0][1]]))
    f[f"edges/{set_name}.#size"].int64_list.value.append(len(ordered))
    f[f"edges/{set_name}.#source"].int64_list.value.extend(
        index[edge_set.source][s] for (s, _), _ in ordered)
    f[f"edges/{set_name}.#target"].int64_list.value.extend(
        index[edge_set.target][t] for (_, t), _ in ordered)
    _put_features(example, f"edges/{set_name}", edge_set.features,
                  [(f"{s!r}->{t!r}", ex) for (s, t), ex in ordered], f"edge {set_name!r}")
  link_edge_set = schema.edge_sets[link.edge_set]
  add_pair_readout(example, index[link_edge_set.source][pair[0]],
                   index[link_edge_set.target][pair[1]])
  f[f"nodes/{READOUT}.{LABEL}"].float_list.value.append(float(label))
  return example


def ordered_nodes(node_set: str, ids: Iterable[bytes], link_edge_set: tfgnn.proto.EdgeSet,
                  pair: Pair) -> list[bytes]:
  """The node ids of one node set in example order: endpoints first, then sorted."""
  first = []
  if node_set == link_edge_set.source:
    first.append(pair[0])
  if node_set == link_edge_set.target and pair[1] not in first:
    first.append(pair[1])
  rest = sorted(set(ids) - set(first))
  return first + rest


def example_key(split: str, index: int) -> bytes:
  """The id of the ``index``-th supervised pair of ``split``."""
  return f"{split}/{index:09d}".encode("utf-8")


def split_of(key: bytes) -> str:
  return key.decode("utf-8").split("/", 1)[0]


def supervision(positives: Mapping[str, Sequence[Pair]],
                negatives: Mapping[str, Sequence[Pair]], link: LinkConfig
                ) -> dict[str, list[tuple[bytes, Pair, float]]]:
  """Split -> ``(example key, pair, label)``, positives and negatives in a seeded random order.

  The order is the order the examples are written in (on the DirectRunner;
  other Beam runners do not keep any): a file of all positives and then all
  negatives would give a trainer with a shuffle buffer smaller than the split
  one-label batches.
  """
  out = {}
  for split in sorted(positives):
    rows = [(p, 1.0) for p in positives[split]] + [(p, 0.0) for p in negatives.get(split, ())]
    order = _rng(link.seed, "order", split).permutation(len(rows))
    out[split] = [(example_key(split, i), rows[j][0], rows[j][1]) for i, j in enumerate(order)]
  return out


def counts(rows: Mapping[str, Sequence[tuple[bytes, Pair, float]]]) -> dict[str, dict[str, int]]:
  """Split -> {"positives": n, "negatives": n} for logging and artifact properties."""
  return {s: {"positives": sum(1 for _, _, y in r if y == 1.0),
              "negatives": sum(1 for _, _, y in r if y == 0.0)} for s, r in rows.items()}
