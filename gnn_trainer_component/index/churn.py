"""Churn: how far this release's neighbourhoods moved from the last blessed index's.

The last release is read from its SavedModel's variables (:func:`read_release`): its ids
and vectors, laid out as it served them. For each of the gate's sampled nodes that both
releases index, each release's exact top-k neighbours (the node itself left out, by each
release's own scores) are compared: the Jaccard similarity of the two sets, their mean,
and the share of nodes whose neighbourhood changed entirely (Jaccard 0). Ids the last
release held and this one does not are the ``removed`` ones (the Vertex AI folder's
``delete/``).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow as tf

from gnn_trainer_component.index import build as build_lib

#: The checkpoint keys of the served module's variables (:class:`serving.IndexModule`).
_IDS, _VECTORS = "ids/.ATTRIBUTES/VARIABLE_VALUE", "vectors/.ATTRIBUTES/VARIABLE_VALUE"


@dataclasses.dataclass(frozen=True)
class LastRelease:
  """The last blessed index: its ids (bytes) and vectors in layout order, where it lives."""
  ids: np.ndarray
  vectors: np.ndarray
  uri: str
  model_id: int = 0


def read_release(serving_dir: str, uri: str, model_id: int = 0) -> LastRelease:
  """The ids and vectors an EmbeddingIndex SavedModel at ``serving_dir`` serves.

  Raises:
    build_lib.IndexInputError: the folder holds no EmbeddingIndex SavedModel (another
      Model: a resolver not scoped to EmbeddingIndex).
  """
  prefix = os.path.join(serving_dir, "variables", "variables")
  try:
    reader = tf.train.load_checkpoint(prefix)
    names = reader.get_variable_to_shape_map()
  except (tf.errors.NotFoundError, ValueError):
    names, reader = {}, None
  if _IDS not in names or _VECTORS not in names:
    raise build_lib.IndexInputError(
        f"{build_lib.WHO}: baseline_index {uri} is not an index EmbeddingIndex wrote (no ids "
        f"and vectors in {prefix}): give the last blessed index, a resolver over "
        "EmbeddingIndex's own outputs (producer_component_id), not a trained model.")
  return LastRelease(ids=np.asarray(reader.get_tensor(_IDS), dtype=object),
                     vectors=reader.get_tensor(_VECTORS), uri=uri, model_id=model_id)


def check_dimension(last: LastRelease, dim: int, uri: str) -> None:
  """Refuses vectors of another dimension than the last release's (one index, one space).

  Raises:
    build_lib.IndexInputError: naming both dimensions and both artifacts.
  """
  if last.vectors.shape[1] != dim:
    raise build_lib.IndexInputError(
        f"{build_lib.WHO}: the embeddings at {uri} have {dim} values per vector and the last "
        f"blessed index ({last.uri}) has {last.vectors.shape[1]}: a Vector Search index "
        "holds one dimension, and neighbourhoods of the two cannot be compared vector for "
        "vector. A model with a new embedding width starts a new index: build it without "
        "baseline_index (and deploy it to a new Vector Search index).")


def neighbour_sets(ids: np.ndarray, vectors: np.ndarray, rows: np.ndarray,
                   k: int) -> list[frozenset]:
  """Each row's exact top-``k`` neighbours by inner product, as sets of ids, itself left out."""
  if not len(rows):
    return []
  found = build_lib.exact_neighbours(vectors, vectors[rows], min(k + 1, len(vectors)))
  sets = []
  for row, neighbours in zip(rows, found, strict=True):
    others = [n for n in neighbours if n != row and n >= 0][:k]
    sets.append(frozenset(ids[others].tolist()))
  return sets


def jaccard(a: frozenset, b: frozenset) -> float:
  """``|a ∩ b| / |a ∪ b|`` (two empty sets: 1)."""
  return len(a & b) / len(a | b) if a | b else 1.0


@dataclasses.dataclass(frozen=True)
class Churn:
  """The neighbourhoods of the sampled nodes both releases hold, compared.

  Attributes:
    jaccard: Per compared node, the Jaccard similarity of its two top-k neighbourhoods.
    removed: Ids (bytes) of the last release that this one does not hold.
    added: How many ids this release holds that the last did not.
  """
  jaccard: np.ndarray
  removed: np.ndarray
  added: int

  @property
  def mean_jaccard(self) -> float:
    return float(self.jaccard.mean()) if len(self.jaccard) else 0.0

  @property
  def changed_share(self) -> float:
    """The share of compared nodes with no neighbour in common (1 where none compared)."""
    return float((self.jaccard == 0).mean()) if len(self.jaccard) else 1.0


def churn(last: LastRelease, ids: np.ndarray, vectors: np.ndarray, rows: np.ndarray,
          k: int) -> Churn:
  """Compares the neighbourhoods of ``rows`` (of ``ids`` / ``vectors``) with ``last``'s.

  Args:
    last: The last blessed release.
    ids: This release's ids (str or bytes), one per row of ``vectors``.
    vectors: This release's vectors as it scores them (unit vectors under cosine).
    rows: The sampled rows; those whose id ``last`` does not hold are not compared.
    k: Neighbours per node.
  """
  ids = build_lib.id_bytes(ids)
  last_row = {node: i for i, node in enumerate(last.ids.tolist())}
  rows = np.asarray([r for r in rows if ids[r] in last_row], dtype=np.int64)
  before = neighbour_sets(last.ids, last.vectors,
                          np.asarray([last_row[i] for i in ids[rows]], np.int64), k)
  after = neighbour_sets(ids, vectors, rows, k)
  current = set(ids.tolist())
  removed = np.asarray([i for i in last.ids.tolist() if i not in current], dtype=object)
  return Churn(jaccard=np.asarray([jaccard(a, b) for a, b in zip(before, after, strict=True)]),
               removed=removed, added=len(current) - (len(last.ids) - len(removed)))
