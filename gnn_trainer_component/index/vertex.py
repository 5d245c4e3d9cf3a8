"""The Vertex AI Vector Search batch folder: the release's vectors in Vector Search's input format.

Point an index's ``contentsDeltaUri`` (a batch update, or a new index) at the artifact's
folder. It holds, directly (Vector Search allows no other subfolder):

* ``embeddings-<i>-of-<n>.json``: JSON lines, uncompressed, one vector per id, each id
  once: ``{"id": "42", "embedding": [0.125, ...]}``, with ``"restricts"`` (string node
  features: ``{"namespace": feature, "allow": [values]}``) and ``"numeric_restricts"``
  (number features: ``{"namespace": feature, "value_int" | "value_float": value}``) where
  ``index_config`` names ``restricts``; at most :data:`MAX_FILES` files;
* ``delete/removed.txt``: the ids the last blessed index held and this release does not,
  one per line (no ``delete/`` where none was removed or there is no last release).

Values are written with 9 significant digits: each reads back as the same float32. Under
cosine the vectors are the unit vectors the index scores.
"""

from __future__ import annotations

import json
import math
import os
from typing import Mapping, Optional

import numpy as np
import tensorflow as tf

from gnn_trainer_component import graph_schema
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import tables
from gnn_trainer_component.index import build as build_lib

#: Vector Search reads at most this many files in a batch folder.
MAX_FILES = 5000
#: The folder of ids to delete, and its one file.
DELETE_DIR, DELETE_FILE = "delete", "removed.txt"
#: The artifact's ``format`` property.
FORMAT = "vertex_ai_vector_search_json"


def file_count(num_vectors: int, rows_per_file: int) -> int:
  """Files for ``num_vectors``: ``rows_per_file`` each, more per file past :data:`MAX_FILES`."""
  return max(1, min(MAX_FILES, math.ceil(num_vectors / rows_per_file)))


def _text(ids: np.ndarray, what: str) -> list[str]:
  """``ids`` as text; refuses one that is not UTF-8 or holds a line break (naming it)."""
  out = []
  for node_id in build_lib.id_bytes(ids):
    try:
      text = node_id.decode("utf-8")
    except UnicodeDecodeError:
      text = None
    if text is None or "\n" in text or "\r" in text:
      raise build_lib.IndexInputError(
          f"{build_lib.WHO}: {what} id {node_id!r} is not one line of UTF-8 text, which a "
          "Vertex AI Vector Search id must be. Give the node set text ids, or set "
          "index_config vertex_ai false.")
    out.append(text)
  return out


def restrict_columns(schema_uri: str, node_set: Optional[str], ids: np.ndarray,
                     names: tuple[str, ...]) -> dict[str, np.ndarray]:
  """The node features ``names`` of ``node_set``'s table, one row per id of ``ids``.

  Raises:
    build_lib.IndexInputError: no node set, a node set or feature the schema does not
      have, a numeric feature with more than one value.
    GraphInputError: a bad table, or an id missing from it.
  """
  schema = graph_schema.read_artifact_schema(schema_uri)
  if not node_set or node_set not in schema.node_sets:
    raise build_lib.IndexInputError(
        f"{build_lib.WHO}: restricts {list(names)} are node features, and the embeddings' "
        f"node set {node_set!r} is not one of the graph schema's {sorted(schema.node_sets)} "
        f"({schema_uri}).")
  spec = schema.node_sets[node_set]
  for name in names:
    if name not in spec.features:
      raise build_lib.IndexInputError(
          f"{build_lib.WHO}: index_config restricts names {name!r}, which node set "
          f"{node_set!r} has no feature of; its features are {sorted(spec.features)}.")
  table = tables.read_node_table(node_set, spec, schema_uri, build_lib.WHO,
                                 keep_features=names)
  rows = graph_ids.lookup(table.finder, build_lib.id_bytes(ids), build_lib.WHO, node_set,
                          table.filename)
  columns = {name: table.features[name][rows] for name in names}
  for name, values in columns.items():
    if values.dtype != object and values.ndim > 1 and values.shape[1:] != (1,):
      raise build_lib.IndexInputError(
          f"{build_lib.WHO}: restricts feature {name!r} of node set {node_set!r} has "
          f"{values.shape[1:]} numbers per node; a numeric restrict takes one. Name a scalar "
          "feature.")
  return columns


def _restricts(columns: Mapping[str, np.ndarray], row: int) -> str:
  """The ``"restricts"`` / ``"numeric_restricts"`` members of one line (leading comma)."""
  tokens, numbers = [], []
  for name, values in columns.items():
    value = values[row]
    if values.dtype == object:
      allow = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
               for v in np.atleast_1d(value).tolist()]
      tokens.append({"namespace": name, "allow": allow})
    elif values.dtype.kind in "iu":
      numbers.append({"namespace": name, "value_int": int(np.ravel(value)[0])})
    else:
      numbers.append({"namespace": name, "value_float": float(np.ravel(value)[0])})
  out = f', "restricts": {json.dumps(tokens)}' if tokens else ""
  return out + (f', "numeric_restricts": {json.dumps(numbers)}' if numbers else "")


def write(uri: str, ids: np.ndarray, matrix: np.ndarray, *, removed: np.ndarray,
          rows_per_file: int,
          restricts: Optional[Mapping[str, np.ndarray]] = None) -> dict[str, int]:
  """Writes the batch folder of ``ids`` / ``matrix`` (and ``removed`` ids) into ``uri``.

  Returns:
    ``num_vectors``, ``num_files``, ``num_deleted``.

  Raises:
    build_lib.IndexInputError: an id that is not one line of UTF-8 text (nothing written).
  """
  names = [json.dumps(t) for t in _text(ids, "an indexed")]
  gone = _text(removed, "a removed") if len(removed) else []
  n, dim = matrix.shape
  per_file = math.ceil(n / file_count(n, rows_per_file))
  files = math.ceil(n / per_file)
  line = '{"id": %s, "embedding": [' + ", ".join(["%.9g"] * dim) + "]%s}\n"
  tf.io.gfile.makedirs(uri)
  for i in range(files):
    rows = range(i * per_file, min(n, (i + 1) * per_file))
    text = "".join(line % (names[r], *matrix[r].tolist(),
                           _restricts(restricts, r) if restricts else "") for r in rows)
    with tf.io.gfile.GFile(os.path.join(uri, f"embeddings-{i:05d}-of-{files:05d}.json"),
                           "w") as f:
      f.write(text)
  if gone:
    tf.io.gfile.makedirs(os.path.join(uri, DELETE_DIR))
    with tf.io.gfile.GFile(os.path.join(uri, DELETE_DIR, DELETE_FILE), "w") as f:
      f.write("".join(f"{g}\n" for g in gone))
  return {"num_vectors": n, "num_files": files, "num_deleted": len(gone)}
