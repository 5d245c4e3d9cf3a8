"""GraphStatisticsGen's ``seeds`` and ``statistics_config``: decoded and checked in one place.

``statistics_config`` (all keys optional)::

  {"seed_node_set": "paper",   # the node set of the seeds and of the label
   "label": "label",           # a scalar feature of seed_node_set: label distributions,
                               # homophily, label_purity of the other features
   "times": {"cites": "year"}, # edge set -> its time feature (a scalar number): its range,
                               # and the edges touching a seed at or after the seed's time
                               # (the seed tables then need a "time" column)
   "engine": "in_memory"}      # or "beam": the same statistics, for graphs that do not fit
                               # in memory (CSV and TFRecord tables)

``seeds`` is GraphSampler's: split -> seed table (relative to the graph's folder).
:func:`parse` checks the shapes without a schema (at pipeline definition);
:func:`check` checks the names against the graph schema (in the executor).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Optional

import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import config_dicts
from gnn_trainer_component import errors
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.graph.table_statistics import StatisticsSpec

WHO = "GraphStatisticsGen"
_WHAT = f"{WHO} statistics_config"
_EXAMPLE = '{"seed_node_set": "paper", "label": "label", "times": {"cites": "year"}}'


#: Where the statistics are computed.
IN_MEMORY, BEAM = "in_memory", "beam"
ENGINES = (IN_MEMORY, BEAM)


class StatisticsConfigError(errors.GnnError, ValueError):
  """``statistics_config`` or ``seeds`` has an unknown key or a bad value."""


@dataclasses.dataclass(frozen=True)
class StatisticsConfig:
  """What GraphStatisticsGen computes (``spec``) and where (``engine``: :data:`ENGINES`)."""
  spec: StatisticsSpec
  engine: str = IN_MEMORY


def _name(raw: Mapping[str, Any], key: str) -> Optional[str]:
  value = raw.get(key)
  if value is not None and (not isinstance(value, str) or not value):
    raise StatisticsConfigError(f"{_WHAT}: {key} must be a name (a non-empty string), got "
                                f"{value!r}; for example {_EXAMPLE}.")
  return value


def _names(value: Any, what: str, example: str) -> dict[str, str]:
  if not isinstance(value, Mapping) or not all(
      isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()):
    raise StatisticsConfigError(f"{what} must map names to names, such as {example}, got "
                                f"{value!r}.")
  return dict(value)


def parse(config: Any, seeds: Any = None) -> StatisticsConfig:
  """``statistics_config`` and ``seeds`` (dicts, their JSON or None) as one config.

  Raises:
    StatisticsConfigError: an unknown key or a bad value, naming both.
  """
  raw = dict(config_dicts.decode(config, _WHAT, StatisticsConfigError, _EXAMPLE,
                                 optional=True))
  config_dicts.check_keys(raw, ("seed_node_set", "label", "times", "engine"), _WHAT,
                          StatisticsConfigError)
  engine = raw.get("engine", IN_MEMORY)
  if engine not in ENGINES:
    raise StatisticsConfigError(f"{_WHAT}: engine must be one of {list(ENGINES)}, got "
                                f"{engine!r}.")
  seed_tables = _names(config_dicts.decode(seeds, f"{WHO} seeds", StatisticsConfigError,
                                           '{"train": "seeds-train.csv"}', optional=True),
                       f"{WHO} seeds", '{"train": "seeds-train.csv"}')
  seed_node_set, label = _name(raw, "seed_node_set"), _name(raw, "label")
  times = _names(raw.get("times", {}), f"{_WHAT}: times", '{"cites": "year"}')
  if (seed_tables or label) and not seed_node_set:
    needs = "seeds" if seed_tables else "label"
    raise StatisticsConfigError(
        f"{_WHAT}: {needs} given without seed_node_set: name the node set of the seeds and "
        f"the label, for example {_EXAMPLE}.")
  return StatisticsConfig(StatisticsSpec(seeds=seed_tables, seed_node_set=seed_node_set,
                                         label=label, times=times), engine)


def dumps(cfg: StatisticsConfig) -> tuple[str, str]:
  """``(statistics_config, seeds)``: the config as the JSON execution properties it travels as."""
  spec = cfg.spec
  config = {"seed_node_set": spec.seed_node_set, "label": spec.label,
            "times": dict(spec.times), "engine": cfg.engine}
  return (json.dumps({k: v for k, v in config.items() if v}, sort_keys=True),
          json.dumps(dict(spec.seeds), sort_keys=True))


def check(spec: StatisticsSpec, schema: tfgnn.GraphSchema) -> None:
  """Checks the spec's names against the graph schema.

  Raises:
    GraphInputError: an unknown node or edge set, a label that is not a scalar
      feature of the seed node set, a time that is not a scalar number feature
      of its edge set.
  """
  if spec.seed_node_set and spec.seed_node_set not in schema.node_sets:
    raise GraphInputError(
        f"{_WHAT}: seed_node_set {spec.seed_node_set!r} is not a node set of the graph schema "
        f"(node sets: {sorted(schema.node_sets)}).")
  if spec.label:
    features = schema.node_sets[spec.seed_node_set].features
    if spec.label not in features or features[spec.label].shape.dim:
      raise GraphInputError(
          f"{_WHAT}: label {spec.label!r} must be a scalar feature of node set "
          f"{spec.seed_node_set!r} (its scalar features: "
          f"{sorted(n for n, f in features.items() if not f.shape.dim)}).")
    if tf.dtypes.as_dtype(features[spec.label].dtype) == tf.bool:
      raise GraphInputError(f"{_WHAT}: label {spec.label!r} is bool: declare it as an int.")
  for edge_set, feature in sorted(spec.times.items()):
    if edge_set not in schema.edge_sets:
      raise GraphInputError(
          f"{_WHAT}: times names {edge_set!r}, not an edge set of the graph schema (edge sets: "
          f"{sorted(schema.edge_sets)}).")
    sampling.edge_feature(schema, edge_set, feature, _WHAT, f"times[{edge_set!r}]")
