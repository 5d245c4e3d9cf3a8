"""Mode "full_graph" layer by layer: the export's steps over chunks equal the one pass, or refused.

No pipeline: the export's whole-graph functions are traced in this process
from the runner's own preprocessing around a base GNN, as GnnTrainer's export
traces them (``model/whole_graph.functions``), and GraphInferrer's choice
(``inferrer/full._layer_by_layer``) runs on a graph held in memory. A model
whose layers read only a node's incident edges (mean over neighbours, both
directions, heterogeneous) gives the one pass's rows to 1e-5 at any chunk size; a
GCN normalised by the graph's degrees does not, and the sample check says so
and keeps the one pass.
"""

import logging
import types

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.models.gcn import gcn_conv

from gnn_trainer_component import tasks as tasks_lib
from gnn_trainer_component.in_memory import store as store_lib
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import full
from gnn_trainer_component.model import whole_graph

SCHEMA = """
node_sets { key: "v" value {
  features { key: "x" value { dtype: DT_FLOAT shape { dim { size: 3 } } } }
  features { key: "label" value { dtype: DT_INT64 } } } }
node_sets { key: "w" value {
  features { key: "x" value { dtype: DT_FLOAT shape { dim { size: 3 } } } } } }
edge_sets { key: "e" value { source: "v" target: "v" } }
edge_sets { key: "f" value { source: "w" target: "v" } }
"""
SIZES = {"v": 60, "w": 25}


def _conv(kind, receiver):
  if kind == "gcn":  # normalised by both ends' degrees: beyond a node's incident edges
    return gcn_conv.GCNConv(4, receiver_tag=receiver, add_self_loops=False)
  return tfgnn.keras.layers.SimpleConv(tf.keras.layers.Dense(4), "mean", receiver_tag=receiver)


def _base_model(spec, kind):
  graph = inputs = tf.keras.Input(type_spec=spec)
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: tf.keras.layers.Dense(4, "relu")(
          node_set["x"]))(graph)
  for _ in range(2):
    graph = tfgnn.keras.layers.GraphUpdate(node_sets={
        "v": tfgnn.keras.layers.NodeSetUpdate(
            {"e": _conv(kind, tfgnn.TARGET), "f": _conv("mean", tfgnn.TARGET)},
            tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(4, "tanh"))),
        "w": tfgnn.keras.layers.NodeSetUpdate(
            {"f": _conv("mean", tfgnn.SOURCE)},
            tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(4, "tanh")))})(graph)
  return tf.keras.Model(inputs, graph)


def _graph(schema):
  rng = np.random.default_rng(0)
  ends = {"e": ("v", "v", 300), "f": ("w", "v", 120)}
  edge_sets = {}
  for name, (src_set, tgt_set, count) in ends.items():
    src = np.sort(rng.integers(0, SIZES[src_set], count))
    indptr = np.searchsorted(src, np.arange(SIZES[src_set] + 1))
    edge_sets[name] = store_lib.EdgeSet(source=src, target=rng.integers(0, SIZES[tgt_set], count),
                                        indptr=indptr, features={}, table=f"{name}.csv")
  node_sets = {name: store_lib.NodeSet(
      ids=pd.Index([f"{name}{i}".encode() for i in range(size)]), table=f"{name}.csv",
      features={"x": rng.normal(size=(size, 3)).astype(np.float32),
                **({"label": rng.integers(0, 2, size)} if name == "v" else {})})
      for name, size in SIZES.items()}
  return store_lib.InMemoryGraph(schema=schema, node_sets=node_sets, edge_sets=edge_sets)


def _export(kind):
  """(schema, functions by attribute as a loaded export has them, embeddings, layer steps)."""
  from tensorflow_gnn import runner
  from tensorflow_gnn.runner import orchestration
  schema = tfgnn.parse_schema(SCHEMA)
  spec = tfgnn.create_graph_spec_from_schema_pb(schema)
  task = tasks_lib.SeedMulticlassClassification(
      "v", num_classes=2, label_fn=tasks_lib.SeedLabelFn("v", feature_name="label"))
  # pylint: disable=protected-access  # the runner's own builders, as runner.run calls them
  preprocessing, _ = orchestration._make_preprocessing_model(spec, (), task.preprocess)
  xs, *_ = preprocessing.output  # the base GNN's input: the label taken out
  run_result = runner.RunResult(
      preprocess_model=orchestration._make_parsing_preprocessing_model(spec, preprocessing),
      base_model=tf.keras.Sequential((_base_model(xs[0].spec, kind),)), trained_model=None)
  traced, description = whole_graph.functions(run_result, spec, {"a": task}, None)
  assert [kind for _, kind in description["layers"]["steps"]] == [
      whole_graph.NODE_WISE, whole_graph.NEIGHBOURS, whole_graph.NEIGHBOURS]
  return schema, types.SimpleNamespace(**traced), traced["embed_graph"], description["layers"]


@pytest.fixture(scope="module")
def mean_export(tmp_path_factory):
  folder = str(tmp_path_factory.mktemp("mean"))
  return (folder, *_export("mean"))


def _passes(exported, chunk_edges):
  """(the one pass's embeddings of every v, layer by layer's or None)."""
  folder, schema, model, embed, layers = exported
  graph = _graph(schema)
  rows = np.arange(SIZES["v"])
  one = full.run_pass(embed, full.tensors(graph, whole_graph.input_spec(embed), rows, folder),
                      False, "m", "g")["embedding"].numpy()
  by_layer = full._layer_by_layer(model, {"embeddings": embed}, layers, graph, "v", rows,
                                  config_lib.InferenceConfig(chunk_edges=chunk_edges), folder)
  return one, by_layer


@pytest.mark.parametrize("chunk_edges", [1, 25])
def test_layer_by_layer_equals_the_one_pass_where_layers_read_incident_edges(
    mean_export, caplog, chunk_edges):
  caplog.set_level(logging.INFO, logger="absl")
  one, by_layer = _passes(mean_export, chunk_edges)
  # w pools the edges it is the source of, v those it is the target of: blocks need both.
  assert (f"layer by layer in chunks of up to {chunk_edges} edges (420 edges; an edge in the "
          "blocks of its source and target)") in caplog.text
  assert by_layer["embedding"].shape == (SIZES["v"], 4)
  np.testing.assert_allclose(by_layer["embedding"], one, atol=1e-5)


def test_a_graph_within_chunk_edges_runs_in_one_pass(mean_export):
  assert _passes(mean_export, 420)[1] is None


def test_a_model_reading_senders_degrees_keeps_the_one_pass_and_says_why(tmp_path, caplog):
  one, by_layer = _passes((str(tmp_path), *_export("gcn")), 25)
  assert by_layer is None and one.shape == (SIZES["v"], 4)
  assert ("the graph's 420 edges are more than chunk_edges 25, but the model runs in one pass "
          "(which holds every edge's messages at once): output 'embedding' differs by up to"
          in caplog.text)
  assert "on a sample of the graph" in caplog.text
