"""The exported serving signature.

``serving_default`` takes a batch of serialized tf.Examples under the input
name ``examples`` and returns:

* one task (module exports ``task``): ``{custom_config['serving_output_name']: logits}``,
  ``"logits"`` by default;
* several tasks (module exports ``tasks``): one output per task, keyed by the
  task name (``"<task>/<key>"`` if a task predicts a dict).

Label features are not needed at serving time. Node/edge labels parse as
optional anyway. Graph-level (context) labels read with
``runner.ContextLabelFn`` would be required by the parser, so the signature
prepends a serialized default tf.Example holding zeros for them: protobuf merge
semantics make a label present in the request win, and the model's outputs do
not depend on the label branch.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from absl import logging
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component import graph_schema

SERVING_INPUT_NAME = "examples"
#: With a Transform graph: a second signature on already-transformed examples.
TRANSFORMED_SIGNATURE = "transformed_examples"


def context_label_features(tasks: Mapping[str, Any]) -> list[str]:
  """Names of context features that the tasks read as labels."""
  names = []
  for task in tasks.values():
    for value in vars(task).values():
      if isinstance(value, runner.ContextLabelFn):
        names.append(value.get_config()["feature_name"])
  return sorted(set(names))


def label_defaults_example(schema: tfgnn.GraphSchema, context_features: list[str]) -> Optional[bytes]:
  """A serialized tf.Example with zero values for the given context features."""
  if not context_features:
    return None
  example = tf.train.Example()
  for name in context_features:
    feature = schema.context.features[name]
    size = 1
    for dim in feature.shape.dim:
      size *= max(int(dim.size), 1)
    kind = graph_schema.example_kind(feature.dtype)
    default = {graph_schema.BYTES: b"", graph_schema.FLOAT: 0.0, graph_schema.INT64: 0}[kind]
    getattr(example.features.feature[f"context/{name}"], kind).value.extend([default] * size)
  return example.SerializeToString()


class PrependSerialized(tf.keras.layers.Layer):
  """Prepends fixed serialized proto bytes to each string (a proto merge)."""

  def __init__(self, prefix: bytes, **kwargs):
    super().__init__(**kwargs)
    self._prefix = prefix

  def call(self, serialized):
    return tf.strings.join([tf.constant(self._prefix), serialized])

  def get_config(self):
    return dict(super().get_config(), prefix=self._prefix.hex())

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["prefix"] = bytes.fromhex(config["prefix"])
    return cls(**config)


def output_names(output: Any, single_task_name: Optional[str]) -> Any:
  """Signature output names with the same nesting as the model's output."""
  def names(value, path):
    if isinstance(value, Mapping):
      return {k: names(v, path + [str(k)]) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
      return type(value)(names(v, path + [str(i)]) for i, v in enumerate(value))
    return "/".join(path)
  if single_task_name is not None:
    if isinstance(output, (Mapping, list, tuple)):
      return names(output, [])
    return single_task_name
  return names(output, [])


def build_serving_model(run_result: runner.RunResult, label_defaults: Optional[bytes],
                        raw_parser: Optional[tf.keras.layers.Layer] = None) -> tf.keras.Model:
  """Stacks parsing + preprocessing and the trained model, as KerasModelExporter does.

  Args:
    run_result: From ``runner.run``.
    label_defaults: Serialized default context labels to prepend, or None.
    raw_parser: Optional layer mapping serialized raw examples to a batched
      GraphTensor of the training spec (the Transform path). Without it, the
      examples are parsed as the training data was.
  """
  examples = tf.keras.Input(shape=(), dtype=tf.string, name=SERVING_INPUT_NAME)
  serialized = examples
  if label_defaults:
    serialized = PrependSerialized(label_defaults, name="label_defaults")(examples)
  if raw_parser is None:
    gnn_inputs, *_ = run_result.preprocess_model(serialized)
  else:
    # runner's parsing model is Input -> ParseExample -> merge -> preprocessing
    # model; keep the last one (feature processors + Task.preprocess).
    preprocessing = run_result.preprocess_model.layers[-1]
    graph = raw_parser(serialized).merge_batch_to_components()
    gnn_inputs, *_ = preprocessing(graph)
  return tf.keras.Model(examples, run_result.trained_model(gnn_inputs))


def _export_two_signatures(serving: tf.keras.Model, training: tf.keras.Model,
                           names: Any, export_dir: str) -> None:
  """Saves ``serving_default`` (raw examples) and ``transformed_examples``."""
  def signature(model):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT_NAME)])
    def fn(examples):
      return dict(zip(tf.nest.flatten(names), tf.nest.flatten(model(examples))))
    return fn
  serving.save(export_dir, save_format="tf", include_optimizer=False, save_traces=False,
               signatures={"serving_default": signature(serving),
                           TRANSFORMED_SIGNATURE: signature(training)})


class ServingExporter(runner.ModelExporter):
  """Exports ``serving_default`` with stable output names; see the module doc.

  After ``save``, ``self.model`` is the in-memory serving model,
  ``self.training_model`` the same model on training-format examples (they
  differ with a Transform graph; used for the pre-publish parity check) and ``self.output_names`` the signature output
  names, nested like the model's output.
  """

  def __init__(self, *, single_task_name: Optional[str], label_defaults: Optional[bytes],
               raw_parser: Optional[tf.keras.layers.Layer] = None):
    self._single_task_name = single_task_name
    self._label_defaults = label_defaults
    self._raw_parser = raw_parser
    self.model: Optional[tf.keras.Model] = None
    self.training_model: Optional[tf.keras.Model] = None
    self.output_names: Any = None

  def save(self, run_result: runner.RunResult, export_dir: str):
    logging.info("GnnTrainer phase: %s", "export")
    training = build_serving_model(run_result, self._label_defaults)
    names = output_names(training.output, self._single_task_name)
    if self._raw_parser is None:
      model = training
      runner.export_model(model, export_dir, output_names=names)
    else:
      model = build_serving_model(run_result, self._label_defaults, self._raw_parser)
      _export_two_signatures(model, training, names, export_dir)
    self.model = model
    self.training_model = training
    self.output_names = names
