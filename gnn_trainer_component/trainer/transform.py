"""TensorFlow Transform on graph tf.Examples, in training and in serving.

Graph tf.Examples are flat: ``nodes/<set>.<feature>``, ``edges/<set>.#source``,
``context/<feature>``, ``nodes/<set>.#size``, ... Transform sees each key as a
feature. This module provides:

* :func:`preprocess_graph_features` for the user's ``preprocessing_fn``: every
  input passes through untouched (structural keys included) except the
  features you transform, e.g.::

    import tensorflow_transform as tft
    from gnn_trainer_component.trainer import transform as gnn_transform

    def preprocessing_fn(inputs):
      return gnn_transform.preprocess_graph_features(inputs, {
          "nodes/paper.feat": tft.scale_to_z_score,
          "nodes/paper.venue": tft.compute_and_apply_vocabulary,
      })

  Transforms must be element-wise (one output value per input value), so the
  graph structure stays valid; a feature may also be dropped (``None``).

* :func:`transformed_graph_schema`: the post-transform GraphSchema, derived
  from the raw GraphSchema and Transform's output schema (the user writes
  one schema, the raw one).
* :class:`RawGraphParser`: the serving-time path, serialized *raw* tf.Examples
  -> Transform graph -> GraphTensor of the transformed spec.
* :func:`check_schema_agreement`: the raw TFMD ``Schema`` against the graph schema.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_metadata.proto.v0 import schema_pb2

from gnn_trainer_component import errors
from gnn_trainer_component import graph_schema


class TransformSchemaError(errors.GnnError, ValueError):
  """Graph schema and Transform / TFMD schema disagree."""


def preprocess_graph_features(inputs: Mapping[str, Any],
                              fns: Mapping[str, Optional[Callable[[Any], Any]]]) -> dict:
  """Passes every input through, applying ``fns[key]`` to the listed features.

  Args:
    inputs: The ``preprocessing_fn`` inputs (flat graph tf.Example features).
    fns: Feature key -> element-wise TFT function (or None to drop the feature).
      Structural keys (``#size``, ``#source``, ``#target``, ragged ``.d<i>``
      row lengths) may not be listed.

  Returns:
    The outputs dict for ``preprocessing_fn``.
  """
  out = dict(inputs)
  for key, fn in fns.items():
    if key not in inputs:
      raise TransformSchemaError(
          f"preprocess_graph_features: {key!r} is not an input feature; inputs are "
          f"{sorted(inputs)}.")
    if "#" in key.rsplit("/", 1)[-1]:
      raise TransformSchemaError(
          f"preprocess_graph_features: {key!r} is structural and must pass through unchanged.")
    if fn is None:
      del out[key]
    else:
      out[key] = fn(inputs[key])
  return out


def _split_key(key: str) -> Optional[tuple[str, str, str]]:
  """'nodes/paper.feat' -> ('nodes', 'paper', 'feat'); 'context/x' -> ('context', '', 'x')."""
  if key.startswith("context/"):
    return "context", "", key[len("context/"):]
  for kind in ("nodes", "edges"):
    if key.startswith(kind + "/") and "." in key:
      set_name, feature = key[len(kind) + 1:].split(".", 1)
      return kind, set_name, feature
  return None


_TFMD_TO_DTYPE = {schema_pb2.FLOAT: tf.float32, schema_pb2.INT: tf.int64,
                  schema_pb2.BYTES: tf.string}


_KIND_TO_TFMD = {graph_schema.BYTES: schema_pb2.BYTES, graph_schema.FLOAT: schema_pb2.FLOAT,
                 graph_schema.INT64: schema_pb2.INT}


def _io_kind(dtype: int) -> int:
  return _KIND_TO_TFMD[graph_schema.example_kind(dtype)]


def _feature_maps(graph_schema: tfgnn.GraphSchema):
  yield "context/", graph_schema.context.features
  for name, node_set in graph_schema.node_sets.items():
    yield f"nodes/{name}.", node_set.features
  for name, edge_set in graph_schema.edge_sets.items():
    yield f"edges/{name}.", edge_set.features


def transformed_graph_schema(raw: tfgnn.GraphSchema, transformed: schema_pb2.Schema,
                             raw_keys: Optional[set] = None) -> tfgnn.GraphSchema:
  """The GraphSchema of Transform's output examples.

  Each graph feature keeps its shape; its dtype becomes the type Transform
  wrote (e.g. a vocabulary turns DT_STRING into DT_INT64); features Transform
  dropped are removed. Structural keys are not features and are unaffected.

  Args:
    raw: The GraphSchema of the raw examples.
    transformed: Transform's output (TFMD) schema.
    raw_keys: The raw feature keys. Outputs that pass a raw key through which
      the graph schema does not declare (e.g. ``context/label`` for TFMA) are
      fine; a *new* graph-shaped key is an error.

  Raises:
    TransformSchemaError: if Transform creates a graph feature that the raw
      schema does not declare (non element-wise features are not supported).
  """
  out = tfgnn.GraphSchema()
  out.CopyFrom(raw)
  types = {f.name: f.type for f in transformed.feature}
  for prefix, features in _feature_maps(out):
    for name in list(features):
      key = prefix + name
      if key not in types:
        del features[name]
      else:
        features[name].dtype = _TFMD_TO_DTYPE[types[key]].as_datatype_enum
  known = {prefix + name for prefix, feats in _feature_maps(raw) for name in feats}
  for key in sorted(types):
    parts = _split_key(key)
    if (parts and "#" not in parts[2] and key not in known and key not in (raw_keys or ())
        and not _is_row_lengths_key(key, known)):
      raise TransformSchemaError(
          f"Transform outputs {key!r}, which the raw graph schema does not declare. "
          "GnnTrainer derives the transformed graph schema from the raw one: transform "
          "existing features element-wise (same key), or declare the feature in "
          "graph_schema.pbtxt.")
  return out


def _is_row_lengths_key(key: str, known: set) -> bool:
  base, _, suffix = key.rpartition(".d")
  return suffix.isdigit() and base in known


def check_schema_agreement(graph_schema: tfgnn.GraphSchema, tfmd: schema_pb2.Schema,
                           where: str) -> None:
  """Every graph feature must be a TFMD feature of the same value type.

  Raises:
    TransformSchemaError: naming the feature and both types.
  """
  types = {f.name: f.type for f in tfmd.feature}
  problems = []
  for prefix, features in _feature_maps(graph_schema):
    for name, feature in sorted(features.items()):
      key = prefix + name
      want = _io_kind(feature.dtype)
      if key not in types:
        problems.append(f"'{key}' is in the graph schema but not in the Schema")
      elif types[key] != want:
        problems.append(
            f"'{key}' is {schema_pb2.FeatureType.Name(types[key])} in the Schema but "
            f"{tf.dtypes.as_dtype(feature.dtype).name} in the graph schema")
  if problems:
    raise TransformSchemaError(
        f"The Schema ({where}) disagrees with the graph schema:\n  - " +
        "\n  - ".join(problems) + "\nRegenerate one of them so that they describe the same data.")


class RawGraphParser(tf.keras.layers.Layer):
  """Serialized raw tf.Examples -> transformed GraphTensor (batched, rank 1).

  Parses the raw graph (structure and raw features) with TF-GNN, runs the
  Transform graph on the same serialized examples, and puts the transformed
  values in place of the raw ones (element-wise transforms keep the structure).
  """

  def __init__(self, transform_graph_path: str, raw_schema: tfgnn.GraphSchema,
               transformed_schema: tfgnn.GraphSchema, **kwargs):
    super().__init__(**kwargs)
    import tensorflow_transform as tft  # Imported here: loaded only with a Transform graph.
    self._path = transform_graph_path
    self._raw_schema = raw_schema
    self._tft_output = tft.TFTransformOutput(transform_graph_path)
    self._tft_layer = self._tft_output.transform_features_layer()
    self._raw_spec = tfgnn.create_graph_spec_from_schema_pb(raw_schema)
    # Raw features the graph does not declare (labels for TFMA, say) must not
    # be required at serving: give fixed-length ones a default.
    declared = set(tfgnn.get_io_spec(self._raw_spec))
    self._raw_feature_spec = {
        key: (tf.io.FixedLenFeature(spec.shape, spec.dtype,
                                    default_value=tf.zeros(spec.shape, spec.dtype).numpy().tolist()
                                    if spec.dtype != tf.string else [b""] * int(
                                        tf.reduce_prod(spec.shape).numpy()))
              if isinstance(spec, tf.io.FixedLenFeature) and spec.default_value is None
              and key not in declared else spec)
        for key, spec in self._tft_output.raw_feature_spec().items()}
    self._schema = transformed_schema

  def get_config(self):
    from google.protobuf import text_format
    return dict(super().get_config(), transform_graph_path=self._path,
                raw_schema=text_format.MessageToString(self._raw_schema),
                transformed_schema=text_format.MessageToString(self._schema))

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    for key in ("raw_schema", "transformed_schema"):
      config[key] = tfgnn.parse_schema(config[key])
    return cls(**config)

  def call(self, serialized):
    graph = tfgnn.parse_example(self._raw_spec, serialized)
    transformed = self._tft_layer(tf.io.parse_example(serialized, self._raw_feature_spec))

    def values(key, field, dtype):
      t = transformed[key]
      flat = t.values if isinstance(t, tf.SparseTensor) else (
          t.flat_values if isinstance(t, tf.RaggedTensor) else tf.reshape(t, [-1]))
      flat = tf.cast(flat, dtype)
      inner = field.flat_values if isinstance(field, tf.RaggedTensor) else field
      new = tf.reshape(flat, tf.shape(inner, out_type=tf.int64))
      return field.with_flat_values(new) if isinstance(field, tf.RaggedTensor) else new

    def features(prefix, old, declared):
      out = {}
      for name, spec in declared.items():
        dtype = tf.dtypes.as_dtype(spec.dtype)
        out[name] = values(prefix + name, old[name], dtype)
      return out

    return graph.replace_features(
        context=features("context/", graph.context.features, self._schema.context.features),
        node_sets={n: features(f"nodes/{n}.", graph.node_sets[n].features,
                               self._schema.node_sets[n].features)
                   for n in self._schema.node_sets},
        edge_sets={e: features(f"edges/{e}.", graph.edge_sets[e].features,
                               self._schema.edge_sets[e].features)
                   for e in self._schema.edge_sets})
