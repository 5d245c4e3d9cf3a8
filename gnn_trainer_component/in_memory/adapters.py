"""The graph in memory as GnnTrainer's TrainingData: sampled, whole, or link pairs.

Instead of ``examples``, GnnTrainer (and GnnTuner) may take the graph itself:
the ``graph_schema`` artifact's folder holding its node and edge tables (what
GraphSampler reads), ``seeds`` (split -> seed table) and GraphSampler's
``sampling_config`` or ``sampling_spec``; or LinkSampler's ``link_config``.
:func:`load_for_training` is the trainer's one call: :func:`load` reads and checks
all of it into one :class:`GraphSplits` (or ``link_pairs.LinkSplits``) before
any training; :func:`for_training` makes it the
:class:`~gnn_trainer_component.training_data.TrainingData` the trainer reads
(:class:`SampledData`, :class:`FullGraphData` or :class:`LinkData`). The
policies live here too: the graph mode (:func:`choose_mode`, from the tasks and
the estimated memory of a full-graph step) and which held-out link splits are
ranked after training (:func:`ranking_splits`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from absl import logging
import numpy as np
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component import outputs
from gnn_trainer_component import process
from gnn_trainer_component import tasks as tasks_lib
from gnn_trainer_component import training_data
from gnn_trainer_component.graph import params as graph_params
from gnn_trainer_component.graph import plan as graph_plan
from gnn_trainer_component.graph import readout as readout_lib
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.graph.errors import GraphTooLargeError
from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import deduplication
from gnn_trainer_component.in_memory import full_graph as full_graph_lib
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.in_memory import link_pairs
from gnn_trainer_component.in_memory import retrieval
from gnn_trainer_component.in_memory import snapshot as snapshot_lib
from gnn_trainer_component.in_memory import store as store_lib
from gnn_trainer_component.model import export as export_lib
from gnn_trainer_component.model import node_serving
from gnn_trainer_component.model import recommend

_WHO = "GnnTrainer"


@dataclasses.dataclass(frozen=True)
class GraphSplits:
  """The graph in memory, how to sample it, and the seeds of each split.

  Attributes:
    sampler: Samples subgraphs of the graph schema's spec.
    seeds: Split name -> seed node indices (table order).
    schema_dir: The folder the tables were read from.
    times: Split name -> each seed's time (table order), where the plan is
      time-aware; else empty.
    check_leakage: Time-aware samples are checked for edges after their
      seed's time (:func:`kernel.check_leaks`).
    deduplicate: ``"auto"``, ``"always"`` or ``"never"``: training steps as one
      graph whose nodes the seeds share (:func:`deduplication.choose`).
  """
  sampler: dataset_lib.SubgraphSampler
  seeds: Mapping[str, np.ndarray]
  schema_dir: str
  times: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  check_leakage: bool = True
  deduplicate: str = "auto"

  @property
  def schema(self) -> tfgnn.GraphSchema:
    """The schema that parses the sampled subgraphs (GraphSampler's output schema)."""
    return self.sampler.graph.schema

  def seeds_of(self, splits: Sequence[str]) -> np.ndarray:
    return np.concatenate([self.seeds[s] for s in splits])

  def sampler_of(self, splits: Sequence[str]
                 ) -> tuple[dataset_lib.SubgraphSampler, np.ndarray]:
    """What samples ``splits`` and its rows: seed nodes, or rows of (seed, time)."""
    if not self.times:
      return self.sampler, self.seeds_of(splits)
    sampler = dataset_lib.TimedSubgraphSampler(
        self.sampler, self.seeds_of(splits), np.concatenate([self.times[s] for s in splits]),
        check_leakage=self.check_leakage)
    return sampler, np.arange(sampler.num_rows)

  def num_examples(self, splits: Sequence[str]) -> int:
    """Subgraphs per pass over ``splits`` (one per seed)."""
    return len(self.seeds_of(splits))

  def provider(self, splits: Sequence[str], *, training: bool, batch_size: int,
               seed: Optional[int], merged: bool = False, drop_remainder: bool = False,
               deduplicate: bool = False) -> dataset_lib.InMemoryDatasetProvider:
    """Training (shuffled, fresh samples every epoch) or validation subgraphs of ``splits``.

    ``merged``: one element per ``batch_size`` seeds, their subgraphs merged into
    one component with the seeds marked by structured readout (the spec of
    :meth:`training_spec`); ``deduplicate``: each such element one graph whose
    nodes the seeds share.
    """
    sampler, rows = self.sampler_of(splits)
    return dataset_lib.InMemoryDatasetProvider(
        sampler, rows, batch_size=batch_size, shuffle=training,
        fresh=training, seed=seed, what=f"splits {', '.join(splits)}", merged=merged,
        drop_remainder=drop_remainder, deduplicate=deduplicate)

  #: Merged batches mark their seeds with structured readout (training_spec).
  merged_reads_out_seeds = True

  def merges_batches(self, tasks: Mapping[str, Any]) -> bool:
    """Merged batches need tasks that read the seed readout."""
    return not tasks_lib.seed_readout_errors(tasks)

  @property
  def training_spec(self) -> tfgnn.GraphTensorSpec:
    """The spec of merged batches: the subgraphs' plus the seed readout."""
    return self.sampler.merged_spec()

  def serving_parser(self) -> export_lib.SubgraphReadoutParser:
    """What a model trained on merged batches serves: subgraphs, their first node read out."""
    return export_lib.SubgraphReadoutParser(self.schema, self.sampler.plan.seed_node_set,
                                                name="subgraph_readout_parser")

  def serialized_examples(self, splits: Sequence[str], n: int) -> list[bytes]:
    """The first ``n`` validation subgraphs of ``splits`` as GraphSampler-format tf.Examples."""
    if n <= 0:
      return []
    sampler, rows = self.sampler_of(splits)
    return sampler.serialized_examples(rows[:n])


def _check_local(request: training_data.Request) -> None:
  """Raises GraphInputError where the input pipeline runs outside the process holding the graph."""
  if request.remote_input:
    raise GraphInputError(
        f"{_WHO}: a graph held in memory is sampled by the process that trains; "
        f"{request.remote_input} runs the input pipeline elsewhere. Train in memory on one "
        "machine or a multi-worker cluster, or pre-sample the subgraphs with GraphSampler "
        "and train on its examples.")


@dataclasses.dataclass(frozen=True)
class SampledData:
  """Subgraphs sampled around the seeds of each split, fresh every training epoch.

  Attributes:
    train_splits, eval_splits: The ``train_args`` / ``eval_args`` split names.
    source: The graph in memory and what each split samples around.
  """
  train_splits: tuple[str, ...]
  eval_splits: tuple[str, ...]
  source: GraphSplits

  mode = training_data.SAMPLED
  raw_parser = None
  #: For the log: what training reads.
  what = "subgraphs sampled in memory around the seeds"

  @property
  def schema(self) -> tfgnn.GraphSchema:
    return self.source.schema

  @property
  def train_records(self) -> int:
    return self.source.num_examples(self.train_splits)

  @property
  def eval_records(self) -> int:
    return self.source.num_examples(self.eval_splits)

  def feed(self, request: training_data.Request) -> training_data.Feed:
    """Subgraphs sampled on the fly: one per example, or merged into one per step."""
    _check_local(request)
    # One local replica: batches come merged (no unbatch and batch again).
    merged = request.local and self.source.merges_batches(request.tasks)
    kwargs = dict(batch_size=request.batch_size, seed=request.seed, merged=merged)
    train, check = self._training_provider(request, kwargs)
    valid = self.source.provider(self.eval_splits, training=False, **kwargs)
    # Merged steps that mark their seeds with structured readout: the export
    # adds it to the subgraphs it serves.
    readout = merged and self.source.merged_reads_out_seeds
    return training_data.Feed(
        train=train, valid=valid,
        spec=(self.source.training_spec if readout
              else tfgnn.create_graph_spec_from_schema_pb(self.schema)),
        whole_steps=merged, train_records=train.steps if merged else self.train_records,
        serving_parser=self.source.serving_parser() if readout else None,
        check_deduplication=check)

  def _training_provider(self, request: training_data.Request, kwargs: dict[str, Any]
                         ) -> tuple[runner.DatasetProvider, Optional[deduplication.ModelCheck]]:
    """The training subgraphs (deduplicated or not), and the check "auto" runs on the model."""
    sampler, rows = self.source.sampler_of(self.train_splits)
    deduplicate = deduplication.choose(self.source.deduplicate, sampler, rows,
                                       batch_size=request.batch_size, merged=kwargs["merged"])
    train = self.source.provider(self.train_splits, training=True, deduplicate=deduplicate,
                                 drop_remainder=request.drop_remainder, **kwargs)
    # "auto" keeps them only if the model computes the same seed states on them.
    return train, (deduplication.ModelCheck(sampler, rows, train)
                   if deduplicate and self.source.deduplicate == deduplication.AUTO else None)

  def parity_examples(self, n: int) -> list[bytes]:
    return self.source.serialized_examples(self.eval_splits, n)

  def ranking_metrics(self, embed: Callable, *, single_task: bool,
                      seed: int) -> dict[str, Any]:
    del embed, single_task, seed  # only link pairs rank held-out edges
    return {}

  def validation_ranker(self, *, single_task: bool, seed: int, max_queries: int) -> None:
    del single_task, seed, max_queries  # only link pairs rank held-out edges
    return None

  def held_out_tables(self) -> dict[str, str]:
    return {}  # the seed tables are the user's own

  def served_graph(self) -> Optional[node_serving.ServedGraph]:
    """The graph in memory and the training's plan (served subgraphs are sampled as here)."""
    sampler = self.source.sampler
    return node_serving.ServedGraph(snapshot_lib.snapshot(sampler.graph, sampler.plan),
                                    sampler.plan, self.schema)

  def describe(self) -> str:
    return (f"{self.what} of train {list(self.train_splits)} ({self.train_records}), "
            f"eval {list(self.eval_splits)} ({self.eval_records})")


@dataclasses.dataclass(frozen=True)
class FullGraphData(SampledData):
  """The whole graph every step, with the seeds of the step marked by structured readout.

  The export serves GraphSampler-format subgraphs (:meth:`GraphSplits.serving_parser`);
  the parity check samples them.
  """
  whole: tfgnn.GraphTensor

  mode = training_data.FULL_GRAPH
  what = "the whole graph in memory, read out at the seeds"

  def feed(self, request: training_data.Request) -> training_data.Feed:
    """Training: ``batch_size`` seeds per step, shuffled every epoch; validation: one step."""
    _check_local(request)
    seed_node_set = self.source.sampler.plan.seed_node_set

    def provider(splits, training):
      seeds = self.source.seeds_of(splits)
      return full_graph_lib.FullGraphDatasetProvider(
          self.whole, seed_node_set, seeds,
          seeds_per_step=request.batch_size if training else len(seeds), shuffle=training,
          seed=request.seed)

    train = provider(self.train_splits, training=True)
    return training_data.Feed(
        train=train, valid=provider(self.eval_splits, training=False),
        spec=readout_lib.seed_readout_spec(self.whole, seed_node_set), whole_steps=True,
        train_records=train.steps, keep_batches=request.local,
        serving_parser=self.source.serving_parser())


@dataclasses.dataclass(frozen=True)
class LinkData(SampledData):
  """Link-prediction pairs, each with the subgraph around both ends, and held-out ranking.

  Attributes:
    source: The graph and the supervised pairs of each split.
    tasks: The module's tasks (the link tasks among them are ranked).
    ranking_splits: Held-out splits whose positives are ranked against every
      node after training (:func:`ranking_splits`).
  """
  source: link_pairs.LinkSplits
  tasks: Mapping[str, Any]
  ranking_splits: tuple[str, ...] = ()

  what = "link pairs sampled in memory"

  def _training_provider(self, request: training_data.Request, kwargs: dict[str, Any]
                         ) -> tuple[runner.DatasetProvider, None]:
    """Each pair's own subgraph (never deduplicated: a pair's subgraph lacks its own edge)."""
    return self.source.provider(self.train_splits, training=True,
                                drop_remainder=request.drop_remainder, **kwargs), None

  def ranking_metrics(self, embed: Callable, *, single_task: bool,
                      seed: int) -> dict[str, Any]:
    if not self.ranking_splits:
      return {}
    outputs.log_phase("retrieval")
    return {f"{retrieval.PREFIX}splits": ",".join(self.ranking_splits),
            **retrieval.evaluate(self.source, self.ranking_splits, embed, self.tasks,
                                 single_task=single_task, seed=seed)}

  def validation_ranker(self, *, single_task: bool, seed: int, max_queries: int
                        ) -> Optional[Callable[[Callable], dict[str, float]]]:
    if not retrieval.link_tasks(self.tasks):  # e.g. edge regression: nothing scores a pair
      return None
    return lambda embed: retrieval.validation(
        self.source, self.eval_splits, embed, self.tasks, single_task=single_task,
        max_queries=max_queries, seed=seed)

  def held_out_tables(self) -> dict[str, str]:
    return self.source.held_out_tables()

  def served_graph(self) -> recommend.ServedLinks:
    """The message-passing graph, both ends' plans and the one link task (``recommend``)."""
    splits = self.source
    link_tasks = retrieval.link_tasks(self.tasks)
    return recommend.ServedLinks(
        snapshot_lib.snapshot(splits.message_graph, *splits.end_plans.values()),
        end_plans=dict(splits.end_plans), schema=splits.schema, edge_set=splits.link.edge_set,
        task=self.tasks[link_tasks[0]] if len(link_tasks) == 1 else None)


@dataclasses.dataclass(frozen=True)
class LinkFullGraphData(LinkData):
  """Link prediction on the whole message-passing graph: each step reads out a share of the pairs.

  Every step holds the graph without its pairs' own edges, read out at
  ``batch_size`` pairs (validation: all of them in one step); the export serves
  LinkSampler-format examples, as after sampled training.
  """
  whole: Optional[tfgnn.GraphTensor] = None

  mode = training_data.FULL_GRAPH
  what = "the whole message-passing graph in memory, read out at each step's pairs"

  def feed(self, request: training_data.Request) -> training_data.Feed:
    _check_local(request)

    def provider(splits, training):
      return self.source.whole_provider(self.whole, splits, training=training,
                                        batch_size=request.batch_size, seed=request.seed)

    train = provider(self.train_splits, training=True)
    return training_data.Feed(
        train=train, valid=provider(self.eval_splits, training=False),
        spec=tfgnn.create_graph_spec_from_schema_pb(self.schema), whole_steps=True,
        train_records=train.steps, keep_batches=request.local)


@dataclasses.dataclass(frozen=True)
class Options:
  """What the trainer's config asks of training on the graph in memory.

  Attributes:
    train_splits, eval_splits: ``train_args`` / ``eval_args`` split names.
    graph_mode: ``custom_config["graph_mode"]``: ``"auto"``, ``"full_graph"`` or ``"sampled"``.
    budget_bytes: ``"auto"`` takes the whole graph when a step's estimated
      memory fits this.
    processes: Training processes (the whole graph trains in one).
    retrieval_splits: ``custom_config["retrieval_splits"]`` (None: the default policy).
    export_embeddings: ``custom_config["export_embeddings"]``.
    check_leakage: ``custom_config["check_leakage"]``: time-aware samples are
      checked for edges after their seed's time.
    deduplicate_batches: ``custom_config["deduplicate_batches"]``: ``"auto"``,
      ``"always"`` or ``"never"`` (:func:`deduplication.choose`).
  """
  train_splits: tuple[str, ...]
  eval_splits: tuple[str, ...]
  graph_mode: str = training_data.AUTO
  budget_bytes: int = 0
  processes: int = 1
  retrieval_splits: Optional[tuple[str, ...]] = None
  export_embeddings: bool = True
  check_leakage: bool = True
  deduplicate_batches: str = "auto"


def for_training(loaded: Union[GraphSplits, link_pairs.LinkSplits], options: Options,
                 tasks: Mapping[str, Any]) -> training_data.TrainingData:
  """What :func:`load` loaded, as the trainer reads it: sampled, whole, or link pairs.

  Raises:
    GraphInputError: a graph_mode or retrieval_splits this graph cannot train with.
    GraphTooLargeError: ``"full_graph"`` with a graph whose step would not fit the machine.
  """
  splits = dict(train_splits=tuple(options.train_splits),
                eval_splits=tuple(options.eval_splits))
  if isinstance(loaded, link_pairs.LinkSplits):
    loaded = dataclasses.replace(loaded, check_leakage=options.check_leakage)
    if options.deduplicate_batches == deduplication.ALWAYS:
      raise GraphInputError(
          f"{_WHO} custom_config['deduplicate_batches']='always' deduplicates batches "
          "sampled around seeds; link prediction ('link_config') samples each pair's own "
          "subgraph. Drop the key.")
    link = dict(**splits, source=loaded, tasks=tasks,
                ranking_splits=ranking_splits(loaded, options, tasks))
    if options.graph_mode != training_data.FULL_GRAPH:  # "auto": pairs' own subgraphs
      return LinkData(**link)
    choose_mode(loaded.message_graph, options.graph_mode, tasks=tasks, budget_bytes=0,
                processes=options.processes,
                schema_dir=f"link edge set {loaded.link.edge_set!r}",
                timed=bool(loaded.link.time), link=True)
    return LinkFullGraphData(**link,
                             whole=full_graph_lib.whole_graph_tensor(loaded.message_graph))
  if options.retrieval_splits:
    raise GraphInputError(
        f"{_WHO} custom_config['retrieval_splits']={list(options.retrieval_splits)} ranks "
        "held-out edges of link prediction: it needs 'link_config' (with the tables as "
        "graph_schema) instead of 'seeds'. Drop the key.")
  loaded = dataclasses.replace(loaded, check_leakage=options.check_leakage)
  if choose_mode(
      loaded.sampler.graph, options.graph_mode, tasks=tasks, budget_bytes=options.budget_bytes,
      processes=options.processes, schema_dir=loaded.schema_dir,
      timed=loaded.sampler.plan.timed) == training_data.SAMPLED:
    return SampledData(**splits, source=dataclasses.replace(
        loaded, deduplicate=options.deduplicate_batches))
  return FullGraphData(**splits, source=loaded,
                       whole=full_graph_lib.whole_graph_tensor(loaded.sampler.graph))


def ranking_splits(pairs: link_pairs.LinkSplits, options: Options,
                   tasks: Mapping[str, Any]) -> tuple[str, ...]:
  """The held-out splits ranked after training, as ``retrieval_splits`` asks (see its doc).

  Raises:
    GraphInputError: explicit splits that are not held out of the message-passing
      graph, or no link-prediction task to score them.
  """
  requested = options.retrieval_splits
  scorable = options.export_embeddings and retrieval.link_tasks(tasks)
  if pairs.link.time:  # every node would be embedded as of each query's time
    if requested:
      raise GraphInputError(
          f"{_WHO} custom_config['retrieval_splits']={list(requested)}: ranking a query "
          "against every node embeds each node as of the query's time, which a time_split "
          "does not run. Drop the key (the held-out pairs' AUC is measured), and rank the test "
          "edges with GraphEvaluator(eval_config={..., 'negatives_per_query': N}): each "
          "query among N negatives, every candidate scored as of the query's time (MRR, "
          "hits@K).")
    return ()
  if requested is None:
    if not scorable:
      return ()
    scores = num_scores(pairs, options.eval_splits)
    if scores > retrieval.DEFAULT_MAX_SCORES:
      logging.warning(
          "%s: no retrieval evaluation by default: ranking the eval_args splits %s against "
          "every node takes %d scores (more than %d); set custom_config 'retrieval_splits' "
          "to run it anyway.", _WHO, list(options.eval_splits), scores,
          retrieval.DEFAULT_MAX_SCORES)
      return ()
    return tuple(options.eval_splits)
  if not requested:
    return ()
  where = f"{_WHO} custom_config['retrieval_splits']={list(requested)}"
  if not scorable:
    raise GraphInputError(
        f"{where}: no task of {sorted(tasks)} is a TF-GNN link-prediction task "
        "(runner.DotProductLinkPrediction / HadamardProductLinkPrediction), whose edge "
        "scorer ranks the candidates. Drop the key.")
  held_out = pairs.link.held_out_splits
  bad = [s for s in requested if s not in held_out]
  if bad:
    raise GraphInputError(
        f"{where}: {bad} {'is' if len(bad) == 1 else 'are'} not a held-out split of "
        f"link_config (held out of the message-passing graph: {held_out}; the "
        f"{pairs.link.message_split!r} edges are in the graph the GNN reads).")
  return tuple(requested)


def num_scores(splits: link_pairs.LinkSplits, split_names: Sequence[str]) -> int:
  """How many (query, candidate) scores :func:`retrieval.evaluate` computes for ``split_names``."""
  queries = sum(len(splits.positives[s]) for s in split_names)
  return queries * splits.message_graph.node_sets[splits.end_node_sets[1]].size


#: Estimated peak bytes of a full-graph training step per byte of the graph's
#: tensors: a deliberately generous count of the copies a step holds (the graph
#: captured by the dataset, its batched and merged copies, the input dropout's
#: mask and output, activations and their gradients).
STEP_BYTES_PER_GRAPH_BYTE = 8


def graph_bytes(graph: store_lib.InMemoryGraph) -> int:
  """Bytes of the full-graph GraphTensor: features and int64 adjacency indices."""
  total = 0
  for node_set in graph.node_sets.values():
    total += sum(a.nbytes for a in node_set.features.values())
  for edge_set in graph.edge_sets.values():
    total += sum(a.nbytes for a in edge_set.features.values()) + 16 * edge_set.size
  return total


def step_bytes(graph: store_lib.InMemoryGraph) -> int:
  """Estimated peak memory of one full-graph training step."""
  return STEP_BYTES_PER_GRAPH_BYTE * graph_bytes(graph)


def _check_tasks(tasks: Mapping[str, Any]) -> None:
  """Raises GraphInputError if a task cannot read the seeds of a full-graph step."""
  problems = tasks_lib.seed_readout_errors(tasks)
  if problems:
    raise GraphInputError(
        "GnnTrainer graph_mode 'full_graph': every step holds the whole graph and marks its "
        f"seeds with structured readout (key {readout_lib.SEED_KEY!r}), but "
        f"{'; '.join(problems)}. "
        "Read the seeds with runner.NodeMulticlassClassification / NodeBinaryClassification "
        f"/ NodeRegression (key={readout_lib.SEED_KEY!r}), or gnn_trainer_component.tasks."
        "RootNodeLogits and tasks.SeedLabelFn (they read the seed readout where there is "
        "one and the first node otherwise), or a task class with reads_seed_readout = True; "
        "or set graph_mode to 'sampled'.")


def _log_choice(mode: str, why: str) -> None:
  logging.info("GnnTrainer graph_mode: %s (%s)", mode, why)


def choose_mode(graph: store_lib.InMemoryGraph, requested: str, *, tasks: Mapping[str, Any],
                budget_bytes: int, processes: int, schema_dir: str, timed: bool = False,
                link: bool = False) -> str:
  """What ``custom_config["graph_mode"]`` resolves to: ``"sampled"`` or ``"full_graph"``.

  Args:
    graph: The graph in memory.
    requested: ``"auto"``, ``"full_graph"`` or ``"sampled"``.
    tasks: The module's tasks (full graph needs tasks that read the seed readout).
    budget_bytes: ``"auto"`` takes the full graph when a step's estimated
      memory fits this.
    processes: Training processes (full graph trains in one).
    schema_dir: The folder the graph was read from (named in errors).
    timed: The sampling is time-aware (a whole-graph step would show every
      seed the edges after its time).
    link: Link prediction (its tasks read pairs, not seeds).

  Raises:
    GraphInputError: ``"full_graph"`` where it cannot train (tasks reading the
      first node, several processes, time-aware sampling).
    GraphTooLargeError: ``"full_graph"`` with a graph whose step
      would not fit the machine.
  """
  if requested == training_data.SAMPLED:
    _log_choice(training_data.SAMPLED, "graph_mode 'sampled'")
    return training_data.SAMPLED
  step = step_bytes(graph)
  leak = "the sampling is time-aware: a whole-graph step shows every seed the edges after its time"
  if requested == training_data.FULL_GRAPH:
    if timed:
      raise GraphInputError(f"GnnTrainer graph_mode 'full_graph' cannot train here: {leak}. "
                            "Set graph_mode to 'sampled' or 'auto'.")
    if not link:
      _check_tasks(tasks)
    if processes > 1:
      raise GraphInputError(
          f"GnnTrainer graph_mode 'full_graph' trains in one process (every step holds the "
          f"whole graph), but this training runs {processes} (local_workers or TF_CONFIG). "
          "Set graph_mode to 'sampled' for multi-worker training.")
    memory = process.memory_bytes()
    if step > memory:
      raise GraphTooLargeError(
          f"GnnTrainer graph_mode 'full_graph': a step on the whole graph of {schema_dir} "
          f"takes about {step / 2**30:,.1f} GiB, more than this machine's "
          f"{memory / 2**30:,.1f} GiB. Set graph_mode to 'sampled' (subgraphs around the "
          "seeds), or pre-sample with GraphSampler on a distributed Beam runner.")
    why = "graph_mode 'full_graph'"
  else:
    reasons = tasks_lib.seed_readout_errors(tasks) + ([leak] if timed else [])
    if processes > 1:
      reasons.append(f"{processes} training processes")
    if step > budget_bytes:
      reasons.append(f"a full-graph step takes about {step / 2**20:,.0f} MiB, over the "
                     f"{budget_bytes / 2**20:,.0f} MiB of full_graph_budget_mb")
    if reasons:
      _log_choice(training_data.SAMPLED, "auto: " + "; ".join(reasons))
      return training_data.SAMPLED
    why = (f"auto: a step takes about {step / 2**20:,.0f} MiB of the "
           f"{budget_bytes / 2**20:,.0f} MiB budget")
  _log_choice(training_data.FULL_GRAPH, why)
  return training_data.FULL_GRAPH


def load(schema_dir: str, *, seeds: Optional[Mapping[str, str]] = None,
         sampling_spec: Optional[str] = None,
         sampling_config: Optional[Mapping[str, Any]] = None,
         link_config: Optional[Mapping[str, Any]] = None,
         splits: Sequence[str], who: str = _WHO) -> Union[GraphSplits, link_pairs.LinkSplits]:
  """Loads the graph of a GraphSchema folder and the seeds (or links) of ``splits``.

  In three steps, each once: the graph core checks the parameters against the
  schema (:func:`graph.plan.plan`), the store loads the tables and seed tables
  (:func:`store.load`), and link prediction splits the links
  (:func:`link_pairs.split`).

  Args:
    schema_dir: The ``graph_schema`` artifact's folder: ``graph_schema.pbtxt``
      naming its tables in ``metadata.filename`` (relative to the folder).
    seeds: Split name -> seed table (relative to the folder).
    sampling_spec: Text-format SamplingSpec, or None.
    sampling_config: ``{"seed_node_set": ..., "hops": [...]}``, or None.
    link_config: Instead of the three above: LinkSampler's ``link_config``;
      the examples are then link-prediction pairs. (JSON execution properties
      are decoded by :func:`trainer.config.from_exec_properties`.)
    splits: The splits training and validation read (each must have seeds).
    who: The component named in errors.

  Raises:
    GraphInputError: naming the table, split, row or id at fault.
    GraphTooLargeError: the tables would not fit in this machine's
      memory (then use GraphSampler).
    graph_schema_lib.GraphSchemaError: a missing or invalid schema file.
  """
  schema = graph_schema_lib.read_artifact_schema(schema_dir)
  plan = graph_plan.plan(schema, seeds=seeds, sampling_spec=sampling_spec,
                         sampling_config=sampling_config, link_config=link_config,
                         splits=splits, engine=kernel.ENGINE, runs=kernel.STRATEGIES, who=who)
  graph, seed_indices, times = store_lib.load_for(schema, schema_dir, plan.sampling,
                                                  plan.seed_tables, seed_times=True, who=who)
  if plan.link:
    pairs = link_pairs.split(graph, plan, who=who)
    logging.info("%s: link pairs per split %s", who,
                 {s: (len(pairs.positives[s]), len(pairs.negatives[s])) for s in pairs.positives})
    return pairs
  logging.info("%s: seeds per split %s", who, {s: len(v) for s, v in seed_indices.items()})
  return GraphSplits(sampler=dataset_lib.SubgraphSampler(graph, plan.sampling),
                     seeds=seed_indices, schema_dir=schema_dir, times=times)


def load_for_training(schema_dir: str, graph: graph_params.GraphParams, options: Options,
                      tasks: Mapping[str, Any]) -> training_data.TrainingData:
  """The graph of a GraphSchema folder as GnnTrainer trains on it.

  :func:`load` of the ``graph`` asked for, then :func:`for_training`: the one
  call the trainer makes for the graph in memory.

  Raises:
    GraphInputError, GraphTooLargeError, graph_schema_lib.GraphSchemaError:
      as :func:`load` and :func:`for_training` say.
  """
  loaded = load(schema_dir, seeds=graph.seeds, sampling_spec=graph.sampling_spec,
                sampling_config=graph.sampling_config, link_config=graph.link_config,
                splits=list(options.train_splits) + list(options.eval_splits))
  return for_training(loaded, options, tasks)
