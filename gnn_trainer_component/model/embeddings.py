"""The ``embeddings`` signature: the base GNN's final state where each task reads it.

Every export (unless ``custom_config["export_embeddings"]`` is false) has a
second signature, ``embeddings``, that takes the same serialized tf.Examples as
``serving_default`` and returns, per task, the hidden state the task's head
reads from the base GNN (the model ``model_fn`` returns), before that head:

* a task with an ``embeddings(graph)`` method: what it returns (a tensor, or
  a dict of them). This is how a custom task says what its embedding is;
* link prediction (``runner.DotProductLinkPrediction`` /
  ``HadamardProductLinkPrediction`` and subclasses): the states of the two
  ends, read by structured readout ``"source"`` and ``"target"``;
* every other runner task (node/graph classification and regression):
  ``task.gather_activations(graph)``, TF-GNN's own readout for the task: the
  root node of each subgraph (``RootNode*``), the structured readout
  (``Node*``), the pooled node states (``Graph*``).

Output names: ``embedding`` (or ``source_embedding`` / ``target_embedding``)
for one task, prefixed ``<task>/`` when the module has several tasks.
"""

from __future__ import annotations

from typing import Any, Mapping

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

#: The signature name in the exported SavedModel.
SIGNATURE = "embeddings"
#: With a Transform graph: the same outputs on already-transformed examples.
TRANSFORMED_SIGNATURE = "transformed_embeddings"
#: Output name of a task's single embedding.
EMBEDDING = "embedding"

_LINK_TASKS = (runner.DotProductLinkPrediction, runner.HadamardProductLinkPrediction)


def rule(task: Any) -> str:
  """How the signature reads ``task``'s embedding: "method", "link", "activations" or ""."""
  if callable(getattr(task, "embeddings", None)):
    return "method"
  if isinstance(task, _LINK_TASKS):
    return "link"
  if callable(getattr(task, "gather_activations", None)):
    return "activations"
  return ""


def unsupported(tasks: Mapping[str, Any]) -> list[str]:
  """Names of the tasks :func:`read` has no rule for (as ``"name (Class)"``)."""
  return [f"{name} ({type(task).__name__})" for name, task in tasks.items() if not rule(task)]


def read(task: Any, graph: tfgnn.GraphTensor) -> dict[str, Any]:
  """The embedding(s) of one task on the base GNN's output graph, by name."""
  kind = rule(task)
  if kind == "method":
    value = task.embeddings(graph)
    return dict(value) if isinstance(value, Mapping) else {EMBEDDING: value}
  if kind == "link":
    feature = getattr(task, "_node_feature_name", tfgnn.HIDDEN_STATE)
    return {f"{key}_{EMBEDDING}": tfgnn.keras.layers.StructuredReadout(
                key, feature_name=feature)(graph) for key in ("source", "target")}
  if kind == "activations":
    return {EMBEDDING: task.gather_activations(graph)}
  raise ValueError(f"no embeddings rule for {type(task).__name__}")


def outputs(tasks: Mapping[str, Any], graph: tfgnn.GraphTensor, *,
            single_task: bool) -> dict[str, Any]:
  """The signature's outputs: flat, named as the module doc says."""
  result = {}
  for name, task in tasks.items():
    for key, value in read(task, graph).items():
      result[key if single_task else f"{name}/{key}"] = value
  return result


def model(base_model: tf.keras.Model, gnn_inputs: tfgnn.GraphTensor, inputs: Any,
          tasks: Mapping[str, Any], *, single_task: bool) -> tf.keras.Model:
  """A Keras model from ``inputs`` (whose preprocessing gave ``gnn_inputs``) to the embeddings."""
  return tf.keras.Model(inputs, outputs(tasks, base_model(gnn_inputs), single_task=single_task))
