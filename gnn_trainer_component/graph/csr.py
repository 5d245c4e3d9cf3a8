"""CSR indexes: the one builder of the row offsets (``indptr``) of entries grouped by row.

An edge set by source, a known edge set's neighbours, a baseline's edges by
node and time, a batch's nodes by subgraph: entries sorted by their row, row
``r`` holding ``indptr[r]:indptr[r + 1]``. :func:`indptr` gives the offsets of
entries already in row order; :func:`by_row` also the order that sorts them so.
"""

from __future__ import annotations

from typing import Optional

import numpy as np


def indptr(rows: np.ndarray, num_rows: int) -> np.ndarray:
  """The ``[num_rows + 1]`` int64 offsets of each row's entries, the rows sorted.

  Args:
    rows: Each entry's row (non-negative ints, any order: only their counts matter).
    num_rows: The rows (more if an entry's row is larger).

  Returns:
    ``indptr``: ``indptr[0] == 0``, ``indptr[r + 1] - indptr[r]`` entries in row ``r``.
  """
  counts = np.bincount(rows, minlength=num_rows)
  return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def run_offsets(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """``(row, offset in [0, counts[row]))`` of every entry of rows of ``counts`` entries.

  The entries of a CSR's rows, walked in order: row ``r``'s ``counts[r]``
  entries are ``(r, 0), (r, 1), ...``.
  """
  rows = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
  return rows, np.arange(counts.sum(), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts,
                                                                   counts)


def by_row(rows: np.ndarray, num_rows: int, within: Optional[np.ndarray] = None
           ) -> tuple[np.ndarray, np.ndarray]:
  """``(indptr, order)``: row ``r``'s entries are ``order[indptr[r]:indptr[r + 1]]``.

  Args:
    rows: Each entry's row (non-negative ints).
    num_rows: The rows.
    within: A key that orders the entries of a row (e.g. their times), or None.
      Stable either way: ties keep the entries' order.

  Returns:
    :func:`indptr` of ``rows`` and the stable order of the entries by row (then ``within``).
  """
  order = (np.argsort(rows, kind="stable") if within is None
           else np.lexsort((within, rows)))
  return indptr(rows, num_rows), order
