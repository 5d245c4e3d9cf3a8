"""``link_config``: link prediction's config checked against the graph schema, and its plans.

:func:`parse_link_config` validates the keys (the edge set, the random or
time split, negatives per positive, each end's hops, the reverse edge set,
``negative_sampling``, ``undirected``, the seed) naming the key at fault;
:func:`plan_links` adds each end's sampling plan, the engine's refusal of a
strategy it does not run and the link examples' schema with the readout sets
(:func:`output_graph_schema`). What the config means for the edges (the
split, supervision and leakage rules) is :mod:`links`; negatives are
:mod:`negatives`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Collection, Iterable, Mapping, Optional, Sequence

import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError


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
      node's :func:`negatives.popularity` among the message split's edges
      (popular items are negatives more often, so a model learns more than
      popularity).
    time: ``time_split``: the link edge set's time feature; each pair is a
      query at its edge's time, sampled with time-aware hops ("" otherwise).
    starts: ``time_split``: split name -> the time its edges start at (the
      message split: ``-inf``); ``splits`` then holds no fractions.
    node_time: ``time_split``: the feature of both ends' node sets that holds
      when each node appears; a negative of a pair at time ``t`` is drawn among
      the nodes that appear at or before ``t`` ("": every node, always).
    edge_label: The edge set's scalar number feature each pair predicts (edge
      regression or classification: a rating, a fraud flag): every pair is an
      edge, labelled with that feature, and no negative is drawn ("": link
      prediction, an edge 1.0 against sampled negatives 0.0).
    edge_features: With ``edge_label``: features of the edge set each pair
      also carries as input, its own edge's values (a purchase's amount), on
      the examples' node set ``pair`` (:data:`readout.PAIR`); empty: none.
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
  edge_label: str = ""
  edge_features: tuple[str, ...] = ()

  @property
  def held_out_splits(self) -> list[str]:
    return sorted(s for s in self.splits if s != self.message_split)

  @property
  def same_hops(self) -> bool:
    """Both ends sample the same hops (``hops``, or equal per-end lists)."""
    return list(self.source_hops) == list(self.target_hops)

  def negatives_for(self, split: str, positives: int) -> int:
    """How many negatives ``positives`` positives of ``split`` get (none with ``edge_label``)."""
    if self.edge_label:
      return 0
    return int(round(self.negatives_per_positive[split] * positives))


_KEYS = ("edge_set", "splits", "time_split", "negatives_per_positive", "hops", "source_hops",
         "target_hops", "reverse_edge_set", "negative_sampling", "message_split", "undirected",
         "seed", "edge_label", "edge_features")
#: How errors name ``time_split``'s time feature.
TIME_WHAT = 'time_split\'s "time"'
#: How errors name ``edge_label``.
EDGE_LABEL_WHAT = 'edge_label (the edge feature each pair predicts)'
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
  """``negatives_per_positive``, one number per split (0 with ``edge_label``)."""
  if "edge_label" in config:
    drawn = sorted({"negatives_per_positive", "negative_sampling"} & set(config))
    if drawn:
      raise GraphInputError(
          f"{where}: with edge_label every pair is an edge, labelled with its "
          f"{config['edge_label']!r}, and no negative is drawn; remove {drawn}.")
    return {s: 0.0 for s in splits}
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

  Predicting each rating's value instead of which items are rated: add
  ``"edge_label": "stars"`` (a scalar number feature of ``rated``) and leave
  out ``negatives_per_positive`` and ``negative_sampling``; ``"edge_features":
  ["minutes"]`` gives each pair its own edge's ``minutes`` as an input too.

  Raises:
    GraphInputError: naming the key, the end, the allowed values and what was given.
  """
  link = _link_config(schema, config, who=who)
  end_plans(schema, link, who=who)  # checks the hops of each end and the time feature
  return link


def _parse_edge_features(where: str, schema: tfgnn.GraphSchema, config: Mapping[str, Any],
                         edge_set: str) -> tuple[str, ...]:
  """``edge_features``: distinct fixed-shape number features of ``edge_set``, not the label."""
  names = config.get("edge_features", [])
  if names and "edge_label" not in config:
    raise GraphInputError(
        f"{where}: edge_features are the inputs a pair takes from its own edge, and only "
        "pairs that are edges have one: add \"edge_label\" (the edge feature each pair "
        "predicts), or remove edge_features (a sampled negative has no edge).")
  if (not isinstance(names, Sequence) or isinstance(names, str)
      or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names)):
    raise GraphInputError(f"{where}: edge_features must be a list of distinct feature names "
                          f"of edge set {edge_set!r}, e.g. [\"amount\"]; got {names!r}.")
  features = schema.edge_sets[edge_set].features
  for name in names:
    if name == config.get("edge_label"):
      raise GraphInputError(f"{where}: edge_features names {name!r}, the edge_label each pair "
                            "predicts: a label is never an input. Remove it from edge_features.")
    if name not in features:
      raise GraphInputError(
          f"{where}: edge_features names {name!r}, which is not a feature of edge set "
          f"{edge_set!r} in the graph schema (its features: {sorted(features)}).")
    dtype = tf.dtypes.as_dtype(features[name].dtype)
    dims = [d.size for d in features[name].shape.dim]
    if not (dtype.is_integer or dtype.is_floating) or any(d <= 0 for d in dims):
      raise GraphInputError(
          f"{where}: edge_features {name!r} of edge set {edge_set!r} must be an int or float "
          f"feature of fixed shape (the head reads it as numbers), but it is {dtype.name} of "
          f"shape {dims}.")
  return tuple(names)


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
  edge_label = config.get("edge_label", "")
  if "edge_label" in config:
    sampling.edge_feature(schema, edge_set, edge_label, where, EDGE_LABEL_WHAT)
  edge_features = _parse_edge_features(where, schema, config, edge_set)
  return LinkConfig(edge_set=edge_set, splits=splits, negatives_per_positive=ratios,
                    source_hops=source_hops, target_hops=target_hops,
                    negative_sampling=negative_sampling, time=time, starts=starts,
                    node_time=node_time, edge_label=edge_label, edge_features=edge_features,
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
                                   schema.edge_sets[link.edge_set], link.edge_set, who=who,
                                   edge_label=link.edge_label,
                                   edge_features=link.edge_features)


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
                                                   who=who, edge_label=link.edge_label,
                                                   edge_features=link.edge_features))

