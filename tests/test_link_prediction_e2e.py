"""End to end, link prediction: tables -> LinkSampler -> GnnTrainer -> BulkInferrer on LocalDagRunner.

A generated graph with 4 communities (citations mostly inside one, features a
noisy one-hot of the community) in the Planetoid layout, so the repository's
GAE module (``module_files/planetoid_link_prediction.py``) trains on it as on
Cora. Checks ML Metadata (properties, lineage), the test pairs' AUC through
the exported model, and serving in a fresh process without TF-GNN and without
labels.
"""

import os

import numpy as np
import pytest

from pipelines.runtime import mlmd_utils
from pipelines import serving
from tests import helpers

pytestmark = [pytest.mark.slow, pytest.mark.compat]

PIPELINE = "links-e2e"
NUM_NODES, COMMUNITIES, DIM = 240, 8, 16
TIME = """
  features { key: "time" value { dtype: DT_INT64 } }"""


def _write_tables(d, seed=0, timed=False):
  """Planetoid-like tables: paper (feat, label), cites (both directions, weight, self loops).

  Nearly all citations stay inside a community, and a uniform non-edge crosses
  communities 7 times in 8: scoring by community alone reaches AUC ~0.92.
  ``timed``: each citation also has a ``time`` in [0, 100) (both directions
  alike; self loops 0).
  """
  import tensorflow as tf
  rng = np.random.default_rng(seed)
  community = np.arange(NUM_NODES) % COMMUNITIES
  feat = rng.normal(0, 1.0, (NUM_NODES, DIM)).astype(np.float32)
  feat[np.arange(NUM_NODES), community] += 3.0
  edges = set()
  while len(edges) < 3 * NUM_NODES:
    u, v = rng.integers(NUM_NODES, size=2)
    same = community[u] == community[v]
    if u != v and (same or rng.random() < 0.005):
      edges.add((min(u, v), max(u, v)))
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "graph_schema.pbtxt"), "w") as f:
    f.write(f"""
node_sets {{ key: "paper" value {{
  features {{ key: "feat" value {{ dtype: DT_FLOAT shape {{ dim {{ size: {DIM} }} }} }} }}
  features {{ key: "label" value {{ dtype: DT_INT64 }} }}
  metadata {{ filename: "nodes-paper.tfrecord" }} }} }}
edge_sets {{ key: "cites" value {{ source: "paper" target: "paper"
  features {{ key: "weight" value {{ dtype: DT_FLOAT }} }}{TIME if timed else ""}
  metadata {{ filename: "edges-cites.tfrecord" }} }} }}
""")
  with tf.io.TFRecordWriter(os.path.join(d, "nodes-paper.tfrecord")) as w:
    for i in range(NUM_NODES):
      ex = tf.train.Example()
      ex.features.feature["#id"].bytes_list.value.append(str(i).encode())
      ex.features.feature["feat"].float_list.value.extend(feat[i].tolist())
      ex.features.feature["label"].int64_list.value.append(int(community[i]))
      w.write(ex.SerializeToString())
  with tf.io.TFRecordWriter(os.path.join(d, "edges-cites.tfrecord")) as w:
    times = {e: int(t) for e, t in zip(sorted(edges), rng.integers(0, 100, len(edges)))}
    pairs = [(u, v) for u, v in edges] + [(v, u) for u, v in edges] + [
        (i, i) for i in range(NUM_NODES)]
    for u, v in pairs:
      ex = tf.train.Example()
      ex.features.feature["#source"].bytes_list.value.append(str(u).encode())
      ex.features.feature["#target"].bytes_list.value.append(str(v).encode())
      ex.features.feature["weight"].float_list.value.append(1.0)
      if timed:
        ex.features.feature["time"].int64_list.value.append(
            times.get((min(u, v), max(u, v)), 0))
      w.write(ex.SerializeToString())
  return len(edges)


def _run(root):
  from tfx import v1 as tfx
  from pipelines.planetoid import pipeline as planetoid_pipeline
  tables = os.path.join(root, "tables")
  if not os.path.exists(tables):
    _write_tables(tables)
  link = planetoid_pipeline.link_config([5, 3], seed=1)
  link["splits"] = {"train": 0.7, "eval": 0.15, "test": 0.15}
  tfx.orchestration.LocalDagRunner().run(planetoid_pipeline.create_link_pipeline(
      pipeline_name=PIPELINE, pipeline_root=os.path.join(root, "pipeline_root"),
      tables_dir=tables, metadata=os.path.join(root, "metadata.sqlite"), link=link,
      bulk_infer_split="test", mode=planetoid_pipeline.SAMPLED, graph_inference=True,
      evaluation_split="test",
      custom_config={"global_batch_size": 64, "epochs": 10, "seed": 2,
                     "summarize_every_n_steps": "never", "restore_best_weights": True,
                     "restore_best_weights_by": "max:val_auc",
                     # The ends marked from _readout: also in the export's serving.
                     "hparams": {"mark_ends": True}}))
  return os.path.join(root, "metadata.sqlite")


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("links_e2e"))
  return {"root": root, "metadata": _run(root)}


def _latest(run, type_name):
  return mlmd_utils.latest_artifact(run["metadata"], type_name, PIPELINE)


def test_model_in_mlmd_with_link_metrics_and_lineage(pipeline_run):
  from ml_metadata.proto import metadata_store_pb2 as pb
  model = _latest(pipeline_run, "Model")
  props = mlmd_utils.custom_properties(model)
  assert props["eval_auc"] > 0.75, props  # communities: far above chance (0.5)
  assert 0 < props["eval_average_precision"] <= 1
  examples = _latest(pipeline_run, "Examples")
  eprops = mlmd_utils.custom_properties(examples)
  assert eprops["num_positives_eval"] == eprops["num_negatives_eval"] > 0
  store = mlmd_utils.store(pipeline_run["metadata"])
  event = [e for e in store.get_events_by_artifact_ids([model.id]) if e.type == pb.Event.OUTPUT][0]
  inputs = [e.artifact_id for e in store.get_events_by_execution_ids([event.execution_id])
            if e.type == pb.Event.INPUT]
  assert examples.id in inputs
  producer = [e for e in store.get_events_by_artifact_ids([examples.id])
              if e.type == pb.Event.OUTPUT][0]
  execution = store.get_executions_by_id([producer.execution_id])[0]
  assert store.get_execution_types_by_id([execution.type_id])[0].name.endswith("LinkSampler")


def test_test_pairs_scored_without_labels(pipeline_run):
  from pipelines.planetoid import pipeline as planetoid_pipeline
  model = _latest(pipeline_run, "Model")
  examples = _latest(pipeline_run, "Examples")
  scores = planetoid_pipeline.evaluate_link_model(
      os.path.join(model.uri, "Format-Serving"), examples.uri, "test")
  assert scores["num_examples"] == 2 * scores["num_positives"] > 0
  assert scores["auc"] > 0.75 and scores["average_precision"] > 0.7, scores
  assert 0 < scores["hits@10"] <= scores["hits@50"] <= 1, scores


def test_graph_evaluator_holds_out_what_link_sampler_held_out(pipeline_run):
  """A model trained on LinkSampler's examples: GraphEvaluator, given the same link_config,
  draws the same test split (the graph core's seeded rules on the tables) and scores it as
  the exported model scores LinkSampler's own test examples."""
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  from pipelines.planetoid import pipeline as planetoid_pipeline
  result = evaluation_lib.read(_latest(pipeline_run, "ModelEvaluation").uri)
  model = result["metrics"]["model"]["all"]
  eprops = mlmd_utils.custom_properties(_latest(pipeline_run, "Examples"))
  assert model["num_nodes"] == eprops["num_positives_test"] + eprops["num_negatives_test"]
  scores = planetoid_pipeline.evaluate_link_model(
      os.path.join(_latest(pipeline_run, "Model").uri, "Format-Serving"),
      _latest(pipeline_run, "Examples").uri, "test")
  # The same pairs; the subgraphs around them sampled by another engine (Beam, in memory).
  assert model["auc"] == pytest.approx(scores["auc"], abs=0.03), (model, scores)
  assert set(result["metrics"]) >= {"model", "popularity", "common_neighbours", "adamic_adar"}


def test_serves_candidate_pairs_in_fresh_process_without_tfgnn(pipeline_run, tmp_path):
  import tensorflow as tf
  from pipelines.planetoid import pipeline as planetoid_pipeline
  model = _latest(pipeline_run, "Model")
  examples = _latest(pipeline_run, "Examples")
  files = serving.split_files(examples.uri, "test")
  raw = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP").take(6)]
  requests = [planetoid_pipeline.without_link_labels(r)[0] for r in raw]
  assert all(b"_readout.label" not in r for r in requests)
  got = helpers.serve_in_fresh_process(
      os.path.join(model.uri, "Format-Serving"), requests, str(tmp_path))
  assert got["tfgnn_imported"] is False
  (name, scores), = got["outputs"].items()
  assert np.array(scores).reshape(-1).shape == (6,), (name, scores)
  source, target = (np.array(got["embeddings"][f"{end}_embedding"]) for end in ("source", "target"))
  assert source.shape == target.shape and source.shape[0] == 6 and source.shape[1] > 1
  assert np.isfinite(source).all() and not np.allclose(source, target)
  serve = tf.saved_model.load(os.path.join(model.uri, "Format-Serving")).signatures[
      "serving_default"]
  with_labels = next(iter(serve(examples=tf.constant(raw)).values())).numpy().reshape(-1)
  np.testing.assert_allclose(np.array(scores).reshape(-1), with_labels, atol=1e-5)


def test_graph_inferrer_embeds_every_paper(pipeline_run):
  """GraphInferrer on the tables: each paper's state as an end of a pair, keyed by id."""
  from gnn_trainer_component.model import embeddings_table as table
  embeddings = _latest(pipeline_run, "gnn_trainer_component.Embeddings")
  props = mlmd_utils.custom_properties(embeddings)
  assert props["num_nodes"] == NUM_NODES and props["columns"] == "id,embedding"
  rows = table.read(embeddings.uri)
  assert rows["id"].tolist() == [str(i) for i in range(NUM_NODES)]
  vectors = np.stack(rows["embedding"].to_numpy())
  assert vectors.shape[0] == NUM_NODES and np.isfinite(vectors).all()
  store = mlmd_utils.store(pipeline_run["metadata"])
  execution, name = helpers.producer(store, embeddings.id)
  assert name.endswith("GraphInferrer")
  assert set(helpers.execution_inputs(store, execution.id)) == {
      "Model", "gnn_trainer_component.GraphSchema", "ExampleAnomalies"}


def test_graph_inferrer_refuses_serving_default_of_a_link_model(pipeline_run, tmp_path):
  """serving_default scores pairs: asked alone (without embeddings), it is refused too."""
  from gnn_trainer_component.inferrer import config as config_lib
  from gnn_trainer_component.inferrer import in_memory
  from gnn_trainer_component.inferrer import signatures
  model = _latest(pipeline_run, "Model")
  path = str(tmp_path / "out.parquet")
  with pytest.raises(signatures.InferenceInputError, match=r"scores pairs of nodes"):
    in_memory.infer(os.path.join(pipeline_run["root"], "tables"),
                    os.path.join(model.uri, "Format-Serving"), path,
                    cfg=config_lib.InferenceConfig(signatures=("serving_default",)),
                    sampling_config={"seed_node_set": "paper", "hops": [{"cites": 3}]})
  assert not os.path.exists(path)


def test_bulk_inferrer_scores_every_test_pair(pipeline_run):
  import tensorflow as tf
  from tensorflow_serving.apis import prediction_log_pb2
  inference = _latest(pipeline_run, "InferenceResult")
  files = tf.io.gfile.glob(os.path.join(inference.uri, "*.gz"))
  logs = [prediction_log_pb2.PredictionLog.FromString(r) for r in
          tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator()]
  examples = _latest(pipeline_run, "Examples")
  assert len(logs) == mlmd_utils.custom_properties(examples)["num_positives_test"] * 2
  serve = tf.saved_model.load(os.path.join(_latest(pipeline_run, "Model").uri,
                                           "Format-Serving")).signatures["serving_default"]
  for log in logs[:8]:  # each logged score is the model's score of the logged request
    request = log.predict_log.request.inputs["examples"].string_val[0]
    (name, tensor), = log.predict_log.response.outputs.items()
    want = next(iter(serve(examples=tf.constant([request])).values())).numpy().reshape(-1)
    np.testing.assert_allclose(tf.make_ndarray(tensor).reshape(-1), want, atol=1e-5)
