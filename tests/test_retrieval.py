"""Retrieval evaluation (in_memory/retrieval.py) against brute force, and its config rules."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph import ranking
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.in_memory import retrieval
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import examples
from gnn_trainer_component.trainer import inputs as inputs_lib
from tests import test_in_memory


def _brute_force_ranks(scores, queries, edges, undirected):
  """OGB's filtered rank, one query and one candidate at a time."""
  known = set(edges) | ({(v, u) for u, v in edges} if undirected else set())
  ranks = []
  for u, v in queries:
    higher = tied = 0
    for w in range(scores.shape[1]):
      if w in (u, v) or (u, w) in known:
        continue
      higher += scores[u, w] > scores[u, v]
      tied += scores[u, w] == scores[u, v]
    ranks.append(1 + higher + 0.5 * tied)
  return np.array(ranks)


@pytest.mark.parametrize("undirected", [False, True])
def test_filtered_ranks_are_the_brute_force_ranks(undirected, monkeypatch):
  rng = np.random.default_rng(3)
  n = 30
  edges = sorted({(int(u), int(v)) for u, v in rng.integers(n, size=(120, 2)) if u != v})
  scores = rng.integers(0, 6, size=(n, n)).astype(np.float32)  # many ties
  queries = np.array(edges[::3], np.int64)
  known = negatives_lib.EdgeKeys(np.array([e[0] for e in edges]), np.array([e[1] for e in edges]),
                             n, undirected)
  monkeypatch.setattr(ranking, "PAIRS_PER_CALL", 2 * n)  # two queries per call
  got = ranking.filtered_ranks(lambda s: scores[s], queries, known, n)
  want = _brute_force_ranks(scores, [tuple(q) for q in queries], edges, undirected)
  np.testing.assert_array_equal(got, want)
  m = retrieval.metrics(got, hits_at=(1, 5))
  assert m["mrr"] == pytest.approx(np.mean(1 / want))
  assert m["hits@5"] == pytest.approx(np.mean(want <= 5)) and m["queries"] == len(queries)
  with pytest.raises(ValueError, match="no held-out edge"):
    retrieval.metrics(np.array([]))


def test_task_scorer_is_the_tasks_edge_score():
  rng = np.random.default_rng(0)
  nodes = rng.normal(size=(7, 4)).astype(np.float32)
  dot = runner.DotProductLinkPrediction()
  np.testing.assert_allclose(retrieval.task_scorer(dot, nodes)(np.array([2, 5])),
                             nodes[[2, 5]] @ nodes.T, rtol=1e-5)
  hadamard = runner.HadamardProductLinkPrediction()
  hadamard._compute_edge_scores(tf.constant(nodes[:1]), tf.constant(nodes[:1]))  # builds it
  w, b = (v.numpy() for v in hadamard._dense_layer.weights)
  np.testing.assert_allclose(retrieval.task_scorer(hadamard, nodes)(np.array([0, 6, 3])),
                             (nodes[[0, 6, 3]] * w[:, 0]) @ nodes.T + b, rtol=1e-4, atol=1e-5)


class _PairMlp(runner.DotProductLinkPrediction):
  """A link task whose pair score is no weighted product of its ends (an MLP on the pair)."""

  def _compute_edge_scores(self, source, target):
    return tf.tanh(tf.reduce_sum(source, -1, keepdims=True)) * tf.reduce_max(target, -1,
                                                                             keepdims=True)


def test_task_scorer_ranks_by_one_matrix_product_only_where_the_task_is_one():
  """Dot product and Hadamard: found on random pairs, scored as a matrix product (and not
  pair by pair); a task that scores pairs otherwise is scored on every pair, as before."""
  rng = np.random.default_rng(1)
  sources, targets = (rng.normal(size=(30, 8)).astype(np.float32) for _ in range(2))
  hadamard = runner.HadamardProductLinkPrediction()
  hadamard._compute_edge_scores(tf.constant(sources[:1]), tf.constant(targets[:1]))  # builds it
  for task in (runner.DotProductLinkPrediction(), hadamard):
    found = retrieval._as_product(task, sources, targets, seed=0)
    assert found is not None, type(task).__name__
    calls, score = [], task._compute_edge_scores
    task._compute_edge_scores = lambda s, t, score=score, calls=calls: (
        calls.append(len(s)), score(s, t))[1]
    got = retrieval.task_scorer(task, sources, targets)(np.array([4, 0, 29]))
    assert calls == [retrieval.PROBES_PER_WEIGHT * 9]  # the probe only
    weights, bias = found
    np.testing.assert_allclose(got, (sources[[4, 0, 29]] * weights) @ targets.T + bias,
                               rtol=1e-6)
  mlp = _PairMlp()
  assert retrieval._as_product(mlp, sources, targets, seed=0) is None
  assert retrieval._as_product(runner.DotProductLinkPrediction(), sources[:0], targets,
                               seed=0) is None  # no source: nothing to probe
  want = np.tanh(sources[[4, 0]].sum(1, keepdims=True)) * targets.max(1)
  np.testing.assert_allclose(retrieval.task_scorer(mlp, sources, targets)(np.array([4, 0])),
                             want, rtol=1e-5)
  # Products that cannot tell every weight apart (a source with a zero): none is assumed.
  sources[:, 3] = 0
  assert retrieval._as_product(runner.DotProductLinkPrediction(), sources, targets,
                               seed=0) is None


@pytest.fixture(scope="module")
def link_splits(tmp_path_factory):
  d = tmp_path_factory.mktemp("retrieval")
  test_in_memory._symmetric_graph(d)
  link = {"edge_set": "e", "splits": {"train": 0.7, "eval": 0.15, "test": 0.15},
          "negatives_per_positive": {"train": 1, "eval": 1, "test": 1},
          "hops": [{"e": 3}], "undirected": True, "seed": 5}
  return adapters.load(str(d), link_config=link, splits=["train", "eval"])


def test_evaluate_ranks_by_each_nodes_own_embedding(link_splits):
  """The embedding of node i is read from the subgraph sampled around i."""
  spec = tfgnn.create_graph_spec_from_schema_pb(tfgnn.parse_schema(test_in_memory.SCHEMA))

  def embed(serialized):  # the seed's features: x and a function of its id
    nodes = tfgnn.parse_example(spec, serialized).node_sets["v"]

    def first(feature):  # the seed is the first node of each subgraph
      return tf.cast(tf.gather(feature.values, feature.row_starts()), tf.float32)
    seed = tf.stack([first(nodes["x"]), tf.sin(first(nodes["ident"]))], axis=1)
    return {"source_embedding": seed, "target_embedding": seed}

  got = retrieval.evaluate(link_splits, ["test"], embed,
                           {"links": runner.DotProductLinkPrediction()}, single_task=True)
  nodes = link_splits.message_graph.node_sets["v"]
  idents = np.asarray(nodes.features["ident"]).reshape(-1).astype(np.float32)
  vectors = np.stack([np.asarray(nodes.features["x"]).reshape(-1), np.sin(idents)], axis=1)
  keys = link_splits.edge_keys.keys
  edges = list(zip(*np.divmod(keys, nodes.size)))
  want = _brute_force_ranks(vectors @ vectors.T, link_splits.positives["test"].tolist(),
                            edges, undirected=True)
  assert got["retrieval_mrr"] == pytest.approx(np.mean(1 / want))
  assert got["retrieval_hits@20"] == pytest.approx(np.mean(want <= 20))
  assert got["retrieval_queries"] == len(link_splits.positives["test"])
  # Several splits: each ranked on its own, its name in the metrics' names.
  both = retrieval.evaluate(link_splits, ["eval", "test"], embed,
                            {"links": runner.DotProductLinkPrediction()}, single_task=True)
  alone = {split: retrieval.evaluate(link_splits, [split], embed,
                                     {"links": runner.DotProductLinkPrediction()},
                                     single_task=True) for split in ("eval", "test")}
  assert alone["test"] == got
  assert both == {key.replace("retrieval_", f"retrieval_{split}_").replace(
      f"retrieval_{split}_popularity_", f"retrieval_popularity_{split}_"): value
                  for split, metrics in alone.items() for key, value in metrics.items()}


def test_retrieval_splits_config(link_splits, monkeypatch, tmp_path):
  """custom_config retrieval_splits: the default policy, explicit splits, and each refusal."""
  tasks = {"links": runner.DotProductLinkPrediction()}

  def resolve(custom_config, tasks=tasks):
    cfg = config_lib.make_trainer_config(None, None, custom_config)
    return adapters.ranking_splits(link_splits, inputs_lib.graph_options(cfg), tasks)

  assert resolve({}) == ("eval",)
  queries = len(link_splits.positives["eval"])
  assert adapters.num_scores(link_splits, ["eval"]) == queries * test_in_memory.NUM_NODES
  monkeypatch.setattr(retrieval, "DEFAULT_MAX_SCORES", queries * test_in_memory.NUM_NODES - 1)
  assert resolve({}) == () and resolve({"retrieval_splits": ["eval"]}) == ("eval",)
  monkeypatch.undo()
  assert resolve({"retrieval_splits": ["test", "eval"]}) == ("test", "eval")
  assert resolve({"retrieval_splits": []}) == ()
  assert resolve({"export_embeddings": False}) == ()
  with pytest.raises(GraphInputError, match=r"\['train'\] is not a held-out split.*"
                                            r"\['eval', 'test'\]"):
    resolve({"retrieval_splits": ["train"]})
  with pytest.raises(GraphInputError, match="link-prediction task"):
    resolve({"retrieval_splits": ["test"]}, tasks={"nodes": runner.RootNodeBinaryClassification(
        "v", label_fn=lambda g: (g, None))})
  with pytest.raises(config_lib.ConfigError, match="export_embeddings"):
    resolve({"retrieval_splits": ["test"], "export_embeddings": False})
  with pytest.raises(config_lib.ConfigError, match="list of split names"):
    resolve({"retrieval_splits": "test"})
  # Without link_config: around seeds, or on examples.
  cfg = config_lib.make_trainer_config(None, None, {"retrieval_splits": ["test"]})
  test_in_memory._write(tmp_path)
  seeds_graph = test_in_memory._load(tmp_path)
  with pytest.raises(GraphInputError, match="needs 'link_config'"):
    adapters.for_training(seeds_graph, inputs_lib.graph_options(cfg), tasks)
  for key, value in (("retrieval_splits", ["test"]), ("graph_mode", "full_graph")):
    with pytest.raises(config_lib.ConfigError, match=f"{key}=.*applies to a graph held in "
                                                     "memory.*'link_config'.*reads 'examples'"):
      examples.locate([], config_lib.make_trainer_config(None, None, {key: value}),
                      graph_schema_uri="unused: refused before it is read")
