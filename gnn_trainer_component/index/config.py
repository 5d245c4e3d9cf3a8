"""EmbeddingIndex's ``index_config``: one frozen dataclass, validated in one place.

Keys (all optional)::

  {"column": "embedding",      # the Embeddings table's column indexed
   "metric": "dot_product",    # or "cosine": the score the model's scorer uses
   "kind": "auto",             # "exact" (brute force), "ivf" (inverted lists), "auto": exact
                               # up to exact_up_to vectors, else ivf
   "exact_up_to": 20000,
   "nlist": 0,                 # ivf: lists (0: 4 * sqrt(vectors), at most vectors / 39)
   "nprobe": 0,                # ivf: lists searched per query (0: the fewest that reach
                               # min_recall on the gate's queries, a power of two)
   "k": 10,                    # neighbours served per query, and the gate's recall@k
   "min_recall": 0.95,         # the gate: recall@k against exact search
   "max_p99_ms": 10.0,         # the gate: one query's 99th percentile latency, served
   "num_queries": 1000,        # the gate's queries: a seeded sample of the indexed vectors
   "min_jaccard": 0.2,         # the gate, with a baseline index: mean Jaccard of the sampled
                               # nodes' top-k neighbourhoods, this release against the last
   "max_changed_share": 0.5,   # ... and the share of them whose neighbourhood changed entirely
   "vertex_ai": true,          # write the Vertex AI Vector Search batch folder
   "restricts": [],            # node features written as each vector's restricts (needs
                               # graph_schema)
   "rows_per_file": 100000,    # vectors per JSON file of the Vertex AI folder (5,000 files
                               # at most: more vectors a file where needed)
   "seed": 0}

TFX-free, so pipeline definitions and tests check it without a pipeline.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

from gnn_trainer_component import config_dicts
from gnn_trainer_component import errors

DOT_PRODUCT, COSINE = "dot_product", "cosine"
METRICS = (DOT_PRODUCT, COSINE)
AUTO, EXACT, IVF = "auto", "exact", "ivf"
KINDS = (AUTO, EXACT, IVF)


class IndexConfigError(errors.GnnError, ValueError):
  """``index_config`` has an unknown key or a bad value."""


@dataclasses.dataclass(frozen=True)
class IndexConfig:
  """What EmbeddingIndex builds and the gate it holds the index to.

  Attributes:
    column: The Embeddings table's column of vectors (GraphInferrer's
      ``embeddings`` signature writes ``embedding``).
    metric: ``"dot_product"`` or ``"cosine"`` (vectors normalized first).
    kind: ``"exact"``, ``"ivf"`` or ``"auto"`` (:meth:`kind_for`).
    exact_up_to: ``"auto"``: exact search up to this many vectors.
    nlist: IVF lists (0: :meth:`nlist_for`).
    nprobe: IVF lists searched per query (0: tuned on the gate's queries).
    k: Neighbours served per query; the gate's recall is recall@k.
    min_recall: The gate's bound on recall@k against exact search.
    max_p99_ms: The gate's bound on one query's p99 latency (milliseconds).
    num_queries: The gate's queries, drawn from the indexed vectors.
    min_jaccard: With a baseline index: the gate's bound on the mean Jaccard similarity of
      the sampled nodes' top-k neighbours, this release's against the last one's.
    max_changed_share: With a baseline index: the gate's bound on the share of the sampled
      nodes none of whose top-k neighbours is still one.
    vertex_ai: Writes the Vertex AI Vector Search batch folder (``vertex_ai`` output).
    restricts: Node features of the indexed node set written as each vector's Vector
      Search restricts (strings: ``restricts``; numbers: ``numeric_restricts``).
    rows_per_file: Vectors per JSON file of the Vector Search folder.
    seed: Seeds the queries and the IVF training.
  """
  column: str = "embedding"
  metric: str = DOT_PRODUCT
  kind: str = AUTO
  exact_up_to: int = 20000
  nlist: int = 0
  nprobe: int = 0
  k: int = 10
  min_recall: float = 0.95
  max_p99_ms: float = 10.0
  num_queries: int = 1000
  min_jaccard: float = 0.2
  max_changed_share: float = 0.5
  vertex_ai: bool = True
  restricts: tuple[str, ...] = ()
  rows_per_file: int = 100000
  seed: int = 0

  def kind_for(self, num_vectors: int) -> str:
    """``exact`` or ``ivf`` for an index of ``num_vectors`` vectors."""
    if self.kind != AUTO:
      return self.kind
    return EXACT if num_vectors <= self.exact_up_to else IVF

  def nlist_for(self, num_vectors: int) -> int:
    """IVF lists: ``nlist``, else 4 √n, with at least 39 training vectors per list (FAISS's)."""
    if self.nlist:
      return min(self.nlist, num_vectors)
    return max(1, min(int(round(4 * num_vectors ** 0.5)), num_vectors // 39))


_WHAT = "EmbeddingIndex index_config"
_INTS = {"exact_up_to": 1, "nlist": 0, "nprobe": 0, "k": 1, "num_queries": 1, "seed": 0,
         "rows_per_file": 1}
#: Bounds in [0, 1]: their defaults.
_SHARES = {"min_recall": 0.95, "min_jaccard": 0.2, "max_changed_share": 0.5}


def parse(config: Any) -> IndexConfig:
  """``index_config`` (a dict, its JSON or None) checked key by key.

  Raises:
    IndexConfigError: an unknown key or a bad value, naming both.
  """
  raw = dict(config_dicts.decode(config, _WHAT, IndexConfigError, '{"metric": "cosine"}',
                                  optional=True))
  config_dicts.check_keys(raw, [f.name for f in dataclasses.fields(IndexConfig)], _WHAT,
                          IndexConfigError)
  for key, low in _INTS.items():
    value = raw.get(key, low)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
      raise IndexConfigError(f"EmbeddingIndex index_config: {key} must be an int >= {low}, "
                             f"got {value!r}.")
  for key, choices in (("metric", METRICS), ("kind", KINDS)):
    if raw.get(key, choices[0]) not in choices:
      raise IndexConfigError(f"EmbeddingIndex index_config: {key} must be one of "
                             f"{list(choices)}, got {raw[key]!r}.")
  if not isinstance(raw.get("column", "embedding"), str) or not raw.get("column", "x"):
    raise IndexConfigError("EmbeddingIndex index_config: column must be the name of a column "
                           f"of the Embeddings table, got {raw['column']!r}.")
  for key, default in _SHARES.items():
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
      raise IndexConfigError(f"EmbeddingIndex index_config: {key} must be a number in "
                             f"[0, 1], got {value!r}.")
  if not isinstance(raw.get("vertex_ai", True), bool):
    raise IndexConfigError("EmbeddingIndex index_config: vertex_ai must be true or false, "
                           f"got {raw['vertex_ai']!r}.")
  restricts = raw.get("restricts", [])
  if (isinstance(restricts, str) or not isinstance(restricts, (list, tuple))
      or not all(isinstance(r, str) and r for r in restricts)
      or len(set(restricts)) < len(restricts)):
    raise IndexConfigError("EmbeddingIndex index_config: restricts must be a list of distinct "
                           f'node feature names such as ["genre"], got {restricts!r}.')
  if restricts and not raw.get("vertex_ai", True):
    raise IndexConfigError("EmbeddingIndex index_config: restricts are written into the "
                           "Vertex AI folder, and vertex_ai is false: drop restricts or set "
                           "vertex_ai true.")
  raw["restricts"] = tuple(restricts)
  p99 = raw.get("max_p99_ms", 10.0)
  if isinstance(p99, bool) or not isinstance(p99, (int, float)) or not p99 > 0:
    raise IndexConfigError("EmbeddingIndex index_config: max_p99_ms must be a number > 0 "
                           f"(milliseconds), got {p99!r}.")
  return IndexConfig(**raw)


def dumps(cfg: Optional[IndexConfig]) -> str:
  """The config as the JSON execution property it travels as."""
  return json.dumps(dataclasses.asdict(cfg or IndexConfig()), sort_keys=True)
