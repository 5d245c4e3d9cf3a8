"""The Parquet reader of tables: Arrow record batches to checked chunks, column-wise.

A Parquet table (``*.parquet``) is read with pyarrow: the keys as CSV names
them (or ``#id``, ``#source``, ``#target``), string, binary or integer columns
(an integer id is its decimal text, as in CSV; see
:mod:`~gnn_trainer_component.graph.ids`); a feature is a column of its dtype's
kind (an integer column for an integer feature; an integer or float column for
a float one; string or binary for a string one), a fixed-shape feature a list
column with the shape's length per row. Errors name the file, the row (1-based),
the column and the id: a missing column, a column of a type the feature cannot
take, a null, a vector of the wrong length, a value out of the dtype's range.

TF-GNN's Beam reader does not read Parquet: the Beam engines refuse it
(:func:`gnn_trainer_component.graph.tables.refuse_parquet_on_beam`).
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import tensorflow as tf

from gnn_trainer_component.graph import table_formats
from gnn_trainer_component.graph.errors import GraphInputError


def _arrow_kind(t: pa.DataType) -> str:
  """``"int"``, ``"float"``, ``"bool"``, ``"bytes"``, ``"list"`` or ``""`` (other)."""
  if pa.types.is_dictionary(t):
    return _arrow_kind(t.value_type)
  if pa.types.is_integer(t):
    return "int"
  if pa.types.is_floating(t):
    return "float"
  if pa.types.is_boolean(t):
    return "bool"
  if (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
      or pa.types.is_large_binary(t)):
    return "bytes"
  if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
    return "list"
  return ""


#: The Arrow kinds a feature of a numpy dtype kind reads (strings: ``O``).
_READS = {"i": ("int",), "u": ("int",), "f": ("int", "float"), "b": ("bool", "int", "float"),
          "O": ("bytes",)}
_READS_TEXT = {"int": "an integer", "float": "a float", "bool": "a boolean",
               "bytes": "a string or binary"}


def _parquet_type_error(who: str, path: str, name: str, shape: tuple[int, ...],
                        dtype: np.dtype, t: pa.DataType) -> Optional[GraphInputError]:
  """Why column type ``t`` cannot hold feature ``name``, or None if it can."""
  wanted = " or ".join(_READS_TEXT[k] for k in _READS[dtype.kind])
  declared = (f"dtype {'string' if dtype.kind == 'O' else dtype.name}"
              + (f", shape {list(shape)}" if shape else ""))
  if any(d < 0 for d in shape):
    return GraphInputError(
        f"{who}: Parquet table {path}: feature {name!r} ({declared}) has no fixed shape; "
        "tables hold fixed-shape features only.")
  inner = t
  for size in shape:
    if _arrow_kind(inner) != "list" or pa.types.is_dictionary(inner):
      break
    if pa.types.is_fixed_size_list(inner) and inner.list_size != size:
      return GraphInputError(
          f"{who}: Parquet table {path}: column {name!r} has type {t}, lists of "
          f"{inner.list_size} values, but feature {name!r} has shape {list(shape)} "
          f"({size} values per list).")
    inner = inner.value_type
  else:
    if _arrow_kind(inner) in _READS[dtype.kind]:
      return None
  want = (f"a list column of {shape[0]} values per row" if len(shape) == 1 else
          f"a column of nested lists of shape {list(shape)} per row" if shape else "a column")
  return GraphInputError(
      f"{who}: Parquet table {path}: column {name!r} has type {t}, which feature {name!r} "
      f"({declared}) does not read: write it as {want} of {wanted} type.")


def _null_rows(array: pa.Array) -> np.ndarray:
  return np.flatnonzero(np.asarray(array.is_null()))


def _arrow_values(who: str, chunk: table_formats.Chunk, name: str, array: pa.Array,
                  shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
  """A feature's ``[rows, *shape]`` array from its (type-checked) Arrow column.

  Raises:
    GraphInputError: a null value or list, a list of the wrong length, a
      non-finite float, an integer or float out of the dtype's range; naming
      the row and id.
  """
  rows, per_row = len(array), 1
  for level, size in enumerate(shape):
    if isinstance(array, pa.DictionaryArray):
      array = array.dictionary_decode()
    bad = _null_rows(array)
    if len(bad):
      raise table_formats.bad_value(who, chunk, bad // per_row, name, "is missing (a null list)",
                                    None)
    if not pa.types.is_fixed_size_list(array.type):
      lengths = np.asarray(pc.list_value_length(array))
      bad = np.flatnonzero(lengths != size)
      if len(bad):
        inner = ("".join(f"[{k}]" for k in np.unravel_index(int(bad[0]) % per_row, shape[:level]))
                 if level else "")
        raise table_formats.bad_value(
            who, chunk, np.unique(bad // per_row), name,
            f"has {int(lengths[bad[0]])} values{' in list ' + inner if inner else ''}, not the "
            f"{size} of its shape {list(shape)}", _shown(array, int(bad[0])))
    array = array.flatten()
    per_row *= size
  if isinstance(array, pa.DictionaryArray):
    array = array.dictionary_decode()
  bad = _null_rows(array)
  if len(bad):
    raise table_formats.bad_value(who, chunk, np.unique(bad // per_row), name,
                     "has a missing value (null)" if shape else "is missing", None)
  if dtype.kind == "O":
    values = array.cast(pa.large_binary()).to_numpy(zero_copy_only=False)
  else:
    values = array.to_numpy(zero_copy_only=False)
  values = values.reshape(rows, *shape)
  if dtype.kind == "O":
    return values
  flat = values.reshape(rows, -1)
  if values.dtype.kind == "f":
    bad = np.flatnonzero(~np.isfinite(flat).all(axis=1))
    if len(bad):
      raise table_formats.bad_value(who, chunk, bad, name, "has a non-finite value (NaN or inf)",
                       values[bad[0]].tolist())
  if dtype.kind in "iu" and not np.can_cast(values.dtype, dtype):
    have, want = np.iinfo(values.dtype), np.iinfo(dtype)
    low, high = values.dtype.type(max(have.min, want.min)), values.dtype.type(
        min(have.max, want.max))
    bad = np.flatnonzero(((flat < low) | (flat > high)).any(axis=1))
    if len(bad):
      raise table_formats.bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
                       values[bad[0]].tolist())
  with np.errstate(over="ignore", invalid="ignore"):
    out = values.astype(dtype)
  if dtype.kind == "f":
    bad = np.flatnonzero(~np.isfinite(out.reshape(rows, -1)).all(axis=1))
    if len(bad):
      raise table_formats.bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
                       values[bad[0]].tolist())
  return out


def _shown(array: pa.Array, i: int):
  """Value ``i`` of an Arrow array as Python (a long list cut to its first values)."""
  value = array[i].as_py()
  return value[:8] + ["..."] if isinstance(value, list) and len(value) > 8 else value


def _arrow_keys(who: str, path: str, first: int, column: str, array: pa.Array) -> np.ndarray:
  """The ids of a key column: integers as int64, strings and binaries as bytes objects.

  A uint64 value beyond int64's range makes its chunk's ids bytes (decimal text).
  """
  if isinstance(array, pa.DictionaryArray):
    array = array.dictionary_decode()
  bad = _null_rows(array)
  if len(bad):
    raise GraphInputError(
        f"{who}: {path}, row {first + int(bad[0])}: {column!r} is missing (null); every node id "
        f"must be a non-empty string ({len(bad)} such row(s) in this part of the table).")
  if pa.types.is_integer(array.type):
    values = array.to_numpy(zero_copy_only=False)
    if values.dtype != np.uint64 or not len(values) or values.max() <= np.iinfo(np.int64).max:
      return values.astype(np.int64, copy=False)
    array = pc.cast(array, pa.string())
  return array.cast(pa.large_binary()).to_numpy(zero_copy_only=False)


@contextlib.contextmanager
def open_parquet(path: str) -> Iterator[pq.ParquetFile]:
  """A Parquet file, local or remote (``gs://...`` through ``tf.io.gfile``)."""
  with contextlib.ExitStack() as stack:
    source = (path if "://" not in path else
              stack.enter_context(tf.io.gfile.GFile(path, "rb")))
    yield stack.enter_context(pq.ParquetFile(source))


def parquet_chunks(path: str, key_columns: Sequence[str], features: table_formats.FeatureSpec,
                   who: str) -> Iterator[table_formats.Chunk]:
  """Chunks of a Parquet file, column-wise: Arrow record batches to numpy arrays."""
  with contextlib.ExitStack() as stack:
    try:
      table = stack.enter_context(open_parquet(path))
    except (pa.ArrowException, OSError) as e:
      raise GraphInputError(
          f"{who}: Parquet table {path} does not read as Parquet: {e}") from None
    schema = table.schema_arrow
    names = list(schema.names)
    keys, missing = [], []
    for c in key_columns:
      found = [n for n in (c, "#" + c) if n in names]
      if len(found) > 1:
        raise GraphInputError(
            f"{who}: Parquet table {path} has both columns {found}; name the {c} column "
            f"{c!r} (or {'#' + c!r}), once.")
      if not found:
        missing.append(c)
      keys.append(found[0] if found else c)
    missing += [n for n in features if n not in names]
    if missing:
      raise GraphInputError(
          f"{who}: Parquet table {path} lacks column(s) {missing} (columns: {names}).")
    for c, key in zip(key_columns, keys, strict=True):
      t = schema.field(key).type
      if _arrow_kind(t) not in ("bytes", "int"):
        raise GraphInputError(
            f"{who}: Parquet table {path}: column {key!r} has type {t}; {c} ids are string, "
            "binary or integer columns.")
    for name, (shape, dtype) in features.items():
      error = _parquet_type_error(who, path, name, shape, dtype, schema.field(name).type)
      if error is not None:
        raise error
    columns = list(dict.fromkeys(keys + list(features)))
    first = 1
    try:
      for batch in table.iter_batches(batch_size=table_formats.CHUNK_ROWS, columns=columns,
                                      use_pandas_metadata=False):
        chunk = table_formats.Chunk(
            path, first, [_arrow_keys(who, path, first, key, batch.column(key)) for key in keys],
            {}, unit="row")
        for name, (shape, dtype) in features.items():
          chunk.features[name] = _arrow_values(who, chunk, name, batch.column(name), shape, dtype)
        first += batch.num_rows
        yield chunk
    except (pa.ArrowException, OSError) as e:
      raise GraphInputError(
          f"{who}: Parquet table {path} does not read past row {first - 1}: {e}") from None
