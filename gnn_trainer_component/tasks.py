"""Small TF-GNN ``runner.Task`` variants for use in user modules."""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component.graph import readout

#: The structured-readout key that marks seeds (full-graph training,
#: ``add_readout_from_first_node``): the graph core's.
SEED_READOUT_KEY = readout.SEED_KEY


def _has_seed_readout(graph: tfgnn.GraphTensor, readout_node_set: str) -> bool:
  return f"{readout_node_set}/{SEED_READOUT_KEY}" in graph.edge_sets


def read_seeds(graph: tfgnn.GraphTensor, node_set_name: str, feature_name: str, *,
               readout_node_set: str = readout.READOUT) -> tfgnn.Field:
  """A feature of each seed.

  Read by structured readout (key ``"seed"``) where the graph has one, else from the first node
  of each component (GraphSampler's subgraphs).
  """
  if _has_seed_readout(graph, readout_node_set):
    return tfgnn.structured_readout(graph, SEED_READOUT_KEY, feature_name=feature_name,
                                    readout_node_set=readout_node_set)
  return tfgnn.gather_first_node(graph, node_set_name, feature_name=feature_name)


class SeedLabelFn(tf.keras.layers.Layer):
  """``runner.RootNodeLabelFn`` that also reads the seeds of a full graph.

  Returns the graph without ``feature_name`` on ``node_set_name`` (no node's
  label is a model input) and the seeds' labels: read with structured readout
  (key ``"seed"``) where the graph marks its seeds that way (GnnTrainer's
  ``graph_mode: "full_graph"``), else from the first node of each component
  (sampled subgraphs). A module using it trains unchanged in every mode.
  """

  def __init__(self, node_set_name: str, *, feature_name: str,
               readout_node_set: str = readout.READOUT, **kwargs):
    super().__init__(**kwargs)
    self._node_set_name = node_set_name
    self._feature_name = feature_name
    self._readout_node_set = readout_node_set

  def get_config(self):
    return dict(super().get_config(), node_set_name=self._node_set_name,
                feature_name=self._feature_name, readout_node_set=self._readout_node_set)

  def call(self, graph: tfgnn.GraphTensor):
    labels = read_seeds(graph, self._node_set_name, self._feature_name,
                        readout_node_set=self._readout_node_set)
    return graph.remove_features(node_sets={self._node_set_name: [self._feature_name]}), labels


class SeedMulticlassClassification(runner.RootNodeMulticlassClassification):
  """``runner.RootNodeMulticlassClassification`` of the seeds, in every GnnTrainer mode.

  The same task (a ``Dense(num_classes)`` head on the root's state, the same
  loss and metrics), except that the root is read with structured readout
  (key ``"seed"``) where the graph marks its seeds that way (the whole graph,
  or subgraphs merged into one component), else as the first node of each
  component (GraphSampler's subgraphs). With :class:`SeedLabelFn` a module
  trains unchanged on examples, on subgraphs sampled in memory and on the
  whole graph.
  """

  #: GnnTrainer's full-graph mode and merged batches check for this.
  reads_seed_readout = True

  def __init__(self, node_set_name: str, *, readout_node_set: str = readout.READOUT, **kwargs):
    super().__init__(node_set_name, **kwargs)
    self._logits_node_set_name = node_set_name
    self._readout_node_set = readout_node_set

  def gather_activations(self, inputs: tfgnn.GraphTensor, name=None) -> tfgnn.Field:
    """The root's state: the seed readout where the graph has one, else the first node."""
    if _has_seed_readout(inputs, self._readout_node_set):
      return tfgnn.keras.layers.StructuredReadout(
          SEED_READOUT_KEY, feature_name=self._state_name,
          readout_node_set=self._readout_node_set, name=name)(inputs)
    return tfgnn.keras.layers.ReadoutFirstNode(
        node_set_name=self._logits_node_set_name, feature_name=self._state_name,
        name=name)(inputs)


class RootNodeLogits(SeedMulticlassClassification):
  """:class:`SeedMulticlassClassification` on logits the GNN already computed.

  ``RootNodeMulticlassClassification.predict`` puts a ``Dense(num_classes)``
  on the root's state; here the last GNN layer has ``num_classes`` units and
  its output is used as the logits directly (loss, metrics and label handling
  are inherited unchanged).
  """

  def predict(self, inputs: tfgnn.GraphTensor):
    tfgnn.check_scalar_graph_tensor(inputs, name="RootNodeLogits")
    return self.gather_activations(inputs, name=self._name)


def _first_column(metric_class: type) -> type:
  """``metric_class`` on the first column of the predictions (each pair's own score)."""

  class FirstColumn(metric_class):

    def update_state(self, y_true, y_pred, sample_weight=None):
      return super().update_state(y_true, y_pred[:, :1], sample_weight=sample_weight)

  FirstColumn.__name__ = metric_class.__name__
  return FirstColumn


def link_prediction_metrics(*, first_column: bool = False
                            ) -> tuple[tf.keras.metrics.Metric, ...]:
  """Metrics of a link-prediction task on logits: ROC AUC, average precision, accuracy.

  ``first_column``: of the predictions' first column (:class:`InBatchScores` in
  training: each pair's own score before the batch's other targets).

  ``average_precision`` is Keras' area under the precision-recall curve
  (``careful_interpolation``, 200 thresholds), an estimate of scikit-learn's
  ``average_precision_score``. Accuracy thresholds the logit at 0
  (probability 0.5); TF-GNN's tasks keep ``BinaryAccuracy``'s default
  threshold of 0.5, which on logits means probability 0.62.
  """
  auc, accuracy = tf.keras.metrics.AUC, tf.keras.metrics.BinaryAccuracy
  if first_column:
    auc, accuracy = _first_column(auc), _first_column(accuracy)
  return (auc(from_logits=True, name="auc"),
          auc(curve="PR", from_logits=True, name="average_precision"),
          accuracy(threshold=0.0, name="binary_accuracy"))


class DotProductLinkPrediction(runner.DotProductLinkPrediction):
  """``runner.DotProductLinkPrediction`` with :func:`link_prediction_metrics`.

  Its score is the dot product of the two ends' states.
  """

  def metrics(self):
    return link_prediction_metrics()


class InBatchScores(tf.keras.layers.Layer):
  """Each pair's dot product; in training also its source against every target of the batch.

  Inputs ``[sources [B, d], targets [B, d]]``. Returns ``[B, 1]`` (the pair's own
  score: what the export serves and validation measures), and in training
  ``[B, 1 + B]``: that score, then the source's score with each target of the
  batch (the in-batch negatives of :class:`InBatchSoftmaxLoss`).
  """

  def call(self, inputs, training=None):
    source, target = inputs
    own = tf.reduce_sum(source * target, axis=-1, keepdims=True)
    if not training:
      return own
    return tf.concat([own, tf.matmul(source, target, transpose_b=True)], axis=1)


class InBatchSoftmaxLoss(tf.keras.losses.Loss):
  """Sampled softmax over the batch's targets for each positive pair, plus weighted BCE.

  On ``[B, 1 + B]`` scores (:class:`InBatchScores` in training): for each pair
  labelled 1, the cross-entropy of its own target among the targets of the
  batch (scores divided by ``temperature``): a ranking loss. The targets it is
  ranked against are those of the batch's negative pairs (label 0: drawn
  uniformly by link_config's ``negatives_per_positive``), and with
  ``positives_as_negatives`` also the other positive pairs' targets (drawn as
  often as they are rated: popular items are then negatives more often, which
  teaches a model to rank them lower). Plus ``bce_weight`` times the binary
  cross-entropy of each pair's own score (the first column): every pair,
  labelled 1 or 0. On ``[B, 1]`` scores (validation): that binary
  cross-entropy alone.
  """

  def __init__(self, temperature: float = 1.0, bce_weight: float = 1.0,
               positives_as_negatives: bool = False, **kwargs):
    super().__init__(**kwargs)
    self._temperature, self._bce_weight = float(temperature), float(bce_weight)
    self._positives_as_negatives = bool(positives_as_negatives)

  def get_config(self):
    return dict(super().get_config(), temperature=self._temperature,
                bce_weight=self._bce_weight,
                positives_as_negatives=self._positives_as_negatives)

  def call(self, y_true, y_pred):
    labels = tf.reshape(tf.cast(y_true, y_pred.dtype), [-1])
    own = y_pred[:, 0]
    bce = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=own)

    def softmax():
      scores = y_pred[:, 1:] / self._temperature
      rows = tf.range(tf.shape(scores)[0])
      if not self._positives_as_negatives:  # a column of another positive pair: left out
        other = tf.logical_and(labels[None, :] > 0.5, rows[:, None] != rows[None, :])
        scores = tf.where(other, tf.fill(tf.shape(scores), scores.dtype.min), scores)
      ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=rows, logits=scores)
      return tf.where(labels > 0.5, ce, tf.zeros_like(ce))

    ranking = tf.cond(tf.shape(y_pred)[1] > 1, softmax, lambda: tf.zeros_like(own))
    return ranking + self._bce_weight * bce


class InBatchSoftmaxLinkPrediction(DotProductLinkPrediction):
  """:class:`DotProductLinkPrediction` trained with a ranking loss: in-batch sampled softmax.

  The score of a pair is the dot product of its ends' states, as in
  ``DotProductLinkPrediction`` (what the export serves, and what GnnTrainer's
  retrieval and GraphEvaluator rank by); in training each positive pair's
  target is also ranked against every other target of the batch
  (:class:`InBatchSoftmaxLoss`), plus ``bce_weight`` times the pairwise
  binary cross-entropy. Metrics: :func:`link_prediction_metrics` of each
  pair's own score.
  """

  def __init__(self, *, temperature: float = 1.0, bce_weight: float = 1.0,
               positives_as_negatives: bool = False, **kwargs):
    super().__init__(**kwargs)
    self._loss = dict(temperature=temperature, bce_weight=bce_weight,
                      positives_as_negatives=positives_as_negatives)

  def predict(self, graph: tfgnn.GraphTensor):
    tfgnn.check_scalar_graph_tensor(graph, name="InBatchSoftmaxLinkPrediction")
    ends = [tfgnn.keras.layers.StructuredReadout(key, feature_name=self._node_feature_name)(
        graph) for key in ("source", "target")]
    return InBatchScores()(ends)

  def losses(self):
    return InBatchSoftmaxLoss(**self._loss)

  def metrics(self):
    return link_prediction_metrics(first_column=True)


class HadamardProductLinkPrediction(runner.HadamardProductLinkPrediction):
  """``runner.HadamardProductLinkPrediction`` with :func:`link_prediction_metrics`.

  Its score is ``Dense(1)`` on the elementwise product of the two ends' states.
  """

  def metrics(self):
    return link_prediction_metrics()


def pair_activations(graph: tfgnn.GraphTensor, *, feature_name: str = tfgnn.HIDDEN_STATE,
                     readout_node_set: str = readout.READOUT) -> tf.Tensor:
  """``[pairs, 3 * d]``: each pair's source state, target state and their elementwise product.

  Read with structured readout (keys ``"source"`` and ``"target"``), the
  readout of LinkSampler's examples and of GnnTrainer's link pairs in memory.
  """
  ends = [tfgnn.keras.layers.StructuredReadout(
      key, feature_name=feature_name, readout_node_set=readout_node_set)(graph)
          for key in ("source", "target")]
  return tf.concat([ends[0], ends[1], ends[0] * ends[1]], axis=-1)


def _pair_feature(graph: tfgnn.GraphTensor, name: str, readout_node_set: str) -> tf.Tensor:
  """``[pairs, d]`` float32: feature ``name`` of each pair's node of set ``pair``.

  Raises:
    ValueError: the graph has no node set ``pair`` or no such feature of it.
  """
  features = (graph.node_sets[readout.PAIR].features if readout.PAIR in graph.node_sets
              else None)
  if features is None or name not in features:
    raise ValueError(
        f"The edge task reads pair feature {name!r}, but the model's output has "
        + (f"node set {readout.PAIR!r} with features {sorted(features)}" if features is not None
           else f"no node set {readout.PAIR!r}")
        + ". Name the feature in link_config's edge_features, and let the model keep it "
        f"(a MapFeatures node_sets_fn that returns None for {readout.PAIR!r}).")
  value = tfgnn.keras.layers.StructuredReadout(readout.PAIR, feature_name=name,
                                               readout_node_set=readout_node_set)(graph)
  value = tf.cast(value, tf.float32)
  return tf.reshape(value, [-1, math.prod(value.shape[1:])])


class _EdgeHead:
  """The activations of an edge task: :func:`pair_activations`, then a ReLU MLP.

  Before a TF-GNN ``runner.Node*`` task in the bases: it reads the pair's
  ``label`` from the ``_readout`` node set.

  Args:
    hidden_units: The units of each hidden ReLU layer, in order (none: the
      head is linear on the pair's activations).
    feature_name: The node feature read as each end's state.
    readout_node_set: The readout node set of the pairs.
    pair_features: Features of node set ``pair`` the head also reads, after
      the model: ``link_config``'s ``edge_features`` (each pair's own edge's
      values), as the model leaves them (a ``MapFeatures`` that returns None
      for ``pair`` keeps them raw) or a state it makes of them. Each is cast
      to float and flattened beside the ends' activations. None (default):
      every feature of ``pair`` the model's output has (none without
      ``edge_features``); ``()``: none.
    **kwargs: The TF-GNN task's other arguments (``num_classes``, ``name``).
  """

  def __init__(self, *, hidden_units: Sequence[int] = (64,),
               feature_name: str = tfgnn.HIDDEN_STATE,
               readout_node_set: str = readout.READOUT,
               pair_features: Optional[Sequence[str]] = None, **kwargs):
    super().__init__("source", feature_name=feature_name, readout_node_set=readout_node_set,
                     label_feature_name=readout.LABEL, **kwargs)
    self._hidden_units = tuple(int(u) for u in hidden_units)
    if isinstance(pair_features, str):
      raise TypeError(f"pair_features must be a list of feature names, got {pair_features!r}.")
    self._pair_features = None if pair_features is None else tuple(pair_features)

  def embeddings(self, graph: tfgnn.GraphTensor) -> dict[str, tf.Tensor]:
    """Each end's state, named as a link-prediction model's export names them.

    The export's ``embeddings`` signature then reads each node as its end of a
    pair, as for link prediction (the head's layers are the task's own).
    """
    return {f"{key}_embedding": tfgnn.keras.layers.StructuredReadout(
        key, feature_name=self._feature_name, readout_node_set=self._readout_node_set)(graph)
            for key in ("source", "target")}

  def gather_activations(self, inputs: tfgnn.GraphTensor) -> tf.Tensor:
    x = pair_activations(inputs, feature_name=self._feature_name,
                         readout_node_set=self._readout_node_set)
    names = self._pair_features
    if names is None:
      names = (sorted(inputs.node_sets[readout.PAIR].features)
               if readout.PAIR in inputs.node_sets else ())
    if names:
      x = tf.concat([x, *(_pair_feature(inputs, name, self._readout_node_set)
                          for name in names)], axis=-1)
    for units in self._hidden_units:
      x = tf.keras.layers.Dense(units, activation="relu")(x)
    return x


class EdgeRegression(_EdgeHead, runner.NodeMeanSquaredError):
  """Predicts each pair's ``edge_label`` value (a rating): mean squared error.

  For ``link_config`` with ``"edge_label"``: every pair is an edge, and the
  ``_readout`` node's ``label`` holds its value. The head is a ReLU MLP
  (``hidden_units``) and ``Dense(1)`` on both ends' states and their product
  (:func:`pair_activations`); metrics: root mean squared error and mean
  absolute error.
  """

  def metrics(self):
    return (tf.keras.metrics.RootMeanSquaredError(name="rmse"),
            tf.keras.metrics.MeanAbsoluteError(name="mae"))


class EdgeBinaryClassification(_EdgeHead, runner.NodeBinaryClassification):
  """Predicts each pair's 0/1 ``edge_label`` (a fraud flag): binary cross-entropy on a logit.

  The head of :class:`EdgeRegression`; metrics :func:`link_prediction_metrics`
  (ROC AUC, average precision, accuracy at probability 0.5).
  """

  def metrics(self):
    return link_prediction_metrics()


class EdgeMulticlassClassification(_EdgeHead, runner.NodeMulticlassClassification):
  """Predicts each pair's class ``0 .. num_classes - 1`` (its ``edge_label``): softmax.

  The head of :class:`EdgeRegression` with ``num_classes`` logits; TF-GNN's
  sparse categorical cross-entropy and accuracy.
  """

  def __init__(self, num_classes: int, **kwargs):
    super().__init__(num_classes=num_classes, **kwargs)


class ReadoutRootFeatures(tf.keras.layers.Layer):
  """Moves features of each component's root node into the ``_readout`` node set.

  A ``feature_processors`` entry for several root-node tasks in one model. The
  runner requires that no task changes the graph's spec, so a multi-task
  module cannot use ``runner.RootNodeLabelFn`` (it removes the label feature);
  instead this layer adds TF-GNN's readout structure for the first node of
  ``node_set_name`` (``tfgnn.add_readout_from_first_node``, key ``"seed"``),
  copies the root's ``feature_names`` into ``_readout`` and removes them from
  ``node_set_name``. Tasks then read their labels with
  ``label_feature_name=...``, and the runner strips ``_readout``'s features
  before the model: no label is a model input. At serving, requests need not
  hold the features (node features parse as optional).
  """

  def __init__(self, node_set_name: str, feature_names: list[str], *,
               readout_node_set: str = readout.READOUT, **kwargs):
    super().__init__(**kwargs)
    self._node_set_name = node_set_name
    self._feature_names = list(feature_names)
    self._readout_node_set = readout_node_set

  def get_config(self):
    return dict(super().get_config(), node_set_name=self._node_set_name,
                feature_names=self._feature_names, readout_node_set=self._readout_node_set)

  def call(self, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
    tfgnn.check_scalar_graph_tensor(graph, name="ReadoutRootFeatures")
    if self._node_set_name not in graph.node_sets:
      raise ValueError(f"ReadoutRootFeatures: the graph has no node set "
                       f"{self._node_set_name!r} (it has {sorted(graph.node_sets)}).")
    features = graph.node_sets[self._node_set_name].features
    missing = [name for name in self._feature_names if name not in features]
    if missing:
      raise ValueError(f"ReadoutRootFeatures: node set {self._node_set_name!r} has no "
                       f"feature {missing} (it has {sorted(features)}).")
    graph = tfgnn.add_readout_from_first_node(
        graph, key=SEED_READOUT_KEY, node_set_name=self._node_set_name,
        readout_node_set=self._readout_node_set)
    moved = {name: tfgnn.gather_first_node(graph, self._node_set_name, feature_name=name)
             for name in self._feature_names}
    kept = {name: value for name, value in features.items()
            if name not in self._feature_names}
    return graph.replace_features(
        node_sets={self._node_set_name: kept, self._readout_node_set: moved})


def _structured_readout_tasks() -> tuple[type, ...]:
  """TF-GNN's tasks that read nodes with structured readout (``runner.Node*``)."""
  return tuple(getattr(runner, name) for name in dir(runner)
               if name.startswith("Node") and isinstance(getattr(runner, name), type))


def seed_readout_errors(tasks: Mapping[str, Any]) -> list[str]:
  """Why tasks may not read the seed readout of a merged batch or the whole graph ([]: they may).

  A task reads it when it is one of TF-GNN's ``runner.Node*`` tasks (structured
  readout) or declares ``reads_seed_readout = True`` (as :class:`RootNodeLogits`
  does), and no label function of it is ``runner.RootNodeLabelFn`` (the first node).
  """
  problems = []
  for name, task in tasks.items():
    if not (isinstance(task, _structured_readout_tasks())
            or getattr(task, "reads_seed_readout", False)):
      problems.append(f"task {name!r} ({type(task).__name__}) does not read the seed readout")
    for value in vars(task).values():
      if isinstance(value, runner.RootNodeLabelFn):
        problems.append(f"task {name!r} takes labels with runner.RootNodeLabelFn (the first "
                        "node)")
  return problems
