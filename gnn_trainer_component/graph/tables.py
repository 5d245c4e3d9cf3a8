"""A graph's unigraph tables: one reader and one set of checks for every engine.

Tables follow TF-GNN's "unigraph" convention (``tensorflow_gnn/data/unigraph.py``),
named in each node or edge set's ``metadata.filename`` relative to the
GraphSchema folder (sharded ``name@N`` TFRecords or globs allowed); the format
comes from the name (:func:`table_format`):

* CSV: a header; a node table has an ``id`` column, an edge table ``source``
  and ``target``; every feature the graph schema declares is a column
  (scalar features only);
* TFRecord of tf.Examples: the same keys as bytes features ``#id``,
  ``#source``, ``#target``; features as the schema declares them;
* Parquet (``*.parquet``), read column-wise with pyarrow: the keys as CSV
  names them (or ``#id``, ``#source``, ``#target``), string, binary or integer
  columns (an integer id is its decimal text, as in CSV; see "Ids" below); a
  feature is a column of its dtype's kind (an integer column for an integer
  feature; an integer or float column for a float one; string or binary for a
  string one), a fixed-shape feature a list column with the shape's length per
  row.
  TF-GNN's Beam reader does not read Parquet: the Beam engines refuse it
  (:func:`check_graph`).

Every component and engine reads tables through :func:`read_node_table`,
:func:`read_edge_table` and :func:`read_seeds` (GraphSampler, LinkSampler and
GraphInferrer's Beam engine through :func:`check_graph`, which keeps no
features), so the same table gets the same verdict everywhere. A table is
read a chunk at a time; each error names the table file, the line (CSV),
record (TFRecord) or row (Parquet; 1-based, the header not counted), the
column and the id:

* a malformed row (more fields than the header; a row with fewer fields is
  named where its missing values are refused), a missing column;
* an empty id, a duplicate node id, an edge end that is not in its node set;
* a feature value that is missing, not a number, not finite, not an integer
  (integer features) or out of the dtype's range; a Parquet column of a type
  the feature cannot take, a vector of the wrong length;
* a seed table that is empty, repeats an id or names an unknown node.

Ids: a node table whose ids are all integers (integer Parquet columns) keeps
them as an int64 :class:`pandas.Index` (8 bytes a node); any other keeps bytes
objects (integers among them as their decimal text). Either way an integer id
is its decimal text: :class:`IdFinder` finds ids of any kind among either
(:func:`lookup` for wanted ids of any kind), and :func:`id_bytes` gives ids as
bytes for output and messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
from typing import Any, Collection, Iterable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph

from gnn_trainer_component.graph.errors import format_ids
from gnn_trainer_component.graph.errors import shown_id
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.graph.errors import GraphTooLargeError
from gnn_trainer_component.graph.errors import too_large_hint

#: Rows (CSV, Parquet) or records (TFRecord) read at a time.
CHUNK_ROWS = 65536
#: The key columns of node and edge tables (CSV names; ``#`` + name in TFRecord).
NODE_KEYS, EDGE_KEYS = ("id",), ("source", "target")

#: Feature name -> (shape, numpy dtype) as the graph schema declares it.
FeatureSpec = Mapping[str, tuple[tuple[int, ...], np.dtype]]


def features_spec(piece) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
  """The :data:`FeatureSpec` of a node or edge set of the graph schema."""
  out = {}
  for name, feature in piece.features.items():
    dt = tf.dtypes.as_dtype(feature.dtype)
    out[name] = (tuple(d.size for d in feature.shape.dim),
                 np.dtype(object) if dt == tf.string else np.dtype(dt.as_numpy_dtype))
  return out


def table_format(filename: str, who: str = "") -> str:
  """``"csv"``, ``"tfrecord"`` or ``"parquet"``: a table's format, from its name.

  A name ending ``.parquet`` (or ``.parquet@N``) is Parquet; others as TF-GNN's
  ``unigraph.guess_file_format`` guesses them, then any ``[_.-]parquet`` in the name.

  Raises:
    GraphInputError: the name says none of them.
  """
  if re.fullmatch(r".*\.parquet(@\d+)?", filename):
    return "parquet"
  try:
    return unigraph.guess_file_format(filename)
  except ValueError:
    if re.search(r"[_.-]parquet\b", filename):
      return "parquet"
    raise GraphInputError(
        f"{who + ': ' if who else ''}cannot tell the format of table {filename!r} from its name: "
        "name CSV tables *.csv, TFRecord tables *.tfrecord and Parquet tables *.parquet."
    ) from None


def resolve_table(data_dir: str, filename: str, who: str) -> list[str]:
  """Files of a (possibly sharded ``name@N`` or glob) table, relative to data_dir.

  Raises:
    GraphInputError: no such files, or a CSV table named ``name@N`` (TF-GNN's
      CSV reader globs the name unexpanded and fails; a glob works).
  """
  shards = re.fullmatch(r"(.*)@(\d+)", filename)
  if shards and table_format(filename, who) == "csv":
    base, n = shards.group(1), int(shards.group(2))
    stem = base[:-len(".csv")] if base.endswith(".csv") else base
    raise GraphInputError(
        f"{who}: CSV table {filename!r}: TF-GNN's CSV reader cannot read sharded names "
        f"'name@N'. Name the shards with a glob instead, e.g. {stem}-*-of-{n:05d}.csv "
        f"(files {stem}-00000-of-{n:05d}.csv, ...).")
  path = filename if os.path.isabs(filename) else os.path.join(data_dir, filename)
  pattern = unigraph.expand_sharded_pattern(path)
  files = sorted(tf.io.gfile.glob(pattern))
  if not files:
    raise GraphInputError(f"{who}: table {filename!r} not found (looked for {pattern}).")
  return files


@dataclasses.dataclass(frozen=True)
class Chunk:
  """Consecutive rows of one table file, checked.

  Attributes:
    path: The file.
    first: The line (CSV), record (TFRecord) or row (Parquet) number of the
      first row.
    keys: One array per key column: int64 for an integer Parquet column, else
      bytes objects.
    features: Feature arrays, ``[rows, *shape]``.
    unit: What ``first`` counts (``line``, ``record``, ``row``); by default
      ``line`` for a ``.csv`` file, else ``record``.
  """
  path: str
  first: int
  keys: list[np.ndarray]
  features: dict[str, np.ndarray]
  unit: str = ""

  def where(self, row: int) -> str:
    """``"<file>, line N"`` (or ``record N``, ``row N``) of the chunk's ``row``."""
    unit = self.unit or ("line" if self.path.endswith(".csv") else "record")
    return f"{self.path}, {unit} {self.first + row}"


def _short_row(path: str, line: int) -> str:
  """`` (the row has N of the header's M fields)`` if CSV ``line`` is short, else ``""``.

  A short row reads as empty values; this names the cause (called on errors only).
  """
  import csv
  with tf.io.gfile.GFile(path, "r") as f:
    reader = csv.reader(f)
    header = next(reader, [])
    for row in reader:
      if reader.line_num == line:
        return (f" (the row has {len(row)} of the header's {len(header)} fields)"
                if len(row) < len(header) else "")
  return ""


def _row_label(keys: Sequence[np.ndarray], row: int) -> str:
  if len(keys) == 1:
    return f"id {shown_id(keys[0][row])!r}"
  return "edge " + " -> ".join(repr(shown_id(k[row])) for k in keys)


def _bad_value(who: str, chunk: Chunk, bad: np.ndarray, name: str, problem: str,
               value) -> GraphInputError:
  row = int(bad[0])
  short = _short_row(chunk.path, chunk.first + row) if value == "" else ""
  return GraphInputError(
      f"{who}: {chunk.where(row)} ({_row_label(chunk.keys, row)}): feature {name!r} {problem} "
      f"({value!r}){short}; {len(bad)} such row(s) in this part of the table.")


def _csv_numbers(who: str, chunk: Chunk, name: str, column: pd.Series, dtype: np.dtype
                 ) -> np.ndarray:
  """The numbers of a CSV column: integers must be integral and in range, floats finite."""
  text = column.str.strip()
  if dtype.kind in "iu":
    bad = np.flatnonzero(~text.str.fullmatch(r"[+-]?\d+").to_numpy(dtype=bool))
    if len(bad):
      value = column.iloc[bad[0]]
      problem = "is missing" if value == "" else f"is not an integer (dtype {dtype.name})"
      raise _bad_value(who, chunk, bad, name, problem, value)
    info = np.iinfo(dtype)
    digits = text.str.lstrip("+-").str.lstrip("0").str.len().to_numpy()
    long = np.flatnonzero(digits >= len(str(info.max)))
    bad = np.asarray([i for i in long if not info.min <= int(text.iloc[i]) <= info.max],
                     dtype=np.int64)
    if len(bad):
      raise _bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
                       column.iloc[bad[0]])
    return text.to_numpy().astype(dtype)
  numbers = pd.to_numeric(text.where(text != ""), errors="coerce").to_numpy(dtype=np.float64)
  bad = np.flatnonzero(~np.isfinite(numbers))
  if len(bad):
    value = column.iloc[bad[0]]
    raise _bad_value(who, chunk, bad, name, "is missing, not a number or not finite", value)
  with np.errstate(over="ignore"):
    out = numbers.astype(dtype)
  bad = np.flatnonzero(~np.isfinite(out))
  if len(bad):
    raise _bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
                     column.iloc[bad[0]])
  return out


def _as_bytes(values: pd.Series) -> np.ndarray:
  return np.asarray([v.encode("utf-8") for v in values], dtype=object)


class _NulGuard:
  r"""A CSV file's text as pandas reads it, refused at its first NUL character.

  pandas' C parser ends a value at a NUL (``"n\x005"`` reads as ``"n"``, a run of
  NULs as nothing), so a corrupt or binary file would load as other values; this
  checks each block pandas reads (no second pass over the file).
  """

  def __init__(self, f, path: str, who: str):
    self._f, self._path, self._who = f, path, who
    self._line = 1  # the line the next block starts on

  def read(self, size: int = -1) -> str:
    return self._checked(self._f.read(size))

  def readline(self) -> str:
    return self._checked(self._f.readline())

  def __iter__(self):  # what makes pandas take it for a file; its C parser calls read()
    return iter(self.readline, "")

  def _checked(self, text: str) -> str:
    at = text.find("\x00")
    if at >= 0:
      line = self._line + text.count("\n", 0, at)
      raise GraphInputError(
          f"{self._who}: CSV table {self._path}, line {line} holds a NUL byte: the file is "
          "corrupt or not text. A CSV table is UTF-8 text; write it again, or name a "
          "table of tf.Examples .tfrecord.")
    self._line += text.count("\n")
    return text


def _csv_chunks(path: str, key_columns: Sequence[str], features: FeatureSpec, who: str
                ) -> Iterator[Chunk]:
  for name, (shape, _) in features.items():
    if shape:
      raise GraphInputError(
          f"{who}: feature {name!r} of CSV table {path} has shape {list(shape)}; CSV tables "
          "hold scalar features only. Write the table as TFRecord tf.Examples.")
  wanted = list(key_columns) + list(features)
  with tf.io.gfile.GFile(path, "r") as f:
    reader = pd.read_csv(_NulGuard(f, path, who), dtype=str, keep_default_na=False,
                         na_filter=False, chunksize=CHUNK_ROWS)
    first = 2
    try:
      for frame in reader:
        missing = [c for c in wanted if c not in frame.columns]
        if missing:
          raise GraphInputError(
              f"{who}: CSV table {path} lacks column(s) {missing} (header: "
              f"{list(frame.columns)}).")
        chunk = Chunk(path, first, [_as_bytes(frame[c]) for c in key_columns], {})
        for name, (_, dtype) in features.items():
          chunk.features[name] = (_as_bytes(frame[name]) if dtype == np.dtype(object) else
                                  _csv_numbers(who, chunk, name, frame[name], dtype))
        first += len(frame)
        yield chunk
    except pd.errors.ParserError as e:
      raise GraphInputError(
          f"{who}: CSV table {path} is malformed: {str(e).strip()} (a row has more fields "
          "than the header; quote values that hold commas).") from None
    except pd.errors.EmptyDataError:
      raise GraphInputError(f"{who}: CSV table {path} is empty: it has no header "
                            f"(columns {wanted}).") from None


def _tfrecord_chunks(path: str, key_columns: Sequence[str], features: FeatureSpec, who: str
                     ) -> Iterator[Chunk]:
  spec = {"#" + c: tf.io.FixedLenFeature([], tf.string) for c in key_columns}
  for name, (shape, dtype) in features.items():
    spec[name] = tf.io.FixedLenFeature(
        shape, tf.string if dtype == np.dtype(object) else tf.as_dtype(dtype))
  first = 1
  for batch in tf.data.TFRecordDataset(path).batch(CHUNK_ROWS):
    try:
      parsed = {k: v.numpy() for k, v in tf.io.parse_example(batch, spec).items()}
    except tf.errors.InvalidArgumentError:
      _raise_record_error(path, first, batch.numpy(), spec, who)
    chunk = Chunk(path, first, [parsed["#" + c].astype(object) for c in key_columns], {})
    for name, (_, dtype) in features.items():
      value = parsed[name]
      if value.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(value.reshape(len(value), -1)).all(axis=1))
        if len(bad):
          raise _bad_value(who, chunk, bad, name, "has a non-finite value (NaN or inf)",
                           value[bad[0]].tolist())
      chunk.features[name] = value.astype(dtype)
    first += len(batch)
    yield chunk


def _raise_record_error(path: str, first: int, records: np.ndarray, spec, who: str):
  """Names the first record of a batch that does not parse, and why."""
  for i, record in enumerate(records):
    try:
      tf.io.parse_example(tf.constant([record]), spec)
    except tf.errors.InvalidArgumentError as e:
      example = tf.train.Example.FromString(record)
      absent = [k for k in spec if k not in example.features.feature]
      reason = (f"lacks feature(s) {absent}" if absent
                else f"has a feature of the wrong type or size ({e.message.splitlines()[0]})")
      raise GraphInputError(
          f"{who}: {path}, record {first + i} {reason}; the graph schema declares "
          f"{sorted(spec)}.") from None
  raise GraphInputError(f"{who}: TFRecord table {path} does not parse.")


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


def _arrow_values(who: str, chunk: Chunk, name: str, array: pa.Array,
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
      raise _bad_value(who, chunk, bad // per_row, name, "is missing (a null list)", None)
    if not pa.types.is_fixed_size_list(array.type):
      lengths = np.asarray(pc.list_value_length(array))
      bad = np.flatnonzero(lengths != size)
      if len(bad):
        inner = ("".join(f"[{k}]" for k in np.unravel_index(int(bad[0]) % per_row, shape[:level]))
                 if level else "")
        raise _bad_value(
            who, chunk, np.unique(bad // per_row), name,
            f"has {int(lengths[bad[0]])} values{' in list ' + inner if inner else ''}, not the "
            f"{size} of its shape {list(shape)}", _shown(array, int(bad[0])))
    array = array.flatten()
    per_row *= size
  if isinstance(array, pa.DictionaryArray):
    array = array.dictionary_decode()
  bad = _null_rows(array)
  if len(bad):
    raise _bad_value(who, chunk, np.unique(bad // per_row), name,
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
      raise _bad_value(who, chunk, bad, name, "has a non-finite value (NaN or inf)",
                       values[bad[0]].tolist())
  if dtype.kind in "iu" and not np.can_cast(values.dtype, dtype):
    have, want = np.iinfo(values.dtype), np.iinfo(dtype)
    low, high = values.dtype.type(max(have.min, want.min)), values.dtype.type(
        min(have.max, want.max))
    bad = np.flatnonzero(((flat < low) | (flat > high)).any(axis=1))
    if len(bad):
      raise _bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
                       values[bad[0]].tolist())
  with np.errstate(over="ignore", invalid="ignore"):
    out = values.astype(dtype)
  if dtype.kind == "f":
    bad = np.flatnonzero(~np.isfinite(out.reshape(rows, -1)).all(axis=1))
    if len(bad):
      raise _bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
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


def _parquet_chunks(path: str, key_columns: Sequence[str], features: FeatureSpec, who: str
                    ) -> Iterator[Chunk]:
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
      for batch in table.iter_batches(batch_size=CHUNK_ROWS, columns=columns,
                                      use_pandas_metadata=False):
        chunk = Chunk(path, first, [_arrow_keys(who, path, first, key, batch.column(key))
                                    for key in keys], {}, unit="row")
        for name, (shape, dtype) in features.items():
          chunk.features[name] = _arrow_values(who, chunk, name, batch.column(name), shape, dtype)
        first += batch.num_rows
        yield chunk
    except (pa.ArrowException, OSError) as e:
      raise GraphInputError(
          f"{who}: Parquet table {path} does not read past row {first - 1}: {e}") from None


def iter_chunks(data_dir: str, filename: str, key_columns: Sequence[str],
                features: FeatureSpec, who: str) -> Iterator[Chunk]:
  """The checked chunks of a table, file by file; no key (id) is empty.

  Raises:
    GraphInputError: naming the file, line or record, column and id.
  """
  read = {"csv": _csv_chunks, "tfrecord": _tfrecord_chunks,
          "parquet": _parquet_chunks}[table_format(filename, who)]
  for path in resolve_table(data_dir, filename, who):
    for chunk in read(path, key_columns, features, who):
      for column, keys in zip(key_columns, chunk.keys, strict=True):
        if keys.dtype != object:  # integers: never empty
          continue
        empty = np.flatnonzero(keys == b"")
        if len(empty):
          row = int(empty[0])
          short = _short_row(chunk.path, chunk.first + row) if path.endswith(".csv") else ""
          raise GraphInputError(
              f"{who}: {chunk.where(row)}: {column!r} is empty{short}; every node id must be "
              f"a non-empty string ({len(empty)} such row(s) in this part of the table).")
      yield chunk


def _table_of(kind: str, name: str, piece, who: str) -> str:
  if not piece.metadata.HasField("filename"):
    raise GraphInputError(
        f"{who}: {kind} set {name!r} has no metadata.filename table in the graph schema.")
  return piece.metadata.filename


def _concat(parts: Sequence[np.ndarray], dtype, shape=()) -> np.ndarray:
  return np.concatenate(parts) if parts else np.zeros((0, *shape), dtype=dtype)


def _features(parts: Mapping[str, list[np.ndarray]], spec: FeatureSpec) -> dict[str, np.ndarray]:
  return {n: _concat(parts[n], dtype, shape) for n, (shape, dtype) in spec.items() if n in parts}


def _locate(parts: Sequence[tuple[Chunk, int]], row: int) -> str:
  """Where ``row`` (0-based over the whole table) of a table read as ``(chunk, rows)`` is."""
  for chunk, size in parts:
    if row < size:
      return chunk.where(row)
    row -= size
  raise IndexError(row)


def is_integer(ids: Union[pd.Index, np.ndarray]) -> bool:
  """Whether ``ids`` are integers (an int64 node index), not bytes objects."""
  return ids.dtype.kind in "iu"


def id_bytes(ids: Union[pd.Index, np.ndarray], rows: Optional[Any] = None) -> np.ndarray:
  """Ids as bytes objects, as they are written out and named: an integer as its decimal text.

  Args:
    ids: A node set's ids (:attr:`NodeTable.ids`) or an array of ids (int or
      bytes objects).
    rows: The rows wanted (indices or a mask); None: all.

  Returns:
    An object array of bytes (``ids``' own array if it is one and ``rows`` is None).
  """
  values = np.asarray(ids)
  if rows is not None:
    values = values[rows]
  if is_integer(values):
    return values.astype(bytes).astype(object)  # decimal text: no NUL is dropped
  return values.astype(object, copy=False)


def byte_order(ids: pd.Index) -> np.ndarray:
  """The rows of a node set's ``ids`` sorted by id as bytes (an integer by its text), stably."""
  values = np.asarray(ids)
  if is_integer(values):
    return np.argsort(values.astype(bytes), kind="stable")  # decimal text: no NUL
  if any(i.endswith(b"\0") for i in values):  # fixed-width bytes would drop trailing NULs
    return np.argsort(values, kind="stable")
  return np.argsort(values.astype(bytes), kind="stable")


def _ids_of(parts: Sequence[np.ndarray]) -> np.ndarray:
  """One array of a table's ids: int64 if every part is, else bytes (integers as their text)."""
  if parts and all(is_integer(p) for p in parts):
    return np.concatenate(parts).astype(np.int64, copy=False)
  return _concat([id_bytes(p) for p in parts], object)


def _as_ids(wanted: Iterable[Any]) -> np.ndarray:
  """Wanted ids of any kind (bytes, str, int) as int64 or an object array of bytes."""
  values = (np.asarray(wanted) if isinstance(wanted, (np.ndarray, pd.Index))
            else np.asarray(list(wanted), dtype=object))
  if values.dtype.kind in "iu":
    return _ids_of([values]) if values.dtype != np.uint64 else id_bytes(values)
  return np.asarray([v if isinstance(v, bytes) else str(v).encode("utf-8")
                     for v in values.tolist()], dtype=object)


#: The text of an int64 id: decimal, no sign but ``-``, no leading zero, ``-0`` not ``0``.
_DECIMAL = r"^(0|-?[1-9][0-9]*)$"
#: Decimal text this long or shorter is always within int64's range (18 digits).
_SAFE_DIGITS = 18


def _decimal_values(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Bytes ids as the int64 each is the decimal text of, and which are.

  Returns:
    ``(values, ok)``: ``values[i]`` is the integer ``ids[i]`` spells where
    ``ok[i]``; an id that is not exactly an int64's text (``"012"``, ``"+1"``,
    ``"1.0"``, ``"u1"``, out of range) is not ``ok``.
  """
  text = pa.array(ids, pa.large_binary())
  ok = np.asarray(pc.match_substring_regex(text, _DECIMAL), dtype=bool)
  short = ok & (np.asarray(pc.binary_length(text)) <= _SAFE_DIGITS)
  values = np.zeros(len(ids), np.int64)
  values[short] = pc.cast(text.filter(pa.array(short)).cast(pa.large_string()),
                          pa.int64()).to_numpy()
  for i in np.flatnonzero(ok & ~short):  # 19 digits: maybe beyond int64's range
    value = int(ids[i])
    ok[i] = np.iinfo(np.int64).min <= value <= np.iinfo(np.int64).max
    values[i] = value if ok[i] else 0
  return values, ok


#: :class:`IdFinder`: the most slots per id of a dense table over the ids' range.
DENSE_SLOTS_PER_ID = 4


class IdFinder:
  """The rows of wanted ids of any kind among a node set's ids; -1 for an absent one.

  An integer id is its decimal text. Among bytes ids, integers are found as
  their text; among integer ids, bytes are found as the integer they are the
  exact text of (``b"12"``, not ``b"012"`` or ``b"+12"``: those are absent).
  Integers among integer ids: the row is the id's offset when the ids are a
  range in order (``0..N-1``: the id is the row); else a dense table of rows
  over the ids' range when it has at most :data:`DENSE_SLOTS_PER_ID` slots per
  id; else pandas' hash table of the index.

  Attributes:
    ids: The node set's ids (:attr:`NodeTable.ids`).
  """

  def __init__(self, ids: pd.Index):
    self.ids = ids
    self._start, self._stop = 0, -1  # integer ids: their range [start, stop]
    self._range = False  # integer ids start..stop in order: the row is the offset
    self._table: Optional[np.ndarray] = None  # row of id start + i, -1 for none
    if not is_integer(ids) or not len(ids):
      return
    values = ids.to_numpy()
    self._start, self._stop = int(values.min()), int(values.max())
    span = self._stop - self._start + 1
    if span == len(values) and ids.is_monotonic_increasing:
      self._range = True
    elif span <= DENSE_SLOTS_PER_ID * len(values):
      self._table = np.full(span, -1, np.int32 if len(values) < 2**31 else np.int64)
      self._table[values - self._start] = np.arange(len(values))

  @property
  def unique(self) -> bool:
    """Whether no id repeats."""
    if self._range:
      return True
    if self._table is not None:  # a repeated id's slot holds one of its rows only
      values = self.ids.to_numpy()
      return bool((self._table[values - self._start] == np.arange(len(values))).all())
    return self.ids.is_unique

  def __call__(self, wanted: np.ndarray) -> np.ndarray:
    """The int64 rows of ``wanted`` (int64, or an object array of bytes) in :attr:`ids`."""
    if not is_integer(self.ids):
      return self.ids.get_indexer(pd.Index(id_bytes(wanted), dtype=object)).astype(np.int64)
    if not is_integer(wanted):
      values, ok = _decimal_values(wanted)
      out = np.full(len(wanted), -1, np.int64)
      out[ok] = self._find(values[ok])
      return out
    return self._find(wanted.astype(np.int64, copy=False))

  def _find(self, values: np.ndarray) -> np.ndarray:
    if not self._range and self._table is None:
      return self.ids.get_indexer(values).astype(np.int64, copy=False)
    inside = (values >= self._start) & (values <= self._stop)
    if inside.all():
      offsets = values - self._start
      return offsets if self._range else self._table[offsets].astype(np.int64)
    out = np.full(len(values), -1, np.int64)
    offsets = values[inside] - self._start
    out[inside] = offsets if self._range else self._table[offsets]
    return out


@dataclasses.dataclass(frozen=True)
class NodeTable:
  """A node set's table: ids in table order (row i is node index i), feature arrays.

  ``ids``: int64 if the table's ids are all integers, else bytes objects
  (:class:`IdFinder` finds ids of any kind among them, :func:`id_bytes` gives
  them as bytes).
  """
  filename: str
  ids: pd.Index
  features: Mapping[str, np.ndarray]

  @functools.cached_property
  def finder(self) -> IdFinder:
    """The :class:`IdFinder` of :attr:`ids`, built once for every edge and seed table."""
    return IdFinder(self.ids)


@dataclasses.dataclass(frozen=True)
class EdgeTable:
  """An edge set's table in table order: its ends as row indices of their node tables."""
  filename: str
  source: np.ndarray
  target: np.ndarray
  features: Mapping[str, np.ndarray]

  def by_source(self, num_sources: int) -> tuple["EdgeTable", np.ndarray]:
    """The table in CSR order by source (stable: table order within a source), and ``indptr``.

    The out-edges of source node ``u`` are then rows ``indptr[u]:indptr[u + 1]``.
    """
    order = np.argsort(self.source, kind="stable")
    counts = np.bincount(self.source, minlength=num_sources)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return EdgeTable(self.filename, self.source[order], self.target[order],
                     {k: v[order] for k, v in self.features.items()}), indptr


#: Which features a reader keeps: all (True), none (False: checked, then dropped) or those named.
Keep = Union[bool, Collection[str]]


def _kept(keep: Keep, spec: FeatureSpec) -> frozenset:
  if isinstance(keep, bool):
    return frozenset(spec) if keep else frozenset()
  return frozenset(keep)


def read_node_table(name: str, node_set, data_dir: str, who: str, *,
                    keep_features: Keep = True) -> NodeTable:
  """Reads and checks a node set's table (``keep_features``: :data:`Keep`).

  Raises:
    GraphInputError: a bad row or value, an empty or duplicate id, no rows.
  """
  filename = _table_of("node", name, node_set, who)
  spec = features_spec(node_set)
  kept = _kept(keep_features, spec)
  ids, where, parts = [], [], {n: [] for n in spec if n in kept}
  for chunk in iter_chunks(data_dir, filename, NODE_KEYS, spec, who):
    ids.append(chunk.keys[0])
    where.append((chunk, len(chunk.keys[0])))
    for n, value in chunk.features.items():
      if n in kept:
        parts[n].append(value)
  values = _ids_of(ids)
  index = pd.Index(values, dtype=values.dtype)
  if not len(index):
    raise GraphInputError(
        f"{who}: node table {filename!r} of node set {name!r} has no rows; every node set of "
        "the graph schema needs at least one node (drop the node set and its edge sets from "
        "graph_schema.pbtxt if the graph has none).")
  table = NodeTable(filename, index, _features(parts, spec))
  if not table.finder.unique:
    repeats = index.duplicated()
    first = _locate(where, int(np.flatnonzero(repeats)[0]))
    raise GraphInputError(
        f"{who}: node table {filename!r} of node set {name!r} has duplicate ids "
        f"{format_ids(id_bytes(index, repeats))} (first repeat: {first}).")
  return table


def read_edge_table(name: str, edge_set, data_dir: str, nodes: Mapping[str, NodeTable],
                    who: str, *, keep_features: Keep = True) -> EdgeTable:
  """Reads and checks an edge set's table: every end must be in its node set.

  Args:
    name: The edge set.
    edge_set: Its GraphSchema piece.
    data_dir: The folder table names are relative to.
    nodes: Node set -> its table (:func:`read_node_table`).
    who: The component named in errors.
    keep_features: Which features are kept (:data:`Keep`); the others are
      checked, then dropped.

  Raises:
    GraphInputError: a bad row or value, or an end not in its node set.
  """
  filename = _table_of("edge", name, edge_set, who)
  spec = features_spec(edge_set)
  kept = _kept(keep_features, spec)
  ends, parts = ([], []), {n: [] for n in spec if n in kept}
  for chunk in iter_chunks(data_dir, filename, EDGE_KEYS, spec, who):
    for role, ids, set_name, out in zip(EDGE_KEYS, chunk.keys,
                                        (edge_set.source, edge_set.target), ends, strict=True):
      index = nodes[set_name].finder(ids)
      bad = np.flatnonzero(index < 0)
      if len(bad):
        raise GraphInputError(
            f"{who}: edge table {filename!r} of edge set {name!r} has {role} ids not in node "
            f"set {set_name!r}: {format_ids(id_bytes(ids, bad))} (first at "
            f"{chunk.where(int(bad[0]))}; {len(bad)} such edge(s) in this part of the table).")
      out.append(index)
    for n, value in chunk.features.items():
      if n in kept:
        parts[n].append(value)
  return EdgeTable(filename, _concat(ends[0], np.int64), _concat(ends[1], np.int64),
                   _features(parts, spec))


def out_of_memory(who: str, what: str) -> GraphTooLargeError:
  """The error for a ``MemoryError`` while ``what`` (e.g. "reading node table 'x'") ran."""
  return GraphTooLargeError(
      f"{who}: ran out of memory {what}: the graph does not fit in what this process may use "
      "(the machine's memory, a container's limit, or an address-space limit such as "
      f"`ulimit -v`). {too_large_hint(who)}")


def _keep_of(keep: Union[bool, Mapping[str, Collection[str]]], name: str) -> Keep:
  return keep if isinstance(keep, bool) else tuple(keep.get(name, ()))


def read_graph_tables(schema: tfgnn.GraphSchema, data_dir: str, who: str, *,
                      keep_features: Union[bool, Mapping[str, Collection[str]]] = True
                      ) -> tuple[dict[str, NodeTable], dict[str, EdgeTable]]:
  """Every node and edge table of ``schema``, read and checked (node sets first).

  ``keep_features``: all, none, or set name -> the features kept (:data:`Keep`).

  Raises:
    GraphInputError: as :func:`read_node_table` and :func:`read_edge_table`.
    GraphTooLargeError: memory ran out while reading a table (naming it).
  """
  nodes, edges = {}, {}
  for name, piece in sorted(schema.node_sets.items()):
    try:
      nodes[name] = read_node_table(name, piece, data_dir, who,
                                    keep_features=_keep_of(keep_features, name))
    except MemoryError:
      raise out_of_memory(who, f"reading node table {piece.metadata.filename!r} of node set "
                               f"{name!r}") from None
  for name, piece in sorted(schema.edge_sets.items()):
    try:
      edges[name] = read_edge_table(name, piece, data_dir, nodes, who,
                                    keep_features=_keep_of(keep_features, name))
    except MemoryError:
      raise out_of_memory(who, f"reading edge table {piece.metadata.filename!r} of edge set "
                               f"{name!r}") from None
  return nodes, edges


def lookup(ids: Union[pd.Index, IdFinder], wanted: Iterable[Any], what: str, node_set: str,
           table: str) -> np.ndarray:
  """Row indices of ``wanted`` in a node set's ``ids``.

  Args:
    ids: The node set's ids (:attr:`NodeTable.ids`), or their :class:`IdFinder`.
    wanted: Ids of any kind: bytes, str or int (an integer is its decimal text).
    what: Who wants them (the start of the error).
    node_set: The node set.
    table: Its table (named in the error).

  Raises:
    GraphInputError: naming ``what`` and the ids missing from the node set.
  """
  wanted = _as_ids(wanted)
  index = (ids if isinstance(ids, IdFinder) else IdFinder(ids))(wanted)
  missing = index < 0
  if missing.any():
    raise GraphInputError(
        f"{what}: ids missing from the {node_set!r} node table {table!r}: "
        f"{format_ids(id_bytes(wanted, missing))}.")
  return index


def read_ids(data_dir: str, filename: str, who: str) -> np.ndarray:
  """The ids of a node or seed table (checked: no row is malformed, no id empty).

  Returns:
    int64 if every id is an integer (integer Parquet columns), else bytes objects.
  """
  return _ids_of([c.keys[0] for c in iter_chunks(data_dir, filename, NODE_KEYS, {}, who)])


def read_seeds(data_dir: str, filename: str, nodes: NodeTable, node_set: str, split: str,
               who: str) -> np.ndarray:
  """Node indices of a split's seed table (a node table: only ``id`` is read).

  Raises:
    GraphInputError: an empty table, an empty or duplicate id, or ids not in
      ``node_set``.
  """
  what = f"{who}: split {split!r}: seed table {filename!r}"
  ids = read_ids(data_dir, filename, who)
  if not len(ids):
    raise GraphInputError(f"{what} is empty.")
  index = pd.Index(ids, dtype=ids.dtype)
  if not index.is_unique:
    raise GraphInputError(
        f"{what} has duplicate ids {format_ids(id_bytes(index, index.duplicated()))}.")
  return lookup(nodes.finder, ids, what, node_set, nodes.filename)


#: The column of a seed table that holds each seed's time (time-aware sampling).
SEED_TIME = "time"


def read_seed_times(data_dir: str, filename: str, split: str, dtype: np.dtype,
                    who: str) -> np.ndarray:
  """The ``time`` column of a split's seed table, in table order (one per seed).

  Raises:
    GraphInputError: the column is missing, or a time is missing, not a
      number, not finite or (``dtype`` integer) not an integer, naming the
      file, line or record and id.
  """
  try:
    chunks = list(iter_chunks(data_dir, filename, NODE_KEYS, {SEED_TIME: ((), dtype)}, who))
  except GraphInputError as e:
    raise GraphInputError(
        f"{e} (split {split!r}: time-aware sampling bounds each seed's subgraph by the "
        f"seed's time, the column {SEED_TIME!r} of its seed table {filename!r})") from None
  return _concat([c.features[SEED_TIME] for c in chunks], dtype)


def check_graph(schema: tfgnn.GraphSchema, data_dir: str, seed_node_set: Optional[str],
                seeds: Mapping[str, str], who: str,
                keep: Optional[Mapping[str, Collection[str]]] = None
                ) -> tuple[dict[str, NodeTable], dict[str, EdgeTable], dict[str, int]]:
  """Checks every table and seed table before a Beam pipeline reads them.

  Args:
    schema: The graph schema (tables in ``metadata.filename``).
    data_dir: The folder table names are relative to.
    seed_node_set: The node set of the seeds (None: no seeds).
    seeds: Split name -> seed table.
    who: The component named in errors.
    keep: Set name -> the features kept (none else: they are checked, then dropped).

  Returns:
    The node and edge tables (ids, edge ends and the features kept) and the
    seeds per split.

  Raises:
    GraphInputError: naming the table, line or record, column and id; a
      Parquet table (:func:`refuse_parquet_on_beam`).
  """
  refuse_parquet_on_beam(schema, seeds, who)
  nodes, edges = read_graph_tables(schema, data_dir, who, keep_features=keep or False)
  counts = {split: len(read_seeds(data_dir, filename, nodes[seed_node_set], seed_node_set,
                                  split, who))
            for split, filename in seeds.items()}
  return nodes, edges, counts


#: What to do instead of a Beam engine that cannot read Parquet, by component.
_PARQUET_HINTS = {
    "GraphSampler": "or let GnnTrainer sample the graph in memory, which reads Parquet: "
                    "GnnTrainer(graph_schema=..., seeds=..., sampling_config=...) without "
                    "GraphSampler",
    "LinkSampler": "or let GnnTrainer sample the links in memory, which reads Parquet: "
                   "GnnTrainer(graph_schema=..., link_config=...) without LinkSampler",
    "GraphInferrer": "or use GraphInferrer's in-memory engine, which reads Parquet: "
                     "inference_config={'engine': 'in_memory'}",
}


def refuse_parquet_on_beam(schema: tfgnn.GraphSchema, seeds: Mapping[str, str],
                           who: str) -> None:
  """Refuses Parquet tables before a Beam engine: TF-GNN's Beam reader reads CSV and TFRecord.

  GraphSampler, LinkSampler and GraphInferrer's Beam engine read the tables in
  Beam with ``tensorflow_gnn.data.unigraph`` (``read_graph``, ``read_node_set``),
  whose ``ReadTable`` reads CSV and TFRecord only.

  Raises:
    GraphInputError: naming the first Parquet table (node set, edge set or split).
  """
  named = [(f"{kind} set {name!r}", piece.metadata.filename)
           for kind, name, piece in [("node", n, p) for n, p in sorted(schema.node_sets.items())]
           + [("edge", n, p) for n, p in sorted(schema.edge_sets.items())]
           if piece.metadata.HasField("filename")]
  named += [(f"split {split!r}", filename) for split, filename in sorted(seeds.items())]
  for what, filename in named:
    if table_format(filename, who) == "parquet":
      hint = _PARQUET_HINTS.get(who, "or use the in-memory engine, which reads Parquet")
      raise GraphInputError(
          f"{who}: the table {filename!r} of {what} is Parquet, which {who}'s Beam engine "
          "does not read (it reads the tables with TF-GNN's Beam reader, CSV and TFRecord "
          f"only). Write the table as CSV or TFRecord for {who}, {hint}.")
