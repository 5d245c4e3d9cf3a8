"""A planted leak: each seed's label is written on an edge after its time.

One LocalDagRunner pipeline trains GnnTrainer twice on the same tables held in memory: with
uniform sampling, which sees the future edge and so the label (near 100 % accuracy: the leak
a timeless sampler lets through), and with ``uniform_before``, which samples only the edges
before each seed's time (chance). A sampler that leaked would score the first's accuracy in
the second; this test is the one that fails then. GraphEvaluator scores the time-aware model
on the same seeds at their times, and GraphInferrer embeds every node as of a time.
"""

import os

import numpy as np
import pandas as pd
import pytest

from pipelines.runtime import mlmd_utils
from tests import helpers

pytestmark = [pytest.mark.slow]

PIPELINE = "temporal-leak-e2e"
#: The link evaluation ranks each test edge among this many negatives.
NEGATIVES_PER_QUERY = 20
#: Every event of an item before the seed's time (fan-out 8 > its 4 events).
TIMED = {"seed_node_set": "item",
         "hops": [{"event": {"fanout": 8, "strategy": "uniform_before", "time": "time"}}]}
NUM_ITEMS = 300
SCHEMA = """
node_sets { key: "item" value {
  features { key: "x" value { dtype: DT_FLOAT } }
  features { key: "label" value { dtype: DT_INT64 } }
  metadata { filename: "items.csv" } } }
node_sets { key: "tag" value {
  features { key: "code" value { dtype: DT_FLOAT } }
  metadata { filename: "tags.csv" } } }
edge_sets { key: "event" value {
  source: "item" target: "tag"
  features { key: "time" value { dtype: DT_INT64 } }
  metadata { filename: "events.csv" } } }
"""

MODULE = '''
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

def model_fn(spec):
  graph = inputs = tf.keras.Input(type_spec=spec)
  columns = {"item": "x", "tag": "code"}
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: tf.keras.layers.Dense(8, "relu")(
          node_set[columns[node_set_name]][:, None]))(graph)
  graph = tfgnn.keras.layers.GraphUpdate(node_sets={"item": tfgnn.keras.layers.NodeSetUpdate(
      {"event": tfgnn.keras.layers.SimpleConv(tf.keras.layers.Dense(8), "sum",
                                               receiver_tag=tfgnn.SOURCE)},
      tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(8, "relu")))})(graph)
  return tf.keras.Model(inputs, graph)

def optimizer_fn():
  return tf.keras.optimizers.Adam(learning_rate=0.01)

def task():
  return runner.RootNodeMulticlassClassification(
      "item", num_classes=2, label_fn=runner.RootNodeLabelFn("item", feature_name="label"))
'''


def _write_tables(d):
  """Items with a time; three tag edges before it (noise), one after it to the label's tag."""
  rng = np.random.default_rng(0)
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "graph_schema.pbtxt"), "w") as f:
    f.write(SCHEMA)
  labels = rng.integers(0, 2, NUM_ITEMS)
  times = rng.integers(100, 200, NUM_ITEMS)
  with open(os.path.join(d, "items.csv"), "w") as f:
    f.write("id,x,label\n" + "".join(f"i{i},{rng.normal():.4f},{labels[i]}\n"
                                     for i in range(NUM_ITEMS)))
  with open(os.path.join(d, "tags.csv"), "w") as f:
    f.write("id,code\nneg,-1\npos,1\nnoise,0\n")
  with open(os.path.join(d, "events.csv"), "w") as f:
    f.write("source,target,time\n")
    for i in range(NUM_ITEMS):
      for back in (1, 2, 3):
        f.write(f"i{i},noise,{times[i] - back}\n")
      f.write(f"i{i},{('neg', 'pos')[labels[i]]},{times[i] + 1}\n")
  for split, rows in (("train", range(240)), ("eval", range(240, NUM_ITEMS))):
    with open(os.path.join(d, f"seeds-{split}.csv"), "w") as f:
      f.write("id,time\n" + "".join(f"i{i},{times[i]}\n" for i in rows))
  with open(os.path.join(d, "module.py"), "w") as f:
    f.write(MODULE)
  return labels[240:]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer, GraphEvaluator, GraphSampler, GraphSchema
  from pipelines.runtime import mlmd_connection
  root = str(tmp_path_factory.mktemp("temporal"))
  tables = os.path.join(root, "tables")
  eval_labels = _write_tables(tables)
  importer = tfx.dsl.Importer(source_uri=tables, artifact_type=GraphSchema).with_id("tables")
  trainers = []
  for name, sampling in (("timeless", {"seed_node_set": "item", "hops": [{"event": 8}]}),
                         ("before", TIMED)):
    trainers.append(GnnTrainer(
        module_file=os.path.join(tables, "module.py"), graph_schema=importer.outputs["result"],
        seeds={"train": "seeds-train.csv", "eval": "seeds-eval.csv"}, sampling_config=sampling,
        train_args=tfx.proto.TrainArgs(splits=["train"]),
        eval_args=tfx.proto.EvalArgs(splits=["eval"]),
        custom_config={"global_batch_size": 16, "epochs": 8, "seed": 3,
                       "graph_mode": "sampled", "summarize_every_n_steps": "never"},
    ).with_id(name))
  # The Beam engine: GraphSampler samples each seed before its time (its own engine), and
  # GnnTrainer trains on its examples.
  sampler = GraphSampler(graph_schema=importer.outputs["result"],
                         seeds={"train": "seeds-train.csv", "eval": "seeds-eval.csv"},
                         sampling_config=TIMED).with_id("sampler")
  trainers.append(GnnTrainer(
      module_file=os.path.join(tables, "module.py"), examples=sampler.outputs["examples"],
      graph_schema=sampler.outputs["output_graph_schema"],
      train_args=tfx.proto.TrainArgs(splits=["train"]),
      eval_args=tfx.proto.EvalArgs(splits=["eval"]),
      custom_config={"global_batch_size": 16, "epochs": 8, "seed": 3,
                     "summarize_every_n_steps": "never"},
  ).with_id("beam_before"))
  evaluator = GraphEvaluator(
      model=trainers[1].outputs["model"], graph_schema=importer.outputs["result"],
      sampling_config=TIMED, eval_config={
          "task": "classification", "label": "label", "test_seeds": "seeds-eval.csv",
          "train_seeds": "seeds-train.csv"}).with_id("evaluator")
  metadata = os.path.join(root, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name=PIPELINE, pipeline_root=os.path.join(root, "pipeline_root"),
      components=[importer, sampler, *trainers, evaluator],
      metadata_connection_config=mlmd_connection.pipeline_connection_config(metadata)))
  store = mlmd_utils.store(metadata)
  models, uris = {}, {}
  for model in store.get_artifacts_by_type("Model"):
    _, name = helpers.producer(store, model.id)
    assert name.endswith("GnnTrainer")
    node = model.uri.split(os.sep + "pipeline_root" + os.sep)[1].split(os.sep)[0]
    models[node], uris[node] = mlmd_utils.custom_properties(model), model.uri
  evaluation = mlmd_utils.latest_artifact(metadata, "ModelEvaluation", PIPELINE)
  examples = mlmd_utils.latest_artifact(metadata, "Examples", PIPELINE)
  return {"models": models, "model_uris": uris, "tables": tables, "root": root,
          "examples": examples,
          "evaluation": mlmd_utils.custom_properties(evaluation),
          "majority": max(eval_labels.mean(), 1 - eval_labels.mean())}


def test_only_the_time_filter_keeps_the_future_label_out(run):
  timeless = run["models"]["timeless"]["eval_sparse_categorical_accuracy"]
  before = run["models"]["before"]["eval_sparse_categorical_accuracy"]
  # The timeless sampler reads the label off the future edge.
  assert timeless > 0.95, run["models"]["timeless"]
  # Sampling before each seed's time leaves only noise: chance (the eval split's majority
  # class, 60 seeds: a binomial standard deviation of about 0.065).
  assert before < run["majority"] + 0.15, (before, run["majority"])


def test_graph_sampler_on_beam_keeps_the_future_label_out_too(run):
  """The Beam engine's examples hold only the events before each seed: the model that trains
  on them is at chance, as the in-memory one, and no example holds the label's tag."""
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  from tfx.types import artifact_utils
  beam = run["models"]["beam_before"]["eval_sparse_categorical_accuracy"]
  assert beam < run["majority"] + 0.15, (beam, run["majority"])
  schema = tfgnn.parse_schema(SCHEMA)
  for node_set in schema.node_sets.values():
    node_set.ClearField("metadata")
  for edge_set in schema.edge_sets.values():
    edge_set.ClearField("metadata")
  spec = tfgnn.create_graph_spec_from_schema_pb(schema)
  examples = run["examples"]
  assert artifact_utils.decode_split_names(examples.properties["split_names"].string_value) == [
      "eval", "train"]
  count = 0
  for split in ("train", "eval"):
    uri = os.path.join(examples.uri, f"Split-{split}")
    for record in tf.data.TFRecordDataset(tf.io.gfile.glob(uri + "/*"), "GZIP"):
      graph = tfgnn.parse_single_example(spec, record)
      codes = graph.node_sets["tag"]["code"].numpy().tolist()
      # Three events to the noise tag (one edge: parallel edges count once), none to the label's.
      assert codes == [0.0] and int(graph.edge_sets["event"].sizes[0]) == 1, codes
      count += 1
  assert count == NUM_ITEMS


def test_graph_evaluator_scores_the_time_aware_model_at_each_seeds_time(run):
  # Fan-out 8 takes every event before the seed's time: the evaluator's subgraphs are the
  # trainer's validation subgraphs, so the accuracy is the trainer's, to the last digit.
  assert run["evaluation"]["num_nodes"] == NUM_ITEMS - 240
  assert run["evaluation"]["accuracy"] == pytest.approx(
      run["models"]["before"]["eval_sparse_categorical_accuracy"], abs=1e-6), run["evaluation"]


def test_graph_inferrer_embeds_every_node_as_of_a_time(run, tmp_path):
  from gnn_trainer_component.graph.errors import GraphInputError
  from gnn_trainer_component.inferrer import config as config_lib
  from gnn_trainer_component.inferrer import in_memory
  from gnn_trainer_component.inferrer.signatures import InferenceInputError
  model_dir = os.path.join(run["model_uris"]["before"], "Format-Serving")
  tables = {}
  for as_of in (50, 10**9):  # before every event; after every one (the labels' tags too)
    path = str(tmp_path / f"as_of_{as_of}.parquet")
    cfg = config_lib.parse({"signatures": ["serving_default"], "as_of": as_of})
    result = in_memory.infer(run["tables"], model_dir, path, cfg=cfg, sampling_config=TIMED)
    assert result.rows == NUM_ITEMS
    tables[as_of] = pd.read_parquet(path).set_index("id")
  early, late = (np.stack(tables[t].iloc[:, 0].to_numpy()) for t in (50, 10**9))
  # As of 50 no item has an event: its own feature only. As of the end, every event counts.
  assert not np.allclose(early, late)
  # The Beam engine (the samplers' own: a time-aware plan) embeds every node as of a time too:
  # at a fan-out that takes every earlier event, the same rows.
  import apache_beam as beam
  from gnn_trainer_component.inferrer import beam as beam_engine
  middle = int(np.median(pd.read_csv(os.path.join(run["tables"], "seeds-eval.csv"))["time"]))
  rows = {}
  for engine in ("in_memory", "beam"):
    path = str(tmp_path / f"{engine}.parquet")
    cfg = config_lib.parse({"signatures": ["serving_default"], "as_of": middle,
                            "engine": engine})
    if engine == "beam":
      beam_engine.infer(beam.Pipeline, [], run["tables"], model_dir, path, cfg=cfg,
                        sampling_config=TIMED)
    else:
      in_memory.infer(run["tables"], model_dir, path, cfg=cfg, sampling_config=TIMED)
    rows[engine] = pd.read_parquet(path).set_index("id").sort_index()
  assert len(rows["beam"]) == NUM_ITEMS
  np.testing.assert_allclose(np.stack(rows["beam"].iloc[:, 0].to_numpy()),
                             np.stack(rows["in_memory"].iloc[:, 0].to_numpy()), atol=1e-5)
  with pytest.raises(GraphInputError, match=r"asks for strategy 'uniform_before', which samples "
                                            r"before each seed's time, but GraphInferrer has no "
                                            r"time per seed here. Give the time \(inference_config "
                                            r"'as_of'"):
    in_memory.infer(run["tables"], model_dir, str(tmp_path / "x.parquet"),
                    cfg=config_lib.parse({"signatures": ["serving_default"]}),
                    sampling_config=TIMED)
  with pytest.raises(InferenceInputError, match=r"as_of'\] = 50 bounds time-aware sampling"):
    in_memory.infer(run["tables"], model_dir, str(tmp_path / "y.parquet"),
                    cfg=config_lib.parse({"as_of": 50}),
                    sampling_config={"seed_node_set": "item", "hops": [{"event": 8}]})


@pytest.fixture(scope="module")
def link_run(tmp_path_factory):
  from tfx import v1 as tfx
  from pipelines.planetoid import pipeline as planetoid_pipeline
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  from tests import test_link_prediction_e2e as links_e2e
  root = str(tmp_path_factory.mktemp("temporal_links"))
  tables = os.path.join(root, "tables")
  links_e2e._write_tables(tables, timed=True)  # pylint: disable=protected-access
  link = planetoid_pipeline.link_config([5, 3], seed=1)
  del link["splits"]
  link["time_split"] = {"time": "time", "from": {"train": None, "eval": 70, "test": 85}}
  link["hops"] = [{"cites": {"fanout": f, "strategy": "uniform_before", "time": "time"}}
                  for f in (5, 3)]
  out = {}
  for mode in (planetoid_pipeline.IN_MEMORY, planetoid_pipeline.SAMPLED):
    name = f"temporal-links-{mode.replace('_', '-')}"
    metadata = os.path.join(root, f"{mode}.sqlite")
    tfx.orchestration.LocalDagRunner().run(planetoid_pipeline.create_link_pipeline(
        pipeline_name=name, pipeline_root=os.path.join(root, mode), tables_dir=tables,
        metadata=metadata, link=link, mode=mode, evaluation_split="test",
        negatives_per_query=NEGATIVES_PER_QUERY,
        custom_config={"global_batch_size": 64, "epochs": 6, "seed": 2,
                       "summarize_every_n_steps": "never"}))
    out[mode] = {kind: mlmd_utils.custom_properties(mlmd_utils.latest_artifact(
        metadata, kind, name)) for kind in ("Model", "ModelEvaluation")}
    out[mode]["metrics"] = evaluation_lib.read(mlmd_utils.latest_artifact(
        metadata, "ModelEvaluation", name).uri)["metrics"]
    # Lineage: the Model's producer and what it read, the evaluation's producer and inputs.
    store = mlmd_utils.store(metadata)
    model = mlmd_utils.latest_artifact(metadata, "Model", name)
    trainer, trainer_type = helpers.producer(store, model.id)
    inputs = helpers.execution_inputs(store, trainer.id)
    out[mode]["lineage"] = {
        "trainer": trainer_type,
        "trainer_inputs": {t: helpers.producer(store, a.id)[1] if t == "Examples" else a.uri
                           for t, a in inputs.items()},
        "evaluator_inputs": sorted(helpers.execution_inputs(store, helpers.producer(
            store, mlmd_utils.latest_artifact(metadata, "ModelEvaluation", name).id)[0].id))}
  return out


def test_time_split_link_prediction_trains_on_the_past_and_scores_the_future(link_run):
  # Each eval pair (times 70-84) is predicted from the citations before its time; the
  # communities are in them, so the future edges are well ranked.
  model, evaluation = link_run["in_memory"]["Model"], link_run["in_memory"]["ModelEvaluation"]
  assert model["graph_mode"] == "sampled" and model["eval_auc"] > 0.75, model
  assert "retrieval_splits" not in model  # ranking every node per query time: not run
  # GraphEvaluator scores the test pairs (times 85-99) at their times, and ranks each among
  # its negatives, every candidate pair on its subgraph as of the query's time; the baselines
  # read only the edges before each pair too. The model beats them all.
  assert evaluation["auc"] > 0.75, evaluation
  chance = 1 / (NEGATIVES_PER_QUERY + 1)
  assert evaluation["mrr"] > 3 * chance, evaluation
  metrics = {name: m["all"] for name, m in link_run["in_memory"]["metrics"].items()}
  for name in ("popularity", "common_neighbours", "adamic_adar", "edgebank", "edgebank_window",
               "recency"):
    assert metrics["model"]["auc"] > metrics[name]["auc"], (name, metrics)
    assert metrics["model"]["mrr"] > metrics[name]["mrr"], (name, metrics)


def test_both_link_pipelines_are_in_mlmd_with_their_lineage(link_run):
  for mode, run in link_run.items():
    lineage = run["lineage"]
    assert lineage["trainer"].endswith("GnnTrainer"), lineage
    assert "Model" in lineage["evaluator_inputs"], lineage
  # Sampled: GnnTrainer read LinkSampler's Examples; in memory: the tables themselves.
  assert link_run["sampled"]["lineage"]["trainer_inputs"]["Examples"].endswith("LinkSampler")
  assert "Examples" not in link_run["in_memory"]["lineage"]["trainer_inputs"]
  from gnn_trainer_component import artifacts
  tables = link_run["in_memory"]["lineage"]["trainer_inputs"][artifacts.GraphSchema.TYPE_NAME]
  assert os.path.basename(tables) == "tables", tables


def test_link_sampler_writes_the_time_split_and_its_model_scores_the_future(link_run):
  # LinkSampler's examples: the same split, each pair's hops before its time (checked in
  # every example as it is written); GnnTrainer trains on them, GraphEvaluator scores the
  # test pairs in memory, at their times.
  model, evaluation = link_run["sampled"]["Model"], link_run["sampled"]["ModelEvaluation"]
  assert model["eval_auc"] > 0.75, model
  assert evaluation["auc"] > 0.75 and evaluation["mrr"] > 3 / (NEGATIVES_PER_QUERY + 1), evaluation
