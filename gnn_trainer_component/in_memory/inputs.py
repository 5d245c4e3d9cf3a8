"""GnnTrainer's graph input: a GraphSchema folder with tables + seeds + sampling, loaded once.

Instead of ``examples``, GnnTrainer (and GnnTuner) may take the graph itself:
the ``graph_schema`` artifact's folder holding its node and edge tables (what
GraphSampler reads), ``seeds`` (split -> seed table) and GraphSampler's
``sampling_config`` or ``sampling_spec``; or LinkSampler's ``link_config``.
:func:`load` reads and checks all of it into one :class:`GraphSplits` (or
``links.LinkSplits``) before any training.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence, Union

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component import process
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.graph.errors import GraphTooLargeError
from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import full_graph as full_graph_lib
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.in_memory import link_pairs
from gnn_trainer_component.in_memory import store as store_lib

_WHO = "GnnTrainer"


@dataclasses.dataclass(frozen=True)
class GraphSplits:
  """The graph in memory, how to sample it, and the seeds of each split.

  Attributes:
    sampler: Samples subgraphs of the graph schema's spec.
    seeds: Split name -> seed node indices (table order).
    schema_dir: The folder the tables were read from.
  """
  sampler: dataset_lib.SubgraphSampler
  seeds: Mapping[str, np.ndarray]
  schema_dir: str

  @property
  def schema(self) -> tfgnn.GraphSchema:
    """The schema that parses the sampled subgraphs (GraphSampler's output schema)."""
    return self.sampler.graph.schema

  def seeds_of(self, splits: Sequence[str]) -> np.ndarray:
    return np.concatenate([self.seeds[s] for s in splits])

  def num_examples(self, splits: Sequence[str]) -> int:
    """Subgraphs per pass over ``splits`` (one per seed)."""
    return len(self.seeds_of(splits))

  def provider(self, splits: Sequence[str], *, training: bool, batch_size: int,
               seed: Optional[int], merged: bool = False, drop_remainder: bool = False
               ) -> dataset_lib.InMemoryDatasetProvider:
    """Training (shuffled, fresh samples every epoch) or validation subgraphs of ``splits``.

    ``merged``: one element per ``batch_size`` seeds, their subgraphs merged into
    one component with the seeds marked by structured readout (the spec of
    :meth:`training_spec`).
    """
    return dataset_lib.InMemoryDatasetProvider(
        self.sampler, self.seeds_of(splits), batch_size=batch_size, shuffle=training,
        fresh=training, seed=seed, what=f"splits {', '.join(splits)}", merged=merged,
        drop_remainder=drop_remainder)

  #: Merged batches mark their seeds with structured readout (training_spec).
  merged_reads_out_seeds = True

  def merges_batches(self, tasks: Mapping[str, Any]) -> bool:
    """Merged batches need tasks that read the seed readout."""
    return not full_graph_lib.task_readout_errors(tasks)

  @property
  def training_spec(self) -> tfgnn.GraphTensorSpec:
    """The spec of merged batches: the subgraphs' plus the seed readout."""
    return self.sampler.merged_spec()

  def serving_parser(self) -> full_graph_lib.SubgraphReadoutParser:
    """What a model trained on merged batches serves: subgraphs, their first node read out."""
    return full_graph_lib.SubgraphReadoutParser(self.schema, self.sampler.plan.seed_node_set,
                                                name="subgraph_readout_parser")

  def serialized_examples(self, splits: Sequence[str], n: int) -> list[bytes]:
    """The first ``n`` validation subgraphs of ``splits`` as GraphSampler-format tf.Examples."""
    if n <= 0:
      return []
    ds = self.sampler.dataset(self.seeds_of(splits)[:n], batch_size=n, shuffle=False,
                              fresh=False, seed=None)
    return [tfgnn.write_example(g).SerializeToString() for g in ds]


@dataclasses.dataclass(frozen=True)
class FullGraphSplits:
  """The whole graph every step, with the seeds of the step marked by structured readout.

  Same interface as :class:`GraphSplits` (whose sampler still makes the
  GraphSampler-format subgraphs of the parity check), plus what differs for
  ``runner.run``: the spec of a step (:attr:`training_spec`), one whole graph
  per element (``runner.run`` batches one per step) and the serving parser
  that turns subgraphs into that spec (:meth:`serving_parser`).
  """
  sampled: GraphSplits
  whole: tfgnn.GraphTensor

  @property
  def schema(self) -> tfgnn.GraphSchema:
    return self.sampled.schema

  @property
  def seed_node_set(self) -> str:
    return self.sampled.sampler.plan.seed_node_set

  @property
  def training_spec(self) -> tfgnn.GraphTensorSpec:
    return full_graph_lib.training_spec(self.whole, self.seed_node_set)

  def num_examples(self, splits: Sequence[str]) -> int:
    """Seeds per pass over ``splits``."""
    return self.sampled.num_examples(splits)

  def provider(self, splits: Sequence[str], *, training: bool, batch_size: int,
               seed: Optional[int], drop_remainder: bool = False
               ) -> full_graph_lib.FullGraphDatasetProvider:
    """Training: ``batch_size`` seeds per step, shuffled every epoch; validation: one step."""
    del drop_remainder  # every seed is read out; the last step may hold fewer
    seeds = self.sampled.seeds_of(splits)
    return full_graph_lib.FullGraphDatasetProvider(
        self.whole, self.seed_node_set, seeds,
        seeds_per_step=batch_size if training else len(seeds), shuffle=training, seed=seed)

  def serialized_examples(self, splits: Sequence[str], n: int) -> list[bytes]:
    return self.sampled.serialized_examples(splits, n)

  def serving_parser(self) -> full_graph_lib.SubgraphReadoutParser:
    return full_graph_lib.SubgraphReadoutParser(self.schema, self.seed_node_set,
                                                name="subgraph_readout_parser")


#: What :func:`load` returns: subgraphs around seeds, or link-prediction pairs;
#: :func:`choose_mode` may turn the first into the whole graph.
GraphInput = Union[GraphSplits, FullGraphSplits, link_pairs.LinkSplits]

#: ``custom_config["graph_mode"]`` values.
AUTO, FULL_GRAPH, SAMPLED = "auto", "full_graph", "sampled"


def mode_of(data: Optional[GraphInput]) -> str:
  """What training reads: ``"examples"`` (no graph), ``"sampled"`` or ``"full_graph"``."""
  if data is None:
    return "examples"
  return FULL_GRAPH if isinstance(data, FullGraphSplits) else SAMPLED


def merges_batches(data: Optional[GraphInput], tasks: Mapping[str, Any]) -> bool:
  """Whether ``data``'s batches may come merged into one component (one element per step).

  Link-prediction pairs may: their tasks read each pair through the
  ``_readout`` structure, which the merge keeps. Subgraphs around seeds may
  where every task reads the seed readout (as on the whole graph); tasks that
  read each subgraph's first node get one subgraph per component.
  """
  merges = getattr(data, "merges_batches", None)
  return bool(merges is not None and merges(tasks))


def choose_mode(data: GraphInput, requested: str, *, tasks: Mapping[str, Any],
                budget_bytes: int, processes: int) -> GraphInput:
  """The graph input of ``custom_config["graph_mode"]``: sampled, or the whole graph.

  Args:
    data: From :func:`load`.
    requested: ``"auto"``, ``"full_graph"`` or ``"sampled"``.
    tasks: The module's tasks (full graph needs tasks that read the seed readout).
    budget_bytes: ``"auto"`` takes the full graph when a step's estimated
      memory fits this.
    processes: Training processes (full graph trains in one).

  Raises:
    GraphInputError: ``"full_graph"`` where it cannot train (link prediction,
      tasks reading the first node, several processes).
    GraphTooLargeError: ``"full_graph"`` with a graph whose step
      would not fit the machine.
  """
  if isinstance(data, link_pairs.LinkSplits):
    if requested == FULL_GRAPH:
      raise GraphInputError(
          f"{_WHO} graph_mode 'full_graph' trains node tasks; link prediction (link_config) "
          "trains on sampled subgraphs around each pair. Set graph_mode to 'sampled' or "
          "'auto'.")
    return data
  if requested == SAMPLED:
    full_graph_lib.log_choice(SAMPLED, "graph_mode 'sampled'")
    return data
  graph = data.sampler.graph
  step = full_graph_lib.step_bytes(graph)
  if requested == FULL_GRAPH:
    full_graph_lib.check_tasks(tasks)
    if processes > 1:
      raise GraphInputError(
          f"{_WHO} graph_mode 'full_graph' trains in one process (every step holds the "
          f"whole graph), but this training runs {processes} (local_workers or TF_CONFIG). "
          "Set graph_mode to 'sampled' for multi-worker training.")
    memory = process.memory_bytes()
    if step > memory:
      raise GraphTooLargeError(
          f"{_WHO} graph_mode 'full_graph': a step on the whole graph of {data.schema_dir} "
          f"takes about {step / 2**30:,.1f} GiB, more than this machine's "
          f"{memory / 2**30:,.1f} GiB. Set graph_mode to 'sampled' (subgraphs around the "
          "seeds), or pre-sample with GraphSampler on a distributed Beam runner.")
    why = "graph_mode 'full_graph'"
  else:
    reasons = full_graph_lib.task_readout_errors(tasks)
    if processes > 1:
      reasons.append(f"{processes} training processes")
    if step > budget_bytes:
      reasons.append(f"a full-graph step takes about {step / 2**20:,.0f} MiB, over the "
                     f"{budget_bytes / 2**20:,.0f} MiB of full_graph_budget_mb")
    if reasons:
      full_graph_lib.log_choice(SAMPLED, "auto: " + "; ".join(reasons))
      return data
    why = (f"auto: a step takes about {step / 2**20:,.0f} MiB of the "
           f"{budget_bytes / 2**20:,.0f} MiB budget")
  full_graph_lib.log_choice(FULL_GRAPH, why)
  return FullGraphSplits(sampled=data, whole=full_graph_lib.whole_graph_tensor(graph))


def _loads(value: Any, key: str) -> Any:
  return sampling.loads_json(value, key, _WHO)


def load(schema_dir: str, *, seeds: Any = None, sampling_spec: Optional[str] = None,
         sampling_config: Any = None, link_config: Any = None,
         splits: Sequence[str]) -> GraphInput:
  """Loads the graph of a GraphSchema folder and the seeds (or links) of ``splits``.

  Args:
    schema_dir: The ``graph_schema`` artifact's folder: ``graph_schema.pbtxt``
      naming its tables in ``metadata.filename`` (relative to the folder).
    seeds: JSON or dict: split name -> seed table (relative to the folder).
    sampling_spec: Text-format SamplingSpec, or None.
    sampling_config: JSON or dict ``{"seed_node_set": ..., "hops": [...]}``, or None.
    link_config: Instead of the three above: LinkSampler's ``link_config``
      (JSON or dict); the examples are then link-prediction pairs.
    splits: The splits training and validation read (each must have seeds).

  Raises:
    GraphInputError: naming the table, split, row or id at fault.
    GraphTooLargeError: the tables would not fit in this machine's
      memory (then use GraphSampler).
    graph_schema_lib.GraphSchemaError: a missing or invalid schema file.
  """
  schema = graph_schema_lib.read_artifact_schema(schema_dir)
  store_lib.check_fits(schema, schema_dir, process.memory_bytes(), who=_WHO)
  if link_config:
    return _load_links(schema, schema_dir, _loads(link_config, "link_config"), splits)
  spec = sampling.sampling_spec_from_config(
      schema, sampling_spec, _loads(sampling_config, "sampling_config"), who=_WHO)
  plan = sampling.plan_from_spec(spec, schema, who=_WHO)
  kernel.check_plan(plan, _WHO)
  seed_tables = _loads(seeds, "seeds") or {}
  missing = [s for s in splits if s not in seed_tables]
  if missing:
    raise GraphInputError(
        f"{_WHO}: train_args/eval_args name split(s) {missing} that 'seeds' does not define "
        f"(seeds: {sorted(seed_tables)}). Add a seed table per split.")
  graph = store_lib.load_graph(schema, schema_dir, who=_WHO)
  seed_indices = {
      split: store_lib.read_seeds(graph, schema_dir, plan.seed_node_set, split,
                                  seed_tables[split], who=_WHO)
      for split in dict.fromkeys(splits)}
  logging.info("%s: graph in memory from %s (%s); seeds per split %s", _WHO, schema_dir,
               store_lib.log_summary(graph), {s: len(v) for s, v in seed_indices.items()})
  return GraphSplits(sampler=dataset_lib.SubgraphSampler(graph, plan), seeds=seed_indices,
                     schema_dir=schema_dir)


def _load_links(schema: tfgnn.GraphSchema, schema_dir: str, link_config: Any,
                splits: Sequence[str]) -> link_pairs.LinkSplits:
  missing = [s for s in splits if s not in (link_config.get("splits") or {})]
  if missing:
    raise GraphInputError(
        f"{_WHO}: train_args/eval_args name split(s) {missing} that link_config['splits'] "
        f"does not define ({sorted(link_config.get('splits') or {})}).")
  graph = store_lib.load_graph(schema, schema_dir, who=_WHO)
  out = link_pairs.load(graph, schema, link_config)
  logging.info("%s: graph in memory from %s (%s); link pairs per split %s", _WHO, schema_dir,
               store_lib.log_summary(graph),
               {s: (len(out.positives[s]), len(out.negatives[s])) for s in out.positives})
  return out


def check_strategy(strategy: tf.distribute.Strategy, service: bool) -> None:
  """Raises GraphInputError where subgraphs cannot be sampled in memory.

  Sampling runs in the process that holds the graph: a parameter-server
  cluster's or the tf.data service's input pipelines run elsewhere.
  """
  if isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy) or service:
    raise GraphInputError(
        f"{_WHO}: a graph held in memory is sampled by the process that trains; a "
        f"{'tf.data service' if service else 'parameter-server cluster'} runs the input "
        "pipeline elsewhere. Train in memory on one machine or a multi-worker cluster, or "
        "pre-sample the subgraphs with GraphSampler and train on its examples.")
