"""A table file's format and its CSV and TFRecord readers: a file read as checked chunks.

Tables follow TF-GNN's "unigraph" convention (``tensorflow_gnn/data/unigraph.py``),
named in each node or edge set's ``metadata.filename`` relative to the
GraphSchema folder (sharded ``name@N`` TFRecords or globs allowed); the format
comes from the name (:func:`table_format`), the files from the name and the
folder (:func:`resolve_table`):

* CSV: a header; a node table has an ``id`` column, an edge table ``source``
  and ``target``; every feature the graph schema declares is a column
  (scalar features only);
* TFRecord of tf.Examples: the same keys as bytes features ``#id``,
  ``#source``, ``#target``; features as the schema declares them;
* Parquet (``*.parquet``): read by
  :mod:`~gnn_trainer_component.graph.parquet_format`.

A reader yields a file's rows a :class:`Chunk` (:data:`CHUNK_ROWS` rows) at a
time, checked; each error names the file, the line (CSV) or record (TFRecord),
the column and the id: a malformed row (more fields than the header; a row with
fewer fields is named where its missing values are refused), a missing column,
a feature value that is missing, not a number, not finite, not an integer
(integer features) or out of the dtype's range (:func:`bad_value`). Reading a
whole table through them is :func:`gnn_trainer_component.graph.tables.iter_chunks`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import tensorflow as tf
from tensorflow_gnn.data import unigraph

from gnn_trainer_component.graph.errors import shown_id
from gnn_trainer_component.graph.errors import GraphInputError

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


def short_row(path: str, line: int) -> str:
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


def bad_value(who: str, chunk: Chunk, bad: np.ndarray, name: str, problem: str,
              value) -> GraphInputError:
  row = int(bad[0])
  short = short_row(chunk.path, chunk.first + row) if value == "" else ""
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
      raise bad_value(who, chunk, bad, name, problem, value)
    info = np.iinfo(dtype)
    digits = text.str.lstrip("+-").str.lstrip("0").str.len().to_numpy()
    long = np.flatnonzero(digits >= len(str(info.max)))
    bad = np.asarray([i for i in long if not info.min <= int(text.iloc[i]) <= info.max],
                     dtype=np.int64)
    if len(bad):
      raise bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
                       column.iloc[bad[0]])
    return text.to_numpy().astype(dtype)
  numbers = pd.to_numeric(text.where(text != ""), errors="coerce").to_numpy(dtype=np.float64)
  bad = np.flatnonzero(~np.isfinite(numbers))
  if len(bad):
    value = column.iloc[bad[0]]
    raise bad_value(who, chunk, bad, name, "is missing, not a number or not finite", value)
  with np.errstate(over="ignore"):
    out = numbers.astype(dtype)
  bad = np.flatnonzero(~np.isfinite(out))
  if len(bad):
    raise bad_value(who, chunk, bad, name, f"is out of the range of {dtype.name}",
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


def csv_chunks(path: str, key_columns: Sequence[str], features: FeatureSpec, who: str
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


def tfrecord_chunks(path: str, key_columns: Sequence[str], features: FeatureSpec, who: str
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
          raise bad_value(who, chunk, bad, name, "has a non-finite value (NaN or inf)",
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
