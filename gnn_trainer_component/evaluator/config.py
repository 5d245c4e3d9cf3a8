"""GraphEvaluator's ``eval_config``: one frozen dataclass, validated in one place.

A node task (``task``, ``label``, ``test_seeds`` and ``train_seeds`` required)::

  {"task": "classification",          # or "regression": a node label, read at the seed
   "label": "label",                  # the label feature of the seed node set's table
   "test_seeds": "seeds-test.csv",    # the held-out nodes evaluated (relative to the tables)
   "train_seeds": "seeds-train.csv",  # the nodes the model was trained on: the baselines' fit
   "output": "logits",                # the serving_default output read (default: its only one)
   "slice_features": ["category"],    # node features to slice by, besides the degree
   "thresholds": [                    # default: beat every baseline on the main metric
       {"metric": "accuracy", "lower_bound": 0.6},
       {"metric": "accuracy", "min_gain_over_baselines": 0.02},
       {"metric": "accuracy", "min_gain_over_baselines": 0.2, "baselines": ["majority_class"]},
       {"metric": "macro_f1", "slice": "degree:1", "lower_bound": 0.4},
       {"metric": "accuracy", "max_loss_vs_baseline_model": 0.01}],
   "batch_size": 512, "sampling_seed": 0}

Link prediction (with GraphEvaluator's ``link_config``, the training's)::

  {"task": "link_prediction",
   "split": "test",                   # the held-out split of link_config evaluated
   "hits_at": [20, 50, 100],          # the K of hits@K
   "negatives_per_query": 1000,       # rank among this many seeded negatives (OGB's protocol;
                                      # default: every node of the target node set)
   "knn_neighbours": 50,              # item_knn / user_knn (default: chosen on validation)
   "edgebank_window": 86400,          # a split by time (default: the split's time span)
   "thresholds": [{"metric": "mrr", "min_gain_over_baselines": 0.0,
                   "gain_confidence": 0.95}]}

An edge's value or class (``link_config`` with ``edge_label``: each held-out edge is a pair
labelled with its value of that feature)::

  {"task": "edge_regression",         # or "edge_classification" (labels 0 .. classes - 1)
   "split": "test",                   # the held-out split of link_config evaluated
   "thresholds": [{"metric": "rmse", "min_gain_over_baselines": 0.0, "baselines": ["bias"]}]}

A rule holds one or more bounds on one metric of one slice (``"all"`` by
default). ``lower_bound`` / ``upper_bound``: the model's value (TFMA's value
threshold). ``min_gain_over_baselines``: the model beats the best
zero-parameter baseline (:mod:`baselines`; or the best of the rule's
``baselines``) by more than this (0: strictly better; for error metrics,
lower is better). With ``gain_confidence`` (MRR and hits@K): the lower
bound of the gain's paired bootstrap interval at that confidence (queries
resampled, seeded by ``sampling_seed``) must beat it, against every
baseline, not only the best. ``max_loss_vs_baseline_model``:
the model is worse than the ``baseline_model`` input by at most this (TFMA's
change threshold; a run without a baseline model is rubber-stamped on it, as
TFX's Evaluator does). Slices: ``all``, ``degree:<a>-<b>`` (log2 buckets of
the node's distinct neighbours in the whole graph, over every edge set and
either direction: ``degree:0`` holds the isolated nodes,
then ``degree:1``, ``degree:2-3``, ``degree:4-7``, ...) and
``<feature>=<value>`` for each ``slice_features`` feature.

TFX-free, so pipeline definitions and tests check it without a pipeline.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Mapping, Optional

from gnn_trainer_component import config_dicts
from gnn_trainer_component import errors
from gnn_trainer_component.graph import statistics

CLASSIFICATION, REGRESSION, LINK_PREDICTION = "classification", "regression", "link_prediction"
EDGE_CLASSIFICATION, EDGE_REGRESSION = "edge_classification", "edge_regression"
TASKS = (CLASSIFICATION, REGRESSION, LINK_PREDICTION, EDGE_CLASSIFICATION, EDGE_REGRESSION)
NODE_TASKS = (CLASSIFICATION, REGRESSION)
#: The tasks of an edge's label (``link_config``'s ``edge_label``), and the node task whose
#: metrics (and report) each follows.
EDGE_TASKS = {EDGE_CLASSIFICATION: CLASSIFICATION, EDGE_REGRESSION: REGRESSION}
#: The tasks of pairs of nodes (GraphEvaluator's ``link_config``).
PAIR_TASKS = (LINK_PREDICTION, *EDGE_TASKS)

#: Metrics per task; ``precision/<class>`` and ``recall/<class>`` too for classification,
#: ``hits@<K>`` for each K of ``hits_at`` for link prediction.
METRICS = {
    CLASSIFICATION: ("accuracy", "macro_f1", "calibration_error"),
    REGRESSION: ("mae", "rmse"),
    LINK_PREDICTION: ("auc", "average_precision", "mrr"),
    EDGE_CLASSIFICATION: ("accuracy", "macro_f1", "calibration_error", "auc"),  # auc: 2 classes
    EDGE_REGRESSION: ("mae", "rmse"),
}
#: The K of hits@K by default (OGB's ogbl-collab / ogbl-ppa report 20, 50, 100).
HITS_AT = (20, 50, 100)
#: The zero-parameter baselines of each task (:mod:`baselines`), in the order reports show them.
#: Link prediction: ``common_neighbours`` and ``adamic_adar`` only between nodes of one node set,
#: ``item_knn`` and ``user_knn`` only between two, ``edgebank``, ``edgebank_window`` and
#: ``recency`` only on a split by time. An edge's label: the message split's mean (or majority
#: class), and ``bias``: that mean plus a bias of the edge's source and of its target.
BASELINES = {CLASSIFICATION: ("majority_class", "label_propagation"), REGRESSION: ("mean",),
             LINK_PREDICTION: ("popularity", "common_neighbours", "adamic_adar", "item_knn",
                               "user_knn", "edgebank", "edgebank_window", "recency"),
             EDGE_CLASSIFICATION: ("majority_class", "bias"), EDGE_REGRESSION: ("mean", "bias")}
#: Metrics a rule's ``gain_confidence`` can bound: a mean over queries (paired bootstrap).
QUERY_METRICS = ("mrr",)  # and hits@K
#: Metrics where lower is better (every other is higher-is-better).
LOWER_IS_BETTER = frozenset({"calibration_error", "mae", "rmse"})
#: The metric the default rule and the report's degree panel use.
MAIN_METRIC = {CLASSIFICATION: "accuracy", REGRESSION: "rmse", LINK_PREDICTION: "auc",
               EDGE_CLASSIFICATION: "accuracy", EDGE_REGRESSION: "rmse"}
_PER_CLASS = re.compile(r"^(precision|recall)/(\d+)$")

ALL = "all"
_DEGREE_SLICE = re.compile(r"^degree:(\d+)(?:-(\d+))?$")
_FEATURE_SLICE = re.compile(r"^([^=:]+)=(.+)$")

#: The keys of a node task, and of link prediction.
_NODE_KEYS = ("label", "test_seeds", "train_seeds")
_LINK_KEYS = ("split", "hits_at", "negatives_per_query", "knn_neighbours", "edgebank_window")

#: The bounds a rule may hold.
BOUNDS = ("lower_bound", "upper_bound", "min_gain_over_baselines", "max_loss_vs_baseline_model")


class EvalConfigError(errors.GnnError, ValueError):
  """``eval_config`` has an unknown key or a bad value."""


@dataclasses.dataclass(frozen=True)
class Rule:
  """One threshold: bounds on one metric of one slice (None: that bound is not checked)."""
  metric: str
  slice: str = ALL
  lower_bound: Optional[float] = None
  upper_bound: Optional[float] = None
  min_gain_over_baselines: Optional[float] = None
  max_loss_vs_baseline_model: Optional[float] = None
  baselines: tuple[str, ...] = ()  # min_gain_over_baselines compares with these (): all
  # With min_gain_over_baselines: the gain's lower confidence bound over every baseline
  gain_confidence: Optional[float] = None

  @property
  def lower_is_better(self) -> bool:
    return self.metric in LOWER_IS_BETTER

  def describe(self) -> str:
    bounds = ", ".join(f"{b} {getattr(self, b)}" for b in BOUNDS if getattr(self, b) is not None)
    among = f" (baselines {list(self.baselines)})" if self.baselines else ""
    confidence = (f" at {self.gain_confidence:g} confidence" if self.gain_confidence is not None
                  else "")
    return f"{self.metric} on slice {self.slice!r}: {bounds}{confidence}{among}"


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  """What GraphEvaluator evaluates, besides its artifacts.

  Attributes:
    task: ``"classification"`` or ``"regression"`` of a node label,
      ``"link_prediction"``, or ``"edge_classification"`` /
      ``"edge_regression"`` of ``link_config``'s ``edge_label``.
    label: The label feature of the seed node set (node tasks).
    test_seeds: Seed table of the held-out nodes (relative to the tables folder).
    train_seeds: Seed table of the nodes the model was trained on: the
      baselines are fit on their labels.
    split: Link prediction and edge tasks: the held-out split of ``link_config`` evaluated.
    hits_at: Link prediction: the K of ``hits@K``.
    negatives_per_query: Link prediction: rank each edge among this many
      negative targets drawn for it (seeded by ``sampling_seed``; no known edge,
      not the source), as OGB's ogbl-citation2 does; 0: among every node of
      the target node set.
    output: The ``serving_default`` output read ("" = its only output).
    slice_features: Node features to slice by.
    thresholds: The rules a blessed model passes (default: :func:`default_rules`).
    batch_size: Nodes per model call.
    sampling_seed: Seeds the neighbourhood sampled around each node (and the
      bootstrap's resamples).
    knn_neighbours: Link prediction between two node sets: the neighbours
      ``item_knn`` and ``user_knn`` keep; None: each chooses among
      ``interactions.NEIGHBOUR_CHOICES`` by its MRR on another held-out split
      of ``link_config`` (without one: ``interactions.DEFAULT_NEIGHBOURS``).
    edgebank_window: A split by time: ``edgebank_window``'s span in the time
      feature's units; None: the span of the evaluated split's edge times.
  """
  task: str
  label: str = ""
  test_seeds: str = ""
  train_seeds: str = ""
  split: str = "test"
  hits_at: tuple[int, ...] = HITS_AT
  negatives_per_query: int = 0
  output: str = ""
  slice_features: tuple[str, ...] = ()
  thresholds: tuple[Rule, ...] = ()
  batch_size: int = 512
  sampling_seed: int = 0
  knn_neighbours: Optional[int] = None
  edgebank_window: Optional[float] = None

  @property
  def main_metric(self) -> str:
    return MAIN_METRIC[self.task]


def default_rules(task: str) -> tuple[Rule, ...]:
  """Without ``thresholds``: the model must beat every baseline on the main metric."""
  return (Rule(metric=MAIN_METRIC[task], min_gain_over_baselines=0.0),)


_EXAMPLE = ('{"task": "classification", "label": "label", "test_seeds": "seeds-test.csv", '
            '"train_seeds": "seeds-train.csv"}')


def _fail(key: str, value: Any, expected: str) -> EvalConfigError:
  """``key``: a top-level key, or a path such as ``['thresholds'][0]['metric']``."""
  path = key if key.startswith("[") else f"[{key!r}]"
  return EvalConfigError(
      f"GraphEvaluator eval_config{path} = {value!r}: expected {expected}. "
      f"A minimal eval_config: {_EXAMPLE}.")


def known_metric(task: str, metric: str, hits_at: tuple[int, ...] = HITS_AT) -> bool:
  """Whether ``task`` computes ``metric``."""
  if task == LINK_PREDICTION and metric in {f"hits@{k}" for k in hits_at}:
    return True
  return metric in METRICS[task] or (kind(task) == CLASSIFICATION
                                     and bool(_PER_CLASS.match(metric)))


def kind(task: str) -> str:
  """The task whose metrics ``task`` computes: an edge task's node task, else ``task``."""
  return EDGE_TASKS.get(task, task)


def keys_of(task: str) -> tuple[str, ...]:
  """The keys that say what ``task`` evaluates (the others are shared)."""
  if task in NODE_TASKS:
    return _NODE_KEYS
  return _LINK_KEYS if task == LINK_PREDICTION else ("split",)


def metric_names(task: str, hits_at: tuple[int, ...] = HITS_AT) -> tuple[str, ...]:
  """The metrics of ``task`` on every slice (per-class ones aside)."""
  if task == LINK_PREDICTION:
    return METRICS[task] + tuple(f"hits@{k}" for k in hits_at)
  return METRICS[task]


def degree_bounds(slice_name: str) -> Optional[tuple[int, int]]:
  """``"degree:4-7"`` -> (4, 7), ``"degree:1"`` -> (1, 1); None for another slice."""
  match = _DEGREE_SLICE.match(slice_name)
  if not match:
    return None
  low = int(match.group(1))
  return low, int(match.group(2)) if match.group(2) else low


def degree_slice(degree: int) -> str:
  """The slice of a degree's log2 bucket (:func:`statistics.degree_bucket`): ``degree:2-3``."""
  return f"degree:{statistics.degree_bucket(degree)}"


def _check_slice(name: Any, features: tuple[str, ...], where: str) -> str:
  if not isinstance(name, str) or not name:
    raise _fail(where, name, "a slice name: 'all', 'degree:<a>-<b>' or '<feature>=<value>'")
  if name == ALL:
    return name
  bounds = degree_bounds(name)
  if bounds is not None:
    if degree_slice(bounds[0]) != name:
      raise _fail(where, name, f"a log2 degree bucket, e.g. {degree_slice(bounds[0])!r} "
                  "(buckets: degree:0, degree:1, degree:2-3, degree:4-7, ...)")
    return name
  match = _FEATURE_SLICE.match(name)
  if not match or match.group(1) not in features:
    raise _fail(where, name, "'all', a degree bucket such as 'degree:2-3', or "
                f"'<feature>=<value>' of a slice_features feature (slice_features: "
                f"{list(features)})")
  return name


def _number(key: str, value: Any) -> float:
  if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
    raise _fail(key, value, "a number")
  return float(value)


def _rule(task: str, value: Any, i: int, features: tuple[str, ...],
          hits_at: tuple[int, ...]) -> Rule:
  where = f"['thresholds'][{i}]"
  if not isinstance(value, Mapping):
    raise _fail(where, value, 'a dict such as {"metric": "accuracy", "lower_bound": 0.6}')
  unknown = sorted(set(value) - {"metric", "slice", "baselines", "gain_confidence", *BOUNDS})
  if unknown:
    raise _fail(where, value, f"the keys metric, slice, baselines, gain_confidence and bounds "
                f"{list(BOUNDS)} (unknown: {unknown})")
  metric = value.get("metric")
  if not isinstance(metric, str) or not known_metric(task, metric, hits_at):
    extra = ", precision/<class>, recall/<class>" if kind(task) == CLASSIFICATION else ""
    raise _fail(f"{where}['metric']", metric,
                f"a metric of {task}: {', '.join(metric_names(task, hits_at))}{extra}")
  bounds = {b: _number(f"{where}[{b!r}]", value[b]) for b in BOUNDS if b in value}
  if not bounds:
    raise _fail(where, value, f"at least one bound of {list(BOUNDS)}")
  for b in ("min_gain_over_baselines", "max_loss_vs_baseline_model"):
    if bounds.get(b, 0) < 0:
      raise _fail(f"{where}[{b!r}]", bounds[b], "a number >= 0")
  names = ()
  if "baselines" in value:
    names = value["baselines"]
    if (isinstance(names, str) or not isinstance(names, (list, tuple)) or not names
        or not set(names) <= set(BASELINES[task]) or "min_gain_over_baselines" not in bounds):
      raise _fail(f"{where}['baselines']", names, "with min_gain_over_baselines, a non-empty "
                  f"list of the baselines of {task}: {list(BASELINES[task])}")
  confidence = None
  if "gain_confidence" in value:
    confidence = value["gain_confidence"]
    if ("min_gain_over_baselines" not in bounds or not is_query_metric(metric)
        or isinstance(confidence, bool) or not isinstance(confidence, (int, float))
        or not 0 < confidence < 1):
      raise _fail(f"{where}['gain_confidence']", confidence,
                  "with min_gain_over_baselines on mrr or hits@K, a confidence in (0, 1) such "
                  "as 0.95: the lower bound of the gain's paired bootstrap interval must beat "
                  "min_gain_over_baselines against every baseline")
  return Rule(metric=metric, slice=_check_slice(value.get("slice", ALL), features,
                                                f"{where}['slice']"),
              baselines=tuple(names), gain_confidence=confidence, **bounds)


def is_query_metric(metric: str) -> bool:
  """Whether ``metric`` is a mean over ranked queries (MRR, hits@K): one value per query."""
  return metric in QUERY_METRICS or metric.startswith("hits@")


def _names(key: str, value: Any) -> tuple[str, ...]:
  if (isinstance(value, str) or not isinstance(value, (list, tuple))
      or not all(isinstance(v, str) and v for v in value) or len(set(value)) != len(value)):
    raise _fail(key, value, "a list of distinct feature names")
  return tuple(value)


def parse(value: Any) -> EvalConfig:
  """An :class:`EvalConfig` from a dict or its JSON.

  Raises:
    EvalConfigError: naming the key and what it must be.
  """
  what = "GraphEvaluator eval_config"
  value = config_dicts.decode(value, what, EvalConfigError, _EXAMPLE)
  config_dicts.check_keys(value, (f.name for f in dataclasses.fields(EvalConfig)), what,
                          EvalConfigError)
  if value.get("task") not in TASKS:
    raise _fail("task", value.get("task"), f"one of {list(TASKS)}")
  task = value["task"]
  out: dict[str, Any] = {"task": task}
  for key in _NODE_KEYS if task in NODE_TASKS else ("split",):
    if key in value or task in NODE_TASKS:
      if not isinstance(value.get(key), str) or not value[key]:
        raise _fail(key, value.get(key), "a non-empty string")
      out[key] = value[key]
  takes = keys_of(task)
  wrong = [k for k in _NODE_KEYS + _LINK_KEYS if k in value and k not in takes]
  if wrong:
    raise _fail(wrong[0], value[wrong[0]], f"no such key with task {task!r} (it takes "
                f"{', '.join(takes)})")
  for key, low in (("negatives_per_query", 1), ("batch_size", 1), ("sampling_seed", 0),
                   ("knn_neighbours", 1)):
    if value.get(key) is not None:
      out[key] = config_dicts.int_at_least(value, key, low, _fail)
  if value.get("edgebank_window") is not None:
    window = _number("edgebank_window", value["edgebank_window"])
    if window <= 0:
      raise _fail("edgebank_window", window, "a time span > 0 (null: the evaluated split's)")
    out["edgebank_window"] = window
  if "hits_at" in value:
    hits = value["hits_at"]
    if (isinstance(hits, (str, bytes)) or not isinstance(hits, (list, tuple)) or not hits
        or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in hits)
        or len(set(hits)) != len(hits)):
      raise _fail("hits_at", hits, "a non-empty list of distinct ints > 0, e.g. [20, 50, 100]")
    out["hits_at"] = tuple(hits)
  if "output" in value:
    if not isinstance(value["output"], str):
      raise _fail("output", value["output"], "the name of a serving_default output")
    out["output"] = value["output"]
  features = out["slice_features"] = _names("slice_features", value.get("slice_features", []))
  if out.get("label") and out["label"] in features:
    raise _fail("slice_features", list(features), f"features other than the label {out['label']!r}")
  rules = value.get("thresholds")
  if rules is None:
    out["thresholds"] = default_rules(task)
  elif isinstance(rules, (list, tuple)) and rules:
    hits_at = out.get("hits_at", HITS_AT)
    out["thresholds"] = tuple(_rule(task, r, i, features, hits_at) for i, r in enumerate(rules))
  else:
    raise _fail("thresholds", rules, "a non-empty list of rules (leave it out for the default: "
                "beat every baseline)")
  return EvalConfig(**out)


def dumps(cfg: EvalConfig) -> str:
  """The JSON :func:`parse` reads back."""
  value = dataclasses.asdict(cfg)
  value["slice_features"] = list(cfg.slice_features)
  value["hits_at"] = list(cfg.hits_at)
  for key in _NODE_KEYS + _LINK_KEYS:
    if key not in keys_of(cfg.task):
      value.pop(key)
  for key in ("knn_neighbours", "edgebank_window"):
    if value.get(key, 0) is None:
      value.pop(key)
  if not value.get("negatives_per_query", 1):
    value.pop("negatives_per_query")
  value["thresholds"] = [{k: list(v) if k == "baselines" else v
                          for k, v in dataclasses.asdict(r).items() if v is not None and v != ()}
                         for r in cfg.thresholds]
  return json.dumps(value, sort_keys=True)
