"""GraphInferrer: a Model over every node of a graph held in memory -> an Embeddings table.

One small pipeline on LocalDagRunner: tables -> GraphSampler (every node a seed,
fan-outs that take every neighbour) -> GnnTrainer -> GraphInferrer on the same
tables. Each node's row equals the export's signatures served on GraphSampler's
example of that node (the same subgraph, sampled by Beam), and MLMD records the
lineage Model + GraphSchema -> GraphInferrer -> Embeddings.
"""

import json
import logging
import os
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import full
from gnn_trainer_component.inferrer import in_memory
from gnn_trainer_component.inferrer import signatures
from gnn_trainer_component.model import embeddings_table as table
from gnn_trainer_component.model import whole_graph
from pipelines.runtime import mlmd_utils
from tests import helpers

PIPELINE = "inferrer-e2e"
NUM_NODES = 48
SCHEMA = """
node_sets { key: "v" value {
  features { key: "x" value { dtype: DT_FLOAT } }
  features { key: "y" value { dtype: DT_FLOAT } }
  features { key: "ident" value { dtype: DT_INT64 } }
  features { key: "label" value { dtype: DT_INT64 } }
  metadata { filename: "nodes.csv" } } }
edge_sets { key: "e" value { source: "v" target: "v" metadata { filename: "edges.csv" } } }
"""
#: Every node has at most 6 out-edges: fan-outs of 8 take every neighbour.
SAMPLING = {"seed_node_set": "v", "hops": [{"e": 8}, {"e": 8}]}

MODULE = '''
import tensorflow as tf
import tensorflow_gnn as tfgnn
from gnn_trainer_component import tasks as task_lib

def model_fn(spec):
  graph = inputs = tf.keras.Input(type_spec=spec)
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: tf.keras.layers.Dense(8, "relu")(
          tf.stack([node_set["x"], node_set["y"]], axis=-1)))(graph)
  for _ in range(2):
    graph = tfgnn.keras.layers.GraphUpdate(node_sets={"v": tfgnn.keras.layers.NodeSetUpdate(
        {"e": tfgnn.keras.layers.SimpleConv(tf.keras.layers.Dense(8), "mean",
                                             receiver_tag=tfgnn.SOURCE)},
        tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(8, "relu")))})(graph)
  return tf.keras.Model(inputs, graph)

def task():
  return task_lib.SeedMulticlassClassification(
      "v", num_classes=2, label_fn=task_lib.SeedLabelFn("v", feature_name="label"))
'''


def _write_tables(d):
  rng = np.random.default_rng(0)
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "graph_schema.pbtxt"), "w") as f:
    f.write(SCHEMA)
  x = rng.normal(size=(NUM_NODES, 2))
  with open(os.path.join(d, "nodes.csv"), "w") as f:
    f.write("id,x,y,ident,label\n")
    for i in range(NUM_NODES):
      f.write(f"n{i},{x[i, 0]:.4f},{x[i, 1]:.4f},{i},{int(x[i, 0] > 0)}\n")
  with open(os.path.join(d, "edges.csv"), "w") as f:
    f.write("source,target\n")
    for u in range(NUM_NODES):
      for v in rng.choice(NUM_NODES, size=rng.integers(1, 7), replace=False):
        f.write(f"n{u},n{v}\n")
  for name, ids in (("all", range(NUM_NODES)), ("eval", range(0, NUM_NODES, 4)),
                    ("some", (5, 17, 3))):
    with open(os.path.join(d, f"seeds-{name}.csv"), "w") as f:
      f.write("id\n" + "".join(f"n{i}\n" for i in ids))
  with open(os.path.join(d, "module.py"), "w") as f:
    f.write(MODULE)


def _run(root):
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer, GraphInferrer, GraphSampler, GraphSchema
  from pipelines.runtime import mlmd_connection
  tables = os.path.join(root, "tables")
  _write_tables(tables)
  importer = tfx.dsl.Importer(source_uri=tables, artifact_type=GraphSchema).with_id("tables")
  sampler = GraphSampler(graph_schema=importer.outputs["result"],
                         seeds={"train": "seeds-all.csv", "eval": "seeds-eval.csv"},
                         sampling_config=SAMPLING)
  trainer = GnnTrainer(
      module_file=os.path.join(tables, "module.py"), examples=sampler.outputs["examples"],
      graph_schema=sampler.outputs["output_graph_schema"],
      train_args=tfx.proto.TrainArgs(splits=["train"], num_steps=6),
      eval_args=tfx.proto.EvalArgs(splits=["eval"]),
      custom_config={"global_batch_size": 16, "epochs": 1, "seed": 1,
                     "summarize_every_n_steps": "never"})
  inferrer = GraphInferrer(model=trainer.outputs["model"], graph_schema=importer.outputs["result"],
                           sampling_config=SAMPLING,
                           inference_config={"signatures": ["embeddings", "serving_default"],
                                             "batch_size": 20})
  metadata = os.path.join(root, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name=PIPELINE, pipeline_root=os.path.join(root, "pipeline_root"),
      components=[importer, sampler, trainer, inferrer],
      metadata_connection_config=mlmd_connection.pipeline_connection_config(metadata)))
  return {"metadata": metadata, "tables": tables}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  return _run(str(tmp_path_factory.mktemp("inferrer")))


def _latest(run, type_name):
  return mlmd_utils.latest_artifact(run["metadata"], type_name, PIPELINE)


@pytest.mark.slow
def test_every_node_equals_serving_its_graph_sampler_example(run):
  embeddings = _latest(run, "gnn_trainer_component.Embeddings")
  props = mlmd_utils.custom_properties(embeddings)
  assert props["node_set"] == "v" and props["num_nodes"] == NUM_NODES
  assert props["columns"] == "id,embedding,logits"
  assert os.listdir(embeddings.uri) == [table.FILE]
  rows = table.read(embeddings.uri)
  assert rows["id"].tolist() == [f"n{i}" for i in range(NUM_NODES)]
  # GraphSampler's example of each node, served by the export.
  examples = _latest(run, "Examples")
  from pipelines import serving
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      serving.split_files(examples.uri, "train"), compression_type="GZIP")]
  assert len(records) == NUM_NODES
  seeds = [tf.train.Example.FromString(r).features.feature["nodes/v.ident"].int64_list.value[0]
           for r in records]
  model = tf.saved_model.load(os.path.join(_latest(run, "Model").uri, "Format-Serving"))
  batch = tf.constant(records)
  served = {**model.signatures["embeddings"](examples=batch),
            **model.signatures["serving_default"](examples=batch)}
  for column in ("embedding", "logits"):
    got = np.stack(rows[column].to_numpy())[seeds]
    assert got.shape == (NUM_NODES, 8 if column == "embedding" else 2)
    np.testing.assert_allclose(got, served[column].numpy(), atol=1e-5)
  assert np.abs(np.stack(rows["embedding"].to_numpy())).sum() > 0


@pytest.mark.slow
def test_lineage_model_and_graph_to_embeddings(run):
  store = mlmd_utils.store(run["metadata"])
  embeddings = _latest(run, "gnn_trainer_component.Embeddings")
  execution, execution_type = helpers.producer(store, embeddings.id)
  assert execution_type.endswith("GraphInferrer")
  inputs = helpers.execution_inputs(store, execution.id)
  assert set(inputs) == {"Model", "gnn_trainer_component.GraphSchema"}
  assert inputs["Model"].id == _latest(run, "Model").id
  assert inputs["gnn_trainer_component.GraphSchema"].uri == run["tables"]


def _infer(run, tmp_path, **kwargs):
  model_dir = os.path.join(_latest(run, "Model").uri, "Format-Serving")
  path = str(tmp_path / "out.parquet")
  kwargs.setdefault("sampling_config", SAMPLING)
  result = in_memory.infer(run["tables"], model_dir, path,
                           cfg=kwargs.pop("cfg", config_lib.InferenceConfig()), **kwargs)
  return result, path


@pytest.mark.slow
def test_a_node_table_selects_nodes_and_bad_ones_are_named(run, tmp_path):
  result, path = _infer(run, tmp_path, nodes="seeds-some.csv")
  assert result.rows == 3 and result.columns == ["id", "embedding"]
  assert pd.read_parquet(path)["id"].tolist() == ["n5", "n17", "n3"]
  with open(os.path.join(run["tables"], "seeds-bad.csv"), "w") as f:
    f.write("id\nn1\nnope\n")
  with pytest.raises(GraphInputError, match=r"seeds-bad.csv.*nope"):
    _infer(run, tmp_path, nodes="seeds-bad.csv")
  with open(os.path.join(run["tables"], "seeds-dup.csv"), "w") as f:
    f.write("id\nn1\nn1\n")
  with pytest.raises(GraphInputError, match=r"seeds-dup.csv.*duplicate.*n1"):
    _infer(run, tmp_path, nodes="seeds-dup.csv")
  with pytest.raises(GraphInputError, match=r"unknown node set 'w'|'w'"):
    _infer(run, tmp_path, sampling_config={"seed_node_set": "w", "hops": [{"e": 2}]})


@pytest.mark.slow
def test_missing_signature_and_colliding_columns_are_refused(run, tmp_path):
  with pytest.raises(signatures.InferenceInputError, match=r"no signature \['scores'\].*has "
                     r"\['embeddings', 'serving_default'\]"):
    _infer(run, tmp_path, cfg=config_lib.InferenceConfig(signatures=("scores",)))


@pytest.mark.slow
def test_a_node_set_the_model_never_saw_and_a_folder_without_model_are_refused(run, tmp_path):
  """A graph with a second node set: the model has no state for its nodes (it was trained on
  'v' only), so inferring it is refused before any table is read; so is a Model folder
  without a SavedModel."""
  other = tmp_path / "tables"
  shutil.copytree(run["tables"], other)
  _second_node_set(other)
  with pytest.raises(signatures.InferenceInputError,
                     match=r"node set 'w' is not in the graph schema the model at .* was "
                           r"trained on \(its node sets: \['v'\]\)"):
    _infer({**run, "tables": str(other)}, tmp_path,
           sampling_config={"seed_node_set": "w", "hops": [{"wv": 4}]})
  assert not os.path.exists(tmp_path / "out.parquet")
  # A feature of another dtype: refused before any table is read (the tables are not changed).
  (other / "graph_schema.pbtxt").write_text(
      SCHEMA.replace('key: "x" value { dtype: DT_FLOAT }', 'key: "x" value { dtype: DT_INT64 }'))
  with pytest.raises(signatures.InferenceInputError,
                     match=r"feature 'x' of node set 'v' is int64 of shape \[\] in the graph, but "
                           r"the model at .* was trained on float32 of shape \[\]"):
    _infer({**run, "tables": str(other)}, tmp_path)
  assert not os.path.exists(tmp_path / "out.parquet")
  (tmp_path / "empty").mkdir()
  with pytest.raises(signatures.InferenceInputError, match=r"empty holds no SavedModel"):
    in_memory.infer(run["tables"], str(tmp_path / "empty"), str(tmp_path / "out.parquet"),
                    cfg=config_lib.InferenceConfig(), sampling_config=SAMPLING)
  assert not os.path.exists(tmp_path / "out.parquet")


def _second_node_set(tables):
  """Adds node set 'w' (the features of 'v') and edge set 'wv' w -> v to a copy of the tables."""
  node_set_v = SCHEMA[SCHEMA.index("node_sets"):SCHEMA.index("edge_sets")]
  (tables / "graph_schema.pbtxt").write_text(
      SCHEMA + node_set_v.replace('"v"', '"w"').replace("nodes.csv", "w.csv")
      + 'edge_sets { key: "wv" value { source: "w" target: "v" '
      'metadata { filename: "wv.csv" } } }\n')
  (tables / "w.csv").write_text("id,x,y,ident,label\nw0,0.1,0.2,0,1\n")
  (tables / "wv.csv").write_text("source,target\nw0,n1\n")


def _nul_in_node_table(tables):
  """A corrupt node table: a NUL byte inside the id of node n5 (line 7)."""
  path = tables / "nodes.csv"
  path.write_bytes(path.read_bytes().replace(b"\nn5,", b"\nn\x005,"))


#: Bad requests through a pipeline: (change to the tables, sampling_config, error text).
BAD_REQUESTS = {
    # Before: the csv module's bare "line contains NUL", or n5 read as 'n' (pandas cuts a
    # value at a NUL).
    "nul_byte_in_node_table": (_nul_in_node_table, SAMPLING,
                               "nodes.csv, line 7 holds a NUL byte"),
    # Before: published the state of some neighbour under the new node set's ids.
    "node_set_not_trained": (_second_node_set, {"seed_node_set": "w", "hops": [{"wv": 4}]},
                             "node set 'w' is not in the graph schema the model"),
    # Before: NotFoundError on the staging file.
    "empty_node_table": (lambda t: (t / "nodes.csv").write_text("id,x,y,ident,label\n"),
                         SAMPLING, "node table 'nodes.csv' of node set 'v' has no rows"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_a_bad_request_fails_the_execution_and_publishes_nothing(run, tmp_path, case):
  """LocalDagRunner: the GraphInferrer execution fails with the named cause, and ML Metadata
  holds no Embeddings artifact from it."""
  from ml_metadata.proto import metadata_store_pb2 as pb
  from tfx import v1 as tfx
  from gnn_trainer_component import GraphInferrer, GraphSchema
  from pipelines.runtime import mlmd_connection
  change, sampling_config, text = BAD_REQUESTS[case]
  tables = tmp_path / "tables"
  shutil.copytree(run["tables"], tables)
  change(tables)
  graph = tfx.dsl.Importer(source_uri=str(tables), artifact_type=GraphSchema).with_id("tables")
  model = tfx.dsl.Importer(source_uri=_latest(run, "Model").uri,
                           artifact_type=tfx.types.standard_artifacts.Model).with_id("model")
  inferrer = GraphInferrer(model=model.outputs["result"], graph_schema=graph.outputs["result"],
                           sampling_config=sampling_config)
  metadata = str(tmp_path / "metadata.sqlite")
  with pytest.raises(Exception) as raised:
    tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
        pipeline_name="bad-request", pipeline_root=str(tmp_path / "root"),
        components=[graph, model, inferrer],
        metadata_connection_config=mlmd_connection.pipeline_connection_config(metadata)))
  chain, error = [], raised.value
  while error is not None:
    chain.append(error)
    error = error.__cause__ or error.__context__
  named = [e for e in chain if isinstance(e, GraphInputError) and text in str(e)]
  assert named, [f"{type(e).__name__}: {e}" for e in chain]
  store = mlmd_utils.store(metadata)
  inferrers = [e for e in store.get_executions()
               if store.get_execution_types_by_id([e.type_id])[0].name.endswith("GraphInferrer")]
  assert [e.last_known_state for e in inferrers] == [pb.Execution.FAILED]
  outputs = [ev.artifact_id for ev in store.get_events_by_execution_ids([inferrers[0].id])
             if ev.type == pb.Event.OUTPUT]
  assert [a.state for a in store.get_artifacts_by_id(outputs)
          if a.state == pb.Artifact.LIVE] == []


@pytest.mark.slow
def test_a_model_trained_in_memory_without_embeddings_is_published_and_served(run, tmp_path):
  """LocalDagRunner: GnnTrainer on the graph in memory with custom_config export_embeddings
  false (it crashed in its export before: ``'NoneType' object has no attribute 'output'``)
  publishes a Model with serving_default only, which GraphInferrer runs on every node, and
  refuses to embed with by name."""
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer, GraphInferrer, GraphSchema
  from pipelines.runtime import mlmd_connection
  tables = run["tables"]
  graph = tfx.dsl.Importer(source_uri=tables, artifact_type=GraphSchema).with_id("tables")
  trainer = GnnTrainer(
      module_file=os.path.join(tables, "module.py"), graph_schema=graph.outputs["result"],
      seeds={"train": "seeds-all.csv", "eval": "seeds-eval.csv"}, sampling_config=SAMPLING,
      train_args=tfx.proto.TrainArgs(splits=["train"], num_steps=2),
      eval_args=tfx.proto.EvalArgs(splits=["eval"]),
      custom_config={"global_batch_size": 16, "epochs": 1, "seed": 1,
                     "summarize_every_n_steps": "never", "export_embeddings": False})
  inferrer = GraphInferrer(model=trainer.outputs["model"], graph_schema=graph.outputs["result"],
                           sampling_config=SAMPLING,
                           inference_config={"signatures": ["serving_default"]})
  metadata = str(tmp_path / "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name="no-embeddings", pipeline_root=str(tmp_path / "root"),
      components=[graph, trainer, inferrer],
      metadata_connection_config=mlmd_connection.pipeline_connection_config(metadata)))
  model = mlmd_utils.latest_artifact(metadata, "Model", "no-embeddings")
  assert "embeddings_outputs" not in mlmd_utils.custom_properties(model)
  model_dir = os.path.join(model.uri, "Format-Serving")
  assert sorted(tf.saved_model.load(model_dir).signatures) == ["serving_default"]
  embeddings = mlmd_utils.latest_artifact(metadata, "gnn_trainer_component.Embeddings",
                                          "no-embeddings")
  rows = table.read(embeddings.uri)
  assert list(rows.columns) == ["id", "logits"] and len(rows) == NUM_NODES
  with pytest.raises(signatures.InferenceInputError,
                     match=r"no signature \['embeddings'\].*export_embeddings"):
    in_memory.infer(tables, model_dir, str(tmp_path / "out.parquet"),
                    cfg=config_lib.InferenceConfig(), sampling_config=SAMPLING)


def _run_executor(run, out_dir, inference_config, beam_pipeline_args=(), nodes=None,
                  blessed=None):
  """GraphInferrer's executor as TFX runs it; returns the Embeddings artifact.

  ``blessed``: give a ``ModelBlessing`` with this ``blessed`` property.
  """
  from tfx.dsl.components.base import base_beam_executor
  from tfx.types import standard_artifacts
  from gnn_trainer_component import artifacts
  from gnn_trainer_component.inferrer import executor
  model = standard_artifacts.Model()
  model.uri = _latest(run, "Model").uri
  graph = artifacts.GraphSchema()
  graph.uri = run["tables"]
  out = artifacts.Embeddings()
  out.uri = str(out_dir)
  os.makedirs(out.uri, exist_ok=True)  # as TFX's launcher makes the output folders
  ctx = base_beam_executor.BaseBeamExecutor.Context(
      beam_pipeline_args=list(beam_pipeline_args), tmp_dir=str(out_dir) + "-tmp", unique_id="1")
  inputs = {"model": [model], "graph_schema": [graph]}
  if blessed is not None:
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(out_dir) + "-blessing"
    blessing.set_int_custom_property("blessed", blessed)
    inputs["model_blessing"] = [blessing]
  executor.Executor(ctx).Do(inputs, {"embeddings": [out]},
                            {"sampling_config": json.dumps(SAMPLING),
                             "inference_config": json.dumps(inference_config), "nodes": nodes})
  return out


@pytest.mark.slow
def test_beam_engine_agrees_with_the_in_memory_engine(run, tmp_path):
  """TF-GNN's Beam sampler and the in-memory sampler take every neighbour: the same rows."""
  signatures = ["embeddings", "serving_default"]
  out = _run_executor(run, tmp_path / "beam", {"signatures": signatures, "engine": "beam",
                                               "batch_size": 16})
  assert out.get_string_custom_property("engine") == "beam"
  assert out.get_int_custom_property("num_nodes") == NUM_NODES
  assert sorted(os.listdir(out.uri)) == [table.FILE]  # no staging left
  beam_rows = table.read(out.uri).set_index("id").sort_index()
  memory_rows = table.read(
      _latest(run, "gnn_trainer_component.Embeddings").uri).set_index("id").sort_index()
  assert list(beam_rows.index) == list(memory_rows.index)
  import pyarrow.parquet as pq
  assert [(f.name, f.type) for f in pq.read_schema(os.path.join(out.uri, table.FILE))] == [
      (f.name, f.type) for f in pq.read_schema(os.path.join(
          _latest(run, "gnn_trainer_component.Embeddings").uri, table.FILE))]
  assert list(beam_rows.columns) == list(memory_rows.columns) == ["embedding", "logits"]
  for column in beam_rows.columns:
    np.testing.assert_allclose(np.stack(beam_rows[column].to_numpy()),
                               np.stack(memory_rows[column].to_numpy()), atol=1e-5)


@pytest.mark.slow
def test_a_model_that_is_not_blessed_is_not_run(run, tmp_path):
  """As the stock BulkInferrer: a ModelBlessing with blessed 0 stops it; the reason is in MLMD."""
  out = _run_executor(run, tmp_path / "not", {"engine": "in_memory"}, blessed=0)
  assert os.listdir(out.uri) == []
  assert out.get_int_custom_property("blessed") == 0
  assert out.get_int_custom_property("num_nodes") == 0
  assert "the model was not blessed" in out.get_string_custom_property("skipped")
  out = _run_executor(run, tmp_path / "yes", {"engine": "in_memory"}, blessed=1)
  assert out.get_int_custom_property("blessed") == 1
  assert out.get_int_custom_property("num_nodes") == NUM_NODES
  assert sorted(os.listdir(out.uri)) == [table.FILE]


@pytest.mark.slow
def test_a_graph_without_the_model_features_is_refused_and_nothing_published(run, tmp_path):
  other = tmp_path / "tables"
  shutil.copytree(run["tables"], other)
  (other / "graph_schema.pbtxt").write_text(
      SCHEMA.replace('  features { key: "y" value { dtype: DT_FLOAT } }\n', ""))
  nodes = pd.read_csv(other / "nodes.csv").drop(columns=["y"])
  nodes.to_csv(other / "nodes.csv", index=False)
  with pytest.raises(signatures.InferenceInputError,
                     match=r"(?s)signature 'embeddings' of the model at .*\(node set 'v' of .*"
                           r"\) rejects the subgraphs.*"
                           r"lacks \['nodes/v\.y'\] of the schema the model was trained on"):
    _infer({**run, "tables": str(other)}, tmp_path)
  assert not os.path.exists(tmp_path / "out.parquet")
  # The Beam engine checks the tables and the node table before any Beam work.
  (tmp_path / "tables" / "seeds-bad.csv").write_text("id\nn1\nnope\n")
  out = tmp_path / "beam"
  with pytest.raises(GraphInputError, match=r"GraphInferrer: .*seeds-bad.csv.*missing"):
    _run_executor({**run, "tables": str(other)}, out, {"engine": "beam"},
                  nodes="seeds-bad.csv")
  assert os.listdir(out) == []


def test_table_columns_per_output_shape(tmp_path):
  """One column type per output shape, whichever engine writes it."""
  import pyarrow as pa
  import pyarrow.parquet as pq
  assert table.column_type([None]) == pa.float32()
  assert table.column_type([None, 3]) == pa.list_(pa.float32(), 3)
  assert table.column_type([None, 2, 2]) == pa.list_(pa.float32(), 4)
  scores, vectors = np.array([0.5, 1.5]), np.arange(8.0).reshape(2, 2, 2)
  assert table.cell(scores, 1) == 1.5 and table.cell(vectors, 1) == [4.0, 5.0, 6.0, 7.0]
  writer = table.Writer(str(tmp_path / "t.parquet"))
  writer.write(np.array([b"a", b"b"], dtype=object), {"score": scores, "vector": vectors})
  writer.close()
  written = pq.read_table(tmp_path / "t.parquet")
  assert [(f.name, f.type) for f in written.schema] == [
      ("id", pa.string()), ("score", table.column_type([None])),
      ("vector", table.column_type([None, 2, 2]))]
  assert written.column("vector").to_pylist()[1] == [4.0, 5.0, 6.0, 7.0]


def test_inference_config_is_checked():
  assert config_lib.parse(None) == config_lib.InferenceConfig()
  cfg = config_lib.parse('{"signatures": ["serving_default"], "batch_size": 7}')
  assert cfg.signatures == ("serving_default",) and cfg.batch_size == 7
  assert config_lib.parse(config_lib.dumps(cfg)) == cfg
  for jit in (True, False):
    exact = config_lib.parse({"mode": "full_graph", "jit_compile": jit})
    assert exact.jit_compile is jit and config_lib.parse(config_lib.dumps(exact)) == exact
  assert config_lib.parse({"mode": "full_graph"}).jit_compile is None  # XLA where it compiles
  timed = config_lib.parse({"as_of": 1700000000})
  assert timed.as_of == 1700000000 and config_lib.parse(config_lib.dumps(timed)) == timed
  for bad, match in (({"batch": 1}, "unknown keys.*batch"),
                     ({"as_of": "2024-01-01"}, r"as_of'\] = '2024-01-01': expected a finite "
                                               "number"),
                     ({"as_of": float("nan")}, "as_of.*finite"),
                     ({"batch_size": 0}, r"batch_size.*int >= 1"),
                     ({"signatures": "embeddings"}, "signatures.*list"),
                     ({"signatures": []}, "signatures.*non-empty"),
                     ({"sampling_seed": -1}, "sampling_seed"),
                     ({"engine": "spark"}, r"engine.*'in_memory', 'beam'"),
                     ({"mode": "exact"}, r"mode.*'sampled', 'full_graph'"),
                     ({"mode": ["full"]}, r"mode.*'sampled', 'full_graph'"),
                     ({"mode": "full_graph", "engine": "beam"},
                      r"\"in_memory\" with mode \"full_graph\""),
                     ({"mode": "full", "as_of": 5}, r"as_of.*null with mode \"full_graph\""),
                     ({"mode": "full_graph", "jit_compile": "yes"},
                      "jit_compile.*true, false or null"),
                     ({"jit_compile": True},
                      r"jit_compile.*null or false unless mode is \"full_graph\""),
                     ("[1]", "must be a JSON object")):
    with pytest.raises(config_lib.InferenceConfigError, match=match):
      config_lib.parse(bad)


def test_inference_mode_full_is_the_deprecated_spelling_of_full_graph(caplog):
  # GnnTrainer's word for the whole graph (graph_mode "full_graph") is GraphInferrer's too.
  caplog.set_level(logging.WARNING, logger="absl")
  assert config_lib.parse({"mode": "full_graph"}).mode == config_lib.FULL_GRAPH == "full_graph"
  assert "deprecated" not in caplog.text
  cfg = config_lib.parse({"mode": "full", "jit_compile": True})
  assert cfg == config_lib.InferenceConfig(mode="full_graph", jit_compile=True)
  assert config_lib.parse(config_lib.dumps(cfg)) == cfg
  assert ("inference_config['mode'] = 'full' is deprecated: write 'full_graph'"
          in caplog.text), caplog.text


@pytest.mark.slow
def test_full_mode_equals_the_sampled_engine_at_fan_outs_that_take_every_neighbour(
    run, tmp_path, caplog):
  """Mode "full_graph": one pass of the model over the whole graph, every node read out.

  Through the executor (under XLA, the default) each node's embedding equals
  its sampled subgraph's (fan-outs 8 take every neighbour; the model's mean
  aggregation does not read a sender's degree), and the pass without XLA
  gives the same rows.
  """
  caplog.set_level(logging.INFO, logger="absl")
  sampled, _ = _infer(run, tmp_path)
  out = _run_executor(run, tmp_path / "full", {"mode": "full_graph"})
  assert "XLA cannot" not in caplog.text
  assert out.get_string_custom_property("mode") == "full_graph"
  assert out.get_int_custom_property("num_nodes") == NUM_NODES
  whole, by_node = table.read(out.uri), pd.read_parquet(tmp_path / "out.parquet")
  assert whole["id"].tolist() == by_node["id"].tolist()
  np.testing.assert_allclose(np.stack(whole["embedding"].to_numpy()),
                             np.stack(by_node["embedding"].to_numpy()), atol=1e-5)
  # A node table selects rows, in its order; without XLA, the same values.
  path = str(tmp_path / "some.parquet")
  result = full.infer(run["tables"], _model_dir(run), path, nodes="seeds-some.csv",
                      cfg=config_lib.InferenceConfig(mode="full_graph", jit_compile=False),
                      sampling_config=SAMPLING)
  some = pd.read_parquet(path)
  assert result.rows == 3 and some["id"].tolist() == ["n5", "n17", "n3"]
  np.testing.assert_allclose(np.stack(some["embedding"].to_numpy()),
                             np.stack(whole["embedding"].to_numpy())[[5, 17, 3]], atol=1e-5)
  # Layer by layer over chunks of at most 20 incident edges: the same rows.
  steps = json.loads((_model_path(run) / "assets.extra" / whole_graph.ASSET_FILE).read_text())
  assert [kind for _, kind in steps["layers"]["steps"]] == ["nodes", "neighbours", "neighbours"]
  caplog.clear()
  full.infer(run["tables"], _model_dir(run), path, sampling_config=SAMPLING,
             cfg=config_lib.InferenceConfig(mode="full_graph", chunk_edges=20))
  # The model pools the edges a node is the source of: its blocks hold those.
  assert "layer by layer in chunks of up to 20 edges (176 edges; an edge in the blocks of its " \
         "source)" in caplog.text
  np.testing.assert_allclose(np.stack(pd.read_parquet(path)["embedding"].to_numpy()),
                             np.stack(whole["embedding"].to_numpy()), atol=1e-5)


def test_the_whole_graph_pass_runs_under_xla_where_it_compiles(caplog):
  """run_pass: XLA by default, with the same values.

  A model XLA cannot compile (here: a NumPy op) runs without it, logged;
  ``jit_compile`` true makes that an error; a graph the model rejects is named.
  """
  caplog.set_level(logging.INFO, logger="absl")
  whole = {"nodes": {"v": {"x": tf.constant([[1.0, 2.0], [3.0, 4.0]])}}}

  @tf.function
  def compiles(graph):
    x = graph["nodes"]["v"]["x"]
    return {"embedding": tf.nn.relu(tf.matmul(x, x, transpose_b=True)) + 1.0}

  @tf.function
  def numpy_op(graph):
    x = graph["nodes"]["v"]["x"]
    return {"embedding": tf.numpy_function(lambda a: a * 2.0, [x], tf.float32)}

  @tf.function
  def rejects(graph):
    x = graph["nodes"]["v"]["x"]
    tf.debugging.assert_equal(tf.shape(x)[0], 3, message="needs 3 nodes")
    return {"embedding": x}

  for jit in (None, True, False):
    np.testing.assert_allclose(full.run_pass(compiles, whole, jit, "m", "g")["embedding"],
                               [[6.0, 12.0], [12.0, 26.0]])
  assert "XLA" not in caplog.text
  doubled = full.run_pass(numpy_op, whole, None, "the model at M ('embeddings')", "G")
  np.testing.assert_allclose(doubled["embedding"], [[2.0, 4.0], [6.0, 8.0]])
  assert re.search(r"XLA cannot run the pass of the model at M \('embeddings'\) \(no XLA kernel "
                   r"for: PyFunc .+\); running it without XLA", caplog.text)
  with pytest.raises(signatures.InferenceInputError,
                     match=r"XLA cannot run the pass of m on the graph g: no XLA kernel for: "
                           r"PyFunc .+jit_compile null"):
    full.run_pass(numpy_op, whole, True, "m", "g")
  with pytest.raises(signatures.InferenceInputError,
                     match=r"m rejects the graph g: assertion failed: \[needs 3 nodes\]"):
    full.run_pass(rejects, whole, False, "m", "g")


def _model_dir(run):
  return os.path.join(_latest(run, "Model").uri, "Format-Serving")


def _model_path(run):
  import pathlib
  return pathlib.Path(_model_dir(run))


@pytest.mark.slow
def test_full_mode_refuses_what_the_export_cannot_run_on_the_whole_graph(run, tmp_path):
  """Predictions of a model trained on examples, an export without whole-graph functions (or
  whose tasks read each subgraph's first node): refused, naming why and what to use."""
  def infer(model_dir, names=("embeddings",)):
    full.infer(run["tables"], model_dir, str(tmp_path / "out.parquet"),
               cfg=config_lib.InferenceConfig(mode="full_graph", signatures=names),
               sampling_config=SAMPLING)

  with pytest.raises(signatures.InferenceInputError,
                     match=r"runs \['embeddings'\] on the whole graph, not \['serving_default'\]"):
    infer(_model_dir(run), ("embeddings", "serving_default"))
  copy = tmp_path / "model"
  shutil.copytree(_model_dir(run), copy)
  asset = copy / "assets.extra" / whole_graph.ASSET_FILE
  asset.write_text(json.dumps({"refused": "task 'a' (RootNodeMulticlassClassification) does "
                                          "not read the seed readout"}))
  with pytest.raises(signatures.InferenceInputError,
                     match=r"cannot run on the whole graph: task 'a' .*does not read the seed "
                           r"readout\. Use inference_config mode \"sampled\""):
    infer(str(copy))
  asset.unlink()
  with pytest.raises(signatures.InferenceInputError, match=r"has no whole-graph functions"):
    infer(str(copy))
  assert not os.path.exists(tmp_path / "out.parquet")


def test_an_export_says_why_its_model_cannot_run_on_the_whole_graph():
  from tensorflow_gnn import runner
  spec = tfgnn.create_graph_spec_from_schema_pb(tfgnn.parse_schema(SCHEMA))
  first_node = {"a": runner.RootNodeMulticlassClassification(
      "v", num_classes=2, label_fn=runner.RootNodeLabelFn("v", feature_name="label"))}
  assert re.search(r"task 'a' \(RootNodeMulticlassClassification\) does not read the seed "
                   r"readout.*structured readout", whole_graph.refusal(spec, first_node, False))
  assert "export_embeddings false" in whole_graph.refusal(spec, None, False)
  assert "Transform" in whole_graph.refusal(spec, first_node, True)
  from gnn_trainer_component import tasks
  seed = {"a": tasks.SeedMulticlassClassification(
      "v", num_classes=2, label_fn=tasks.SeedLabelFn("v", feature_name="label"))}
  assert whole_graph.refusal(spec, seed, False) == ""


def test_component_refuses_bad_parameters_at_definition():
  from tfx import v1 as tfx
  from gnn_trainer_component import GraphInferrer
  from gnn_trainer_component.artifacts import GraphSchema
  model = tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model)
  graph = tfx.dsl.Channel(type=GraphSchema)
  with pytest.raises(ValueError, match="exactly one of 'sampling_spec' or 'sampling_config'"):
    GraphInferrer(model=model, graph_schema=graph)
  with pytest.raises(config_lib.InferenceConfigError, match="batch_size"):
    GraphInferrer(model=model, graph_schema=graph, sampling_config=SAMPLING,
                  inference_config={"batch_size": "big"})
  link = {"edge_set": "e", "splits": {"train": 0.8, "eval": 0.2}, "hops": [{"e": 2}]}
  with pytest.raises(ValueError, match="exactly one of .* or 'link_config' for a model of pairs"):
    GraphInferrer(model=model, graph_schema=graph, sampling_config=SAMPLING, link_config=link)
  with pytest.raises(ValueError, match="takes 'pairs' with 'link_config'"):
    GraphInferrer(model=model, graph_schema=graph, sampling_config=SAMPLING, pairs="p.csv")
  with pytest.raises(ValueError, match="and 'nodes' with a sampling config"):
    GraphInferrer(model=model, graph_schema=graph, link_config=link, nodes="n.csv")
  from gnn_trainer_component.model.loading import InferenceInputError
  with pytest.raises(InferenceInputError, match=r"inference_config engine 'beam' and mode "
                                                r"'sampled' are for nodes"):
    GraphInferrer(model=model, graph_schema=graph, link_config=link,
                  inference_config={"engine": "beam"})
  pairs = GraphInferrer(model=model, graph_schema=graph, link_config=link, pairs="p.csv")
  assert config_lib.parse(pairs.exec_properties["inference_config"]).signatures == (
      "serving_default",)  # a pair's prediction by default
  assert json.loads(pairs.exec_properties["link_config"]) == link


#: Bad tables as users write them: (file, line number to change (1 = header), new line).
BAD_TABLES = {
    "nan_feature": ("nodes.csv", 6, "n4,nan,0.1,4,1", r"line 6 \(id 'n4'\): feature 'x' is "
                    r"missing, not a number or not finite \('nan'\)"),
    "non_integral_int": ("nodes.csv", 7, "n5,0.1,0.1,1.7,1", r"line 7 \(id 'n5'\): feature "
                         r"'ident' is not an integer \(dtype int64\) \('1.7'\)"),
    "int_out_of_range": ("nodes.csv", 8, "n6,0.1,0.1,9223372036854775809,1",
                         r"line 8 \(id 'n6'\): feature 'ident' is out of the range of int64"),
    "empty_id": ("nodes.csv", 9, ",0.1,0.1,7,1", r"line 9: 'id' is empty"),
    "field_too_many": ("nodes.csv", 10, "n8,0.1,0.1,8,1,9", r"nodes.csv is malformed: .*"
                       r"Expected 5 fields in line 10, saw 6"),
    "field_too_few": ("edges.csv", 3, "n1", r"edges.csv, line 3: 'target' is empty \(the row "
                      r"has 1 of the header's 2 fields\)"),
    # A corrupt file: pandas alone would read the id as 'n'.
    "nul_byte": ("nodes.csv", 11, "n\x009,0.1,0.1,9,1", r"nodes.csv, line 11 holds a NUL byte"),
    # (line None: the table keeps its header only)
    "empty_node_table": ("nodes.csv", None, None, r"node table 'nodes.csv' of node set 'v' has "
                         r"no rows"),
}


def _sampler_do(kind, tables_dir, out_dir, props):
  """GraphSampler's or LinkSampler's executor as TFX runs it, on hand-made artifacts."""
  from tfx.dsl.components.base import base_beam_executor
  from tfx.types import standard_artifacts
  from gnn_trainer_component import artifacts
  if kind == "GraphSampler":
    from gnn_trainer_component.sampler.graph import executor
  else:
    from gnn_trainer_component.sampler.link import executor
  graph, out_schema, examples = (artifacts.GraphSchema(), artifacts.GraphSchema(),
                                 standard_artifacts.Examples())
  graph.uri, out_schema.uri, examples.uri = (tables_dir, str(out_dir / "schema"),
                                             str(out_dir / "examples"))
  ctx = base_beam_executor.BaseBeamExecutor.Context(
      beam_pipeline_args=[], tmp_dir=str(out_dir / "tmp"), unique_id="1")
  executor.Executor(ctx).Do({"graph_schema": [graph]},
                            {"examples": [examples], "output_graph_schema": [out_schema]},
                            {k: json.dumps(v) for k, v in props.items()})


ENGINES = {
    "GraphSampler": lambda run, tables, out: _sampler_do(
        "GraphSampler", tables, out, {"seeds": {"train": "seeds-all.csv"},
                                      "sampling_config": SAMPLING}),
    "LinkSampler": lambda run, tables, out: _sampler_do(
        "LinkSampler", tables, out, {"link_config": {
            "edge_set": "e", "splits": {"train": 0.8, "eval": 0.2}, "hops": [{"e": 2}]}}),
    "GnnTrainer": lambda run, tables, out: adapters.load(
        tables, seeds={"train": "seeds-all.csv"}, sampling_config=SAMPLING, splits=["train"]),
    "GraphInferrer in memory": lambda run, tables, out: _run_executor(
        {**run, "tables": tables}, out, {"engine": "in_memory"}),
    "GraphInferrer beam": lambda run, tables, out: _run_executor(
        {**run, "tables": tables}, out, {"engine": "beam"}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_a_bad_table_gets_the_same_error_from_every_engine(run, tmp_path, case):
  """The graph core reads every table: one verdict, one error class, one message everywhere."""
  filename, line, text, match = BAD_TABLES[case]
  tables = tmp_path / "tables"
  shutil.copytree(run["tables"], tables)
  lines = (tables / filename).read_text().splitlines()
  if line is None:
    del lines[1:]
  else:
    lines[line - 1] = text
  (tables / filename).write_text("\n".join(lines) + "\n")
  messages = {}
  for engine, call in ENGINES.items():
    out = tmp_path / engine.replace(" ", "-")
    out.mkdir()
    with pytest.raises(GraphInputError) as raised:
      call(run, str(tables), out)
    assert type(raised.value) is GraphInputError, engine
    who = engine.split(" ")[0]
    assert str(raised.value).startswith(f"{who}: "), (engine, str(raised.value))
    messages[engine] = str(raised.value)[len(who) + 2:]
    assert [p for p in out.rglob("*") if p.is_file()] == [], f"{engine} left files"
  assert len(set(messages.values())) == 1, messages
  assert re.search(match, messages["GnnTrainer"]), messages["GnnTrainer"]
