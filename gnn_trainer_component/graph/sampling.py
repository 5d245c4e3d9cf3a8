"""What to sample: the hop-by-hop config, TF-GNN's SamplingSpec, and one engine-neutral plan.

Every component that samples (GraphSampler, LinkSampler, GnnTrainer in memory,
both GraphInferrer engines) goes config -> :func:`sampling_spec_from_config`
-> :func:`plan_from_spec` -> :func:`check_engine`:

* ``sampling_config`` is ``{"seed_node_set": str, "hops": [{edge_set: fan_out}, ...]}``;
  a fan-out is an int, or ``{"fanout": int, "strategy": name}``;
* a text-format ``tensorflow_gnn.sampler.SamplingSpec`` may be given instead;
* the :class:`SamplingPlan` is what engines run: its ops in order, each with
  its edge set, both ends' node sets, fan-out and :data:`STRATEGIES` name.

Strategies are the seam for sampling other than uniform: an engine states
the ones it runs and :func:`check_engine` refuses the others by name, before
any work (none falls back silently). Every engine here runs ``uniform``
(TF-GNN 1.0.3's Beam sampler implements only ``RANDOM_UNIFORM``).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Collection, Mapping, Optional, Sequence

import tensorflow_gnn as tfgnn
import tensorflow_gnn.sampler as tfgnn_sampler

from google.protobuf import text_format

from gnn_trainer_component.graph.errors import GraphInputError

#: Strategy name -> TF-GNN's SamplingStrategy.
UNIFORM, TOP_K, WEIGHTED = "uniform", "top_k", "weighted"
STRATEGIES = {
    UNIFORM: tfgnn_sampler.SamplingStrategy.RANDOM_UNIFORM,
    TOP_K: tfgnn_sampler.SamplingStrategy.TOP_K,
    WEIGHTED: tfgnn_sampler.SamplingStrategy.RANDOM_WEIGHTED,
}
#: What every engine of this package runs today.
ENGINE_STRATEGIES = frozenset({UNIFORM})


def _fan_out(who: str, hop: int, edge_set: str, value: Any) -> tuple[int, str]:
  """``(fan-out, strategy name)`` of one hop entry: ``n`` or ``{"fanout": n, "strategy": s}``."""
  where = f"{who}: hop {hop}, edge set {edge_set!r}"
  strategy = UNIFORM
  if isinstance(value, Mapping):
    unknown = sorted(set(value) - {"fanout", "strategy"})
    if unknown:
      raise GraphInputError(f"{where}: unknown keys {unknown}; allowed: fanout, strategy.")
    strategy = value.get("strategy", UNIFORM)
    if strategy not in STRATEGIES:
      raise GraphInputError(f"{where}: strategy {strategy!r} is not one of "
                            f"{sorted(STRATEGIES)}.")
    value = value.get("fanout")
  if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
    raise GraphInputError(f"{where}: the fan-out (sample size) must be a positive int, "
                          f"got {value!r}.")
  return value, strategy


def build_sampling_spec(schema: tfgnn.GraphSchema, seed_node_set: str,
                        hops: Sequence[Mapping[str, Any]], *, who: str,
                        end: str = "") -> tfgnn_sampler.SamplingSpec:
  """Builds a SamplingSpec from a hop-by-hop fan-out config.

  Hop ``i`` expands, for every edge set ``e`` named in ``hops[i]``, the nodes
  reached in hop ``i-1`` (the seeds for hop 0) that belong to ``e``'s source
  node set, sampling up to ``hops[i][e]`` outgoing edges per node.

  Args:
    schema: The input graph schema.
    seed_node_set: Node set of the seeds.
    hops: One ``{edge_set_name: fan-out}`` mapping per hop.
    who: The component named in errors.
    end: For link prediction, which end of the pair the hops start from
      (named in errors).

  Raises:
    GraphInputError: on unknown sets, bad sizes, or a hop that expands nothing.
  """
  start = f" from the {end} end (node set {seed_node_set!r})" if end else ""
  if seed_node_set not in schema.node_sets:
    raise GraphInputError(
        f"{who}: seed node set {seed_node_set!r} is not in the graph schema "
        f"(node sets: {sorted(schema.node_sets)}).")
  if not hops:
    raise GraphInputError(f"{who}: the sampling config needs at least one hop.")
  spec = tfgnn_sampler.SamplingSpec()
  spec.seed_op.op_name = "seed"
  spec.seed_op.node_set_name = seed_node_set
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
      size, strategy = _fan_out(who, hop, edge_set_name, value)
      edge_set = schema.edge_sets[edge_set_name]
      inputs = frontier.get(edge_set.source)
      if not inputs:
        raise GraphInputError(
            f"{who}: hop {hop}{start} samples edge set {edge_set_name!r} from node set "
            f"{edge_set.source!r}, which the previous hop does not reach (it reaches "
            f"{sorted(frontier)}).")
      op = spec.sampling_ops.add()
      op.op_name = f"hop{hop}_{edge_set_name}"
      op.input_op_names.extend(inputs)
      op.edge_set_name = edge_set_name
      op.sample_size = size
      op.strategy = STRATEGIES[strategy]
      next_frontier.setdefault(edge_set.target, []).append(op.op_name)
    frontier = next_frontier
  return spec


def parse_sampling_spec(text: str, who: str) -> tfgnn_sampler.SamplingSpec:
  """Parses a text-format ``tensorflow_gnn.sampler.SamplingSpec``."""
  try:
    return text_format.Parse(text, tfgnn_sampler.SamplingSpec())
  except text_format.ParseError as e:
    raise GraphInputError(f"{who}: invalid sampling_spec text proto: {e}") from None


def sampling_spec_from_config(schema: tfgnn.GraphSchema, sampling_spec: Optional[str],
                              sampling_config: Optional[Mapping[str, Any]], *,
                              who: str) -> tfgnn_sampler.SamplingSpec:
  """The SamplingSpec from exactly one of a text proto or a hop config, checked.

  Args:
    schema: The input graph schema.
    sampling_spec: Text-format SamplingSpec, or None.
    sampling_config: ``{"seed_node_set": str, "hops": [{edge_set: size}, ...]}``,
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
    plan_from_spec(spec, schema, who=who)
    return spec
  config = dict(sampling_config)
  unknown = set(config) - {"seed_node_set", "hops"}
  if unknown:
    raise GraphInputError(f"{who}: unknown sampling_config keys {sorted(unknown)}; "
                          "allowed: seed_node_set, hops.")
  return build_sampling_spec(schema, config.get("seed_node_set"), config.get("hops") or [],
                             who=who)


@dataclasses.dataclass(frozen=True)
class SamplingOp:
  """One sampling op of a SamplingSpec, resolved against the schema."""
  name: str
  inputs: tuple[str, ...]
  edge_set: str
  source: str
  target: str
  size: int
  strategy: str = UNIFORM


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

  def root_ops(self, width: int) -> tuple[tuple[str, str], ...]:
    """``(seed op, node set)`` of each of ``width`` roots per subgraph."""
    if not self.roots:
      return ((self.seed_op, self.seed_node_set),) * width
    if width != len(self.roots):
      raise ValueError(f"the plan has {len(self.roots)} roots per subgraph, got {width}")
    return self.roots


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
    ops.append(SamplingOp(name=op.op_name, inputs=tuple(op.input_op_names),
                          edge_set=op.edge_set_name, source=edge_set.source,
                          target=edge_set.target, size=int(op.sample_size),
                          strategy=_strategy_name(op)))
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
                 runs: Collection[str] = ENGINE_STRATEGIES) -> None:
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
          f"Use strategy {UNIFORM!r}.")


def output_graph_schema(schema: tfgnn.GraphSchema) -> tfgnn.GraphSchema:
  """The schema that parses sampled subgraphs: the input without table metadata."""
  out = copy.deepcopy(schema)
  for _, _, piece in tfgnn.iter_sets(out):
    piece.ClearField("metadata")
  return out
