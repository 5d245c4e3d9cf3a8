"""Unit tests for the serving-signature helpers."""

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component.trainer import export


def test_output_names():
  assert export.output_names(tf.zeros([1]), "logits") == "logits"
  assert export.output_names({"a": 1, "b": {"c": 2}}, None) == {"a": "a", "b": {"c": "b/c"}}
  assert export.output_names({"p": 1}, "logits") == {"p": "p"}


def test_context_labels_get_defaults_and_parse():
  schema = tfgnn.parse_schema("""
    context { features { key: "label" value { dtype: DT_INT64 } } }
    node_sets { key: "n" value { features { key: "f" value { dtype: DT_FLOAT } } } }
  """)
  tasks = {"g": runner.GraphMulticlassClassification(
      "n", num_classes=2, label_fn=runner.ContextLabelFn("label"))}
  assert export.context_label_features(tasks) == ["label"]
  defaults = export.label_defaults_example(schema, ["label"])
  request = tf.train.Example()
  request.features.feature["nodes/n.#size"].int64_list.value.append(2)
  request.features.feature["nodes/n.f"].float_list.value.extend([1.0, 2.0])
  spec = tfgnn.create_graph_spec_from_schema_pb(schema)
  joined = export.PrependSerialized(defaults)(tf.constant([request.SerializeToString()]))
  graph = tfgnn.parse_example(spec, joined)
  assert graph.context["label"].numpy().tolist() == [[0]]
  assert graph.node_sets["n"]["f"].flat_values.numpy().tolist() == [1.0, 2.0]
  # A label present in the request wins over the default.
  request.features.feature["context/label"].int64_list.value.append(1)
  joined = export.PrependSerialized(defaults)(tf.constant([request.SerializeToString()]))
  assert tfgnn.parse_example(spec, joined).context["label"].numpy().tolist() == [[1]]
