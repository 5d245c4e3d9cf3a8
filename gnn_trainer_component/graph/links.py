"""Link prediction's rules, one definition for LinkSampler and GnnTrainer in memory.

``link_config`` (:func:`parse_link_config`), the seeded split of an edge set's
distinct edges (:func:`split_links`), negatives (:func:`draw_negatives`,
:func:`fixed_negatives`) and the output schema with the readout sets. Both
engines build their supervised pairs with :func:`supervise`.

Leakage rules (tested exactly in ``tests/test_link_sampler.py`` and
``tests/test_in_memory.py``):

* a positive of a held-out split (every split but ``message_split``) is not
  an edge of the message-passing graph of any example (both directions when
  ``undirected``);
* the supervised pair of an example is never a message edge of that example
  (so a training positive is not handed to the model as input);
* a negative is no edge of the whole edge set (any split; with ``undirected``
  in neither direction) and no self pair; fixed negatives repeat no other.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import math
from typing import Any, Collection, Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import errors
from gnn_trainer_component.graph import tables
from gnn_trainer_component.graph.errors import GraphInputError

#: Candidate pairs drawn per wanted negative before giving up (a graph too dense).
NEGATIVE_TRIES_PER_PAIR = 50

Pair = tuple[bytes, bytes]


@dataclasses.dataclass(frozen=True)
class LinkConfig:
  """What link prediction samples (``link_config``, validated by :func:`parse_link_config`).

  Attributes:
    edge_set: The edge set whose edges are predicted.
    splits: Split name -> fraction of the (deduplicated, self-loop-free) edges.
    negatives_per_positive: Split name -> negatives sampled per positive.
    source_hops: One ``{edge_set: fan_out}`` per hop, from the source end
      (``hops`` gives both ends the same).
    target_hops: The same from the target end.
    message_split: The split whose positives stay in the message-passing graph
      (the others are held out of it).
    undirected: ``(u, v)`` and ``(v, u)`` are one edge: split together, held
      out together, and a negative is neither.
    seed: Seeds the split, the negatives and every neighbour sample.
    reverse_edge_set: The edge set holding each edge ``(u, v)`` as ``(v, u)``
      (e.g. ``rated_by`` of ``rated``): held out with it, or None.
    negative_sampling: How a negative's target is drawn: ``"uniform"`` over the
      target node set, or ``"popularity"``: in proportion to one plus the
      node's in-degree among the message split's edges (popular items are
      negatives more often, so a model learns more than popularity).
    time: ``time_split``: the link edge set's time feature; each pair is a
      query at its edge's time, sampled with time-aware hops ("" otherwise).
    starts: ``time_split``: split name -> the time its edges start at (the
      message split: ``-inf``); ``splits`` then holds no fractions.
    node_time: ``time_split``: the feature of both ends' node sets that holds
      when each node appears; a negative of a pair at time ``t`` is drawn among
      the nodes that appear at or before ``t`` ("": every node, always).
  """
  edge_set: str
  splits: Mapping[str, float]
  negatives_per_positive: Mapping[str, float]
  source_hops: Sequence[Mapping[str, Any]]
  target_hops: Sequence[Mapping[str, Any]]
  message_split: str = "train"
  undirected: bool = False
  seed: int = 0
  reverse_edge_set: Optional[str] = None
  negative_sampling: str = "uniform"
  time: str = ""
  starts: Mapping[str, float] = dataclasses.field(default_factory=dict)
  node_time: str = ""

  @property
  def held_out_splits(self) -> list[str]:
    return sorted(s for s in self.splits if s != self.message_split)

  @property
  def same_hops(self) -> bool:
    """Both ends sample the same hops (``hops``, or equal per-end lists)."""
    return list(self.source_hops) == list(self.target_hops)

  def negatives_for(self, split: str, positives: int) -> int:
    """How many negatives ``positives`` positives of ``split`` get."""
    return int(round(self.negatives_per_positive[split] * positives))


_KEYS = ("edge_set", "splits", "time_split", "negatives_per_positive", "hops", "source_hops",
         "target_hops", "reverse_edge_set", "negative_sampling", "message_split", "undirected",
         "seed")
#: How errors name ``time_split``'s time feature.
TIME_WHAT = 'time_split\'s "time"'
#: ``negative_sampling`` values.
NEGATIVE_SAMPLING = ("uniform", "popularity")


def _positive_number(value: Any) -> bool:
  return (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value) and value > 0)


def _parse_splits(where: str, config: Mapping[str, Any]) -> tuple[dict, dict, str]:
  """``(splits, negatives per positive, message split)`` of a link config."""
  if "time_split" in config:
    if "splits" in config:
      raise GraphInputError(f"{where}: give splits (random fractions) or time_split (by "
                            "time), not both.")
    return _parse_time_split(where, config)
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
  return dict(splits), _negative_ratios(where, config, splits), message_split


def _parse_time_split(where: str, config: Mapping[str, Any]) -> tuple[dict, dict, str]:
  """``time_split``: ``({split: start}, negatives per positive, message split)``."""
  example = ('{"time": "ts", "from": {"train": null, "eval": 1700000000, "test": '
             '1710000000}} (optionally "node_time": a node feature)')
  value = config["time_split"]
  if not isinstance(value, Mapping) or not {"time", "from"} <= set(value) <= {
      "time", "from", "node_time"} or not isinstance(
      value["from"], Mapping) or len(value["from"]) < 2:
    raise GraphInputError(f"{where}: time_split must be {example} (each split's first time; "
                          f"the first split's null), got {value!r}.")
  starts = dict(value["from"])
  first = [name for name, start in starts.items() if start is None]
  bad = [name for name, start in starts.items() if start is not None and (
      isinstance(start, bool) or not isinstance(start, (int, float)) or not math.isfinite(start))]
  if len(first) != 1 or bad:
    raise GraphInputError(f"{where}: time_split['from'] gives each split its first time (a "
                          "number), and exactly one split, the first, null; got "
                          f"{starts!r}.")
  for name in starts:
    if not isinstance(name, str) or not name or "/" in name:
      raise GraphInputError(f"{where}: split name {name!r} must be a non-empty string "
                            "without '/'.")
  message_split = config.get("message_split", first[0])
  if message_split != first[0]:
    raise GraphInputError(f"{where}: message_split {message_split!r} must be the first split "
                          f"of time_split ({first[0]!r}): the later ones are predicted from "
                          "what came before.")
  starts[first[0]] = -math.inf
  return starts, _negative_ratios(where, config, starts), message_split


def _negative_ratios(where: str, config: Mapping[str, Any],
                     splits: Mapping[str, Any]) -> dict[str, float]:
  """``negatives_per_positive``, one number per split."""
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
  return ratios


def parse_link_config(schema: tfgnn.GraphSchema, config: Mapping[str, Any], *,
                      who: str) -> LinkConfig:
  """Checks ``link_config`` against the graph schema, the hops of each end included.

  Example (one node set)::

    {"edge_set": "cites",
     "splits": {"train": 0.85, "eval": 0.05, "test": 0.10},
     "negatives_per_positive": 1,             # or {"train": 1, "eval": 1, "test": 1}
     "hops": [{"cites": 10}, {"cites": 5}],  # from each end
     "undirected": true, "seed": 0}

  Between two node sets (``rated``: user -> item, ``rated_by``: item -> user)::

    {"edge_set": "rated", "reverse_edge_set": "rated_by", "splits": {...},
     "source_hops": [{"rated": 10}, {"rated_by": 5}],   # from the user
     "target_hops": [{"rated_by": 10}, {"rated": 5}]}   # from the item

  Raises:
    GraphInputError: naming the key, the end, the allowed values and what was given.
  """
  link = _link_config(schema, config, who=who)
  end_plans(schema, link, who=who)  # checks the hops of each end and the time feature
  return link


def _hop_list(where: str, key: str, hops: Any, edge_set: str) -> list[dict[str, Any]]:
  if (not isinstance(hops, Sequence) or isinstance(hops, str)
      or not all(isinstance(h, Mapping) for h in hops)):
    raise GraphInputError(f"{where}: {key} must be a list of {{edge_set: fan_out}}, one per "
                          f"hop, e.g. [{{{edge_set!r}: 10}}, {{{edge_set!r}: 5}}]; got {hops!r}.")
  return [dict(h) for h in hops]


def _parse_hops(where: str, config: Mapping[str, Any], edge_set: str
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
  """``(source hops, target hops)``: ``hops`` for both, or ``source_hops`` and ``target_hops``."""
  per_end = [key for key in ("source_hops", "target_hops") if key in config]
  if per_end and "hops" in config:
    raise GraphInputError(f"{where}: give hops (the same from both ends) or source_hops and "
                          "target_hops (one list per end), not both.")
  if len(per_end) == 1:
    raise GraphInputError(f"{where}: {per_end[0]} without its other end; give both "
                          "source_hops and target_hops.")
  if per_end:
    return tuple(_hop_list(where, key, config[key], edge_set) for key in per_end)
  hops = _hop_list(where, "hops", config.get("hops"), edge_set)
  return hops, hops


def _parse_reverse(where: str, schema: tfgnn.GraphSchema, config: Mapping[str, Any],
                   name: str, hops: Iterable[Mapping[str, Any]]) -> Optional[str]:
  """The declared reverse edge set, checked; refuses an undeclared one the hops sample."""
  edge_set = schema.edge_sets[name]
  backwards = (edge_set.target, edge_set.source)
  if "reverse_edge_set" not in config:
    sampled = sorted({e for hop in hops for e in hop
                      if e != name and e in schema.edge_sets
                      and (schema.edge_sets[e].source, schema.edge_sets[e].target) == backwards})
    if sampled:
      raise GraphInputError(
          f"{where}: the hops sample edge set(s) {sampled}, from node set {backwards[0]!r} to "
          f"{backwards[1]!r}, which may hold the edges of {name!r} reversed: a held-out edge "
          f"would then reach the model that way. Name the reverse as \"reverse_edge_set\": "
          f"{sampled[0]!r} (its copies of held-out edges are then kept out of message "
          "passing too), or set \"reverse_edge_set\": null if it holds other edges.")
    return None
  reverse = config["reverse_edge_set"]
  if reverse is None:
    return None
  if reverse not in schema.edge_sets:
    raise GraphInputError(f"{where}: reverse_edge_set {reverse!r} is not in the graph schema "
                          f"(edge sets: {sorted(schema.edge_sets)}).")
  got = (schema.edge_sets[reverse].source, schema.edge_sets[reverse].target)
  if reverse == name or got != backwards:
    raise GraphInputError(
        f"{where}: reverse_edge_set {reverse!r} goes from {got[0]!r} to {got[1]!r}; the "
        f"reverse of {name!r} is another edge set from {backwards[0]!r} to {backwards[1]!r}.")
  return reverse


def _link_config(schema: tfgnn.GraphSchema, config: Mapping[str, Any], *,
                 who: str) -> LinkConfig:
  """``link_config``'s keys checked against the schema (not yet its hops)."""
  where = f"{who} link_config"
  if not isinstance(config, Mapping):
    raise GraphInputError(f"{where} must be a JSON object, got {type(config).__name__}.")
  unknown = sorted(set(config) - set(_KEYS))
  if unknown:
    raise GraphInputError(f"{where}: unknown keys {unknown}; allowed: {list(_KEYS)}.")
  edge_set = config.get("edge_set")
  if edge_set not in schema.edge_sets:
    raise GraphInputError(f"{where}: edge_set {edge_set!r} is not in the graph schema "
                          f"(edge sets: {sorted(schema.edge_sets)}).")
  splits, ratios, message_split = _parse_splits(where, config)
  undirected = config.get("undirected", False)
  if not isinstance(undirected, bool):
    raise GraphInputError(f"{where}: undirected must be true or false, got {undirected!r}.")
  edge_set_pb = schema.edge_sets[edge_set]
  if undirected and edge_set_pb.source != edge_set_pb.target:
    raise GraphInputError(f"{where}: undirected needs an edge set within one node set; "
                          f"{edge_set!r} goes from {edge_set_pb.source!r} to "
                          f"{edge_set_pb.target!r} (name its reverse as reverse_edge_set).")
  seed = config.get("seed", 0)
  if not isinstance(seed, int) or isinstance(seed, bool):
    raise GraphInputError(f"{where}: seed must be an int, got {seed!r}.")
  source_hops, target_hops = _parse_hops(where, config, edge_set)
  negative_sampling = config.get("negative_sampling", "uniform")
  if negative_sampling not in NEGATIVE_SAMPLING:
    raise GraphInputError(f"{where}: negative_sampling must be one of "
                          f"{list(NEGATIVE_SAMPLING)}, got {negative_sampling!r}.")
  reverse = _parse_reverse(where, schema, config, edge_set, source_hops + target_hops)
  time, starts, node_time = "", {}, ""
  if "time_split" in config:  # the features are checked with the hops (end_plans)
    time = config["time_split"]["time"]
    node_time = config["time_split"].get("node_time") or ""
    starts, splits = splits, {name: 0.0 for name in splits}
  return LinkConfig(edge_set=edge_set, splits=splits, negatives_per_positive=ratios,
                    source_hops=source_hops, target_hops=target_hops,
                    negative_sampling=negative_sampling, time=time, starts=starts,
                    node_time=node_time,
                    message_split=message_split, undirected=undirected, seed=seed,
                    reverse_edge_set=reverse)


def end_plans(schema: tfgnn.GraphSchema, link: LinkConfig, *,
              who: str) -> dict[str, sampling.SamplingPlan]:
  """``{"source": plan, "target": plan}``: each end's hops from its node set.

  Raises:
    GraphInputError: a hop that does not apply from its end, naming the end
      (and, for the same hops from both ends of an edge set between two node
      sets, how to give each end its own); a ``time_split`` time that is not a
      number feature of the edge set.
  """
  edge_set = schema.edge_sets[link.edge_set]
  where = f"{who} link_config"
  if link.time:
    sampling.edge_feature(schema, link.edge_set, link.time, where, TIME_WHAT)
  if link.node_time:
    for node_set in dict.fromkeys((edge_set.source, edge_set.target)):
      sampling.node_feature(schema, node_set, link.node_time, where,
                            'time_split\'s "node_time"')
  specs = {}
  for end, node_set, hops in (("source", edge_set.source, link.source_hops),
                              ("target", edge_set.target, link.target_hops)):
    try:
      specs[end] = sampling.plan_from_hops(schema, node_set, hops, who=where, end=end)
    except GraphInputError as e:
      if not link.same_hops or edge_set.source == edge_set.target:
        raise
      raise GraphInputError(
          f"{e} The same hops are sampled from both ends, and {link.edge_set!r} joins node "
          f"set {edge_set.source!r} to {edge_set.target!r}: give each end its own, "
          f"source_hops (from {edge_set.source!r}) and target_hops (from "
          f"{edge_set.target!r}).") from e
  return specs


def output_graph_schema(schema: tfgnn.GraphSchema, link: LinkConfig, *,
                        who: str) -> tfgnn.GraphSchema:
  """The schema of the link examples: the input's, plus the readout sets."""
  return readout.with_link_readout(sampling.output_graph_schema(schema),
                                   schema.edge_sets[link.edge_set], link.edge_set, who=who)


@dataclasses.dataclass(frozen=True)
class LinkPlan:
  """``link_config`` checked against the schema, with what an engine runs for it.

  Attributes:
    link: The validated config.
    plans: ``"source"`` / ``"target"`` -> the hops from that end's node set.
    sampling: What samples a pair's subgraph from its two roots (source,
      target): one plan rooted at both when both ends sample the same hops in
      one node set, else the two ends' plans joined
      (:func:`sampling.join_plans`).
    graph_schema: The input schema without table metadata (the graph's).
    schema: The link examples' schema (:func:`output_graph_schema`).
  """
  link: LinkConfig
  plans: Mapping[str, sampling.SamplingPlan]
  sampling: sampling.SamplingPlan
  graph_schema: tfgnn.GraphSchema
  schema: tfgnn.GraphSchema


def plan_links(schema: tfgnn.GraphSchema, config: Mapping[str, Any], *, engine: str,
               runs: Collection[str], who: str) -> LinkPlan:
  """Everything schema-level of ``link_config``, before any table is read.

  The config (:func:`parse_link_config`), the examples' readout sets, the plan
  from each end and the engine's refusal of a strategy it does not run
  (:func:`sampling.check_engine`).

  Raises:
    GraphInputError: naming the key, end, set, hop or op at fault.
  """
  link = _link_config(schema, config, who=who)
  edge_set = schema.edge_sets[link.edge_set]
  plans = end_plans(schema, link, who=who)
  for plan in plans.values():
    sampling.check_engine(plan, engine, who, runs)
    if plan.timed and not link.time:
      raise GraphInputError(
          f"{who} link_config: time-aware strategies bound each subgraph by its query's "
          "time, and link pairs split at random have none. Split by time (time_split), or "
          "use uniform, weighted or top_k hops.")
    timeless = [op for op in plan.ops if not op.time]
    if link.time and timeless:
      raise GraphInputError(
          f"{who} link_config: with time_split each pair is a query at its edge's time and "
          f"sees only what came before, so every hop must be time-aware; sampling op "
          f"{timeless[0].name!r} (edge set {timeless[0].edge_set!r}) is "
          f"{timeless[0].strategy!r}. Write it as {{\"fanout\": {timeless[0].size}, "
          f"\"strategy\": \"uniform_before\", \"time\": <its time feature>}}.")
  one_plan = link.same_hops and edge_set.source == edge_set.target
  graph_schema = sampling.output_graph_schema(schema)
  return LinkPlan(link=link, plans=plans,
                  sampling=plans["source"] if one_plan else sampling.join_plans(plans),
                  graph_schema=graph_schema,
                  schema=readout.with_link_readout(graph_schema, edge_set, link.edge_set,
                                                   who=who))


def split_rng(seed: int, *parts: Any) -> np.random.Generator:
  """A generator seeded by ``seed`` and ``parts`` (stable across processes)."""
  digest = hashlib.sha256(repr((seed,) + parts).encode("utf-8")).digest()
  return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def edge_key(u: bytes, v: bytes, undirected: bool) -> Pair:
  """The key of edge ``(u, v)``: the ordered pair, or the sorted one if undirected."""
  return (min(u, v), max(u, v)) if undirected else (u, v)


def split_links(pairs: Iterable[Pair], link: LinkConfig, *, who: str) -> dict[str, list[Pair]]:
  """The positives of each split: a seeded permutation of the distinct edges, cut by fraction.

  Self loops are dropped (they cannot be held out of a GNN that adds them) and
  duplicates (and, if undirected, reverse duplicates) count once. Split sizes
  are the fractions rounded down, the rest going to the largest split, so
  every split gets its share to within one edge.

  Raises:
    GraphInputError: if some split would get no edge.
  """
  keys = sorted({edge_key(u, v, link.undirected) for u, v in pairs if u != v})
  order = split_rng(link.seed, "split").permutation(len(keys))
  names = sorted(link.splits)
  sizes = {s: int(math.floor(link.splits[s] * len(keys))) for s in names}
  largest = max(names, key=lambda s: (link.splits[s], s))
  sizes[largest] += len(keys) - sum(sizes.values())
  empty = [s for s in names if sizes[s] == 0]
  if empty:
    raise GraphInputError(
        f"{who}: edge set {link.edge_set!r} has {len(keys)} distinct edges (no self "
        f"loops), too few to give split(s) {empty} any edge with fractions {dict(link.splits)}.")
  out, start = {}, 0
  for s in names:
    out[s] = [keys[i] for i in sorted(order[start:start + sizes[s]])]
    start += sizes[s]
  return out


class EdgeKeys:
  """Membership of ``(u, v)`` node-index pairs in a set of edges, vectorized (sorted keys)."""

  def __init__(self, source: np.ndarray, target: np.ndarray, num_targets: int,
               undirected: bool):
    self._n = max(int(num_targets), 1)
    self._undirected = undirected
    self.keys = np.unique(self.key(np.asarray(source, np.int64), np.asarray(target, np.int64)))

  def key(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The int64 key of each pair (the sorted pair's, if undirected)."""
    if self._undirected:
      u, v = np.minimum(u, v), np.maximum(u, v)
    return u * self._n + v

  def contains(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    key = self.key(u, v)
    at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
    return self.keys[at] == key if len(self.keys) else np.zeros(len(key), bool)

  def neighbours(self, num_sources: int) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, targets)``: CSR of the pairs ``(u, w)`` held (both ways if undirected).

    ``num_sources``: the nodes ``u`` ranges over (``indptr`` has one more entry).
    """
    source, target = np.divmod(self.keys, self._n)
    if self._undirected:
      source, target = np.r_[source, target], np.r_[target, source]
    order = np.lexsort((target, source))
    counts = np.bincount(source, minlength=num_sources)
    return np.r_[0, np.cumsum(counts)].astype(np.int64), target[order]


def _negative(u: np.ndarray, v: np.ndarray, known: "EdgeKeys", taken: Optional[np.ndarray],
              one_node_set: bool) -> np.ndarray:
  """Which drawn pairs may be negatives.

  No known edge, no self pair in one node set and, with ``taken`` (keys of the
  negatives so far), none taken or drawn twice (the first counts).
  """
  ok = ~known.contains(u, v)
  if one_node_set:
    ok &= u != v
  if taken is not None:
    key = known.key(u, v)
    first = np.zeros(len(u), bool)
    first[np.unique(key, return_index=True)[1]] = True
    ok &= first & ~np.isin(key, taken)
  return ok


def draw_negatives_at(rng: np.random.Generator, times: np.ndarray,
                      node_times: tuple[np.ndarray, np.ndarray], known: "EdgeKeys", *,
                      one_node_set: bool, what: str, who: str, distinct: bool = False,
                      target_cdf: Optional[np.ndarray] = None) -> np.ndarray:
  """A negative per time in ``times``, both ends among the nodes appeared by it ([n, 2]).

  As :func:`draw_negatives`, for ``node_time``: pair ``i``'s source and target
  are drawn among the nodes whose time (``node_times``: sources', targets') is
  at or before ``times[i]``, uniformly (or the targets by ``target_cdf``, a
  target not yet there drawn again).

  Raises:
    GraphInputError: no node appeared by a time, or too few non-edges among those that did.
  """
  born_s, born_t = (np.asarray(b, np.float64) for b in node_times)
  times = np.asarray(times, np.float64)
  order_s, order_t = np.argsort(born_s, kind="stable"), np.argsort(born_t, kind="stable")
  n_s = np.searchsorted(born_s[order_s], times, side="right")
  n_t = np.searchsorted(born_t[order_t], times, side="right")
  empty = np.flatnonzero((n_s == 0) | (n_t == 0))
  if len(empty):
    raise GraphInputError(
        f"{who}: no node had appeared (node_time) by time {times[empty[0]]:g}, the time of a "
        f"negative of {what}: every pair's ends must exist at its time.")
  out = np.zeros((len(times), 2), np.int64)
  pending, keys, tries = np.arange(len(times)), np.zeros(0, np.int64), 0
  while len(pending):
    if tries > NEGATIVE_TRIES_PER_PAIR * max(len(times), 1):
      raise GraphInputError(
          f"{who}: found only {len(times) - len(pending)} of {len(times)} negatives for {what} "
          f"after {tries} random pairs among the nodes that had appeared by each pair's time: "
          "the graph is too dense for negatives_per_positive.")
    draw = rng.random((2, len(pending)))
    u = order_s[(draw[0] * n_s[pending]).astype(np.int64)]
    v = (order_t[(draw[1] * n_t[pending]).astype(np.int64)] if target_cdf is None else
         np.searchsorted(target_cdf, draw[1], side="right"))
    tries += len(pending)
    ok = _negative(u, v, known, keys if distinct else None, one_node_set) & (
        born_t[v] <= times[pending])
    if distinct:
      keys = np.r_[keys, known.key(u[ok], v[ok])]
    out[pending[ok]] = np.stack([u[ok], v[ok]], axis=1)
    pending = pending[~ok]
  return out


def draw_negatives(rng: np.random.Generator, count: int, num_sources: int, num_targets: int,
                   known: EdgeKeys, *, one_node_set: bool, what: str, who: str,
                   distinct: bool = False, target_cdf: Optional[np.ndarray] = None
                   ) -> np.ndarray:
  """``count`` random (source node, target node) pairs that are no known edge ([count, 2]).

  Sources are uniform; targets too, or drawn by ``target_cdf``.

  Args:
    rng: The random generator.
    count: How many.
    num_sources: Nodes in the edge set's source node set (sources are drawn from
      ``range(num_sources)``).
    num_targets: Nodes in the edge set's target node set (targets are drawn from
      ``range(num_targets)``).
    known: The pairs a negative must not be (every edge; for ``distinct``,
      also the negatives drawn before).
    one_node_set: Both ends are in one node set: no self pair ``(u, u)``.
    what: The negatives' purpose, for the error.
    who: The component named in errors.
    distinct: No pair twice among the ones drawn.
    target_cdf: The cumulative distribution of the targets (:func:`popularity_cdf`),
      or None: uniform.

  Raises:
    GraphInputError: if the graph is too dense to find that many non-edges.
  """
  found, keys, tries, missing = [], np.zeros(0, np.int64), 0, count
  while missing > 0:
    if tries > NEGATIVE_TRIES_PER_PAIR * max(count, 1):
      raise GraphInputError(
          f"{who}: found only {count - missing} of {count} negatives for {what} after {tries} "
          "random pairs: the graph is too dense for negatives_per_positive.")
    u = rng.integers(num_sources, size=2 * missing + 16)
    v = (rng.integers(num_targets, size=2 * missing + 16) if target_cdf is None else
         np.searchsorted(target_cdf, rng.random(2 * missing + 16), side="right"))
    tries += len(u)
    ok = _negative(u, v, known, keys if distinct else None, one_node_set)
    pairs = np.stack([u[ok], v[ok]], axis=1)[:missing]
    keys = np.r_[keys, known.key(pairs[:, 0], pairs[:, 1])]
    found.append(pairs)
    missing -= len(pairs)
  return np.concatenate(found).astype(np.int64) if found else np.zeros((0, 2), np.int64)


@dataclasses.dataclass(frozen=True)
class Supervision:
  """The supervised pairs of each split, as node indices.

  Attributes:
    positives: Split -> ``[P, 2]`` (source, target) node indices.
    negatives: Split -> fixed ``[Q, 2]`` negatives (empty where none were asked).
    known: Every edge of the link edge set (negatives avoid them).
    held_out: The held-out splits' positives (kept out of message passing).
    held_out_pairs: The same as ``[H, 2]`` node indices.
    target_cdf: How negative targets are drawn (``negative_sampling``): None,
      uniform; else their cumulative distribution (:func:`popularity_cdf`).
    times: ``time_split``: split -> each positive's time (its edge's); else empty.
    negative_times: ``time_split``: split -> each fixed negative's time (that
      of a positive of its split, drawn seeded); else empty.
  """
  positives: Mapping[str, np.ndarray]
  negatives: Mapping[str, np.ndarray]
  known: EdgeKeys
  held_out: EdgeKeys
  held_out_pairs: np.ndarray
  target_cdf: Optional[np.ndarray] = None
  times: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  negative_times: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)


def popularity_cdf(pairs: np.ndarray, num_targets: int, undirected: bool) -> np.ndarray:
  """The cumulative distribution of "popularity" negatives' targets.

  Each target node in proportion to one plus its in-degree among ``pairs``
  (``[P, 2]``, the message split's edges; with ``undirected``, both ends count).
  """
  degree = np.bincount(pairs[:, 1], minlength=num_targets)
  if undirected:
    degree = degree + np.bincount(pairs[:, 0], minlength=num_targets)
  cdf = np.cumsum(degree + 1.0)
  return cdf / cdf[-1]


def split_by_time(link: LinkConfig, source: np.ndarray, target: np.ndarray, times: np.ndarray,
                  num_targets: int, *, one_node_set: bool, who: str
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
  """``time_split``'s positives: each distinct edge at its first time, in the split of that time.

  Returns:
    ``({split: [P, 2] pairs}, {split: [P] times})``.

  Raises:
    GraphInputError: a split whose time range holds no edge.
  """
  keep = source != target if one_node_set else np.ones(len(source), bool)
  source, target, times = source[keep], target[keep], np.asarray(times, np.float64)[keep]
  key = EdgeKeys(np.zeros(0), np.zeros(0), num_targets, link.undirected).key(source, target)
  order = np.lexsort((times, key))
  first = order[np.unique(key[order], return_index=True)[1]]
  names = sorted(link.starts, key=lambda name: link.starts[name])
  split_of = np.searchsorted([link.starts[n] for n in names], times[first], side="right") - 1
  pairs, out_times = {}, {}
  for i, name in enumerate(names):
    rows = first[split_of == i]
    if not len(rows):
      raise GraphInputError(
          f"{who}: time_split split {name!r} (from {link.starts[name]:g}) holds no edge of "
          f"{link.edge_set!r}: its edges' first times run from {times.min(initial=0):g} to "
          f"{times.max(initial=0):g}.")
    pairs[name] = np.stack([source[rows], target[rows]], axis=1).astype(np.int64)
    out_times[name] = times[rows]
  return pairs, out_times


def supervise(link: LinkConfig, source_ids: pd.Index, target_ids: pd.Index,
              source: np.ndarray, target: np.ndarray, *, one_node_set: bool,
              negatives_for: Collection[str], who: str,
              times: Optional[np.ndarray] = None,
              node_times: Optional[tuple[np.ndarray, np.ndarray]] = None,
              table: str = "") -> Supervision:
  """Splits the link edge set's edges and draws the fixed negatives of ``negatives_for``.

  Args:
    link: The config.
    source_ids: Ids of the edge set's source node set.
    target_ids: Ids of the edge set's target node set.
    source: The edges' sources, as node indices (table order).
    target: The edges' targets, as node indices (table order), one per source.
    one_node_set: The edge set joins one node set to itself (no self pairs).
    negatives_for: The splits that get fixed negatives (distinct across them,
      split by split in sorted order, each seeded by ``link.seed`` and its name).
    who: The component named in errors.
    times: ``time_split``: each edge's time (the link's time feature). Each
      pair is then a query at its time: none is held out of message passing
      (time-aware sampling keeps each query's own and later edges out).
    node_times: ``node_time``: when each source and each target node appears;
      a negative at time ``t`` is drawn among the nodes that appeared by ``t``
      (:func:`draw_negatives_at`), and no edge may be earlier than its ends
      (:func:`check_node_times`).
    table: The edge set's table, as errors name it.
  """
  positive_times = {}
  if node_times is not None:
    check_node_times(link, source_ids, target_ids, source, target, times, node_times,
                     who=who, table=table)
  if link.time:
    positives, positive_times = split_by_time(link, source, target, times, len(target_ids),
                                              one_node_set=one_node_set, who=who)
  else:
    positives = _split_pairs(link, source_ids, target_ids, source, target, who=who)
  known = EdgeKeys(source, target, len(target_ids), link.undirected)
  held = np.concatenate([positives[s] for s in link.held_out_splits if not link.time] or
                        [np.zeros((0, 2), np.int64)])
  cdf = (popularity_cdf(positives[link.message_split], len(target_ids), link.undirected)
         if link.negative_sampling == "popularity" else None)
  negatives, taken, negative_times = {}, known, {}
  for split in sorted(positives):
    count = link.negatives_for(split, len(positives[split])) if split in negatives_for else 0
    rng, what = split_rng(link.seed, "negatives", split), f"split {split!r}"
    if link.node_time and count:  # each negative's time first: its ends appeared by then
      negative_times[split] = split_rng(link.seed, "negative_times", split).choice(
          positive_times[split], count)
      negatives[split] = draw_negatives_at(
          rng, negative_times[split], node_times, taken, one_node_set=one_node_set,
          what=what, who=who, distinct=True, target_cdf=cdf)
    else:
      negatives[split] = draw_negatives(
          rng, count, len(source_ids), len(target_ids), taken, one_node_set=one_node_set,
          what=what, who=who, distinct=True, target_cdf=cdf)
    taken = _with(taken, negatives[split], len(target_ids), link.undirected)
  if not link.node_time:
    negative_times = {
        split: split_rng(link.seed, "negative_times", split).choice(
            positive_times[split], len(negatives[split]))
        for split in positive_times if len(negatives[split])}
  return Supervision(positives=positives, negatives=negatives, known=known,
                     held_out=EdgeKeys(held[:, 0], held[:, 1], len(target_ids),
                                       link.undirected),
                     held_out_pairs=held, target_cdf=cdf, times=positive_times,
                     negative_times=negative_times)


def check_node_times(link: LinkConfig, source_ids: pd.Index, target_ids: pd.Index,
                     source: np.ndarray, target: np.ndarray, times: np.ndarray,
                     node_times: tuple[np.ndarray, np.ndarray], *, who: str,
                     table: str = "") -> None:
  """Refuses an edge of the link's edge set earlier than an end's ``node_time``.

  A pair's ends must exist at its time, and a node reached by an edge before a
  query's time must have appeared by then: no edge precedes its nodes.

  Raises:
    GraphInputError: the first such edge, with its ends' ids and the times.
  """
  times = np.asarray(times, np.float64)
  for end, nodes, ids, appears in (("source", source, source_ids, node_times[0]),
                                   ("target", target, target_ids, node_times[1])):
    appears = np.asarray(appears, np.float64).reshape(len(ids), -1)[:, 0]
    bad = np.flatnonzero(times < appears[nodes])
    if len(bad):
      i = bad[0]
      raise GraphInputError(
          f"{who}: edge {errors.shown_id(source_ids[source[i]])!r} -> "
          f"{errors.shown_id(target_ids[target[i]])!r} "
          f"of edge set {link.edge_set!r}{f' (table {table})' if table else ''} is at time "
          f"{times[i]:g} ({link.time!r}), before "
          f"its {end} appears (node_time {link.node_time!r}: {appears[nodes[i]]:g}); "
          f"{len(bad)} such edge(s). An edge cannot be earlier than its nodes: fix the "
          "times in the tables, or leave \"node_time\" out of link_config[\"time_split\"].")


def _split_pairs(link: LinkConfig, source_ids: pd.Index, target_ids: pd.Index,
                 source: np.ndarray, target: np.ndarray, *, who: str) -> dict[str, np.ndarray]:
  """The random split's positives of each split, as ``[P, 2]`` node indices.

  The split orders the edges by their ends' ids as bytes (integer ids as their text).
  """
  ids_s, ids_t = tables.id_bytes(source_ids), tables.id_bytes(target_ids)
  find_s, find_t = tables.IdFinder(source_ids), tables.IdFinder(target_ids)
  positives = {}
  edges = zip(ids_s[source], ids_t[target], strict=True)
  for split, pairs in split_links(edges, link, who=who).items():
    positives[split] = np.stack([
        find_s(np.asarray([p[0] for p in pairs], dtype=object)),
        find_t(np.asarray([p[1] for p in pairs], dtype=object))],
                                axis=1).astype(np.int64).reshape(-1, 2)
  return positives


def _with(keys: EdgeKeys, pairs: np.ndarray, num_targets: int, undirected: bool) -> EdgeKeys:
  if not len(pairs):
    return keys
  source, target = np.divmod(keys.keys, max(num_targets, 1))
  return EdgeKeys(np.r_[source, pairs[:, 0]], np.r_[target, pairs[:, 1]], num_targets,
                  undirected)


def pairs_csv(positives: np.ndarray, negatives: np.ndarray, source_ids: pd.Index,
              target_ids: pd.Index) -> str:
  """``source,target,label`` rows of node-index pairs by node id: positives 1, negatives 0."""
  out = io.StringIO()
  writer = csv.writer(out, lineterminator="\n")
  writer.writerow(["source", "target", "label"])
  for pairs, label in ((positives, 1), (negatives, 0)):
    for u, v in id_pairs(pairs, source_ids, target_ids):
      writer.writerow([_text(u), _text(v), label])
  return out.getvalue()


def _text(node_id: Any) -> str:
  return node_id.decode("utf-8", "backslashreplace") if isinstance(node_id, bytes) else str(node_id)


def id_pairs(pairs: np.ndarray, source_ids: pd.Index, target_ids: pd.Index) -> list[Pair]:
  """Node-index pairs ``[N, 2]`` as (source id, target id) pairs of bytes ids."""
  return list(zip(tables.id_bytes(source_ids, pairs[:, 0]),
                  tables.id_bytes(target_ids, pairs[:, 1]), strict=True))
