"""EmbeddingIndex releases: churn against the last blessed index, Vertex AI folder, executor.

Churn is held to a brute-force numpy computation (each node's top-k by inner product, itself
left out; Jaccard of the two sets); the gate blesses a release whose neighbourhoods moved
within the bounds and refuses one that moved beyond them; the Vector Search folder is read
back line by line; the executor runs on real TFX artifacts, a first release and then a
second one against the first's SavedModel.
"""

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from gnn_trainer_component import artifacts
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.index import build
from gnn_trainer_component.index import churn
from gnn_trainer_component.index import config as config_lib
from gnn_trainer_component.index import executor as executor_lib
from gnn_trainer_component.index import gate
from gnn_trainer_component.index import serving
from gnn_trainer_component.index import vertex
from gnn_trainer_component.index.build import IndexInputError
from gnn_trainer_component.index.config import IndexConfigError
from gnn_trainer_component.model import embeddings_table


def _vectors(n=400, dim=8, seed=0, prefix="n"):
  rng = np.random.default_rng(seed)
  centers = rng.normal(size=(10, dim))
  matrix = (centers[rng.integers(0, 10, n)] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)
  return build.Vectors(ids=np.array([f"{prefix}{i}" for i in range(n)], dtype=object),
                       matrix=matrix)


def _saved(vectors, path, cfg=None):
  cfg = cfg or config_lib.IndexConfig()
  serving.save(serving.IndexModule(build.build(vectors, cfg), cfg.k), str(path))
  return churn.read_release(str(path), str(path))


def _brute_sets(ids, matrix, rows, k):
  scores = matrix[rows] @ matrix.T
  scores[np.arange(len(rows)), rows] = -np.inf  # the node itself left out
  return [set(ids[np.argsort(-s, kind="stable")[:k]].tolist()) for s in scores]


def test_churn_equals_brute_force_jaccard(tmp_path):
  before = _vectors(n=300)
  rng = np.random.default_rng(1)
  kept = np.sort(rng.choice(300, 250, replace=False))  # 50 removed, 30 added
  after = build.Vectors(
      ids=np.concatenate([before.ids[kept], [f"new{i}" for i in range(30)]]).astype(object),
      matrix=np.concatenate([before.matrix[kept] + 0.4 * rng.normal(size=(250, 8)),
                             rng.normal(size=(30, 8))]).astype(np.float32))
  last = _saved(before, tmp_path / "last")
  assert sorted(last.ids.tolist()) == sorted(i.encode() for i in before.ids)
  rows = np.arange(0, 280, 3)
  got = churn.churn(last, after.ids, after.matrix, rows, 5)
  old_row = {i: r for r, i in enumerate(before.ids)}
  compared = [r for r in rows if after.ids[r] in old_row]
  want_old = _brute_sets(before.ids, before.matrix, np.array([old_row[after.ids[r]]
                                                              for r in compared]), 5)
  want_new = _brute_sets(after.ids, after.matrix, np.array(compared), 5)
  want = [len(a & b) / len(a | b) for a, b in zip(want_old, want_new, strict=True)]
  np.testing.assert_allclose(got.jaccard, want)
  assert got.mean_jaccard == pytest.approx(np.mean(want))
  assert got.changed_share == pytest.approx(np.mean(np.array(want) == 0))
  assert sorted(got.removed.tolist()) == sorted(
      i.encode() for i in set(before.ids.tolist()) - set(after.ids.tolist()))
  assert got.added == 30 and 0 < got.mean_jaccard < 1
  assert churn.jaccard(frozenset("ab"), frozenset("bc")) == pytest.approx(1 / 3)


def test_the_gate_blesses_a_small_shift_and_not_a_retrained_space(tmp_path):
  """A release whose vectors moved a little keeps its neighbourhoods (blessed).

  One from a model that learnt another space loses them (not blessed, each churn bound named).
  """
  before = _vectors(n=400)
  last = _saved(before, tmp_path / "last")
  cfg = config_lib.parse({"num_queries": 200, "max_p99_ms": 1000, "min_jaccard": 0.5,
                          "max_changed_share": 0.1})
  noise = np.random.default_rng(2).normal(size=before.matrix.shape).astype(np.float32)
  near = build.Vectors(before.ids, before.matrix + 0.05 * noise)
  done = gate.release(near, cfg, last)
  assert done.verdict.blessed, done.verdict.message
  assert done.metrics["jaccard@10"] > 0.5 and done.metrics["churn_nodes"] == 200
  far = build.Vectors(before.ids, np.random.default_rng(3).permutation(before.matrix))
  moved = gate.release(far, cfg, last)
  assert not moved.verdict.blessed
  assert "jaccard@10" in moved.verdict.message and "changed_share" in moved.verdict.message
  assert [c["name"] for c in moved.verdict.checks] == [
      "recall@10", "p99_ms", "jaccard@10", "changed_share"]
  first = gate.release(before, cfg)  # no last release: recall and latency only
  assert first.churn is None and len(first.verdict.checks) == 2


def test_a_baseline_that_is_no_index_or_of_another_dimension_is_refused(tmp_path):
  last = _saved(_vectors(dim=8), tmp_path / "last")
  with pytest.raises(IndexInputError, match=r"have 4 values per vector and the last blessed "
                                            r"index \(.*last\) has 8"):
    churn.check_dimension(last, 4, "emb/uri")

  class Model(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def __call__(self, x):
      return x
  tf.saved_model.save(Model(), str(tmp_path / "model"))
  with pytest.raises(IndexInputError, match=r"is not an index EmbeddingIndex wrote.*"
                                            r"producer_component_id"):
    churn.read_release(str(tmp_path / "model"), "model/uri")


def _schema(tmp_path):
  data = tmp_path / "graph"
  data.mkdir()
  (data / "graph_schema.pbtxt").write_text('''
node_sets { key: "item" value {
  features { key: "genre" value { dtype: DT_STRING } }
  features { key: "year" value { dtype: DT_INT64 } }
  features { key: "price" value { dtype: DT_FLOAT } }
  features { key: "pair" value { dtype: DT_FLOAT shape { dim { size: 2 } } } }
  metadata { filename: "items.parquet" } } }''')
  pq.write_table(pa.table({"id": [f"n{i}" for i in range(10)],
                           "genre": ["ab"[i % 2] for i in range(10)],
                           "year": [1990 + i for i in range(10)],
                           "price": [i / 4 for i in range(10)],
                           "pair": [[i, i] for i in range(10)]}), data / "items.parquet")
  return str(data)


def _lines(folder):
  files = sorted(f for f in os.listdir(folder) if f.endswith(".json"))
  return files, [json.loads(line) for f in files
                 for line in open(os.path.join(folder, f), encoding="utf-8")]


def test_the_vertex_folder_is_read_back_line_by_line(tmp_path):
  vectors = _vectors(n=10, dim=3)
  vectors.matrix[0, 0] = 1e-7  # small values keep their float32
  restricts = vertex.restrict_columns(_schema(tmp_path), "item", vectors.ids,
                                      ("genre", "year", "price"))
  got = vertex.write(str(tmp_path / "out"), vectors.ids, vectors.matrix,
                     removed=np.array([b"gone1", b"gone2"], dtype=object), rows_per_file=3,
                     restricts=restricts)
  assert got == {"num_vectors": 10, "num_files": 4, "num_deleted": 2}
  files, lines = _lines(tmp_path / "out")
  assert files == [f"embeddings-{i:05d}-of-00004.json" for i in range(4)]
  assert sorted(os.listdir(tmp_path / "out")) == sorted(files + ["delete"])  # no other folder
  assert [line["id"] for line in lines] == [f"n{i}" for i in range(10)]  # each id once
  for i, line in enumerate(lines):
    assert set(line) == {"id", "embedding", "restricts", "numeric_restricts"}
    assert np.array_equal(np.array(line["embedding"], np.float32), vectors.matrix[i])
    assert line["restricts"] == [{"namespace": "genre", "allow": ["ab"[i % 2]]}]
    assert line["numeric_restricts"] == [{"namespace": "year", "value_int": 1990 + i},
                                         {"namespace": "price", "value_float": i / 4}]
  assert (tmp_path / "out" / "delete" / "removed.txt").read_text() == "gone1\ngone2\n"
  vertex.write(str(tmp_path / "plain"), vectors.ids, vectors.matrix, removed=np.array([]),
               rows_per_file=100)
  files, lines = _lines(tmp_path / "plain")
  assert len(files) == 1 and set(lines[0]) == {"id", "embedding"}
  assert not os.path.exists(tmp_path / "plain" / "delete")
  assert vertex.file_count(10_000_000, 100) == 5000 and vertex.file_count(1, 100) == 1


def test_the_vertex_folder_refuses_what_vector_search_cannot_read(tmp_path):
  matrix = np.ones((2, 2), np.float32)
  for bad in (b"\xff\xfe", "two\nlines"):
    with pytest.raises(IndexInputError, match=r"is not one line of UTF-8 text"):
      vertex.write(str(tmp_path / "bad"), np.array(["ok", bad], dtype=object), matrix,
                   removed=np.array([]), rows_per_file=10)
    assert not os.path.exists(tmp_path / "bad")  # nothing written
  schema = _schema(tmp_path)
  ids = np.array(["n1", "n2"], dtype=object)
  for names, error, match in (
      (("colour",), IndexInputError, r"restricts names 'colour'.*features are \['genre'"),
      (("pair",), IndexInputError, r"restricts feature 'pair'.*has \(2,\) numbers"),):
    with pytest.raises(error, match=match):
      vertex.restrict_columns(schema, "item", ids, names)
  with pytest.raises(IndexInputError, match=r"node set 'user' is not one of"):
    vertex.restrict_columns(schema, "user", ids, ("genre",))
  with pytest.raises(GraphInputError, match=r"ids missing from the 'item' node table.*n99"):
    vertex.restrict_columns(schema, "item", np.array(["n1", "n99"], dtype=object), ("genre",))
  for bad, match in (({"restricts": "genre"}, r"restricts must be a list of distinct"),
                     ({"restricts": ["a", "a"]}, r"restricts must be a list of distinct"),
                     ({"restricts": ["a"], "vertex_ai": False}, r"vertex_ai is false"),
                     ({"min_jaccard": 2}, r"min_jaccard must be a number in \[0, 1\]"),
                     ({"vertex_ai": "yes"}, r"vertex_ai must be true or false"),
                     ({"rows_per_file": 0}, r"rows_per_file must be an int >= 1")):
    with pytest.raises(IndexConfigError, match=match):
      config_lib.parse(bad)


def _artifacts(tmp_path, name, vectors, model_id):
  embeddings = artifacts.Embeddings()
  embeddings.uri = str(tmp_path / name / "embeddings")
  os.makedirs(embeddings.uri)
  writer = embeddings_table.Writer(os.path.join(embeddings.uri, embeddings_table.FILE))
  writer.write(vectors.ids, {"embedding": vectors.matrix})
  writer.close()
  embeddings.set_string_custom_property("node_set", "item")
  embeddings.set_string_custom_property("model_uri", f"models/{model_id}")
  embeddings.set_int_custom_property("model_id", model_id)
  out = {}
  for key, kind in ((spec_lib.INDEX_KEY, standard_artifacts.Model),
                    (spec_lib.EVALUATION_KEY, standard_artifacts.ModelEvaluation),
                    (spec_lib.BLESSING_KEY, standard_artifacts.ModelBlessing),
                    (spec_lib.VERTEX_AI_KEY, artifacts.VectorSearchBatch)):
    out[key] = kind()
    out[key].uri = str(tmp_path / name / key)
    os.makedirs(out[key].uri)
  return embeddings, out


def _run(tmp_path, name, vectors, model_id, baseline=None, config=None):
  embeddings, out = _artifacts(tmp_path, name, vectors, model_id)
  inputs = {spec_lib.EMBEDDINGS_KEY: [embeddings]}
  if baseline is not None:
    inputs[spec_lib.BASELINE_INDEX_KEY] = [baseline]
  config = {"max_p99_ms": 1000, "num_queries": 100, **(config or {})}
  executor_lib.Executor().Do(inputs, {k: [v] for k, v in out.items()},
                             {spec_lib.INDEX_CONFIG_KEY: json.dumps(config)})
  return out


def test_the_executor_publishes_a_release_then_one_against_it(tmp_path):
  first = _vectors(n=300)
  out = _run(tmp_path, "one", first, 7)
  index = out[spec_lib.INDEX_KEY]
  assert index.get_int_custom_property("model_id") == 7
  assert index.get_string_custom_property("node_set") == "item"
  assert out[spec_lib.BLESSING_KEY].get_int_custom_property("blessed") == 1
  assert not os.path.exists(os.path.join(out[spec_lib.VERTEX_AI_KEY].uri, "delete"))
  second = build.Vectors(first.ids[50:], first.matrix[50:] * 1.01)
  out2 = _run(tmp_path, "two", second, 8, baseline=index)
  evaluation = json.load(open(os.path.join(out2[spec_lib.EVALUATION_KEY].uri,
                                           "evaluation.json")))
  assert evaluation["lineage"] == {"node_set": "item", "model_id": 8, "model_uri": "models/8",
                                   "baseline_index_uri": index.uri, "baseline_model_id": 7}
  assert evaluation["metrics"]["removed"] == 50 and evaluation["blessed"]
  assert evaluation["metrics"]["jaccard@10"] > 0.6  # neighbours removed: not 1
  png = open(os.path.join(out2[spec_lib.EVALUATION_KEY].uri, "report.png"), "rb").read()
  assert png.startswith(b"\x89PNG")
  batch = out2[spec_lib.VERTEX_AI_KEY]
  assert (batch.get_int_custom_property("num_deleted"),
          batch.get_int_custom_property("model_id")) == (50, 8)
  removed = open(os.path.join(batch.uri, "delete", "removed.txt")).read().split()
  assert removed == [f"n{i}" for i in range(50)]
  with pytest.raises(IndexInputError, match=r"have 4 values per vector"):
    _run(tmp_path, "narrow", _vectors(n=50, dim=4), 9, baseline=index)
  assert not os.listdir(tmp_path / "narrow" / spec_lib.INDEX_KEY)  # nothing written


def test_the_executor_refuses_two_models_and_skips_skipped_embeddings(tmp_path):
  one, _ = _artifacts(tmp_path, "a", _vectors(n=20), 1)
  two, _ = _artifacts(tmp_path, "b", _vectors(n=20), 2)
  with pytest.raises(IndexInputError, match=r"got 2: .*models/1.*models/2.*unrelated spaces"):
    executor_lib.one_model_embeddings([one, two])
  skipped, out = _artifacts(tmp_path, "c", _vectors(n=20), 3)
  skipped.set_string_custom_property("skipped", "the model was not blessed (b/1)")
  executor_lib.Executor().Do({spec_lib.EMBEDDINGS_KEY: [skipped]},
                             {k: [v] for k, v in out.items()},
                             {spec_lib.INDEX_CONFIG_KEY: "{}"})
  blessing = out[spec_lib.BLESSING_KEY]
  assert blessing.get_int_custom_property("blessed") == 0
  assert "not blessed (b/1)" in blessing.get_string_custom_property("blessing_message")
  assert not os.listdir(out[spec_lib.INDEX_KEY].uri)


def test_the_last_blessed_index_is_the_newest_whose_blessing_names_it():
  """The resolver's strategy: blessings name their index by URI (it has no id yet)."""
  from gnn_trainer_component.index.component import LatestBlessedIndexStrategy

  def artifact(kind, artifact_id, uri, **props):
    a = kind()
    a.id, a.uri = artifact_id, uri
    for name, value in props.items():
      (a.set_int_custom_property if isinstance(value, int) else
       a.set_string_custom_property)(name, value)
    return a
  indexes = [artifact(standard_artifacts.Model, i, f"index/{i}") for i in (3, 7, 9)]
  blessings = [artifact(standard_artifacts.ModelBlessing, 10 + i, f"b/{i}", current_model=uri,
                        blessed=blessed)
               for i, (uri, blessed) in enumerate((("index/3", 1), ("index/7", 1),
                                                    ("index/9", 0)))]
  got = LatestBlessedIndexStrategy().resolve_artifacts(
      None, {"model": indexes, "model_blessing": blessings})
  assert [a.uri for a in got["model"]] == ["index/7"]  # index/9 was not blessed
  assert [a.uri for a in got["model_blessing"]] == ["b/1"]
  assert LatestBlessedIndexStrategy().resolve_artifacts(
      None, {"model": indexes, "model_blessing": []}) == {"model": [], "model_blessing": []}
