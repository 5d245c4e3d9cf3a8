"""A planted leak: each seed's label is written on an edge after its time.

One LocalDagRunner pipeline trains GnnTrainer twice on the same tables held in memory: with
uniform sampling, which sees the future edge and so the label (near 100 % accuracy: the leak
a timeless sampler lets through), and with ``uniform_before``, which samples only the edges
before each seed's time (chance). A sampler that leaked would score the first's accuracy in
the second; this test is the one that fails then.
"""

import os

import numpy as np
import pytest

from pipelines.runtime import mlmd_utils
from tests import helpers

pytestmark = [pytest.mark.slow]

PIPELINE = "temporal-leak-e2e"
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
  from gnn_trainer_component import GnnTrainer, GraphSchema
  from pipelines.runtime import mlmd_connection
  root = str(tmp_path_factory.mktemp("temporal"))
  tables = os.path.join(root, "tables")
  eval_labels = _write_tables(tables)
  importer = tfx.dsl.Importer(source_uri=tables, artifact_type=GraphSchema).with_id("tables")
  trainers = []
  for name, hop in (("timeless", 8),
                    ("before", {"fanout": 8, "strategy": "uniform_before", "time": "time"})):
    trainers.append(GnnTrainer(
        module_file=os.path.join(tables, "module.py"), graph_schema=importer.outputs["result"],
        seeds={"train": "seeds-train.csv", "eval": "seeds-eval.csv"},
        sampling_config={"seed_node_set": "item", "hops": [{"event": hop}]},
        train_args=tfx.proto.TrainArgs(splits=["train"]),
        eval_args=tfx.proto.EvalArgs(splits=["eval"]),
        custom_config={"global_batch_size": 16, "epochs": 8, "seed": 3,
                       "graph_mode": "sampled", "summarize_every_n_steps": "never"},
    ).with_id(name))
  metadata = os.path.join(root, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name=PIPELINE, pipeline_root=os.path.join(root, "pipeline_root"),
      components=[importer, *trainers],
      metadata_connection_config=mlmd_connection.pipeline_connection_config(metadata)))
  store = mlmd_utils.store(metadata)
  models = {}
  for model in store.get_artifacts_by_type("Model"):
    execution, name = helpers.producer(store, model.id)
    assert name.endswith("GnnTrainer")
    models[model.uri.split(os.sep + "pipeline_root" + os.sep)[1].split(os.sep)[0]] = (
        mlmd_utils.custom_properties(model))
  return {"models": models, "majority": max(eval_labels.mean(), 1 - eval_labels.mean())}


def test_only_the_time_filter_keeps_the_future_label_out(run):
  timeless = run["models"]["timeless"]["eval_sparse_categorical_accuracy"]
  before = run["models"]["before"]["eval_sparse_categorical_accuracy"]
  # The timeless sampler reads the label off the future edge.
  assert timeless > 0.95, run["models"]["timeless"]
  # Sampling before each seed's time leaves only noise: chance (the eval split's majority
  # class, 60 seeds: a binomial standard deviation of about 0.065).
  assert before < run["majority"] + 0.15, (before, run["majority"])
