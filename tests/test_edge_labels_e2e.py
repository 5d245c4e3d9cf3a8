"""End to end, edge regression and classification: a rating's stars, and whether it was liked.

``python -m pipelines.recommendation --stars`` (the documented command): GnnTrainer in memory
learns each rating's ``stars`` (``link_config``'s ``edge_label``, ``EdgeRegression``) from
both ends and the rating's own ``completion`` (``edge_features``); then one LocalDagRunner
run on its tables: LinkSampler -> GnnTrainer on its examples learns ``liked``
(``EdgeBinaryClassification``).
ML Metadata then holds both Models with their metrics; every held-out pair carries its own
edge's value, the examples their edge's label, and each export answers its pairs in a fresh
process. GraphEvaluator evaluates each on the test ratings beside its baselines (the training
ratings' mean or majority, and user + item biases). The same run indexes the users' states
(GraphInferrer -> EmbeddingIndex -> Pusher: similar users), and the pushed index answers in
a fresh process with TensorFlow alone.
"""

import csv
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pipelines.runtime import mlmd_utils
from tests import helpers

pytestmark = [pytest.mark.slow]

PIPELINE = "edge-labels-e2e"
MODULE_FILE = os.path.join(helpers.REPO_ROOT, "module_files", "recommendation_stars.py")
TRAINING = {"global_batch_size": 64, "epochs": 3, "seed": 1, "summarize_every_n_steps": "never"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """The documented command with ``--stars`` (in memory), then LinkSampler on its tables."""
  from tfx import v1 as tfx
  from gnn_trainer_component import EmbeddingIndex
  from gnn_trainer_component import GnnTrainer
  from gnn_trainer_component import GraphEvaluator
  from gnn_trainer_component import GraphInferrer
  from gnn_trainer_component import GraphSchema
  from gnn_trainer_component import LinkSampler
  from pipelines.recommendation import pipeline as recommendation
  root = str(tmp_path_factory.mktemp("edge_labels"))
  command = os.path.join(root, "command")
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.recommendation", "--stars", "--output-dir", command,
       "--users", "300", "--items", "100", "--epochs", "8", "--batch-size", "64"],
      cwd=helpers.REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=1200, check=False)
  assert proc.returncode == 0, proc.stdout[-5000:]
  tables_dir = os.path.join(command, "tables")
  link = {**recommendation.link_config_of(MODULE_FILE), "edge_label": "liked"}
  tables = tfx.dsl.Importer(source_uri=tables_dir, artifact_type=GraphSchema).with_id("tables")
  sampler = LinkSampler(graph_schema=tables.outputs["result"], link_config=link)
  liked = GnnTrainer(
      module_file=MODULE_FILE, examples=sampler.outputs["examples"],
      graph_schema=sampler.outputs["output_graph_schema"],
      train_args=tfx.proto.TrainArgs(splits=["train"]),
      eval_args=tfx.proto.EvalArgs(splits=["eval"]),
      custom_config={**TRAINING, "hparams": {"head": "binary"}}).with_id("liked_on_examples")
  evaluator = GraphEvaluator(
      model=liked.outputs["model"], graph_schema=tables.outputs["result"], link_config=link,
      eval_config={"task": "edge_classification", "split": "test", "sampling_seed": 1})
  inferrer = GraphInferrer(model=liked.outputs["model"], graph_schema=tables.outputs["result"],
                           link_config=link)  # every rating's chance of being liked
  users = GraphInferrer(  # each user's state, read as a pair's source with no edge of its own
      model=liked.outputs["model"], graph_schema=tables.outputs["result"],
      sampling_config={"seed_node_set": "user", "hops": link["source_hops"]},
      inference_config={"signatures": ["embeddings"]}).with_id("user_embeddings")
  index = EmbeddingIndex(embeddings=users.outputs["embeddings"],
                         index_config={"max_p99_ms": 1000})  # latency: a shared CI machine
  pusher = tfx.components.Pusher(
      model=index.outputs["index"], model_blessing=index.outputs["blessing"],
      push_destination=tfx.proto.PushDestination(filesystem=tfx.proto.PushDestination.Filesystem(
          base_directory=os.path.join(root, "index_serving"))))
  metadata = os.path.join(root, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name=PIPELINE, pipeline_root=os.path.join(root, "pipeline_root"),
      components=[tables, sampler, liked, evaluator.with_id("liked_evaluator"), inferrer,
                  users, index, pusher],
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata)))
  with open(os.path.join(tables_dir, "rated.csv")) as f:
    rated = {(row["source"], row["target"]): row for row in csv.DictReader(f)}
  return {"metadata": {"stars": os.path.join(command, "metadata.sqlite"), "liked": metadata},
          "tables": tables_dir,
          "printed": json.loads(proc.stdout.strip().splitlines()[-1]), "rated": rated}


def _output(run, model, type_name, component_id):
  """The ``type_name`` artifact ``component_id`` published in ``model``'s (stars or liked) run."""
  store = mlmd_utils.store(run["metadata"][model])
  for artifact in store.get_artifacts_by_type(type_name):
    execution, _ = helpers.producer(store, artifact.id)
    if any(c.name.endswith(component_id) for c in store.get_contexts_by_execution(execution.id)):
      return artifact
  raise LookupError(f"no {type_name} of {component_id}")


def test_stars_are_learned_in_memory_and_every_held_out_pair_carries_its_own(run):
  model = _output(run, "stars", "Model", "GnnTrainer")
  props = mlmd_utils.custom_properties(model)
  assert {"eval_rmse", "eval_mae"} <= set(props), props
  assert run["printed"]["eval_rmse"] == props["eval_rmse"] and run["printed"]["served"] is None
  # The epoch with the lowest validation RMSE is the one exported.
  model_run = _output(run, "stars", "ModelRun", "GnnTrainer")
  with open(os.path.join(model_run.uri, "history.json")) as f:
    history = json.load(f)
  assert props["exported_epoch"] == 1 + int(np.argmin([e["val_rmse"] for e in history]))
  stars_by_split = {}
  for split in ("eval", "test"):
    with open(os.path.join(model_run.uri, "held_out", f"{split}.csv")) as f:
      rows = list(csv.DictReader(f))
    assert rows and all(row["label"] == run["rated"][(row["source"], row["target"])]["stars"]
                        for row in rows)  # each pair's own edge's value, no negatives
    stars_by_split[split] = np.array([float(row["label"]) for row in rows])
  assert len(stars_by_split["eval"]) == pytest.approx(0.1 * len(run["rated"]), abs=1)
  # Better than predicting one number for every rating (the held-out ratings' own mean).
  assert props["eval_rmse"] < np.std(stars_by_split["eval"]), props
  assert props["eval_mae"] <= props["eval_rmse"]


def test_liked_is_learned_on_link_sampler_examples_and_served_in_a_fresh_process(run, tmp_path):
  import tensorflow as tf
  from gnn_trainer_component.graph import readout
  model = _output(run, "liked", "Model", "liked_on_examples")
  props = mlmd_utils.custom_properties(model)
  assert props["eval_auc"] > 0.6, props
  examples = mlmd_utils.latest_artifact(run["metadata"]["liked"], "Examples", PIPELINE)
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      sorted(glob.glob(os.path.join(examples.uri, "Split-test", "*"))), "GZIP")]
  assert len(records) == pytest.approx(0.1 * len(run["rated"]), abs=1)
  labels, requests = [], []
  for record in records:  # each example: its pair's ends first, labelled with the edge's liked
    example = tf.train.Example.FromString(record)
    feature = example.features.feature
    pair = (feature["nodes/user.#id"].bytes_list.value[0].decode(),
            feature["nodes/item.#id"].bytes_list.value[0].decode())
    label = feature.pop(f"nodes/{readout.READOUT}.{readout.LABEL}").float_list.value[0]
    assert label == float(run["rated"][pair]["liked"]), pair
    completion = feature[f"nodes/{readout.PAIR}.completion"].float_list.value  # its own
    assert completion == pytest.approx([float(run["rated"][pair]["completion"])]), pair
    labels.append(label)
    requests.append(example.SerializeToString())
  outputs = helpers.serve_in_fresh_process(os.path.join(model.uri, "Format-Serving"), requests,
                                           str(tmp_path))["outputs"]
  logits = np.asarray(next(iter(outputs.values()))).ravel()
  assert len(logits) == len(requests) and np.isfinite(logits).all()
  from sklearn import metrics
  assert metrics.roc_auc_score(labels, logits) > 0.6


@pytest.mark.parametrize("name, metric, baselines", [
    ("stars", "rmse", {"mean", "bias"}), ("liked", "accuracy", {"majority_class", "bias"})])
def test_graph_evaluator_scores_the_test_ratings_beside_the_bias_baselines(run, name, metric,
                                                                         baselines):
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  artifact = _output(run, name, "ModelEvaluation",
                     "GraphEvaluator" if name == "stars" else "liked_evaluator")
  result = evaluation_lib.read(artifact.uri)
  overall = {predictor: s["all"] for predictor, s in result["metrics"].items()}
  assert set(overall) == {"model"} | baselines and result["node_set"] == "rated"
  assert overall["model"]["num_nodes"] == pytest.approx(0.1 * len(run["rated"]), abs=1)
  props = mlmd_utils.custom_properties(artifact)
  assert props[metric] == pytest.approx(overall["model"][metric], abs=1e-6)
  assert props[f"bias_{metric}"] == pytest.approx(overall["bias"][metric], abs=1e-6)
  assert os.path.getsize(os.path.join(artifact.uri, "report.png")) > 10_000
  # The test ratings' own labels: the model and every baseline predicted the same edges.
  import pyarrow.parquet as pq
  rows = pq.read_table(os.path.join(artifact.uri, "predictions.parquet")).to_pylist()
  column = "stars" if name == "stars" else "liked"
  assert all(row["label"] == float(run["rated"][(row["source"], row["target"])][column])
             for row in rows)
  if name == "stars":  # the graph's biases are real: user + item bias beats the mean
    assert overall["bias"]["rmse"] < overall["mean"]["rmse"], overall
    # The rating's own completion tells what no end does: the model is far below the biases.
    assert overall["model"]["rmse"] < 0.8 * overall["bias"]["rmse"], overall
    printed = run["printed"]["evaluation"]  # the command prints the verdict and every RMSE
    assert printed["blessed"] == result["blessed"]
    assert printed["bias_rmse"] == pytest.approx(overall["bias"]["rmse"], abs=1e-6)
  else:
    assert 0.5 < overall["model"]["auc"] <= 1 and "auc" in overall["bias"], overall


def test_graph_inferrer_predicts_every_rating_as_a_pair(run):
  from gnn_trainer_component import artifacts
  from gnn_trainer_component.model import embeddings_table as table
  from sklearn import metrics
  embeddings = _output(run, "liked", artifacts.Embeddings.TYPE_NAME, "GraphInferrer")
  props = mlmd_utils.custom_properties(embeddings)
  frame = table.read(embeddings.uri)
  assert props["node_set"] == "rated" and props["num_nodes"] == len(frame) == len(run["rated"])
  output = props["columns"].split(",")[2]
  assert list(frame.columns) == ["source", "target", output]
  assert list(zip(frame.source, frame.target)) == list(run["rated"])  # the edge table's order
  liked = [int(run["rated"][pair]["liked"]) for pair in zip(frame.source, frame.target)]
  assert metrics.roc_auc_score(liked, np.stack(frame[output])[:, 0]) > 0.6
  store = mlmd_utils.store(run["metadata"]["liked"])
  execution, _ = helpers.producer(store, embeddings.id)
  assert set(helpers.execution_inputs(store, execution.id)) == {
      "Model", "gnn_trainer_component.GraphSchema"}


def test_graph_inferrer_embeds_each_user_of_a_model_with_edge_features(run):
  """A node read as one end of a pair has no edge, so no ``pair`` node: its state still is."""
  from gnn_trainer_component import artifacts
  from gnn_trainer_component.model import embeddings_table as table
  frame = table.read(_output(run, "liked", artifacts.Embeddings.TYPE_NAME,
                             "user_embeddings").uri)
  with open(os.path.join(run["tables"], "users.csv")) as f:
    assert len(frame) == sum(1 for _ in f) - 1
  vectors = np.stack(frame["embedding"])
  assert np.isfinite(vectors).all() and len(np.unique(vectors.round(5), axis=0)) > 1


def test_the_users_index_is_gated_pushed_and_answers_in_a_fresh_process(run):
  """Model -> GraphInferrer -> EmbeddingIndex -> Pusher in ML Metadata; the pushed index's
  neighbours of a user are the exact ones of the Embeddings table (300 users: exact search)."""
  from gnn_trainer_component import artifacts
  from gnn_trainer_component.model import embeddings_table as table
  store = mlmd_utils.store(run["metadata"]["liked"])
  pushed = mlmd_utils.latest_artifact(run["metadata"]["liked"], "PushedModel", PIPELINE)
  assert mlmd_utils.custom_properties(pushed)["pushed"] == 1
  push, _ = helpers.producer(store, pushed.id)
  index = helpers.execution_inputs(store, push.id)["Model"]
  execution, kind = helpers.producer(store, index.id)
  assert kind.endswith("EmbeddingIndex")
  embeddings = helpers.execution_inputs(store, execution.id)[artifacts.Embeddings.TYPE_NAME]
  inferrer, kind = helpers.producer(store, embeddings.id)
  assert kind.endswith("GraphInferrer")
  model = helpers.execution_inputs(store, inferrer.id)["Model"]
  assert model.id == _output(run, "liked", "Model", "liked_on_examples").id
  props = mlmd_utils.custom_properties(index)
  assert (props["kind"], props["recall@10"], props["blessed"]) == ("exact", 1.0, 1), props
  evaluation = _output(run, "liked", "ModelEvaluation", "EmbeddingIndex")
  with open(os.path.join(evaluation.uri, "evaluation.json")) as f:
    assert json.load(f)["metrics"]["recall@10"] == 1.0
  frame = table.read(embeddings.uri)
  vectors, ids = np.stack(frame["embedding"]), list(frame["id"])
  scores = vectors @ vectors[0]
  want = [ids[i] for i in np.argsort(-scores, kind="stable")[:11]]
  got = helpers.query_index_in_fresh_process(
      mlmd_utils.custom_properties(pushed)["pushed_destination"], embedding=vectors[:1],
      ids=[ids[0]])
  assert got["ids"][0] == want[:10]
  assert got["by_id"][0] == [i for i in want if i != ids[0]][:10]  # the user left out


def test_graph_inferrer_predicts_a_table_of_new_pairs_and_names_a_bad_id(run, tmp_path):
  """The stars model on pairs never rated, each with its completion, in the table's order.

  The more of an item a user went through, the more stars. A dangling id or a missing
  completion column is refused.
  """
  from tfx.types import standard_artifacts
  from gnn_trainer_component import GraphSchema
  from gnn_trainer_component.graph.errors import GraphInputError
  from gnn_trainer_component.inferrer import executor
  from gnn_trainer_component.model import embeddings_table as table
  from gnn_trainer_component import artifacts
  from pipelines.recommendation import pipeline as recommendation
  new = [(f"u{u}", f"i{i}") for u in range(3) for i in range(40)
         if (f"u{u}", f"i{i}") not in run["rated"]][:5]
  tables_dir = tmp_path / "tables"
  import shutil
  shutil.copytree(run["tables"], tables_dir)
  (tables_dir / "new.csv").write_text("source,target,completion\n" + "".join(
      f"{u},{i},{c}\n" for u, i in new for c in (0.1, 0.9)))
  (tables_dir / "bad.csv").write_text("source,target,completion\nu1,i2,0.5\nu1,nope,0.5\n")
  (tables_dir / "bare.csv").write_text("source,target\nu1,i2\n")
  model, schema = standard_artifacts.Model(), GraphSchema()
  model.uri, schema.uri = _output(run, "stars", "Model", "GnnTrainer").uri, str(tables_dir)
  link = recommendation.link_config_of(MODULE_FILE)

  def infer(pairs, uri):
    out = artifacts.Embeddings()
    out.uri = str(uri)
    executor.Executor().Do({"model": [model], "graph_schema": [schema]}, {"embeddings": [out]},
                           {"link_config": json.dumps(link), "pairs": pairs,
                            "inference_config": json.dumps({"signatures": ["serving_default"]})})
    return table.read(out.uri)

  frame = infer("new.csv", tmp_path / "new")
  assert list(zip(frame.source, frame.target)) == [pair for pair in new for _ in range(2)]
  stars = np.stack(frame[frame.columns[2]])  # serving_default's [pairs, 1] output
  assert stars.shape == (10, 1) and np.isfinite(stars).all()
  assert 0 < stars.min() and stars.max() < 6
  low, high = stars[0::2, 0], stars[1::2, 0]  # the same pair at completion 0.1 and 0.9
  assert (high > low + 1).all(), stars
  with pytest.raises(GraphInputError, match=r"GraphInferrer: edge table 'bad.csv' of edge set "
                                            r"'rated \(pairs\)' has target ids not in node set "
                                            r"'item': \['nope'\] \(first at .*bad.csv, line 3"):
    infer("bad.csv", tmp_path / "bad")
  assert not os.listdir(tmp_path / "bad")  # nothing published
  with pytest.raises(GraphInputError, match=r"bare.csv.*completion"):
    infer("bare.csv", tmp_path / "bare")
  assert not os.listdir(tmp_path / "bare")
