"""Unit tests for the serving-signature helpers."""

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component.model import export
from gnn_trainer_component.trainer import publish


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


def test_metrics_of_several_tasks_are_named_by_task():
  x = tf.keras.Input([3])
  model = tf.keras.Model(x, {"topic": tf.keras.layers.Dense(7, name="classification_logits")(x),
                             "citations": tf.keras.layers.Dense(1, name="regression_logits")(x)})
  prefixes = publish.metric_prefixes(model)
  assert prefixes == {"regression_logits": "citations", "classification_logits": "topic"}
  logs = {"loss": 1.0, "classification_logits_loss": 0.7, "regression_logits_mean_absolute_error": 0.2,
          "val_classification_logits_sparse_categorical_accuracy": 0.8, "val_loss": 1.1}
  assert publish.by_task(logs, prefixes) == {
      "loss": 1.0, "topic_loss": 0.7, "citations_mean_absolute_error": 0.2,
      "val_topic_sparse_categorical_accuracy": 0.8, "val_loss": 1.1}
  single = tf.keras.Model(x, tf.keras.layers.Dense(2, name="logits")(x))
  assert publish.metric_prefixes(single) == {}


class _Doubler(tf.keras.layers.Layer):
  """Plain Python over graph pieces: traces without AutoGraph."""

  def call(self, x):
    return tf.cast(tf.strings.length(x), tf.float32) * 2.0


class _Branchy(tf.keras.layers.Layer):
  """A tensor in a Python condition: traces only with AutoGraph."""

  def call(self, x):
    n = tf.cast(tf.strings.length(x), tf.float32)
    if tf.reduce_sum(n) > 3:
      return n * 2.0
    return n


def test_signatures_are_traced_without_autograph_unless_a_layer_needs_it(caplog):
  caplog.set_level("WARNING", logger="absl")  # as an earlier test may leave absl's verbosity
  caplog.set_level("INFO", logger="absl")  # both restored after the test
  for layer, batch, want, needs_autograph in (
      (_Doubler(), ["ab", "c"], [4.0, 2.0], False),
      (_Branchy(), ["ab", "cd"], [4.0, 4.0], True),  # sum 4 > 3: doubled
      (_Branchy(), ["a"], [1.0], True)):
    caplog.clear()
    examples = tf.keras.Input([], dtype=tf.string)
    fn = export.signature_function(tf.keras.Model(examples, layer(examples)), "y")
    assert fn(tf.constant(batch))["y"].numpy().tolist() == want
    assert ("needs AutoGraph" in caplog.text) == needs_autograph, caplog.text
