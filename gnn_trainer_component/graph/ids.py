"""Node ids: integers or bytes, found among a node set's ids, written out as bytes.

A node table whose ids are all integers (integer Parquet columns) keeps them as
an int64 :class:`pandas.Index` (8 bytes a node); any other keeps bytes objects
(integers among them as their decimal text). Either way an integer id is its
decimal text: :class:`IdFinder` finds ids of any kind among either
(:func:`lookup` for wanted ids of any kind), and :func:`id_bytes` gives ids as
bytes for output and messages.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gnn_trainer_component.graph.errors import format_ids
from gnn_trainer_component.graph.errors import GraphInputError


def is_integer(ids: Union[pd.Index, np.ndarray]) -> bool:
  """Whether ``ids`` are integers (an int64 node index), not bytes objects."""
  return ids.dtype.kind in "iu"


def id_bytes(ids: Union[pd.Index, np.ndarray], rows: Optional[Any] = None) -> np.ndarray:
  """Ids as bytes objects, as they are written out and named: an integer as its decimal text.

  Args:
    ids: A node set's ids
      (:attr:`~gnn_trainer_component.graph.tables.NodeTable.ids`) or an array
      of ids (int or bytes objects).
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


def ids_of(parts: Sequence[np.ndarray]) -> np.ndarray:
  """One array of a table's ids: int64 if every part is, else bytes (integers as their text)."""
  if parts and all(is_integer(p) for p in parts):
    return np.concatenate(parts).astype(np.int64, copy=False)
  texts = [id_bytes(p) for p in parts]
  return np.concatenate(texts) if texts else np.zeros(0, dtype=object)


def _as_ids(wanted: Iterable[Any]) -> np.ndarray:
  """Wanted ids of any kind (bytes, str, int) as int64 or an object array of bytes."""
  values = (np.asarray(wanted) if isinstance(wanted, (np.ndarray, pd.Index))
            else np.asarray(list(wanted), dtype=object))
  if values.dtype.kind in "iu":
    return ids_of([values]) if values.dtype != np.uint64 else id_bytes(values)
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
    ids: The node set's ids
      (:attr:`~gnn_trainer_component.graph.tables.NodeTable.ids`).
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


class FirstRowFinder:
  """An :class:`IdFinder` over ids that repeat: an id's row is its first row (-1: absent).

  For a node table read with its faults counted
  (:func:`~gnn_trainer_component.graph.tables.read_node_table`'s ``lenient``).
  """

  unique = False

  def __init__(self, ids: pd.Index):
    self.ids = ids
    first = ~ids.duplicated()
    self._rows = np.flatnonzero(first)
    self._finder = IdFinder(ids[first])

  def __call__(self, wanted: np.ndarray) -> np.ndarray:
    """The int64 first rows of ``wanted`` in :attr:`ids`, -1 for an absent id."""
    found = self._finder(wanted)
    return np.where(found >= 0, self._rows[np.maximum(found, 0)], -1)


def lookup(ids: Union[pd.Index, IdFinder], wanted: Iterable[Any], what: str, node_set: str,
           table: str) -> np.ndarray:
  """Row indices of ``wanted`` in a node set's ``ids``.

  Args:
    ids: The node set's ids
      (:attr:`~gnn_trainer_component.graph.tables.NodeTable.ids`), or their
      :class:`IdFinder`.
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
