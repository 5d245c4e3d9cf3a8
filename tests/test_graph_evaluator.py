"""GraphEvaluator's pure parts: each metric and baseline against a brute-force computation,
the slices, the rules and the eval_config's errors (fast, no pipeline)."""

import csv
import math
import os

import numpy as np
import pytest

from gnn_trainer_component.evaluator import baselines
from gnn_trainer_component.evaluator import blessing
from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator import metrics
from tests.helpers import REPO_ROOT

CONFIG = {"task": "classification", "label": "label", "test_seeds": "seeds-test.csv",
          "train_seeds": "seeds-train.csv"}


def _random_case(seed, n=200, classes=4):
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, classes, n)
  logits = rng.normal(size=(n, classes)) + 2.0 * np.eye(classes)[labels] * rng.random((n, 1))
  probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
  return labels, probs


def _brute_classification(labels, probs):
  n, classes = probs.shape
  predicted = [max(range(classes), key=lambda c: probs[i][c]) for i in range(n)]
  out = {"accuracy": sum(p == y for p, y in zip(predicted, labels)) / n}
  f1s = []
  for c in range(classes):
    tp = sum(1 for p, y in zip(predicted, labels) if p == c and y == c)
    fp = sum(1 for p, y in zip(predicted, labels) if p == c and y != c)
    fn = sum(1 for p, y in zip(predicted, labels) if p != c and y == c)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    out[f"precision/{c}"], out[f"recall/{c}"] = precision, recall
    if c in set(predicted) | set(labels.tolist()):
      f1s.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
  out["macro_f1"] = sum(f1s) / len(f1s)
  ece = 0.0
  for b in range(10):
    low, high = b / 10, (b + 1) / 10
    members = [i for i in range(n) if (low < max(probs[i]) <= high) or (b == 0 and max(probs[i]) == 0)]
    if members:
      acc = sum(predicted[i] == labels[i] for i in members) / len(members)
      conf = sum(max(probs[i]) for i in members) / len(members)
      ece += len(members) / n * abs(acc - conf)
  out["calibration_error"] = ece
  return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_metrics_equal_a_brute_force_computation(seed):
  labels, probs = _random_case(seed)
  got = metrics.classification(labels, probs)
  want = _brute_classification(labels, probs)
  assert got == pytest.approx(want, abs=1e-12)


def test_macro_f1_is_scikit_learns_and_a_class_never_seen_is_left_out():
  labels = np.array([0, 0, 1, 1, 1])
  probs = np.eye(3)[[0, 1, 1, 1, 0]]  # class 2: neither a label nor a prediction
  got = metrics.classification(labels, probs)
  f1_0, f1_1 = 2 * 0.5 * 0.5 / 1.0, 2 * (2 / 3) * (2 / 3) / (4 / 3)
  assert got["macro_f1"] == pytest.approx((f1_0 + f1_1) / 2)
  assert got["precision/2"] == 0.0 and got["recall/2"] == 0.0


def test_regression_metrics_equal_a_brute_force_computation():
  rng = np.random.default_rng(3)
  labels, predictions = rng.normal(size=50), rng.normal(size=50)
  got = metrics.regression(labels, predictions)
  assert got["mae"] == pytest.approx(sum(abs(p - y) for p, y in zip(predictions, labels)) / 50)
  assert got["rmse"] == pytest.approx(
      math.sqrt(sum((p - y) ** 2 for p, y in zip(predictions, labels)) / 50))


def test_degree_buckets_are_log2_and_slices_hold_their_nodes():
  assert [config_lib.degree_slice(d) for d in (0, 1, 2, 3, 4, 7, 8, 100)] == [
      "degree:0", "degree:1", "degree:2-3", "degree:2-3", "degree:4-7", "degree:4-7",
      "degree:8-15", "degree:64-127"]
  degrees = np.array([0, 1, 5, 3, 2, 5])
  got = metrics.slices(degrees, {"kind": np.array([b"a", b"b", b"a", b"a", b"b", b"a"])})
  assert list(got) == ["all", "degree:0", "degree:1", "degree:2-3", "degree:4-7", "kind=a",
                       "kind=b"]
  assert got["degree:2-3"].tolist() == [3, 4] and got["kind=b"].tolist() == [1, 4]


def _brute_label_propagation(num_nodes, edges, train, train_labels, classes):
  """PyG's LabelPropagation written out with dense loops."""
  neighbours = [[] for _ in range(num_nodes)]
  for u, v in edges:
    neighbours[u].append(v)
    neighbours[v].append(u)
  degree = [len(n) for n in neighbours]
  y0 = [[0.0] * classes for _ in range(num_nodes)]
  for node, label in zip(train, train_labels):
    y0[node][label] = 1.0
  out = [row[:] for row in y0]
  for _ in range(baselines.ROUNDS):
    new = []
    for u in range(num_nodes):
      row = []
      for c in range(classes):
        total = sum(out[v][c] / math.sqrt(degree[u] * degree[v]) for v in neighbours[u])
        row.append(min(1.0, max(0.0, baselines.ALPHA * total + (1 - baselines.ALPHA) * y0[u][c])))
      new.append(row)
    out = new
  return out


def test_label_propagation_equals_a_brute_force_computation():
  rng = np.random.default_rng(4)
  num_nodes, classes = 30, 3
  edges = sorted({tuple(sorted(e)) for e in rng.integers(0, 25, (50, 2)).tolist() if e[0] != e[1]})
  train = np.array([0, 3, 6, 9, 12, 27])
  train_labels = np.array([0, 1, 2, 0, 1, 2])
  src, dst = np.array(edges).T
  adj = baselines.adjacency(num_nodes, src, dst)
  got = baselines.label_propagation(adj, train, train_labels, classes)
  raw = _brute_label_propagation(num_nodes, edges, train.tolist(), train_labels.tolist(), classes)
  prior = np.bincount(train_labels, minlength=classes) / len(train_labels)
  for u in range(num_nodes):
    total = sum(raw[u])
    want = [x / total for x in raw[u]] if total > 0 else prior.tolist()
    assert got[u] == pytest.approx(want, abs=1e-9), u
  # Nodes 25..29 have no edge: the labels never reach them (27 is a train node itself).
  assert got[28] == pytest.approx(prior)


def test_degrees_count_distinct_neighbours_and_label_propagation_crosses_node_sets():
  from gnn_trainer_component.evaluator import in_memory
  from gnn_trainer_component.graph import sampling
  from gnn_trainer_component.in_memory import store
  import tensorflow_gnn as tfgnn
  data = os.path.join(REPO_ROOT, "pipelines", "quickstart", "data")
  schema = tfgnn.read_schema(os.path.join(data, "graph_schema.pbtxt"))
  graph, _, _ = store.load(schema, data, graph_schema=sampling.output_graph_schema(schema),
                        memory_bytes=2 ** 34)
  neighbours = {}
  for table in ("bought.csv", "also_viewed.csv"):
    with open(os.path.join(data, table)) as f:
      for row in csv.DictReader(f):
        neighbours.setdefault(row["source"], set()).add(row["target"])
        neighbours.setdefault(row["target"], set()).add(row["source"])
  structure = in_memory.Structure(graph)
  for node_set in ("user", "item"):
    ids = [i.decode() for i in graph.node_sets[node_set].ids]
    rows = np.arange(len(ids))
    want = [len(neighbours.get(i, set()) - {i}) for i in ids]
    assert structure.degrees(node_set, rows).tolist() == want
  # Users are linked through items only: propagation reaches them across node sets.
  labels = graph.node_sets["user"].features["label"]
  train, test = np.arange(0, 200), np.arange(200, 300)
  probs = structure.propagated("user", train, labels[train], test, 3)
  assert probs.shape == (100, 3) and np.allclose(probs.sum(axis=1), 1)
  assert len({tuple(p) for p in np.round(probs, 6)}) > 10  # not the prior for everyone


def test_a_self_loop_and_a_repeated_edge_add_no_neighbour():
  from gnn_trainer_component.evaluator import in_memory
  adj = baselines.adjacency(4, np.array([0, 0, 0, 1, 3]), np.array([0, 1, 1, 0, 3]))
  structure = in_memory.Structure.__new__(in_memory.Structure)
  structure.offsets, structure.adjacency = {"n": 0}, adj
  assert structure.degrees("n", np.arange(4)).tolist() == [1, 1, 0, 0]


def test_the_majority_class_baseline_predicts_the_training_class_frequencies():
  got = baselines.predict(config_lib.CLASSIFICATION, train_labels=np.array([2, 2, 0, 2]),
                          num_classes=3, propagated=lambda: None, num_test=2)
  assert got["majority_class"].tolist() == [[0.25, 0, 0.75]] * 2
  got = baselines.predict(config_lib.REGRESSION, train_labels=np.array([1.0, 3.0]),
                          num_classes=0, propagated=lambda: None, num_test=3)
  assert got == {"mean": pytest.approx([2.0, 2.0, 2.0])}


# ---- rules ----

def _results(model, best_baseline, other=0.1, baseline_model=None):
  out = {"model": {"all": {"accuracy": model, "rmse": model}},
         "majority_class": {"all": {"accuracy": other, "rmse": other}},
         "label_propagation": {"all": {"accuracy": best_baseline, "rmse": best_baseline}}}
  if baseline_model is not None:
    out["baseline_model"] = {"all": {"accuracy": baseline_model, "rmse": baseline_model}}
  return out


NAMES = ("majority_class", "label_propagation")


def test_the_default_rule_needs_the_model_strictly_better_than_every_baseline():
  rules = config_lib.parse(CONFIG).thresholds
  assert blessing.judge(rules, _results(0.8, 0.7), NAMES).blessed
  tie = blessing.judge(rules, _results(0.7, 0.7), NAMES)
  assert not tie.blessed
  assert tie.failed == ("accuracy on 'all' is 0.7000 vs label_propagation 0.7000; "
                        "min_gain_over_baselines 0.0",)
  assert tie.checks[0]["against"] == "label_propagation"


def test_lower_is_better_metrics_gain_by_going_down():
  rule = config_lib.Rule(metric="rmse", min_gain_over_baselines=0.05)
  assert blessing.judge([rule], _results(0.5, 0.6, other=0.9), NAMES).blessed
  assert not blessing.judge([rule], _results(0.58, 0.6, other=0.9), NAMES).blessed


def test_a_rule_may_name_the_baselines_it_must_beat():
  rule = config_lib.parse(dict(CONFIG, thresholds=[
      {"metric": "accuracy", "min_gain_over_baselines": 0.2,
       "baselines": ["majority_class"]}])).thresholds[0]
  verdict = blessing.judge([rule], _results(0.8, 0.9, other=0.5), NAMES)
  assert verdict.blessed and verdict.checks[0]["against"] == "majority_class"
  assert not blessing.judge([rule], _results(0.65, 0.9, other=0.5), NAMES).blessed


def test_value_and_change_bounds_and_the_rubber_stamp():
  rules = [config_lib.Rule(metric="accuracy", lower_bound=0.6, upper_bound=0.95),
           config_lib.Rule(metric="accuracy", max_loss_vs_baseline_model=0.02)]
  stamped = blessing.judge(rules, _results(0.8, 0.7), NAMES)
  assert stamped.blessed and stamped.rubber_stamped and "rubber-stamped" in stamped.message
  assert blessing.judge(rules, _results(0.8, 0.7, baseline_model=0.81), NAMES).blessed
  worse = blessing.judge(rules, _results(0.8, 0.7, baseline_model=0.83), NAMES)
  assert not worse.blessed and "baseline_model 0.8300" in worse.message
  low = blessing.judge(rules, _results(0.5, 0.4, baseline_model=0.5), NAMES)
  assert low.failed == ("accuracy on 'all' is 0.5000; lower_bound 0.6",)


def test_a_rule_on_a_slice_with_no_node_fails_clearly():
  rule = config_lib.Rule(metric="accuracy", slice="degree:64-127", lower_bound=0.5)
  with pytest.raises(blessing.EvaluationInputError, match=r"degree:64-127.*slices of this "
                     r"evaluation: \['all'\]"):
    blessing.judge([rule], _results(0.8, 0.7), NAMES)


# ---- eval_config ----

def test_the_config_round_trips_and_fills_the_default_rule():
  cfg = config_lib.parse(dict(CONFIG, slice_features=["age"], thresholds=[
      {"metric": "recall/2", "slice": "age=30", "lower_bound": 0.5},
      {"metric": "accuracy", "slice": "degree:4-7", "max_loss_vs_baseline_model": 0.01}]))
  assert config_lib.parse(config_lib.dumps(cfg)) == cfg
  assert config_lib.parse(CONFIG).thresholds == (
      config_lib.Rule(metric="accuracy", min_gain_over_baselines=0.0),)
  assert config_lib.parse(dict(CONFIG, task="regression")).thresholds[0].metric == "rmse"


@pytest.mark.parametrize("change, match", [
    ({"task": "ranking"}, r"\['task'\] = 'ranking': expected one of \['classification', "
                          r"'regression', 'link_prediction', 'edge_classification', "
                          r"'edge_regression'\]"),
    ({"label": ""}, r"\['label'\] = '': expected a non-empty string"),
    ({"test_seeds": None}, r"\['test_seeds'\] = None"),
    ({"thresholds": [{"metric": "auc", "lower_bound": 0.5}]},
     r"eval_config\['thresholds'\]\[0\]\['metric'\] = 'auc': expected a metric of classification: accuracy, "
     r"macro_f1, calibration_error, precision/<class>, recall/<class>"),
    ({"thresholds": [{"metric": "accuracy", "slice": "degree:3-7", "lower_bound": 0.5}]},
     r"a log2 degree bucket, e.g. 'degree:2-3'"),
    ({"thresholds": [{"metric": "accuracy", "slice": "colour=red", "lower_bound": 0.5}]},
     r"'<feature>=<value>' of a slice_features feature \(slice_features: \[\]\)"),
    ({"thresholds": [{"metric": "accuracy"}]}, r"at least one bound"),
    ({"thresholds": [{"metric": "accuracy", "lower_bound": "high"}]}, r"expected a number"),
    ({"thresholds": [{"metric": "accuracy", "min_gain_over_baselines": -1}]}, r"a number >= 0"),
    ({"thresholds": []}, r"a non-empty list of rules"),
    ({"thresholds": [{"metric": "accuracy", "min_gain_over_baselines": 0, "baselines": ["mean"]}]},
     r"a non-empty list of the baselines of classification: \['majority_class', "
     r"'label_propagation'\]"),
    ({"thresholds": [{"metric": "accuracy", "lower_bound": 0, "baselines": ["majority_class"]}]},
     r"with min_gain_over_baselines"),
    ({"slice_features": ["label"]}, r"features other than the label"),
    ({"batch_size": 0}, r"an int >= 1"),
    ({"epochs": 3}, r"unknown keys \['epochs'\]"),
])
def test_a_bad_config_is_refused_naming_the_key(change, match):
  with pytest.raises(config_lib.EvalConfigError, match=match):
    config_lib.parse(dict(CONFIG, **change))


def test_the_component_refuses_a_bad_config_at_pipeline_definition():
  from tfx import v1 as tfx
  from gnn_trainer_component import GraphEvaluator, GraphSchema
  model = tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model)
  tables = tfx.dsl.Channel(type=GraphSchema)
  with pytest.raises(config_lib.EvalConfigError, match="unknown keys"):
    GraphEvaluator(model=model, graph_schema=tables, eval_config=dict(CONFIG, nope=1),
                   sampling_config={"seed_node_set": "user", "hops": [{"bought": 2}]})
  with pytest.raises(ValueError, match="exactly one of 'sampling_spec' or 'sampling_config'"):
    GraphEvaluator(model=model, graph_schema=tables, eval_config=CONFIG)
  evaluator = GraphEvaluator(model=model, graph_schema=tables, eval_config=CONFIG,
                             sampling_config={"seed_node_set": "user", "hops": [{"bought": 2}]})
  assert set(evaluator.outputs) == {"evaluation", "blessing"}
  assert config_lib.parse(evaluator.exec_properties["eval_config"]) == config_lib.parse(CONFIG)




# ---- link prediction ----

def _brute_auc(labels, scores):
  pos = [s for s, y in zip(scores, labels) if y == 1]
  neg = [s for s, y in zip(scores, labels) if y != 1]
  wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
  return wins / (len(pos) * len(neg))


def _brute_average_precision(labels, scores):
  """scikit-learn's definition: sum over thresholds (distinct scores, high to low) of
  (recall gained) x precision at that threshold."""
  total_pos = sum(1 for y in labels if y == 1)
  ap, last_recall = 0.0, 0.0
  for threshold in sorted(set(scores), reverse=True):
    chosen = [y for s, y in zip(scores, labels) if s >= threshold]
    tp = sum(1 for y in chosen if y == 1)
    recall, precision = tp / total_pos, tp / len(chosen)
    ap += (recall - last_recall) * precision
    last_recall = recall
  return ap


@pytest.mark.parametrize("seed", [0, 1])
def test_auc_and_average_precision_equal_a_brute_force_computation(seed):
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 2, 80)
  scores = np.round(rng.normal(size=80) + labels, 1)  # rounded: ties across classes
  assert metrics.auc(labels, scores) == pytest.approx(_brute_auc(labels, scores))
  assert metrics.average_precision(labels, scores) == pytest.approx(
      _brute_average_precision(labels, scores))


def test_link_metrics_need_both_classes_and_rank_only_edges():
  labels = np.array([1, 1, 0, 0])
  ranks = np.array([1.0, 4.0, np.nan, np.nan])
  got = metrics.link_prediction(labels, np.array([3.0, 1.0, 2.0, 0.0]), ranks, (1, 3))
  assert got == pytest.approx({"auc": 0.75, "average_precision": (1 + 2 / 3) / 2,
                               "mrr": (1 + 0.25) / 2, "hits@1": 0.5, "hits@3": 0.5})
  only_edges = metrics.link_prediction(labels[:2], np.array([3.0, 1.0]), ranks[:2], (1,))
  assert set(only_edges) == {"mrr", "hits@1"}
  assert "mrr" not in metrics.link_prediction(labels, np.zeros(4), None, (1,))


def test_common_neighbours_and_adamic_adar_equal_a_brute_force_computation():
  rng = np.random.default_rng(5)
  n = 15
  edges = rng.integers(0, n, (40, 2))
  neighbours = [set() for _ in range(n)]
  for u, v in edges:
    if u != v:
      neighbours[u].add(v)
      neighbours[v].add(u)
  scores = baselines.NeighbourScores(n, edges[:, 0], edges[:, 1])
  pairs = np.array([(u, v) for u in range(n) for v in range(n)])
  cn = scores.pairs(baselines.COMMON_NEIGHBOURS, pairs)
  aa = scores.pairs(baselines.ADAMIC_ADAR, pairs)
  rows = scores.rows(baselines.ADAMIC_ADAR, np.arange(n))
  for i, (u, v) in enumerate(pairs):
    common = neighbours[u] & neighbours[v]
    assert cn[i] == len(common)
    want = sum(1 / math.log(len(neighbours[w])) for w in common)
    assert aa[i] == pytest.approx(want) and rows[u, v] == pytest.approx(want)


@pytest.mark.parametrize("inclusive", [False, True])
def test_time_split_baselines_read_only_the_edges_before_each_pair(inclusive):
  """As of time t, popularity, common neighbours and Adamic-Adar are the static baselines of
  the graph of the edges before t (at or before it: ``inclusive``), brute force."""
  rng = np.random.default_rng(6)
  n = 12
  edges = rng.integers(0, n, (60, 2))
  times = rng.integers(0, 10, 60).astype(float)
  pairs = np.array([(u, v) for u in range(n) for v in range(n)])
  pair_times = rng.integers(0, 11, len(pairs)).astype(float)
  cn = baselines.TimedNeighbourScores(n, edges[:, 0], edges[:, 1], times, inclusive)
  pop = baselines.TimedPopularity(edges, times, n, False, inclusive).pairs(pairs, pair_times)
  both = baselines.TimedPopularity(edges, times, n, True, inclusive).pairs(pairs, pair_times)
  got = {name: cn.pairs(name, pairs, pair_times)
         for name in (baselines.COMMON_NEIGHBOURS, baselines.ADAMIC_ADAR)}
  for i, ((u, v), t) in enumerate(zip(pairs, pair_times, strict=True)):
    before = (times <= t) if inclusive else (times < t)
    past = edges[before]
    static = baselines.NeighbourScores(n, past[:, 0], past[:, 1]) if len(past) else None
    for name, values in got.items():
      want = static.pairs(name, pairs[i:i + 1])[0] if static else 0.0
      assert values[i] == pytest.approx(want), (name, u, v, t)
    assert pop[i] == np.sum(past[:, 1] == v)
    assert both[i] == np.sum(past[:, 1] == v) + np.sum(past[:, 0] == v)  # undirected


def test_a_link_config_takes_split_and_hits_at_and_refuses_node_keys():
  cfg = config_lib.parse({"task": "link_prediction", "split": "eval", "hits_at": [10],
                          "thresholds": [{"metric": "hits@10", "lower_bound": 0.2},
                                         {"metric": "mrr", "min_gain_over_baselines": 0,
                                          "baselines": ["popularity"]}]})
  assert (cfg.split, cfg.hits_at, cfg.main_metric) == ("eval", (10,), "auc")
  assert cfg.negatives_per_query == 0  # every target
  ogb = config_lib.parse({"task": "link_prediction", "negatives_per_query": 1000})
  assert ogb.negatives_per_query == 1000 and config_lib.parse(config_lib.dumps(ogb)) == ogb
  assert config_lib.parse(config_lib.dumps(cfg)) == cfg
  assert config_lib.parse({"task": "link_prediction"}).thresholds == (
      config_lib.Rule(metric="auc", min_gain_over_baselines=0.0),)
  with pytest.raises(config_lib.EvalConfigError, match=r"\['label'\] = 'label': expected no "
                     r"such key with task 'link_prediction' \(it takes split, hits_at, "
                     r"negatives_per_query, knn_neighbours, edgebank_window\)"):
    config_lib.parse({"task": "link_prediction", "label": "label"})
  with pytest.raises(config_lib.EvalConfigError, match=r"'hits@20': expected a metric of "
                     r"link_prediction: auc, average_precision, mrr, hits@10"):
    config_lib.parse({"task": "link_prediction", "hits_at": [10],
                      "thresholds": [{"metric": "hits@20", "lower_bound": 0.1}]})
  with pytest.raises(config_lib.EvalConfigError, match=r"\['split'\] = 'test': expected no such"):
    config_lib.parse(dict(CONFIG, split="test"))


def test_an_edge_task_takes_split_and_its_node_tasks_metrics_and_edge_baselines():
  cfg = config_lib.parse({"task": "edge_regression", "split": "eval", "thresholds": [
      {"metric": "rmse", "min_gain_over_baselines": 0.0, "baselines": ["bias"]}]})
  assert (cfg.split, cfg.main_metric) == ("eval", "rmse")
  assert config_lib.parse(config_lib.dumps(cfg)) == cfg
  binary = config_lib.parse({"task": "edge_classification",
                             "thresholds": [{"metric": "auc", "lower_bound": 0.7},
                                            {"metric": "recall/1", "lower_bound": 0.5}]})
  assert binary.split == "test" and config_lib.parse(config_lib.dumps(binary)) == binary
  assert config_lib.parse({"task": "edge_classification"}).thresholds == (
      config_lib.Rule(metric="accuracy", min_gain_over_baselines=0.0),)
  with pytest.raises(config_lib.EvalConfigError, match=r"\['hits_at'\] = \[10\]: expected no "
                     r"such key with task 'edge_regression' \(it takes split\)"):
    config_lib.parse({"task": "edge_regression", "hits_at": [10]})
  with pytest.raises(config_lib.EvalConfigError, match=r"\['label'\] = 'stars': expected no "
                     r"such key with task 'edge_classification'"):
    config_lib.parse({"task": "edge_classification", "label": "stars"})
  with pytest.raises(config_lib.EvalConfigError, match=r"baselines of edge_regression: "
                     r"\['mean', 'bias'\]"):
    config_lib.parse({"task": "edge_regression", "thresholds": [
        {"metric": "rmse", "min_gain_over_baselines": 0.0, "baselines": ["popularity"]}]})
  with pytest.raises(config_lib.EvalConfigError, match=r"'mrr': expected a metric of "
                     r"edge_regression: mae, rmse"):
    config_lib.parse({"task": "edge_regression", "thresholds": [
        {"metric": "mrr", "lower_bound": 0.1}]})


def test_a_rule_on_a_metric_the_model_lacks_or_a_baseline_the_graph_lacks_fails_clearly():
  results = {"model": {"all": {"auc": 0.9, "num_nodes": 10}},
             "popularity": {"all": {"auc": 0.6, "mrr": 0.1, "num_nodes": 10}}}
  with pytest.raises(blessing.EvaluationInputError, match=r"the model has no 'mrr' on slice "
                     r"'all' \(it has \['auc'\]\)"):
    blessing.judge([config_lib.Rule(metric="mrr", lower_bound=0.1)], results, ("popularity",))
  with pytest.raises(blessing.EvaluationInputError, match=r"the baseline model has no 'mrr' on "
                     r"slice 'all', so the change cannot be measured"):
    blessing.judge([config_lib.Rule(metric="mrr", max_loss_vs_baseline_model=0.1)],
                   {**results, "model": {"all": {"auc": 0.9, "mrr": 0.2}},
                    "baseline_model": {"all": {"auc": 0.8}}}, ("popularity",))
  with pytest.raises(blessing.EvaluationInputError, match=r"names baselines \['adamic_adar'\], "
                     r"which this graph does not have"):
    blessing.judge([config_lib.Rule(metric="auc", min_gain_over_baselines=0,
                                    baselines=("adamic_adar",))], results, ("popularity",))


def test_the_pair_scorer_is_found_when_it_is_a_weighted_product_of_the_ends():
  from gnn_trainer_component.graph import ranking
  rng = np.random.default_rng(6)
  source, target = rng.normal(size=(50, 4)), rng.normal(size=(50, 4))
  w, b = np.array([0.5, -1.0, 2.0, 0.0]), 0.3
  weights, bias = ranking.product_weights(source, target, (source * target) @ w + b)
  assert weights == pytest.approx(w) and bias == pytest.approx(b)
  assert ranking.product_weights(source, target, np.sum(source * target, axis=1))[1] == (
      pytest.approx(0, abs=1e-9))
  # A score that is no such product (an MLP on the pair, say), or too few pairs to tell.
  assert ranking.product_weights(source, target, np.tanh(source[:, 0] + target[:, 1])) is None
  assert ranking.product_weights(source[:4], target[:4], np.ones(4)) is None


def test_ogb_style_ranks_count_each_querys_own_negatives_and_draw_only_non_edges():
  from gnn_trainer_component.graph import negatives as negatives_lib
  from gnn_trainer_component.graph import ranking
  from gnn_trainer_component.graph.errors import GraphInputError
  scores = np.array([[0.0, 5.0, 1.0, 5.0, 9.0], [3.0, 0.0, 2.0, 1.0, 0.0]])
  queries = np.array([[0, 1], [1, 0]])
  negatives = np.array([[2, 3, 4], [2, 3, 4]])
  ranks = ranking.sampled_ranks(lambda sources: scores[sources], queries, negatives)
  # Query 0: 9 beats 5, 5 ties it (half), 1 does not: 1 + 1 + 0.5. Query 1: first.
  assert ranks.tolist() == [2.5, 1.0]
  known = negatives_lib.EdgeKeys(np.array([0, 0]), np.array([1, 2]), 6, undirected=True)
  drawn = negatives_lib.query_negatives(np.array([[0, 1]] * 3), 3, known, 6, one_node_set=True, seed=3)
  assert drawn.shape == (3, 3) and all(sorted(row) == [3, 4, 5] for row in drawn.tolist())
  wide = negatives_lib.EdgeKeys(np.array([0]), np.array([1]), 1000, undirected=True)
  drawn = negatives_lib.query_negatives(np.array([[0, 1]] * 2), 50, wide, 1000, one_node_set=True, seed=3)
  assert all(len(set(row)) == 50 and not {0, 1} & set(row) for row in drawn.tolist())
  again = negatives_lib.query_negatives(np.array([[0, 1]] * 2), 50, wide, 1000, one_node_set=True, seed=3)
  assert (drawn == again).all()  # seeded: the same negatives every run
  with pytest.raises(GraphInputError, match=r"negatives_per_query 4: source node "
                     r"index 0 has 2 non-edges among the 6 candidate targets"):
    negatives_lib.query_negatives(np.array([[0, 1]]), 4, negatives_lib.EdgeKeys(
        np.array([0, 0, 0]), np.array([1, 2, 3]), 6, undirected=True), 6, one_node_set=True,
        seed=0)
