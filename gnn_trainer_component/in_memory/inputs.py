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
from gnn_trainer_component.in_memory import dataset as dataset_lib
from gnn_trainer_component.in_memory import graph as graph_lib
from gnn_trainer_component.in_memory import links as links_lib
from gnn_trainer_component.in_memory import sampler as sampler_lib
from gnn_trainer_component.sampler import inputs as sampler_inputs
from gnn_trainer_component.sampler.graph import tables as graph_tables
from gnn_trainer_component.sampler.inputs import GraphInputError
from gnn_trainer_component.trainer import input_data

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
               seed: Optional[int]) -> dataset_lib.InMemoryDatasetProvider:
    """Training (shuffled, fresh samples every epoch) or validation subgraphs of ``splits``."""
    return dataset_lib.InMemoryDatasetProvider(
        self.sampler, self.seeds_of(splits), batch_size=batch_size, shuffle=training,
        fresh=training, seed=seed, what=f"splits {', '.join(splits)}")

  def serialized_examples(self, splits: Sequence[str], n: int) -> list[bytes]:
    """The first ``n`` validation subgraphs of ``splits`` as GraphSampler-format tf.Examples."""
    if n <= 0:
      return []
    ds = self.sampler.dataset(self.seeds_of(splits)[:n], batch_size=n, shuffle=False,
                              fresh=False, seed=None)
    return [tfgnn.write_example(g).SerializeToString() for g in ds]


#: What :func:`load` returns: subgraphs around seeds, or link-prediction pairs.
GraphInput = Union[GraphSplits, links_lib.LinkSplits]


def _loads(value: Any, key: str) -> Any:
  return sampler_inputs.loads_json(value, key, _WHO)


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
    graph_lib.GraphTooLargeError: the tables would not fit in this machine's
      memory (then use GraphSampler).
    graph_schema_lib.GraphSchemaError: a missing or invalid schema file.
  """
  schema = graph_schema_lib.read_artifact_schema(schema_dir)
  graph_lib.check_fits(schema, schema_dir, input_data.machine_memory_bytes(), who=_WHO)
  if link_config:
    return _load_links(schema, schema_dir, _loads(link_config, "link_config"), splits)
  spec = graph_tables.sampling_spec_from_config(
      schema, sampling_spec, _loads(sampling_config, "sampling_config"), who=_WHO)
  plan = sampler_lib.plan_from_spec(spec, schema, who=_WHO)
  seed_tables = _loads(seeds, "seeds") or {}
  missing = [s for s in splits if s not in seed_tables]
  if missing:
    raise GraphInputError(
        f"{_WHO}: train_args/eval_args name split(s) {missing} that 'seeds' does not define "
        f"(seeds: {sorted(seed_tables)}). Add a seed table per split.")
  graph = graph_lib.load_graph(schema, schema_dir, who=_WHO)
  seed_indices = {
      split: graph_lib.read_seeds(graph, schema_dir, plan.seed_node_set, split,
                                  seed_tables[split], who=_WHO)
      for split in dict.fromkeys(splits)}
  logging.info("%s: graph in memory from %s (%s); seeds per split %s", _WHO, schema_dir,
               graph_lib.log_summary(graph), {s: len(v) for s, v in seed_indices.items()})
  return GraphSplits(sampler=dataset_lib.SubgraphSampler(graph, plan), seeds=seed_indices,
                     schema_dir=schema_dir)


def _load_links(schema: tfgnn.GraphSchema, schema_dir: str, link_config: Any,
                splits: Sequence[str]) -> links_lib.LinkSplits:
  missing = [s for s in splits if s not in (link_config.get("splits") or {})]
  if missing:
    raise GraphInputError(
        f"{_WHO}: train_args/eval_args name split(s) {missing} that link_config['splits'] "
        f"does not define ({sorted(link_config.get('splits') or {})}).")
  graph = graph_lib.load_graph(schema, schema_dir, who=_WHO)
  out = links_lib.load(graph, schema, link_config)
  logging.info("%s: graph in memory from %s (%s); link pairs per split %s", _WHO, schema_dir,
               graph_lib.log_summary(graph),
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
