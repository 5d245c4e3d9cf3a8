"""Unit tests for Transform on graph examples (pure schema logic)."""

import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_metadata.proto.v0 import schema_pb2
from google.protobuf import text_format

from gnn_trainer_component.trainer import transform

RAW = tfgnn.parse_schema("""
  node_sets { key: "paper" value {
    features { key: "feat" value { dtype: DT_FLOAT shape { dim { size: 8 } } } }
    features { key: "venue" value { dtype: DT_STRING } }
    features { key: "label" value { dtype: DT_INT64 } } } }
  edge_sets { key: "cites" value { source: "paper" target: "paper" } }
""")


def _tfmd(text):
  return text_format.Parse(text, schema_pb2.Schema())


def test_preprocess_graph_features_passes_structure_through():
  inputs = {"nodes/paper.#size": 1, "nodes/paper.feat": 2, "nodes/paper.venue": 3,
            "edges/cites.#source": 4, "context/label": 5}
  out = transform.preprocess_graph_features(
      inputs, {"nodes/paper.feat": lambda x: x * 10, "nodes/paper.venue": None})
  assert out == {"nodes/paper.#size": 1, "nodes/paper.feat": 20,
                 "edges/cites.#source": 4, "context/label": 5}
  with pytest.raises(transform.TransformSchemaError, match="structural"):
    transform.preprocess_graph_features(inputs, {"nodes/paper.#size": lambda x: x})
  with pytest.raises(transform.TransformSchemaError, match="'nodes/paper.nope' is not an input"):
    transform.preprocess_graph_features(inputs, {"nodes/paper.nope": lambda x: x})


def test_transformed_graph_schema_follows_transform_types():
  out = transform.transformed_graph_schema(RAW, _tfmd("""
    feature { name: "nodes/paper.feat" type: FLOAT }
    feature { name: "nodes/paper.venue" type: INT }
    feature { name: "nodes/paper.#size" type: INT }
    feature { name: "context/label" type: INT }
  """), raw_keys={"context/label", "nodes/paper.label"})
  feats = out.node_sets["paper"].features
  assert feats["venue"].dtype == tf.int64.as_datatype_enum
  assert feats["feat"].shape.dim[0].size == 8
  assert "label" not in feats  # dropped by Transform
  assert RAW.node_sets["paper"].features["venue"].dtype == tf.string.as_datatype_enum


def test_new_graph_feature_from_transform_is_an_error():
  with pytest.raises(transform.TransformSchemaError,
                     match="Transform outputs 'nodes/paper.degree', which the raw graph schema"):
    transform.transformed_graph_schema(RAW, _tfmd('feature { name: "nodes/paper.degree" type: INT }'),
                                       raw_keys=set())


def test_schema_agreement():
  good = _tfmd("""
    feature { name: "nodes/paper.feat" type: FLOAT }
    feature { name: "nodes/paper.venue" type: BYTES }
    feature { name: "nodes/paper.label" type: INT }
  """)
  transform.check_schema_agreement(RAW, good, "schema.pbtxt")
  bad = _tfmd("""
    feature { name: "nodes/paper.feat" type: FLOAT }
    feature { name: "nodes/paper.venue" type: INT }
  """)
  with pytest.raises(transform.TransformSchemaError) as e:
    transform.check_schema_agreement(RAW, bad, "schema.pbtxt")
  assert "'nodes/paper.venue' is INT in the Schema but string in the graph schema" in str(e.value)
  assert "'nodes/paper.label' is in the graph schema but not in the Schema" in str(e.value)
