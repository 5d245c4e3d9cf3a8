"""End to end, recommendation: user-item tables -> GnnTrainer in memory (user -> item links).

The shipped example (``pipelines/recommendation``, ``module_files/recommendation_ranking.py``) on a
generated rating graph (600 users, 200 items), run by its own command on LocalDagRunner: ML Metadata then holds
the Model with the test ratings ranked against every item, the most-popular-item ranking's
metrics beside the model's, and the held-out pairs in the ModelRun; the export scores
(user, item) pairs in a fresh process; GraphInferrer embeds users and items, each as its end
of the model's pairs, the same in both engines; and the same tables through LinkSampler train the
same module on its examples.
"""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pipelines.runtime import mlmd_utils
from tests import helpers

pytestmark = [pytest.mark.slow]

def _trained(metadata: str, name: str = "gnn-recommendation"):
  """The newest Model GnnTrainer made (the items' index is a Model too)."""
  return mlmd_utils.latest_artifact(metadata, "Model", name, producer="GnnTrainer")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """``python -m pipelines.recommendation`` (the documented command, its defaults)."""
  out = str(tmp_path_factory.mktemp("recommendation"))
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.recommendation", "--output-dir", out],
      cwd=helpers.REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=1200, check=False)
  assert proc.returncode == 0, proc.stdout[-5000:]
  printed = json.loads(proc.stdout.strip().splitlines()[-1])
  return {"out": out, "printed": printed, "metadata": os.path.join(out, "metadata.sqlite")}


def test_the_model_and_the_popularity_baseline_are_in_mlmd(run):
  from pipelines.recommendation import pipeline as recommendation
  model = _trained(run["metadata"])
  props = mlmd_utils.custom_properties(model)
  printed = {k: v for k, v in run["printed"].items()
             if k not in ("served", "evaluation", "index", "similar")}
  assert printed == {"model": model.uri, **{
      k: v for k, v in props.items() if k.startswith(("eval_auc", "eval_average_precision", "retrieval_"))}}
  assert props["graph_mode"] == "sampled" and props["eval_auc"] > 0.75, props
  assert props["retrieval_splits"] == "test"
  with open(os.path.join(run["out"], "tables", "rated.csv")) as f:
    num_ratings = sum(1 for _ in f) - 1
  assert abs(props["retrieval_queries"] - 0.1 * num_ratings) <= 1  # the test share
  for who in ("retrieval_", "retrieval_popularity_"):
    assert 0 < props[f"{who}mrr"] <= 1, props
    assert props[f"{who}hits@20"] <= props[f"{who}hits@50"] <= props[f"{who}hits@100"]
  # The model reads tastes the most-popular ranking cannot (pipelines/recommendation/data.py).
  assert props["retrieval_hits@20"] > props["retrieval_popularity_hits@20"], props
  # The held-out pairs, by node id, in the ModelRun: what the test split ranked.
  model_run = mlmd_utils.latest_artifact(run["metadata"], "ModelRun",
                                         recommendation.PIPELINE_NAME)
  assert sorted(os.listdir(os.path.join(model_run.uri, "held_out"))) == ["eval.csv", "test.csv"]
  with open(os.path.join(run["out"], "tables", "rated.csv")) as f:
    rated = {(row["source"], row["target"]) for row in csv.DictReader(f)}
  seen = set()
  for split in ("eval", "test"):
    with open(os.path.join(model_run.uri, "held_out", f"{split}.csv")) as f:
      rows = [(row["source"], row["target"], row["label"]) for row in csv.DictReader(f)]
    positives = {(u, v) for u, v, label in rows if label == "1"}
    negatives = {(u, v) for u, v, label in rows if label == "0"}
    assert positives <= rated and not negatives & rated and not positives & seen
    assert all(u.startswith("u") and v.startswith("i") for u, v, _ in rows)
    assert len(positives) == len(negatives) == len(rows) / 2  # one negative per positive
    seen |= positives
  assert len(positives) == props["retrieval_queries"]
  # Selection by ranking: every epoch ranked the validation ratings against every item, and
  # the export holds the epoch that ranked them best.
  with open(os.path.join(model_run.uri, "history.json")) as f:
    history = json.load(f)
  ranked = [epoch["val_retrieval_mrr"] for epoch in history]
  assert len(ranked) == props["epochs"] and all(0 < mrr <= 1 for mrr in ranked), history
  assert props["exported_epoch"] == 1 + int(np.argmax(ranked)), (props, ranked)
  assert props["eval_retrieval_mrr"] == pytest.approx(max(ranked), abs=1e-6), props
  store = mlmd_utils.store(run["metadata"])
  execution, name = helpers.producer(store, model.id)
  assert name.endswith("GnnTrainer")
  assert set(helpers.execution_inputs(store, execution.id)) == {
      "gnn_trainer_component.GraphSchema", "ExampleAnomalies"}
  helpers.assert_validated(store, execution.id)


def test_the_blessed_model_is_pushed_and_recommends_by_user_id_in_a_fresh_process(run):
  """Tables -> GnnTrainer -> GraphEvaluator -> Pusher; the command then asks the pushed model,
  in a process where TF-GNN and this package cannot be imported, for user u0's five best items:
  five items, best first, none that u0 rated in the graph the model was trained on."""
  served = run["printed"]["served"]
  assert served is not None, "GraphEvaluator blessed the model: Pusher pushed it"
  assert served["user"] == "u0" and served["status"] == 0
  assert len(served["items"]) == 5 and all(i.startswith("i") for i in served["items"])
  assert served["scores"] == sorted(served["scores"], reverse=True)
  model = _trained(run["metadata"])
  with open(os.path.join(model.uri, "Format-Serving", "assets.extra",
                         "node_serving.json")) as f:
    assert json.load(f)["signatures"] == ["recommend"]
  with open(os.path.join(run["out"], "tables", "rated.csv")) as f:
    rated = {row["target"] for row in csv.DictReader(f) if row["source"] == "u0"}
  # Held out: not in the graph the model serves from.
  assert not set(served["items"]) & (rated - _held_out(model, run["metadata"], "u0")), served


def test_graph_evaluator_ranks_the_test_ratings_with_the_export_and_blesses_it(run):
  """Between two node sets: popularity, item-kNN and user-kNN (their neighbours chosen on the
  eval split) are the baselines; with the training's sampling seed the export ranks the test
  ratings as GnnTrainer's own ranking did; the blessing needs the gains over popularity beyond
  noise."""
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  from pipelines.recommendation import pipeline as recommendation
  props = mlmd_utils.custom_properties(
      _trained(run["metadata"]))
  result = evaluation_lib.read(mlmd_utils.latest_artifact(
      run["metadata"], "ModelEvaluation", recommendation.PIPELINE_NAME,
      producer="GraphEvaluator").uri)
  overall = {name: by_slice["all"] for name, by_slice in result["metrics"].items()}
  assert set(overall) == {"model", "popularity", "item_knn", "user_knn"}
  for knn in ("item_knn", "user_knn"):
    assert result["baseline_settings"][knn]["chosen_on"] == "eval"
  for check in result["checks"]:
    assert check["against"] == "popularity" and 0 < check["gain_low"] <= check["gain"]
  assert set(result["gains"]) == {"popularity", "item_knn", "user_knn"}
  for metric in ("mrr", "hits@20", "hits@50"):
    assert overall["model"][metric] == pytest.approx(props[f"retrieval_{metric}"], rel=1e-3)
    assert overall["popularity"][metric] == pytest.approx(
        props[f"retrieval_popularity_{metric}"], abs=1e-6)
  assert result["blessed"] and overall["model"]["mrr"] > overall["popularity"]["mrr"]
  printed = run["printed"]["evaluation"]  # the command prints the verdict and every baseline
  assert printed["blessed"] and printed["message"] == result["message"]
  for predictor in overall:
    assert printed[f"{predictor}_mrr"] == pytest.approx(overall[predictor]["mrr"], abs=1e-6)
  assert printed["mrr_gain_low_vs_popularity"] > 0


def test_the_export_scores_user_item_pairs_in_a_fresh_process(run, tmp_path):
  from gnn_trainer_component.in_memory import adapters
  from pipelines.recommendation import pipeline as recommendation
  from gnn_trainer_component.graph import readout
  import tensorflow as tf
  link = recommendation.link_config_of(recommendation.MODULE_FILE)
  splits = adapters.load(os.path.join(run["out"], "tables"), link_config=link,
                         splits=["train", "test"])
  records = splits.serialized_examples(["test"], 10**6, step=4)  # positives, then negatives
  labels = []
  for i, record in enumerate(records):  # requests: the pairs without their labels
    example = tf.train.Example.FromString(record)
    labels.append(example.features.feature.pop(
        f"nodes/{readout.READOUT}.{readout.LABEL}").float_list.value[0])
    records[i] = example.SerializeToString()
  model = _trained(run["metadata"])
  outputs = helpers.serve_in_fresh_process(os.path.join(model.uri, "Format-Serving"), records,
                                           str(tmp_path))["outputs"]
  assert len(outputs) == 1, outputs.keys()  # one task: the pair's logit
  logits = np.asarray(next(iter(outputs.values()))).ravel()
  labels = np.array(labels)
  assert len(logits) == len(records) and set(labels) == {0.0, 1.0}
  # Ratings score above the non-rated (user, item) pairs, most of the time.
  wins = (logits[labels == 1][:, None] > logits[labels == 0][None, :]).mean()
  assert wins > 0.7, wins


def test_graph_inferrer_embeds_either_end_and_both_engines_agree_on_the_items(run, tmp_path):
  """Each node set as its end of the model's pairs, in memory; fan-outs above every degree:
  the Beam engine takes every neighbour too and gives the items the same embeddings (one node
  set: its Beam pipeline is the same code for either end; one hop: fewer stages for TF-GNN's
  sampling program to save)."""
  import apache_beam as beam
  import pyarrow.parquet as pq
  from gnn_trainer_component.inferrer import beam as beam_engine
  from gnn_trainer_component.inferrer import config as config_lib
  from gnn_trainer_component.inferrer import in_memory
  from gnn_trainer_component.model import embeddings_table as table
  model = _trained(run["metadata"])
  model_dir = os.path.join(model.uri, "Format-Serving")
  tables = os.path.join(run["out"], "tables")
  hops = {"user": [{"rated": 1000}, {"rated_by": 1000}],
          "item": [{"rated_by": 1000}]}

  def embeddings(path: str, ids: list[str]) -> np.ndarray:
    frame = pq.read_table(path).to_pandas().set_index(table.ID_COLUMN).sort_index()
    assert list(frame.index) == ids
    return np.stack(frame["embedding"].to_numpy())

  for node_set, prefix in (("user", "u"), ("item", "i")):
    nodes, ids = f"infer-{node_set}.csv", sorted(f"{prefix}{k}" for k in range(0, 40, 4))
    with open(os.path.join(tables, nodes), "w") as f:
      f.write("id\n" + "".join(f"{i}\n" for i in ids))
    config = {"seed_node_set": node_set, "hops": hops[node_set]}
    path = str(tmp_path / f"{node_set}-in_memory.parquet")
    got = in_memory.infer(tables, model_dir, path, cfg=config_lib.InferenceConfig(),
                          sampling_config=config, nodes=nodes)
    assert (got.node_set, got.rows, got.columns) == (node_set, 10, ["id", "embedding"])
    vectors = embeddings(path, ids)
    assert vectors.shape == (10, 32) and np.isfinite(vectors).all()
  # The items (the loop's last node set) again, on the Beam engine.
  beam_path = str(tmp_path / "item-beam.parquet")
  beam_engine.infer(beam.Pipeline, [], tables, model_dir, beam_path,
                    cfg=config_lib.InferenceConfig(engine="beam"), sampling_config=config,
                    nodes=nodes)
  np.testing.assert_allclose(embeddings(beam_path, ids), vectors, atol=1e-4)


def test_linksampler_examples_between_two_node_sets_train_the_same_module(tmp_path):
  """tables -> LinkSampler -> GnnTrainer on LocalDagRunner: its examples, counts and lineage.

  A third of the example's graph (200 users, 100 items): LinkSampler writes every rating's
  examples on the DirectRunner, a minute for these.
  """
  from tfx import v1 as tfx
  from pipelines.recommendation import data
  from pipelines.recommendation import pipeline as recommendation
  tables = str(tmp_path / "tables")
  num_ratings = data.write_tables(tables, num_users=200, num_items=100, ratings_per_user=8,
                                  seed=0)
  name, metadata = "gnn-recommendation-sampled", str(tmp_path / "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(recommendation.create_pipeline(
      pipeline_root=str(tmp_path / "root"), metadata_path=metadata, tables_dir=tables,
      mode=recommendation.SAMPLED, custom_config={"epochs": 8}, pipeline_name=name))
  examples = mlmd_utils.latest_artifact(metadata, "Examples", name)
  counts = mlmd_utils.custom_properties(examples)
  positives = {s: counts[f"num_positives_{s}"] for s in ("train", "eval", "test")}
  assert sum(positives.values()) == num_ratings
  assert abs(positives["test"] - 0.1 * num_ratings) <= 1
  assert counts["num_negatives_train"] == 2 * positives["train"]
  assert counts["num_negatives_test"] == positives["test"]
  model = _trained(metadata, name)
  props = mlmd_utils.custom_properties(model)
  assert props["graph_mode"] == "examples" and props["eval_auc"] > 0.7, props
  assert not [k for k in props if k.startswith("retrieval_")]  # no graph to rank against
  # GraphEvaluator has the tables: it ranks the test ratings with this export too.
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  result = evaluation_lib.read(mlmd_utils.latest_artifact(
      metadata, "ModelEvaluation", name, producer="GraphEvaluator").uri)
  scored = result["metrics"]["model"]["all"]
  assert scored["num_nodes"] == positives["test"] + counts["num_negatives_test"]
  assert 0 < scored["mrr"] <= 1 and scored["hits@20"] <= scored["hits@100"]
  store = mlmd_utils.store(metadata)
  execution, _ = helpers.producer(store, model.id)
  assert set(helpers.execution_inputs(store, execution.id)) == {
      "Examples", "gnn_trainer_component.GraphSchema", "ExampleAnomalies"}
  assert helpers.producer(store, examples.id)[1].endswith("LinkSampler")


def _index_output(metadata: str, type_name: str):
  """The newest ``type_name`` the items' EmbeddingIndex output."""
  return mlmd_utils.latest_artifact(metadata, type_name, "gnn-recommendation",
                                    producer="item_index")


def test_the_blessed_models_items_are_indexed_pushed_and_answer_in_a_fresh_process(run):
  """Model -> item_embeddings (GraphInferrer) -> item_index (EmbeddingIndex) -> Pusher.

  A first release (no churn check): every item indexed, exact search (200 vectors). The
  command's ``similar`` (the pushed index's neighbours of i0, from a fresh process) are i0's
  ten best by dot product over the Embeddings table; the Vertex AI folder holds each item once
  with its genre (a numeric restrict) and the vector indexed.
  """
  from gnn_trainer_component import artifacts
  from gnn_trainer_component.model import embeddings_table as table
  printed = run["printed"]["index"]
  assert printed["blessed"], printed
  assert (printed["num_vectors"], printed["kind"]) == (200, "exact")
  assert printed["recall@10"] >= 0.99  # exact search: near-ties may order apart (float sums)
  assert "jaccard@10" not in printed  # the first release
  metadata, store = run["metadata"], mlmd_utils.store(run["metadata"])
  pushed = mlmd_utils.latest_artifact(metadata, "PushedModel", "gnn-recommendation",
                                      producer="item_index_pusher")
  assert mlmd_utils.custom_properties(pushed)["pushed"] == 1
  push, _ = helpers.producer(store, pushed.id)
  index = helpers.execution_inputs(store, push.id)["Model"]
  assert index.id == _index_output(metadata, "Model").id
  execution, _ = helpers.producer(store, index.id)
  embeddings = helpers.execution_inputs(store, execution.id)[artifacts.Embeddings.TYPE_NAME]
  inferrer, kind = helpers.producer(store, embeddings.id)
  assert kind.endswith("GraphInferrer")
  trained = _trained(metadata)
  assert helpers.execution_inputs(store, inferrer.id)["Model"].id == trained.id
  assert mlmd_utils.custom_properties(index)["model_id"] == trained.id  # every vector's model
  frame = table.read(embeddings.uri)
  vectors, ids = np.stack(frame["embedding"]), list(frame["id"])
  first = ids.index("i0")
  scores = vectors @ vectors[first]
  scores[first] = -np.inf
  similar = run["printed"]["similar"]
  assert similar["neighbours"] == [ids[i] for i in np.argsort(-scores, kind="stable")[:10]]
  batch = _index_output(metadata, artifacts.VectorSearchBatch.TYPE_NAME)
  with open(os.path.join(run["out"], "tables", "items.csv")) as f:
    genre = {row["id"]: int(row["genre"]) for row in csv.DictReader(f)}
  lines = [json.loads(line) for name in sorted(os.listdir(batch.uri))
           for line in open(os.path.join(batch.uri, name))]
  assert sorted(line["id"] for line in lines) == sorted(ids) == sorted(genre)
  for line in lines:
    assert line["numeric_restricts"] == [{"namespace": "genre", "value_int": genre[line["id"]]}]
    np.testing.assert_array_equal(np.float32(line["embedding"]), vectors[ids.index(line["id"])])


def test_a_refresh_gives_the_blessed_model_newer_tables_and_serves_a_new_user(run, tmp_path):
  """``--refresh`` in (a copy of) the run's folder: the tables a while later (20 new users and
  their ratings) -> the latest blessed Model's weights exported with them, untrained ->
  GraphEvaluator -> Pusher. A new user, unknown to the first push, gets five items it has not
  rated from the refreshed push in a fresh process; ML Metadata records the refreshed Model as
  made from the blessed Model and the newer tables."""
  import shutil
  from gnn_trainer_component import GraphSchema
  from pipelines import serving
  out = str(tmp_path / "out")
  shutil.copytree(run["out"], out)
  first_push = serving.latest_push(os.path.join(out, "serving"))
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.recommendation", "--output-dir", out, "--refresh"],
      cwd=helpers.REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=1200, check=False)
  assert proc.returncode == 0, proc.stdout[-5000:]
  served = json.loads(proc.stdout.strip().splitlines()[-1])["served"]
  assert served is not None, "GraphEvaluator blessed the refreshed model: Pusher pushed it"
  assert served["user"] == "u600" and served["status"] == 0 and len(served["items"]) == 5
  metadata = os.path.join(out, "metadata.sqlite")
  model = _trained(metadata)
  trained = _trained(run["metadata"])
  store = mlmd_utils.store(metadata)
  execution, _ = mlmd_utils.producer(store, model.id)
  inputs = mlmd_utils.execution_inputs(store, execution.id)
  assert [a.id for a in inputs["Model"]] == [trained.id]
  assert [a.uri for a in inputs[GraphSchema.TYPE_NAME]] == [os.path.join(out, "tables_refreshed")]
  props = mlmd_utils.custom_properties(model)
  assert props["train_steps"] == 0 and props["refreshed_from"].startswith(trained.uri)
  assert props["retrieval_mrr"] > props["retrieval_popularity_mrr"], props
  with open(os.path.join(out, "tables_refreshed", "rated.csv")) as f:
    rated = {row["target"] for row in csv.DictReader(f) if row["source"] == "u600"}
  assert rated and not set(served["items"]) & rated - _held_out(model, metadata, "u600")
  before = subprocess.run([sys.executable, "-c", serving.RECOMMEND_SCRIPT, first_push, "u600",
                           "5"], check=True, capture_output=True, text=True, cwd="/")
  assert json.loads(before.stdout.strip().splitlines()[-1])["status"] == 1  # unknown then
  # The items indexed again, against the first run's index: the same weights on a graph with
  # 20 more users keep most neighbourhoods (within the default bounds), so it is released.
  index = json.loads(proc.stdout.strip().splitlines()[-1])["index"]
  assert index["blessed"] and index["jaccard@10"] >= 0.2 and index["changed_share"] <= 0.5, index
  assert index["removed"] == 0 and index["num_vectors"] == 200
  with open(os.path.join(_index_output(metadata, "ModelEvaluation").uri,
                         "evaluation.json")) as f:
    lineage = json.load(f)["lineage"]
  assert lineage["baseline_index_uri"] == _index_output(run["metadata"], "Model").uri
  assert lineage["model_id"] == model.id


def _held_out(model, metadata: str, user: str) -> set[str]:
  """The items ``user`` rated in the held-out splits of the run that made ``model``."""
  store = mlmd_utils.store(metadata)
  execution, _ = mlmd_utils.producer(store, model.id)
  (model_run,) = [a for a in store.get_artifacts_by_id(
      [e.artifact_id for e in store.get_events_by_execution_ids([execution.id])])
      if a.type == "ModelRun"]
  held_out = set()
  for split in ("eval", "test"):
    with open(os.path.join(model_run.uri, "held_out", f"{split}.csv")) as f:
      held_out |= {row["target"] for row in csv.DictReader(f)
                   if row["source"] == user and row["label"] == "1"}
  return held_out


def test_ones_own_tables_and_link_config_with_a_step_cap(run, tmp_path):
  """``--tables`` / ``--link-config`` / ``--steps``: the example's command on a graph of other
  names (customers, products; the products without the example's features), trained for a
  capped number of steps; the evaluator's verdict printed, the first customer served."""
  own = tmp_path / "tables"
  own.mkdir()
  names = {"users.csv": "customers.csv", "items.csv": "products.csv",
           "rated.csv": "bought.csv", "rated_by.csv": "bought_by.csv"}
  for old, new in names.items():
    with open(os.path.join(run["out"], "tables", old)) as f:
      (own / new).write_text(f.read())
  (own / "graph_schema.pbtxt").write_text("""
node_sets { key: "customer" value { features { key: "#id" value { dtype: DT_STRING } }
  metadata { filename: "customers.csv" } } }
node_sets { key: "product" value { features { key: "#id" value { dtype: DT_STRING } }
  metadata { filename: "products.csv" } } }
edge_sets { key: "bought" value { source: "customer" target: "product"
  metadata { filename: "bought.csv" } } }
edge_sets { key: "bought_by" value { source: "product" target: "customer"
  metadata { filename: "bought_by.csv" } } }
""")
  (tmp_path / "link.json").write_text(json.dumps({
      "edge_set": "bought", "reverse_edge_set": "bought_by",
      "source_hops": [{"bought": 10}, {"bought_by": 5}],
      "target_hops": [{"bought_by": 10}, {"bought": 5}]}))
  out = tmp_path / "out"
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.recommendation", "--output-dir", str(out),
       "--tables", str(own), "--link-config", str(tmp_path / "link.json"), "--steps", "40",
       "--epochs", "2"],
      cwd=helpers.REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=1200, check=False)
  assert proc.returncode == 0, proc.stdout[-5000:]
  printed = json.loads(proc.stdout.strip().splitlines()[-1])
  props = mlmd_utils.custom_properties(_trained(str(out / "metadata.sqlite")))
  assert props["train_steps"] == 40 and props["epochs"] == 2, props
  verdict = printed["evaluation"]
  assert {"model_mrr", "popularity_mrr", "item_knn_mrr", "user_knn_mrr"} <= set(verdict)
  assert verdict["message"].startswith("Blessed" if verdict["blessed"] else "Not blessed")
  if verdict["blessed"]:
    assert printed["served"]["user"] == "u0" and printed["served"]["status"] == 0
  else:
    assert printed["served"] is None


def test_a_retrained_model_whose_item_neighbourhoods_moved_beyond_the_bound_is_not_indexed(
    run, tmp_path):
  """The command again in (a copy of) the run's folder, trained anew (256 pairs a step, 5
  epochs): GraphEvaluator blesses the model, and its items' neighbourhoods against the first
  run's index (Jaccard about 0.6) miss ``--index-config``'s bound of 0.85: the index is not
  blessed, says why, and is not pushed; the Vertex AI folder is written and marked so."""
  import shutil
  from gnn_trainer_component import artifacts
  from pipelines import serving
  out = str(tmp_path / "out")
  shutil.copytree(run["out"], out)
  first_index = serving.latest_push(os.path.join(out, "index_serving"))
  (tmp_path / "index.json").write_text(json.dumps({"min_jaccard": 0.85}))
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.recommendation", "--output-dir", out,
       "--batch-size", "256", "--epochs", "5", "--index-config", str(tmp_path / "index.json")],
      cwd=helpers.REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=1200, check=False)
  assert proc.returncode == 0, proc.stdout[-5000:]
  printed = json.loads(proc.stdout.strip().splitlines()[-1])
  assert printed["evaluation"]["blessed"], printed["evaluation"]
  index = printed["index"]
  assert not index["blessed"] and 0 < index["jaccard@10"] < 0.85, index
  assert index["message"].startswith("Not blessed: jaccard@10 "), index
  assert printed["similar"] is None
  assert serving.latest_push(os.path.join(out, "index_serving")) == first_index
  metadata = os.path.join(out, "metadata.sqlite")
  trained = _trained(metadata)
  assert trained.id != _trained(run["metadata"]).id  # trained anew
  batch = mlmd_utils.custom_properties(_index_output(
      metadata, artifacts.VectorSearchBatch.TYPE_NAME))
  assert (batch["blessed"], batch["model_id"], batch["num_vectors"]) == (0, trained.id, 200)
