"""The TF-GNN graph schema as both components read it: one file, one reader, one dtype rule.

A ``GraphSchema`` artifact is a folder holding :data:`GRAPH_SCHEMA_FILE`
(a ``tensorflow_gnn.GraphSchema`` text proto). GnnTrainer and GraphSampler
read it with :func:`read_artifact_schema`; graph features travel in
tf.Examples as the kind :func:`example_kind` names.
"""

from __future__ import annotations

import os

from gnn_trainer_component import errors

#: A node feature the graph schema may declare (``DT_STRING``, scalar) to give the model each
#: node's id, as TF-GNN's samplers do: the tables fill it from their id column, never read as
#: a column (an id embedding's input, e.g. hashed with ``tf.strings.to_hash_bucket_fast``).
NODE_ID_FEATURE = "#id"

#: File name of the schema inside a GraphSchema artifact's folder.
GRAPH_SCHEMA_FILE = "graph_schema.pbtxt"

#: The three ``tf.train.Feature`` kinds.
BYTES, FLOAT, INT64 = "bytes_list", "float_list", "int64_list"


class GraphSchemaError(errors.GnnError, ValueError):
  """The graph schema file is missing or invalid."""


def example_kind(dtype) -> str:
  """The ``tf.train.Feature`` kind (``bytes_list``, ``float_list``, ``int64_list``) of a dtype.

  Args:
    dtype: A ``tf.DType`` or a ``DataType`` enum value (as in ``Feature.dtype``
      of a GraphSchema).
  """
  import tensorflow as tf  # Imported here: importing this module loads no TensorFlow.
  dt = tf.dtypes.as_dtype(dtype)
  if dt == tf.string:
    return BYTES
  return FLOAT if dt.is_floating else INT64


def read_graph_schema(path: str):
  """Reads and validates a ``graph_schema.pbtxt``.

  Returns:
    The ``tensorflow_gnn.GraphSchema``.

  Raises:
    GraphSchemaError: naming the file and the problem.
  """
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  if not tf.io.gfile.exists(path):
    raise GraphSchemaError(f"Graph schema file {path} does not exist.")
  try:
    schema = tfgnn.read_schema(path)
  except Exception as e:  # Any failure here is the user's schema: reported with its path.
    raise GraphSchemaError(
        f"Graph schema file {path} is not a valid tensorflow_gnn.GraphSchema "
        f"text proto: {e}") from e
  if not schema.node_sets:
    raise GraphSchemaError(f"Graph schema file {path} declares no node_sets.")
  try:
    tfgnn.validate_schema(_without_node_ids(schema))
  except Exception as e:  # Any failure of TF-GNN's validation: reported with the path.
    raise GraphSchemaError(f"Graph schema file {path} is invalid: {e}") from e
  return schema


def _without_node_ids(schema):
  """``schema`` without the :data:`NODE_ID_FEATURE` of its node sets.

  TF-GNN's validation logs an error for ``#``-names, which it reserves for its samplers'
  ``#id``: the same feature, whose dtype the table reader checks.
  """
  copy = type(schema)()
  copy.CopyFrom(schema)
  for node_set in copy.node_sets.values():
    if NODE_ID_FEATURE in node_set.features:
      del node_set.features[NODE_ID_FEATURE]
  return copy


def read_artifact_schema(artifact_uri: str):
  """Reads the schema of a ``GraphSchema`` artifact (its folder's :data:`GRAPH_SCHEMA_FILE`)."""
  return read_graph_schema(os.path.join(artifact_uri, GRAPH_SCHEMA_FILE))


def write_artifact_schema(schema, artifact_uri: str) -> None:
  """Writes ``schema`` as the :data:`GRAPH_SCHEMA_FILE` of a ``GraphSchema`` artifact folder."""
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  tf.io.gfile.makedirs(artifact_uri)
  tfgnn.write_schema(schema, os.path.join(artifact_uri, GRAPH_SCHEMA_FILE))
