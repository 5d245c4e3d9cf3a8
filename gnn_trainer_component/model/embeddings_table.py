"""The Embeddings artifact's table: ``embeddings.parquet``, one row per node (or pair).

Columns: ``id`` (the node table's id: string, or binary where an id is not
UTF-8; a table of pairs: ``source`` and ``target``) and one per signature
output, named by the output: a float32 fixed-size list of the output's width
per node (``[batch]`` outputs are plain float32). Rows are in node order (node
table order, or the ``nodes`` table's; pairs in their table's order). Written
batch by batch (one row group per batch or more), so memory holds one batch,
not the table.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gnn_trainer_component.model import loading

#: The file inside the Embeddings artifact's folder.
FILE = "embeddings.parquet"
#: The column of node ids (no output of the model may take its name: ``loading.ID_COLUMN``).
ID_COLUMN = loading.ID_COLUMN
#: The id columns of a table of pairs (GraphInferrer with ``link_config``): each pair's ends.
PAIR_COLUMNS = ("source", "target")
#: The ``id`` column's type when the writer is not told (:func:`id_type` of the ids).
_DEFAULT_ID_KIND = pa.string()


def id_type(ids: np.ndarray) -> pa.DataType:
  """``string`` where every id is UTF-8 (integer ids always are), else ``binary``."""
  if np.asarray(ids).dtype.kind in "iu":
    return pa.string()
  try:
    for i in ids:
      if isinstance(i, bytes):
        i.decode("utf-8")
  except UnicodeDecodeError:
    return pa.binary()
  return pa.string()


def _ids(ids: np.ndarray, kind: pa.DataType) -> pa.Array:
  if kind == pa.string():
    return pa.array([i.decode("utf-8") if isinstance(i, bytes) else str(i) for i in ids], kind)
  return pa.array(list(ids), kind)


def column_type(shape: Sequence[Optional[int]]) -> pa.DataType:
  """The column type of an output of ``shape`` (``[batch, *dims]``).

  float32 for ``[batch]``, else a float32 list of ``prod(dims)`` (both engines write this).
  """
  if len(shape) <= 1:
    return pa.float32()
  return pa.list_(pa.float32(), int(np.prod(shape[1:])))


def cell(values: np.ndarray, row: int) -> Any:
  """Row ``row`` of an output batch as a Python value of :func:`column_type`."""
  return float(values[row]) if values.ndim == 1 else values[row].reshape(-1).tolist()


def _column(values: np.ndarray) -> pa.Array:
  values = np.asarray(values, dtype=np.float32)
  if values.ndim == 1:
    return pa.array(values, column_type(values.shape))
  flat = values.reshape(len(values), -1)
  return pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), flat.shape[1])


class Writer:
  """Appends batches of ``(ids, {output: [batch, ...] array})`` to ``path``.

  ``id_kind``: the id columns' type (:func:`id_type` of all the ids); ``id_columns``: their
  names (a pair's: :data:`PAIR_COLUMNS`).
  """

  def __init__(self, path: str, id_kind: pa.DataType = _DEFAULT_ID_KIND,
               id_columns: Sequence[str] = (ID_COLUMN,)):
    self._path = path
    self._id_kind = id_kind
    self._id_columns = tuple(id_columns)
    self._writer: Optional[pq.ParquetWriter] = None
    self.rows = 0
    self.columns: list[str] = []

  def write(self, ids: Union[np.ndarray, Sequence[np.ndarray]],
            outputs: Mapping[str, np.ndarray]) -> None:
    """``ids``: the batch's ids, or one array per id column (a pair's source and target)."""
    keys = (ids,) if len(self._id_columns) == 1 else tuple(ids)
    arrays = {name: _ids(k, self._id_kind)
              for name, k in zip(self._id_columns, keys, strict=True)}
    for name in sorted(outputs):
      arrays[name] = _column(outputs[name])
    batch = pa.table(arrays)
    if self._writer is None:
      self._writer = pq.ParquetWriter(self._path, batch.schema)
      self.columns = list(batch.schema.names)
    self._writer.write_table(batch)
    self.rows += len(keys[0])

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None


def read(uri: str):
  """The table of an Embeddings artifact folder as a pandas DataFrame."""
  return pq.read_table(os.path.join(uri, FILE)).to_pandas()
