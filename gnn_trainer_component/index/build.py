"""An Embeddings table read and checked, and the index built over it (FAISS's k-means lists).

:func:`read` takes GraphInferrer's table (:mod:`model.embeddings_table`) and refuses what
cannot be indexed, naming the row's id: no row, a missing column, a NaN or infinite value,
an id twice, a zero vector under cosine. :func:`build` lays the vectors out for search:

* ``exact``: every vector scored against the query (brute force), one list;
* ``ivf``: FAISS's inverted-file layout (``IndexIVFFlat``: k-means centroids trained on
  a seeded sample, each vector in the list of its best-scoring centroid); a query scores
  the centroids, then the vectors of its ``nprobe`` best lists.

The layout is plain arrays (vectors sorted by list, each list's offset), so the served
index (:mod:`serving`) searches them with TensorFlow alone. FAISS also gives the exact
neighbours the gate compares with (:func:`exact_neighbours`).
"""

from __future__ import annotations

import dataclasses
import os

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gnn_trainer_component import errors
from gnn_trainer_component.index import config as config_lib
from gnn_trainer_component.model import embeddings_table

WHO = "EmbeddingIndex"
#: FAISS trains k-means on at most this many vectors per list.
_TRAIN_PER_LIST = 256


class IndexInputError(errors.GnnError, ValueError):
  """The Embeddings cannot be indexed (naming the table, column, row or id)."""


@dataclasses.dataclass(frozen=True)
class Vectors:
  """The table's ids (str or bytes objects) and ``[n, d]`` float32 vectors (unit with cosine)."""
  ids: np.ndarray
  matrix: np.ndarray


def id_bytes(ids: np.ndarray) -> np.ndarray:
  """Ids (str or bytes objects) as bytes objects: UTF-8 text, as the served index holds them."""
  return np.array([i if isinstance(i, bytes) else str(i).encode("utf-8") for i in ids],
                  dtype=object)


def _shown(node_id) -> str:
  return node_id.decode("utf-8", "backslashreplace") if isinstance(node_id, bytes) else node_id


def read(uri: str, cfg: config_lib.IndexConfig) -> Vectors:
  """The vectors of column ``cfg.column`` of the Embeddings artifact at ``uri``, checked.

  Raises:
    IndexInputError: no table, no such column, no row, a bad value or a repeated id.
  """
  path = os.path.join(uri, embeddings_table.FILE)
  if not os.path.exists(path):
    raise IndexInputError(f"{WHO}: the Embeddings artifact at {uri} has no "
                          f"{embeddings_table.FILE}; give it GraphInferrer's embeddings.")
  names = pq.read_schema(path).names
  if embeddings_table.ID_COLUMN not in names:
    raise IndexInputError(f"{WHO}: {path} has columns {names} and no "
                          f"{embeddings_table.ID_COLUMN!r}: a table of pairs has no node to "
                          "index. Index a node set's embeddings.")
  if cfg.column not in names:
    raise IndexInputError(f"{WHO}: {path} has no column {cfg.column!r} (index_config column); "
                          f"its columns are {names}.")
  table = pq.read_table(path, columns=[embeddings_table.ID_COLUMN, cfg.column])
  if not table.num_rows:
    raise IndexInputError(f"{WHO}: {path} has no row: there is nothing to index.")
  ids = np.asarray(table.column(0).to_pylist(), dtype=object)
  column = table.column(1).combine_chunks()
  if pa.types.is_fixed_size_list(column.type):
    matrix = column.flatten().to_numpy().reshape(len(ids), column.type.list_size)
  else:
    matrix = column.to_numpy(zero_copy_only=False).reshape(len(ids), -1)
  matrix = np.ascontiguousarray(matrix, dtype=np.float32)
  _check(path, cfg, ids, matrix)
  if cfg.metric == config_lib.COSINE:
    matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
  return Vectors(ids=ids, matrix=matrix)


def _check(path: str, cfg: config_lib.IndexConfig, ids: np.ndarray, matrix: np.ndarray) -> None:
  """Refuses a non-finite value, a repeated id, a zero vector under cosine; names the first."""
  bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
  if len(bad):
    raise IndexInputError(
        f"{WHO}: {path} column {cfg.column!r} has a NaN or infinite value at id "
        f"{_shown(ids[bad[0]])!r} (row {bad[0]}); {len(bad)} such row(s). Fix the model or "
        "the graph that gave them: an index of them would rank at random.")
  unique, counts = np.unique(ids, return_counts=True)
  if len(unique) < len(ids):
    twice = unique[counts > 1]
    raise IndexInputError(
        f"{WHO}: {path} holds id {_shown(twice[0])!r} {counts.max()} times; {len(twice)} "
        "id(s) repeat. One vector per id: were two tables written into one artifact?")
  if cfg.metric == config_lib.COSINE:
    zero = np.flatnonzero(~(np.abs(matrix) > 0).any(axis=1))
    if len(zero):
      raise IndexInputError(
          f"{WHO}: {path} column {cfg.column!r} is all zeros at id {_shown(ids[zero[0]])!r}; "
          f"{len(zero)} such row(s): a zero vector has no cosine. Use metric 'dot_product'.")


@dataclasses.dataclass(frozen=True)
class Layout:
  """The vectors laid out for search: sorted by list, each list's range.

  Attributes:
    kind: ``"exact"`` or ``"ivf"``.
    metric: ``"dot_product"`` or ``"cosine"``.
    ids: The ids in layout order.
    vectors: ``[n, d]`` float32, in layout order.
    centroids: ``[nlist, d]`` (``exact``: none, ``[0, d]``).
    offsets: ``[nlist + 1]``: list ``i`` is rows ``offsets[i]:offsets[i + 1]``.
  """
  kind: str
  metric: str
  ids: np.ndarray
  vectors: np.ndarray
  centroids: np.ndarray
  offsets: np.ndarray

  @property
  def nlist(self) -> int:
    return len(self.centroids)

  def as_exact(self) -> "Layout":
    """The same vectors, in the same order, laid out for exact search (one list)."""
    return exact_layout(self.metric, self.ids, self.vectors)


def exact_layout(metric: str, ids: np.ndarray, vectors: np.ndarray) -> Layout:
  """``vectors`` for exact search: every one scored, no centroid, one list."""
  n, dim = vectors.shape
  return Layout(config_lib.EXACT, metric, ids, vectors, np.zeros((0, dim), np.float32),
                np.array([0, n], np.int64))


def build(vectors: Vectors, cfg: config_lib.IndexConfig) -> Layout:
  """The layout of ``vectors`` for ``cfg``'s kind (``auto``: by their number)."""
  n, dim = vectors.matrix.shape
  kind = cfg.kind_for(n)
  if kind == config_lib.EXACT:
    return exact_layout(cfg.metric, vectors.ids, vectors.matrix)
  nlist = cfg.nlist_for(n)
  index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
  index.cp.seed = cfg.seed
  sample = np.random.default_rng(cfg.seed).choice(n, min(n, _TRAIN_PER_LIST * nlist),
                                                  replace=False)
  index.train(vectors.matrix[np.sort(sample)])
  centroids = index.quantizer.reconstruct_n(0, nlist)
  _, lists = index.quantizer.search(vectors.matrix, 1)
  order = np.argsort(lists[:, 0], kind="stable")
  offsets = np.searchsorted(lists[order, 0], np.arange(nlist + 1)).astype(np.int64)
  return Layout(kind, cfg.metric, vectors.ids[order], vectors.matrix[order],
                np.ascontiguousarray(centroids, np.float32), offsets)


def exact_neighbours(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
  """``[q, k]`` rows of ``matrix`` with the highest inner product with each query (brute force)."""
  index = faiss.IndexFlatIP(matrix.shape[1])
  index.add(matrix)
  _, rows = index.search(np.ascontiguousarray(queries, np.float32), k)
  return rows
