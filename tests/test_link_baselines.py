"""GraphEvaluator's interaction baselines and the blessing beyond noise.

item-kNN and user-kNN (between two node sets), EdgeBank, its window and recency (a split by
time) against brute-force computations; the neighbours chosen on the validation split; the
paired bootstrap interval's coverage; a model that wins by noise is not blessed under a rule
with ``gain_confidence``, one that wins by a margin is.
"""

import numpy as np
import pytest

from gnn_trainer_component.evaluator import baselines
from gnn_trainer_component.evaluator import blessing
from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.evaluator import evaluation
from gnn_trainer_component.evaluator import interactions
from gnn_trainer_component.evaluator import metrics
from gnn_trainer_component.evaluator import pairs as pairs_lib
from gnn_trainer_component.evaluator.in_memory import Predictions
from tests import test_recommendation as recommendation


def _cosine(rows):
  norms = np.linalg.norm(rows, axis=1)
  outer = np.outer(norms, norms)
  sim = np.divide(rows @ rows.T, outer, out=np.zeros_like(outer), where=outer > 0)
  np.fill_diagonal(sim, 0.0)
  return sim


def _kept(sim, k):
  """Each row's k most similar other rows (positive; ties: the lower index), brute force."""
  out = np.zeros_like(sim)
  for i in range(len(sim)):
    best = sorted((j for j in range(len(sim)) if sim[i, j] > 0), key=lambda j: (-sim[i, j], j))
    out[i, best[:k]] = sim[i, best[:k]]
  return out


@pytest.mark.parametrize("k", [1, 3, 200])
def test_item_and_user_knn_equal_a_brute_force_computation(k):
  rng = np.random.default_rng(k)
  users, items = 40, 15
  matrix = (rng.random((users, items)) < 0.2).astype(float)
  sources, targets = np.nonzero(matrix)
  knn = interactions.KnnScores(users, items, np.r_[sources, sources[:5]],
                               np.r_[targets, targets[:5]])  # a repeat counts once
  knn.use(interactions.ITEM_KNN, k)
  knn.use(interactions.USER_KNN, k)
  want = {interactions.ITEM_KNN: matrix @ _kept(_cosine(matrix.T), k).T,
          interactions.USER_KNN: _kept(_cosine(matrix), k) @ matrix}
  pairs = np.stack([rng.integers(users, size=100), rng.integers(items, size=100)], axis=1)
  for name, scores in want.items():
    np.testing.assert_allclose(knn.rows(name, np.arange(users)), scores, atol=1e-12)
    np.testing.assert_allclose(knn.pairs(name, pairs), scores[pairs[:, 0], pairs[:, 1]],
                               atol=1e-12)
  with pytest.raises(ValueError, match="201 neighbours asked, at most 200"):
    knn.use(interactions.ITEM_KNN, 201)


@pytest.mark.parametrize("k", [1, 2, 5, 40])
def test_a_sparse_matrixs_top_k_is_what_its_dense_rows_keep(k):
  """What ``use`` keeps of the precomputed neighbours (sorted within rows) equals the dense
  block selection's: the k largest positive entries of each row, ties to the lower column."""
  import scipy.sparse
  rng = np.random.default_rng(k)
  dense = rng.integers(-1, 4, size=(30, 40)).astype(float) * (rng.random((30, 40)) < 0.5)
  want = interactions._blockwise_top_k(dense.shape, lambda start, stop: dense[start:stop], k)
  got = interactions._RankedRows(scipy.sparse.csr_matrix(dense)).top(k)
  assert got.shape == want.shape and (got != want).nnz == 0 and want.nnz > 0


@pytest.mark.parametrize("inclusive, undirected", [(False, False), (True, False), (False, True)])
def test_edgebank_its_window_and_recency_read_only_the_edges_before_each_pair(
    inclusive, undirected):
  rng = np.random.default_rng(7)
  n, window = 6, 3.0
  edges = rng.integers(0, n, (50, 2))
  times = rng.integers(0, 10, 50).astype(float)
  pairs = np.array([(u, v) for u in range(n) for v in range(n)] * 3)
  pair_times = rng.integers(0, 12, len(pairs)).astype(float)
  history = interactions.EdgeHistory(edges, times, n, undirected=undirected, window=window,
                                     inclusive=inclusive)
  got = {name: history.pairs(name, pairs, pair_times) for name in (
      interactions.EDGEBANK, interactions.EDGEBANK_WINDOW, interactions.RECENCY)}
  for i, ((u, v), t) in enumerate(zip(pairs, pair_times, strict=True)):
    same = ((edges[:, 0] == u) & (edges[:, 1] == v)) | (
        undirected & (edges[:, 0] == v) & (edges[:, 1] == u))
    before = same & ((times <= t) if inclusive else (times < t))
    assert got[interactions.EDGEBANK][i] == float(before.any())
    assert got[interactions.EDGEBANK_WINDOW][i] == float((before & (times >= t - window)).any())
    assert got[interactions.RECENCY][i] == (times[before].max() if before.any() else -np.inf)
  assert interactions.window_of(np.array([4.0, 9.0, 6.0])) == 5.0


def test_knn_neighbours_are_chosen_by_the_validation_splits_mrr(tmp_path):
  """Users -> items: each kNN baseline keeps the neighbour count whose MRR on the other held-out
  split (its queries ranked as the evaluated split's) is best; its ranks of the evaluated split
  are those of a KnnScores with that count; a set count is used as it is."""
  from gnn_trainer_component.in_memory import adapters
  recommendation.write_graph(str(tmp_path))
  splits = adapters.load(str(tmp_path), link_config=recommendation.CONFIG, splits=[])
  cfg = config_lib.parse({"task": "link_prediction", "split": "test"})
  task = pairs_lib._ranking(splits, cfg)  # pylint: disable=protected-access
  validation = pairs_lib._ranking(splits, config_lib.parse(  # pylint: disable=protected-access
      {"task": "link_prediction", "split": "eval"}))
  scored = np.concatenate([task.queries, splits.negatives["test"]])
  scores, ranks, settings = baselines.link_baselines(splits, scored, None, task, cfg,
                                                     lambda: ("eval", validation))
  assert {"popularity", "item_knn", "user_knn"} <= set(ranks) and "adamic_adar" not in ranks
  graph = splits.message_graph
  edges = graph.edge_sets["rated"]
  knn = interactions.KnnScores(recommendation.NUM_USERS, recommendation.NUM_ITEMS,
                               edges.source, edges.target)
  for name in (interactions.ITEM_KNN, interactions.USER_KNN):
    mrr = {}
    for k in interactions.NEIGHBOUR_CHOICES:
      knn.use(name, k)
      mrr[k] = np.mean(1 / validation.ranks(lambda rows, n=name: knn.rows(n, rows)))
    best = max(mrr, key=lambda k: (mrr[k], -k))
    assert settings[name]["neighbours"] == best and settings[name]["chosen_on"] == "eval"
    knn.use(name, best)
    np.testing.assert_array_equal(ranks[name], task.ranks(lambda rows, n=name: knn.rows(n, rows)))
    np.testing.assert_allclose(scores[name], knn.pairs(name, scored))
  fixed = config_lib.parse({"task": "link_prediction", "knn_neighbours": 3})
  _, _, settings = baselines.link_baselines(splits, scored, None, task, fixed)
  assert settings["item_knn"] == {"neighbours": 3, "chosen_on": "eval_config"}


def test_the_bootstrap_interval_covers_the_true_gain_about_as_often_as_it_says():
  rng = np.random.default_rng(0)
  trials, covered = 300, 0
  for trial in range(trials):
    model = rng.binomial(1, 0.35, size=150).astype(float)
    baseline = np.where(rng.random(150) < 0.7, model, rng.binomial(1, 0.30, size=150))
    got = metrics.paired_interval(model, baseline, 0.9, seed=trial, resamples=400)
    covered += got["low"] <= 0.35 * 0.3 - 0.30 * 0.3 <= got["high"]
    assert got["gain"] == pytest.approx(np.mean(model - baseline))
  assert 0.84 <= covered / trials <= 0.96, covered / trials


def _ranked(model_ranks, baseline_ranks):
  n = len(model_ranks)
  return Predictions(
      node_set="rated", ids=np.arange(n), labels=np.ones(n, np.int64), degrees=np.ones(n),
      slice_features={}, by_predictor={"model": -model_ranks, "popularity": -baseline_ranks},
      num_classes=0, seconds=0.0, ranks={"model": model_ranks, "popularity": baseline_ranks})


def test_a_model_winning_by_noise_is_not_blessed_under_the_interval_rule():
  """The baseline's ranks shuffled across queries, one improved: the model beats it on MRR by
  a hair and by chance. The plain rule blesses that, the rule with gain_confidence does not; a
  real margin passes both."""
  rng = np.random.default_rng(3)
  baseline = rng.integers(1, 50, 400).astype(float)
  noisy = rng.permutation(baseline)
  noisy[np.argmax(noisy == 2)] = 1.0
  better = np.maximum(1.0, np.floor(baseline / 2))
  plain = {"task": "link_prediction", "thresholds": [
      {"metric": "mrr", "min_gain_over_baselines": 0.0}]}
  strict = {"task": "link_prediction", "thresholds": [
      {"metric": "mrr", "min_gain_over_baselines": 0.0, "gain_confidence": 0.95}]}
  noise = _ranked(noisy, baseline)
  gain = evaluation.evaluate(noise, config_lib.parse(plain))
  assert gain.metrics["model"]["all"]["mrr"] > gain.metrics["popularity"]["all"]["mrr"]
  assert gain.verdict.blessed
  judged = evaluation.evaluate(noise, config_lib.parse(strict))
  assert not judged.verdict.blessed
  check = judged.verdict.checks[0]
  assert check["against"] == "popularity" and check["gain_low"] < 0 < check["gain"]
  assert "the gain over popularity is" in judged.verdict.message
  assert "0.95 interval" in judged.verdict.message
  assert judged.gains["popularity"]["mrr"]["low"] < 0 < judged.gains["popularity"]["mrr"]["high"]
  assert judged.properties()["mrr_gain_low_vs_popularity"] < 0
  assert evaluation.evaluate(_ranked(better, baseline), config_lib.parse(strict)).verdict.blessed


@pytest.mark.parametrize("rule, match", [
    ({"metric": "mrr", "lower_bound": 0.1, "gain_confidence": 0.95}, "with min_gain_over"),
    ({"metric": "auc", "min_gain_over_baselines": 0, "gain_confidence": 0.95}, "on mrr or hits"),
    ({"metric": "mrr", "min_gain_over_baselines": 0, "gain_confidence": 1}, r"in \(0, 1\)"),
])
def test_a_bad_gain_confidence_is_refused_naming_the_rule(rule, match):
  with pytest.raises(config_lib.EvalConfigError, match=r"\['thresholds'\]\[0\]\['gain_confidence"
                     r"'\].*" + match):
    config_lib.parse({"task": "link_prediction", "thresholds": [rule]})


def test_the_new_link_keys_round_trip_and_are_checked():
  cfg = config_lib.parse({"task": "link_prediction", "knn_neighbours": 20,
                          "edgebank_window": 3600, "thresholds": [
                              {"metric": "hits@20", "min_gain_over_baselines": 0.01,
                               "gain_confidence": 0.9, "baselines": ["item_knn"]}]})
  assert (cfg.knn_neighbours, cfg.edgebank_window) == (20, 3600.0)
  assert config_lib.parse(config_lib.dumps(cfg)) == cfg
  assert "at 0.9 confidence" in cfg.thresholds[0].describe()
  for key, value in (("knn_neighbours", 0), ("edgebank_window", -1)):
    with pytest.raises(config_lib.EvalConfigError, match=rf"\['{key}'\]"):
      config_lib.parse({"task": "link_prediction", key: value})
  with pytest.raises(config_lib.EvalConfigError, match=r"\['knn_neighbours'\] = 5: expected no "
                     "such key with task 'classification'"):
    config_lib.parse({"task": "classification", "label": "y", "test_seeds": "a",
                      "train_seeds": "b", "knn_neighbours": 5})
  assert blessing.MODEL == "model"


def test_scores_of_minus_infinity_tie_in_average_precision():
  """recency scores a never-seen pair -inf: those pairs are one tied group, in any order."""
  labels = np.array([1, 0, 1, 0, 0, 1])
  scores = np.array([5.0, -np.inf, -np.inf, -np.inf, 2.0, -np.inf])
  finite = np.where(np.isinf(scores), -1e9, scores)
  assert metrics.average_precision(labels, scores) == pytest.approx(
      metrics.average_precision(labels, finite))
  assert metrics.average_precision(labels, scores) == pytest.approx(
      metrics.average_precision(labels[::-1], scores[::-1]))


def test_a_ranking_sample_keeps_each_querys_own_negatives_and_time():
  from gnn_trainer_component.graph import ranking
  queries = np.arange(20).reshape(10, 2)
  full = ranking.Ranking(queries=queries, known=None, num_candidates=30, num_sources=30,
                         one_node_set=True, negatives=queries * 100, times=np.arange(10.0))
  part = full.sample(4, seed=1)
  assert len(part.queries) == 4 and part.sample(4, seed=2) is part and full.sample(10, 0) is full
  rows = part.queries[:, 0] // 2
  np.testing.assert_array_equal(part.negatives, full.negatives[rows])
  np.testing.assert_array_equal(part.times, full.times[rows])


def test_the_bias_baseline_is_the_ridge_least_squares_solution():
  rng = np.random.default_rng(5)
  pairs = np.stack([rng.integers(7, size=60), rng.integers(5, size=60)], axis=1)
  values = rng.integers(1, 6, size=60).astype(np.float64)
  predict = baselines.bias_model(pairs, values, 9, 5)  # sources 7 and 8 have no edge
  # Brute force: the ridge normal equations of [b_source; b_target], the mean held fixed.
  design = np.zeros((60, 14))
  design[np.arange(60), pairs[:, 0]] = 1
  design[np.arange(60), 9 + pairs[:, 1]] = 1
  mean = values.mean()
  b = np.linalg.solve(design.T @ design + baselines.BIAS_L2 * np.eye(14),
                      design.T @ (values - mean))
  every = np.array([(u, i) for u in range(9) for i in range(5)])
  np.testing.assert_allclose(predict(every), mean + b[every[:, 0]] + b[9 + every[:, 1]],
                             atol=1e-5)
  assert b[7] == b[8] == 0.0


def test_edge_baselines_fit_the_message_split_and_classify_with_per_class_biases():
  train = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [2, 1]])
  stars = np.array([5.0, 4.0, 2.0, 1.0, 3.0])
  got = baselines.edge_baselines("edge_regression", train, stars, np.array([[0, 1], [1, 1]]),
                                 3, 2, 0)
  assert set(got) == {"mean", "bias"} and got["mean"].tolist() == [3.0, 3.0]
  assert got["bias"][0] > 3.0 > got["bias"][1]  # user 0 rates high, user 1 low
  liked = (stars >= 4).astype(np.int64)
  got = baselines.edge_baselines("edge_classification", train, liked,
                                 np.array([[0, 1], [1, 0]]), 3, 2, 2)
  np.testing.assert_allclose(got["majority_class"], [[0.6, 0.4], [0.6, 0.4]])
  np.testing.assert_allclose(got["bias"].sum(axis=1), 1.0)
  assert got["bias"][0, 1] > 0.5 > got["bias"][1, 1]
  labels = np.array([1, 0])
  assert metrics.compute("edge_classification", labels, got["bias"])["auc"] == 1.0
  assert "auc" not in metrics.compute("classification", labels, got["bias"])
