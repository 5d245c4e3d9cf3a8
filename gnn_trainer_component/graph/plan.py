"""What an engine is asked to load and sample, checked against the graph schema in one call.

:func:`plan` turns the graph schema and the decoded graph parameters (seed
tables with ``sampling_config`` or ``sampling_spec``; or ``link_config``) into
everything schema-level, before any table is read: the sampling plan (link
prediction: its rules and a plan from each end, :func:`link_config.plan_links`),
the schema of the examples, the engine's refusal of a strategy it does not run,
and the splits' seed tables. It visits ``link_config`` (and ``readout``) before
``sampling``, and neither calls back into the other.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Collection, Mapping, Optional, Sequence

import numpy as np
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError


@dataclasses.dataclass(frozen=True)
class GraphPlan:
  """Everything schema-level an engine needs before it reads a table.

  Attributes:
    graph_schema: The input schema without table metadata: the graph's, and
      what parses subgraphs sampled from it.
    output_schema: What parses the examples (link prediction: with the
      readout sets; else ``graph_schema``).
    sampling: The hops (link prediction: from a pair's two roots,
      :attr:`link_config.LinkPlan.sampling`).
    seed_tables: Split -> seed table, for the splits asked (none for links).
    link: The validated ``link_config``, or None.
    end_plans: Link prediction: ``"source"`` / ``"target"`` -> the hops from
      that end alone.
  """
  graph_schema: tfgnn.GraphSchema
  output_schema: tfgnn.GraphSchema
  sampling: sampling.SamplingPlan
  seed_tables: Mapping[str, str]
  link: Optional[link_config_lib.LinkConfig] = None
  end_plans: Mapping[str, sampling.SamplingPlan] = dataclasses.field(default_factory=dict)

  @property
  def seed_time_dtype(self) -> Optional[np.dtype]:
    """How the seed tables' times are read (None: the plan is timeless)."""
    return sampling.seed_time_dtype(self.graph_schema, self.sampling)


def plan(schema: tfgnn.GraphSchema, *, seeds: Optional[Mapping[str, str]],
         sampling_spec: Optional[str], sampling_config: Optional[Mapping[str, Any]],
         link_config: Optional[Mapping[str, Any]], splits: Sequence[str], engine: str,
         runs: Collection[str], who: str) -> GraphPlan:
  """Checks the graph parameters against ``schema`` and the engine; what it then loads.

  Args:
    schema: The input graph schema (tables in ``metadata.filename``).
    seeds: Split name -> seed table (node seeds), or None.
    sampling_spec: Text-format SamplingSpec, or None.
    sampling_config: ``{"seed_node_set": ..., "hops": [...]}``, or None.
    link_config: LinkSampler's ``link_config`` instead of the three above.
    splits: The splits read (``train_args`` / ``eval_args``); each must be defined.
    engine: The engine, as the user knows it (e.g. "the in-memory sampler").
    runs: The sampling strategies the engine runs.
    who: The component named in errors.

  Raises:
    GraphInputError: naming the split, key, set, hop or op at fault.
  """
  if link_config:
    # A link_config that is not a dict is told so by link_config.plan_links.
    if isinstance(link_config, Mapping):
      time_split = link_config.get("time_split")
      defined = link_config.get("splits") or (
          time_split.get("from") if isinstance(time_split, Mapping) else None) or {}
      missing = [s for s in splits if s not in defined]
      if missing:
        raise GraphInputError(
            f"{who}: train_args/eval_args name split(s) {missing} that link_config['splits'] "
            f"does not define ({sorted(defined)}).")
    rules = link_config_lib.plan_links(schema, link_config, engine=engine, runs=runs, who=who)
    return GraphPlan(graph_schema=rules.graph_schema, output_schema=rules.schema,
                     sampling=rules.sampling, seed_tables={}, link=rules.link,
                     end_plans=rules.plans)
  hops = sampling.plan_from_params(schema, sampling_spec, sampling_config, who=who)
  sampling.check_engine(hops, engine, who, runs)
  seeds = seeds or {}
  missing = [s for s in splits if s not in seeds]
  if missing:
    raise GraphInputError(
        f"{who}: train_args/eval_args name split(s) {missing} that 'seeds' does not define "
        f"(seeds: {sorted(seeds)}). Add a seed table per split.")
  out = sampling.output_graph_schema(schema)
  return GraphPlan(graph_schema=out, output_schema=out, sampling=hops,
                   seed_tables={split: seeds[split] for split in dict.fromkeys(splits)})
