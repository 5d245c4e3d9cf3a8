"""What to sample: the hop-by-hop config, TF-GNN's SamplingSpec, and one engine-neutral plan.

Every component that samples (GraphSampler, LinkSampler, GnnTrainer in memory,
both GraphInferrer engines) goes config -> :func:`plan_from_params` ->
:func:`check_engine`:

* ``sampling_config`` is ``{"seed_node_set": str, "hops": [{edge_set: fan_out}, ...]}``;
  a fan-out is an int, or ``{"fanout": int, "strategy": name, ...}`` with the
  strategy's own keys (:func:`parse_fan_out`);
* a text-format ``tensorflow_gnn.sampler.SamplingSpec`` may be given instead;
* the :class:`SamplingPlan` is what engines run: its ops in order, each with
  its edge set, both ends' node sets, fan-out, strategy and the edge features
  the strategy reads.

Strategies (:data:`ALL_STRATEGIES`), each choosing up to ``fanout`` out-edges
of a node, without replacement:

* ``uniform``: uniformly;
* ``weighted``: with probability proportional to the edge feature ``weight``
  (edges of weight 0 are never chosen);
* ``top_k``: the ``fanout`` edges of the highest ``weight`` (ties: table order);
* ``uniform_before``: uniformly among the edges whose ``time`` is before the
  seed's time (``time_inclusive``: at or before);
* ``latest``: the most recent edges before the seed's time (TF-GNN's ``LATEST_K``).

A time-aware op bounds every hop by the seed's time; ``time_respecting`` bounds
it by the time of the edge that reached the node instead (a temporal walk:
each hop earlier than the last). An engine states the strategies it runs and
:func:`check_engine` refuses the others by name, before any work (none falls
back silently).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Collection, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
import tensorflow_gnn.sampler as tfgnn_sampler

from google.protobuf import text_format

from gnn_trainer_component.graph.errors import GraphInputError

#: Strategy names.
UNIFORM, TOP_K, WEIGHTED = "uniform", "top_k", "weighted"
UNIFORM_BEFORE, LATEST = "uniform_before", "latest"
#: Strategy name -> TF-GNN's SamplingStrategy (the strategies a SamplingSpec can name).
STRATEGIES = {
    UNIFORM: tfgnn_sampler.SamplingStrategy.RANDOM_UNIFORM,
    TOP_K: tfgnn_sampler.SamplingStrategy.TOP_K,
    WEIGHTED: tfgnn_sampler.SamplingStrategy.RANDOM_WEIGHTED,
}
#: Strategies that read an edge weight, and those that read an edge time.
BY_WEIGHT = frozenset({WEIGHTED, TOP_K})
BY_TIME = frozenset({UNIFORM_BEFORE, LATEST})
ALL_STRATEGIES = (UNIFORM, WEIGHTED, TOP_K, UNIFORM_BEFORE, LATEST)
#: The edge feature TF-GNN's samplers read as the weight (``weight_feature_name``):
#: what a ``sampling_spec``'s TOP_K and RANDOM_WEIGHTED ops read.
SPEC_WEIGHT_FEATURE = "weight"

_OP_KEYS = {
    UNIFORM: (),
    WEIGHTED: ("weight",),
    TOP_K: ("weight",),
    UNIFORM_BEFORE: ("time", "time_inclusive", "time_respecting"),
    LATEST: ("time", "time_inclusive", "time_respecting"),
}


@dataclasses.dataclass(frozen=True)
class FanOut:
  """One hop entry of a ``sampling_config``: how many edges, and how they are chosen.

  Attributes:
    size: Up to this many out-edges per node.
    strategy: One of :data:`ALL_STRATEGIES`.
    weight: The edge feature ``weighted`` / ``top_k`` read ("" otherwise).
    time: The edge feature time-aware strategies read ("" otherwise).
    time_inclusive: An edge at the bound's time counts as before it.
    time_respecting: The bound is the time of the edge that reached the node,
      not the seed's.
  """
  size: int
  strategy: str = UNIFORM
  weight: str = ""
  time: str = ""
  time_inclusive: bool = False
  time_respecting: bool = False


def edge_feature(schema: tfgnn.GraphSchema, edge_set: str, name: Any, where: str,
                  what: str) -> str:
  """``name``, checked to be a scalar number feature of ``edge_set``; ``what`` names its key."""
  return _number_feature(schema.edge_sets[edge_set].features, "edge", edge_set, name, where,
                         what)


def node_feature(schema: tfgnn.GraphSchema, node_set: str, name: Any, where: str,
                 what: str) -> str:
  """``name``, checked to be a scalar number feature of ``node_set``; ``what`` names its key."""
  return _number_feature(schema.node_sets[node_set].features, "node", node_set, name, where,
                         what)


def _number_feature(features: Mapping[str, Any], kind: str, set_name: str, name: Any,
                    where: str, what: str) -> str:
  if name is None:
    raise GraphInputError(
        f"{where}: {what} is missing: name the {kind} feature it reads (features of {kind} set "
        f"{set_name!r}: {sorted(features)}).")
  if not isinstance(name, str) or name not in features:
    raise GraphInputError(
        f"{where}: {what} {name!r} is not a feature of {kind} set {set_name!r} in the graph "
        f"schema (its features: {sorted(features)}). Declare the column as a feature of the "
        f"{kind} set.")
  feature = features[name]
  dtype = tf.dtypes.as_dtype(feature.dtype)
  if not (dtype.is_integer or dtype.is_floating) or feature.shape.dim:
    raise GraphInputError(
        f"{where}: {what} {name!r} must be a scalar int or float feature, but it is "
        f"{dtype.name} of shape {[d.size for d in feature.shape.dim]}.")
  return name


def parse_fan_out(schema: tfgnn.GraphSchema, edge_set: str, value: Any, where: str) -> FanOut:
  """One hop entry: ``n`` or ``{"fanout": n, "strategy": s, ...}`` with ``s``'s keys.

  Raises:
    GraphInputError: a bad fan-out, an unknown strategy or key, a missing or
      unknown weight / time feature, naming ``where``.
  """
  if not isinstance(value, Mapping):
    value = {"fanout": value}
  strategy = value.get("strategy", UNIFORM)
  if strategy not in _OP_KEYS:
    raise GraphInputError(f"{where}: strategy {strategy!r} is not one of "
                          f"{list(ALL_STRATEGIES)}.")
  allowed = ("fanout", "strategy") + _OP_KEYS[strategy]
  unknown = sorted(set(value) - set(allowed))
  if unknown:
    raise GraphInputError(f"{where}: unknown keys {unknown} for strategy {strategy!r}; "
                          f"allowed: {', '.join(allowed)}.")
  size = value.get("fanout")
  if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
    raise GraphInputError(f"{where}: the fan-out (sample size) must be a positive int, "
                          f"got {size!r}.")
  out = FanOut(size=size, strategy=strategy)
  if strategy in BY_WEIGHT:
    out = dataclasses.replace(out, weight=edge_feature(
        schema, edge_set, value.get("weight"), where, f'strategy {strategy!r}\'s "weight"'))
  if strategy in BY_TIME:
    flags = {}
    for key in ("time_inclusive", "time_respecting"):
      flags[key] = value.get(key, False)
      if not isinstance(flags[key], bool):
        raise GraphInputError(f"{where}: {key} must be true or false, got {flags[key]!r}.")
    out = dataclasses.replace(out, time=edge_feature(
        schema, edge_set, value.get("time"), where, f'strategy {strategy!r}\'s "time"'),
                              **flags)
  return out


def _hop_ops(schema: tfgnn.GraphSchema, seed_node_set: str,
             hops: Sequence[Mapping[str, Any]], *, who: str, end: str) -> list["SamplingOp"]:
  """The ops of a hop-by-hop config (see :func:`plan_from_hops`), checked against ``schema``."""
  start = f" from the {end} end (node set {seed_node_set!r})" if end else ""
  if seed_node_set not in schema.node_sets:
    raise GraphInputError(
        f"{who}: seed node set {seed_node_set!r} is not in the graph schema "
        f"(node sets: {sorted(schema.node_sets)}).")
  if not hops:
    raise GraphInputError(f"{who}: the sampling config needs at least one hop.")
  ops = []
  frontier = {seed_node_set: ["seed"]}  # node set -> op names reaching it last hop
  for hop, fan_outs in enumerate(hops, 1):
    if not fan_outs:
      raise GraphInputError(f"{who}: hop {hop} samples no edge set.")
    next_frontier: dict[str, list[str]] = {}
    for edge_set_name, value in sorted(fan_outs.items()):
      if edge_set_name not in schema.edge_sets:
        raise GraphInputError(
            f"{who}: hop {hop} names unknown edge set {edge_set_name!r} "
            f"(edge sets: {sorted(schema.edge_sets)}).")
      fan_out = parse_fan_out(schema, edge_set_name, value,
                              f"{who}: hop {hop}, edge set {edge_set_name!r}")
      edge_set = schema.edge_sets[edge_set_name]
      inputs = frontier.get(edge_set.source)
      if not inputs:
        raise GraphInputError(
            f"{who}: hop {hop}{start} samples edge set {edge_set_name!r} from node set "
            f"{edge_set.source!r}, which the previous hop does not reach (it reaches "
            f"{sorted(frontier)}).")
      ops.append(SamplingOp(
          name=f"hop{hop}_{edge_set_name}", inputs=tuple(inputs), edge_set=edge_set_name,
          source=edge_set.source, target=edge_set.target, **dataclasses.asdict(fan_out)))
      next_frontier.setdefault(edge_set.target, []).append(ops[-1].name)
    frontier = next_frontier
  return ops


def plan_from_hops(schema: tfgnn.GraphSchema, seed_node_set: str,
                   hops: Sequence[Mapping[str, Any]], *, who: str,
                   end: str = "") -> "SamplingPlan":
  """The plan of a hop-by-hop fan-out config.

  Hop ``i`` expands, for every edge set ``e`` named in ``hops[i]``, the nodes
  reached in hop ``i-1`` (the seeds for hop 0) that belong to ``e``'s source
  node set, choosing up to ``hops[i][e]`` outgoing edges per node by the
  entry's strategy (:func:`parse_fan_out`).

  Args:
    schema: The input graph schema.
    seed_node_set: Node set of the seeds.
    hops: One ``{edge_set_name: fan-out}`` mapping per hop.
    who: The component named in errors.
    end: For link prediction, which end of the pair the hops start from
      (named in errors).

  Raises:
    GraphInputError: on unknown sets, features or strategies, bad sizes, or a
      hop that expands nothing.
  """
  return SamplingPlan(seed_node_set=seed_node_set, seed_op="seed",
                      ops=tuple(_hop_ops(schema, seed_node_set, hops, who=who, end=end)))


def parse_sampling_spec(text: str, who: str) -> tfgnn_sampler.SamplingSpec:
  """Parses a text-format ``tensorflow_gnn.sampler.SamplingSpec``."""
  try:
    return text_format.Parse(text, tfgnn_sampler.SamplingSpec())
  except text_format.ParseError as e:
    raise GraphInputError(f"{who}: invalid sampling_spec text proto: {e}") from None


def plan_from_params(schema: tfgnn.GraphSchema, sampling_spec: Optional[str],
                     sampling_config: Optional[Mapping[str, Any]], *,
                     who: str) -> "SamplingPlan":
  """The plan of exactly one of a text SamplingSpec or a hop config, checked.

  Args:
    schema: The input graph schema.
    sampling_spec: Text-format SamplingSpec, or None.
    sampling_config: ``{"seed_node_set": str, "hops": [{edge_set: fan_out}, ...]}``,
      or None.
    who: The component named in errors.

  Raises:
    GraphInputError: if both or neither are given, or either is invalid.
  """
  if bool(sampling_spec) == bool(sampling_config):
    raise GraphInputError(
        f"{who} needs exactly one of 'sampling_spec' (text SamplingSpec) or "
        "'sampling_config' ({'seed_node_set': ..., 'hops': [{edge_set: size}, ...]}).")
  if sampling_spec:
    spec = parse_sampling_spec(sampling_spec, who)
    if not spec.HasField("seed_op"):
      raise GraphInputError(f"{who}: sampling_spec must set seed_op "
                            f"(link seeds are not supported by {who}).")
    if spec.seed_op.node_set_name not in schema.node_sets:
      raise GraphInputError(
          f"{who}: sampling_spec seeds unknown node set {spec.seed_op.node_set_name!r}.")
    return plan_from_spec(spec, schema, who=who)
  if not isinstance(sampling_config, Mapping):
    raise GraphInputError(f"{who}: sampling_config must be a dict such as "
                          '{"seed_node_set": ..., "hops": [...]}, got '
                          f"{type(sampling_config).__name__}.")
  unknown = set(sampling_config) - {"seed_node_set", "hops"}
  if unknown:
    raise GraphInputError(f"{who}: unknown sampling_config keys {sorted(unknown)}; "
                          "allowed: seed_node_set, hops.")
  return plan_from_hops(schema, sampling_config.get("seed_node_set"),
                        sampling_config.get("hops") or [], who=who)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SamplingOp(FanOut):
  """One sampling op, resolved against the schema: its place in the plan and its fan-out.

  Attributes:
    name: The op's name (``hop<i>_<edge set>`` from a hop config).
    inputs: The ops whose nodes it expands.
    edge_set: The edge set it samples; ``source`` / ``target``: its node sets.
  """
  name: str
  inputs: tuple[str, ...]
  edge_set: str
  source: str
  target: str


@dataclasses.dataclass(frozen=True)
class SamplingPlan:
  """The seed node set and the ops, in an order where inputs come first.

  Attributes:
    seed_node_set: The node set of the (first) root of each subgraph.
    seed_op: The op the (first) root seeds.
    ops: The sampling ops, inputs first.
    roots: ``(seed op, node set)`` per root of a subgraph, in root order (a
      plan joined from several, :func:`join_plans`); empty: every root is a
      node of ``seed_node_set`` and seeds ``seed_op``.
  """
  seed_node_set: str
  seed_op: str
  ops: tuple[SamplingOp, ...]
  roots: tuple[tuple[str, str], ...] = ()

  @property
  def timed(self) -> bool:
    """Some op is time-aware: each subgraph needs its seed's time."""
    return any(op.time for op in self.ops)

  def time_rules(self) -> dict[str, tuple[str, bool]]:
    """Edge set -> (time feature, inclusive) where no sampled edge may be after its seed.

    The edge sets whose every op is time-aware with one time feature (an edge
    a timeless op samples may be later; the bound of a ``time_respecting`` hop
    is never after the seed's time). ``inclusive``: some op takes edges at the
    bound's time.
    """
    rules: dict[str, tuple[str, bool]] = {}
    mixed = set()
    for op in self.ops:
      if not op.time or (op.edge_set in rules and rules[op.edge_set][0] != op.time):
        mixed.add(op.edge_set)
        continue
      inclusive = op.time_inclusive or rules.get(op.edge_set, ("", False))[1]
      rules[op.edge_set] = (op.time, inclusive)
    return {name: rule for name, rule in rules.items() if name not in mixed}

  def root_ops(self, width: int) -> tuple[tuple[str, str], ...]:
    """``(seed op, node set)`` of each of ``width`` roots per subgraph."""
    if not self.roots:
      return ((self.seed_op, self.seed_node_set),) * width
    if width != len(self.roots):
      raise ValueError(f"the plan has {len(self.roots)} roots per subgraph, got {width}")
    return self.roots


def seed_time_dtype(schema: tfgnn.GraphSchema, plan: "SamplingPlan") -> Optional[np.dtype]:
  """How seed times are read for ``plan`` (None: the plan is timeless).

  int64 where every time feature the plan reads is an integer, else float64.
  """
  dtypes = [tf.dtypes.as_dtype(schema.edge_sets[op.edge_set].features[op.time].dtype)
            for op in plan.ops if op.time]
  if not dtypes:
    return None
  return np.dtype(np.int64) if all(d.is_integer for d in dtypes) else np.dtype(np.float64)


def join_plans(plans: Mapping[str, SamplingPlan]) -> SamplingPlan:
  """One plan with a root per given plan: each root's ops, named ``<key>/<op>``, from it alone.

  E.g. link prediction between two node sets: ``{"source": ..., "target": ...}``
  samples the hops of each end around that end only. The roots are in the
  mapping's order.
  """
  ops, roots = [], []
  for key, plan in plans.items():
    roots.append((f"{key}/{plan.seed_op}", plan.seed_node_set))
    ops += [dataclasses.replace(op, name=f"{key}/{op.name}",
                                inputs=tuple(f"{key}/{i}" for i in op.inputs))
            for op in plan.ops]
  return SamplingPlan(seed_node_set=roots[0][1], seed_op=roots[0][0], ops=tuple(ops),
                      roots=tuple(roots))


def _strategy_name(op) -> str:
  for name, value in STRATEGIES.items():
    if op.strategy == value:
      return name
  return tfgnn_sampler.SamplingStrategy.Name(op.strategy).lower()


def plan_from_spec(spec: tfgnn_sampler.SamplingSpec, schema: tfgnn.GraphSchema, *,
                   who: str) -> SamplingPlan:
  """The :class:`SamplingPlan` of a SamplingSpec with a ``seed_op``.

  Raises:
    GraphInputError: an op before its inputs, an input from another node set,
      an unknown edge set or a non-positive sample size.
  """
  if not spec.HasField("seed_op"):
    raise GraphInputError(f"{who}: the sampling spec needs a seed_op (node seeds).")
  reaches = {spec.seed_op.op_name: spec.seed_op.node_set_name}
  ops = []
  for op in spec.sampling_ops:
    if op.edge_set_name not in schema.edge_sets:
      raise GraphInputError(f"{who}: sampling op {op.op_name!r} names unknown edge set "
                            f"{op.edge_set_name!r}.")
    edge_set = schema.edge_sets[op.edge_set_name]
    for name in op.input_op_names:
      if name not in reaches:
        raise GraphInputError(
            f"{who}: sampling op {op.op_name!r} reads op {name!r}, which is not defined "
            "before it.")
      if reaches[name] != edge_set.source:
        raise GraphInputError(
            f"{who}: sampling op {op.op_name!r} samples edge set {op.edge_set_name!r} "
            f"(from node set {edge_set.source!r}) from op {name!r}, which reaches node set "
            f"{reaches[name]!r}.")
    if op.sample_size <= 0:
      raise GraphInputError(f"{who}: sampling op {op.op_name!r} has sample_size "
                            f"{op.sample_size}; it must be positive.")
    reaches[op.op_name] = edge_set.target
    strategy = _strategy_name(op)
    weight = ""
    if strategy in BY_WEIGHT:
      features = edge_set.features
      if SPEC_WEIGHT_FEATURE not in features:
        raise GraphInputError(
            f"{who}: sampling op {op.op_name!r} asks for strategy {strategy!r}, which reads "
            f"the edge feature {SPEC_WEIGHT_FEATURE!r} (TF-GNN's weight feature); edge set "
            f"{op.edge_set_name!r} has none (its features: {sorted(features)}). Add it, or "
            f'write the hop in sampling_config: {{"fanout": {op.sample_size}, "strategy": '
            f'"{strategy}", "weight": <feature>}}.')
      weight = edge_feature(schema, op.edge_set_name, SPEC_WEIGHT_FEATURE,
                             f"{who}: sampling op {op.op_name!r}", "the weight feature")
    ops.append(SamplingOp(name=op.op_name, inputs=tuple(op.input_op_names),
                          edge_set=op.edge_set_name, source=edge_set.source,
                          target=edge_set.target, size=int(op.sample_size),
                          strategy=strategy, weight=weight))
  return SamplingPlan(seed_node_set=spec.seed_op.node_set_name,
                      seed_op=spec.seed_op.op_name, ops=tuple(ops))


def unreached_sets(plan: SamplingPlan, schema: tfgnn.GraphSchema
                   ) -> tuple[list[str], list[str]]:
  """The node sets and edge sets of ``schema`` that no op of ``plan`` samples (sorted).

  Every subgraph holds them empty.
  """
  nodes = ({plan.seed_node_set} | {node_set for _, node_set in plan.roots}
           | {op.target for op in plan.ops})
  edges = {op.edge_set for op in plan.ops}
  return (sorted(n for n in schema.node_sets if n not in nodes),
          sorted(e for e in schema.edge_sets if e not in edges))


def check_engine(plan: SamplingPlan, engine: str, who: str,
                 runs: Collection[str]) -> None:
  """Refuses a plan with a strategy the engine does not run.

  Args:
    plan: The plan.
    engine: The engine, as the user knows it (e.g. "the in-memory sampler").
    who: The component named in errors.
    runs: The strategies the engine runs.

  Raises:
    GraphInputError: naming the op, its strategy, the engine and what it runs.
  """
  for op in plan.ops:
    if op.strategy not in runs:
      raise GraphInputError(
          f"{who}: sampling op {op.name!r} (edge set {op.edge_set!r}) asks for strategy "
          f"{op.strategy!r}, which {engine} does not run (it runs {sorted(runs)}). "
          "Use one it runs, or an engine that runs this one (docs/samplers.md, "
          "'Sampling strategies').")


def check_seed_times(plan: SamplingPlan, who: str, *, seed_times: bool,
                     how: str = "a 'time' column in the seed tables") -> None:
  """Refuses a time-aware plan where the caller has no time per seed (GraphInputError).

  ``how``: how the caller takes times, named in the error.
  """
  for op in plan.ops:
    if op.time and not seed_times:
      raise GraphInputError(
          f"{who}: sampling op {op.name!r} (edge set {op.edge_set!r}) asks for strategy "
          f"{op.strategy!r}, which samples before each seed's time, but {who} has no time "
          f"per seed here. Give the time ({how}), or use a strategy without time.")


def output_graph_schema(schema: tfgnn.GraphSchema) -> tfgnn.GraphSchema:
  """The schema that parses sampled subgraphs: the input without table metadata."""
  out = copy.deepcopy(schema)
  for _, _, piece in tfgnn.iter_sets(out):
    piece.ClearField("metadata")
  return out
