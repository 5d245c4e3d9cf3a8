"""EmbeddingIndex's pure parts: the config, the table's checks, the search and the gate's numbers.

The served search is held to brute force computed here with numpy (exact, and ivf with every
list probed), recall@k to its definition, and the SavedModel to TensorFlow alone in a fresh
process.
"""

import os

import numpy as np
import pytest

from gnn_trainer_component.index import build
from gnn_trainer_component.index import config as config_lib
from gnn_trainer_component.index import gate
from gnn_trainer_component.index import serving
from gnn_trainer_component.index.build import IndexInputError
from gnn_trainer_component.index.config import IndexConfigError
from gnn_trainer_component.model import embeddings_table


def _vectors(n=600, dim=8, seed=0):
  rng = np.random.default_rng(seed)
  centers = rng.normal(size=(12, dim))
  matrix = (centers[rng.integers(0, 12, n)] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)
  return build.Vectors(ids=np.array([f"n{i}" for i in range(n)], dtype=object), matrix=matrix)


def _write(path, ids, matrix, column="embedding"):
  os.makedirs(path, exist_ok=True)
  writer = embeddings_table.Writer(os.path.join(path, embeddings_table.FILE))
  writer.write(np.asarray(ids, dtype=object), {column: np.asarray(matrix, np.float32)})
  writer.close()
  return str(path)


def test_index_config_is_checked_key_by_key():
  cfg = config_lib.parse(None)
  assert (cfg.metric, cfg.kind, cfg.k, cfg.min_recall) == ("dot_product", "auto", 10, 0.95)
  assert cfg.kind_for(20000) == "exact" and cfg.kind_for(20001) == "ivf"
  assert cfg.nlist_for(1_000_000) == 4000 and cfg.nlist_for(1000) == 25
  assert config_lib.parse(config_lib.dumps(cfg)) == cfg
  for bad, match in (({"metric": "l2"}, r"metric must be one of \['dot_product', 'cosine'\]"),
                     ({"k": 0}, r"k must be an int >= 1, got 0"),
                     ({"min_recall": 1.5}, r"min_recall must be a number in \[0, 1\]"),
                     ({"max_p99_ms": 0}, r"max_p99_ms must be a number > 0"),
                     ({"nprobe": -1}, r"nprobe must be an int >= 0"),
                     ({"column": ""}, r"column must be the name of a column"),
                     ({"kind": "hnsw"}, r"kind must be one of \['auto', 'exact', 'ivf'\]"),
                     ({"nlists": 4}, r"unknown keys \['nlists'\]"),
                     ("[1]", r"must be a JSON object")):
    with pytest.raises(IndexConfigError, match=match):
      config_lib.parse(bad)


def test_the_table_is_read_and_each_bad_input_is_named(tmp_path):
  cfg = config_lib.parse({"metric": "cosine"})
  got = build.read(_write(tmp_path / "ok", ["a", "b"], [[3, 4], [0, 2]]), cfg)
  assert got.ids.tolist() == ["a", "b"]
  np.testing.assert_allclose(got.matrix, [[0.6, 0.8], [0, 1]])  # unit vectors: cosine
  cases = (
      ("nan", ["a", "b"], [[1, 2], [np.nan, 1]], {},
       r"NaN or infinite value at id 'b' \(row 1\); 1 such row"),
      ("twice", ["a", "b", "a"], [[1, 2], [1, 1], [2, 2]], {},
       r"holds id 'a' 2 times; 1 id\(s\) repeat"),
      ("zero", ["a", "b"], [[1, 2], [0, 0]], {"metric": "cosine"},
       r"all zeros at id 'b'; 1 such row\(s\): a zero vector has no cosine"),
      ("column", ["a"], [[1, 2]], {"column": "logits"},
       r"has no column 'logits' \(index_config column\); its columns are \['id', 'embedding'\]"))
  for name, ids, matrix, change, match in cases:
    with pytest.raises(IndexInputError, match=match):
      build.read(_write(tmp_path / name, ids, matrix), config_lib.parse(change))
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(IndexInputError, match="has no embeddings.parquet"):
    build.read(str(empty), cfg)
  pairs = tmp_path / "pairs"
  pairs.mkdir()
  writer = embeddings_table.Writer(str(pairs / embeddings_table.FILE),
                                   id_columns=embeddings_table.PAIR_COLUMNS)
  writer.write((np.array(["a"], object), np.array(["b"], object)), {"x": np.ones((1, 2))})
  writer.close()
  with pytest.raises(IndexInputError, match="a table of pairs has no node to index"):
    build.read(str(pairs), cfg)
  with pytest.raises(IndexInputError, match=r"k is 10, and the index holds 2 vector\(s\)"):
    gate.release(got, cfg)


def _brute(matrix, queries, k):
  scores = queries @ matrix.T
  return np.argsort(-scores, axis=1, kind="stable")[:, :k], -np.sort(-scores, axis=1)[:, :k]


@pytest.mark.parametrize("kind", ["exact", "ivf"])
def test_the_search_equals_brute_force_with_every_list_probed(kind):
  vectors = _vectors()
  cfg = config_lib.parse({"kind": kind, "nlist": 16, "k": 5})
  layout = build.build(vectors, cfg)
  assert layout.nlist == (16 if kind == "ivf" else 0)
  assert sorted(layout.ids.tolist()) == sorted(vectors.ids.tolist())
  if kind == "ivf":  # each vector lies in the list of its best-scoring centroid
    lists = np.repeat(np.arange(16), np.diff(layout.offsets))
    np.testing.assert_array_equal(np.argmax(layout.vectors @ layout.centroids.T, axis=1), lists)
  module = serving.IndexModule(layout, cfg.k, nprobe=16)
  queries = np.random.default_rng(1).normal(size=(20, 8)).astype(np.float32)
  rows, scores = module.top_k(queries, 5)
  want_rows, want_scores = _brute(layout.vectors, queries, 5)
  np.testing.assert_array_equal(rows.numpy(), want_rows)
  np.testing.assert_allclose(scores.numpy(), want_scores, rtol=1e-5)
  answer = module.search(queries[:2])
  assert answer["ids"].numpy().tolist() == [[layout.ids[r].encode() for r in row]
                                            for row in want_rows[:2]]
  # neighbours by id: the node's own vector, the node itself left out
  own = module.neighbours(np.array([layout.ids[3]], dtype=object))["ids"].numpy()[0]
  others, _ = _brute(layout.vectors, layout.vectors[3:4], 6)
  assert own.tolist() == [layout.ids[r].encode() for r in others[0] if r != 3][:5]
  if kind == "ivf":  # fewer lists probed: a subset of those candidates, so recall can drop
    module.nprobe.assign(1)
    assert gate.recall_at_k(module.top_k(queries, 5)[0].numpy(), want_rows) < 1


def test_recall_and_the_verdict_follow_their_definitions():
  found = np.array([[1, 2, 3], [4, 5, -1]])
  exact = np.array([[3, 2, 9], [4, 6, 7]])
  assert gate.recall_at_k(found, exact) == pytest.approx((2 / 3 + 1 / 3) / 2)
  cfg = config_lib.parse({"min_recall": 0.9, "max_p99_ms": 5})
  assert gate.verdict(0.95, 4.0, cfg).blessed
  missed = gate.verdict(0.8, 7.5, cfg)
  assert not missed.blessed and missed.message == (
      "Not blessed: recall@10 0.8 (bound >= 0.9); p99_ms 7.5 (bound <= 5)")


def test_nprobe_is_tuned_to_the_fewest_lists_that_reach_the_recall():
  vectors = _vectors(n=3000, dim=16)
  cfg = config_lib.parse({"kind": "ivf", "nlist": 32, "min_recall": 0.9, "num_queries": 200,
                          "max_p99_ms": 1000})
  done = gate.release(vectors, cfg)
  nprobe = done.metrics["nprobe"]
  assert done.metrics["recall@10"] >= 0.9 and done.verdict.blessed
  assert nprobe in (1, 2, 4, 8, 16, 32) and done.metrics["nlist"] == 32
  if nprobe > 1:  # half the lists would not have reached it
    layout = build.build(vectors, cfg)
    module = serving.IndexModule(layout, 10, nprobe=nprobe // 2)
    queries = layout.vectors[gate.query_rows(len(layout.ids), cfg)]
    exact = build.exact_neighbours(layout.vectors, queries, 10)
    assert gate.recall_at_k(gate.served_rows(module, queries, 10), exact) < 0.9
  assert done.metrics["p50_ms"] <= done.metrics["p99_ms"] and done.metrics["exact_p50_ms"] > 0


def test_auto_gives_way_to_exact_search_where_the_lists_buy_nothing():
  """Vectors without clusters: a quarter of the lists does not reach the recall bound, so the
  tuning stops there and ``auto`` serves exact search (recall 1), saying what it tried."""
  matrix = np.random.default_rng(0).normal(size=(3000, 32)).astype(np.float32)
  vectors = build.Vectors(ids=np.array([f"n{i}" for i in range(3000)], dtype=object),
                          matrix=matrix)
  cfg = config_lib.parse({"exact_up_to": 100, "num_queries": 100, "max_p99_ms": 1000,
                          "min_recall": 0.99})
  done = gate.release(vectors, cfg)
  metrics = done.metrics
  assert (metrics["kind"], metrics["fallback_from"], metrics["recall@10"]) == (
      "exact", "ivf", 1.0), metrics
  assert metrics["nprobe"] / metrics["nlist"] <= 0.25 and metrics["p50_ms"] == metrics[
      "exact_p50_ms"]
  assert done.module.floats_per_query() == 3000 and done.verdict.blessed  # a score per vector
  layout = build.build(vectors, cfg)  # the lists it gave up on: below the bound
  module = serving.IndexModule(layout, 10, nprobe=metrics["nprobe"])
  queries = layout.vectors[gate.query_rows(3000, cfg)]
  assert gate.recall_at_k(gate.served_rows(module, queries, 10),
                          build.exact_neighbours(layout.vectors, queries, 10)) < 0.99


def test_the_saved_index_answers_in_a_fresh_process_with_tensorflow_alone(tmp_path):
  from tests import helpers
  vectors = _vectors(n=300)
  layout = build.build(vectors, config_lib.parse({"kind": "ivf", "nlist": 8}))
  module = serving.IndexModule(layout, 4, nprobe=8)
  serving.save(module, str(tmp_path / "index"))
  queries = vectors.matrix[:3]
  want = [[i.decode() for i in row] for row in module.search(queries)["ids"].numpy()]
  got = helpers.query_index_in_fresh_process(str(tmp_path / "index"), embedding=queries,
                                             ids=["n0"], unknown_ids=["n0", "nope"])
  assert got["ids"] == want and len(got["by_id"][0]) == 4 and "n0" not in got["by_id"][0]
  assert "ids not in the index" in got["error"] and "nope" in got["error"]


def test_the_benchmark_reports_every_measure(capsys):
  from benchmarks import embedding_index
  got = embedding_index.main(["--num-vectors", "2500", "--dim", "8", "--clusters", "20"])
  assert {"build_s", "recall@10", "p50_ms", "p99_ms", "qps_batch", "index_mb", "peak_rss_gb",
          "exact_p50_ms", "speedup_at_p50"} <= set(got)
  assert got["kind"] == "exact" and got["recall@10"] == 1.0  # 2,500 vectors: brute force
  assert capsys.readouterr().out.strip().splitlines()[-1].startswith("{")
