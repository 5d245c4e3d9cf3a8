"""The release gate of an index: recall against exact search and one query's latency, served.

The queries are a seeded sample of the indexed vectors (``num_queries``). Recall@k is the
share of each query's exact top-k (brute force, :func:`build.exact_neighbours`) that the
served search finds, averaged over the queries; with ``nprobe`` 0 the fewest lists (a power
of two) that reach ``min_recall`` are chosen here, on those queries. Latency is measured on
the search the SavedModel serves, one query at a time after a warm-up: p50 and p99 in
milliseconds, beside exact search's p50 on the same queries. The verdict blesses an index
whose recall and p99 are within their bounds and, given the last blessed index, whose
neighbourhoods moved no further than ``min_jaccard`` / ``max_changed_share`` allow
(:mod:`churn`, on the same sampled nodes); it names each bound missed. With ``kind``
``auto``, inverted lists that miss the recall bound within a quarter of the vectors, or are
no faster than exact search, give way to exact search (vectors without clusters need every
list).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from gnn_trainer_component.index import build as build_lib
from gnn_trainer_component.index import churn as churn_lib
from gnn_trainer_component.index import config as config_lib
from gnn_trainer_component.index import serving

#: Queries searched at once while recall is measured, at most; fewer when their searches
#: would hold more than ``_FLOATS`` floats (128 MiB: scores, or the candidates' vectors).
_BATCH = 256
_FLOATS = 1 << 25
#: Tuning gives up on lists whose search would score more than this share of the vectors:
#: exact search is then as fast (``auto`` serves it).
_MAX_SHARE = 0.25
#: Single queries timed (after as many warm-up calls as there are compiled shapes).
_TIMED = 200
#: Single queries timed for each point of the recall-latency curve.
_CURVE_TIMED = 50


def query_rows(num_vectors: int, cfg: config_lib.IndexConfig) -> np.ndarray:
  """The gate's queries: ``num_queries`` rows (at most all), seeded, sorted."""
  count = min(cfg.num_queries, num_vectors)
  return np.sort(np.random.default_rng(cfg.seed).choice(num_vectors, count, replace=False))


def recall_at_k(found: np.ndarray, exact: np.ndarray) -> float:
  """Mean share of each row's ``exact`` entries that its ``found`` row holds (``-1``: none)."""
  hits = [len(set(f[f >= 0].tolist()) & set(e[e >= 0].tolist())) / max(1, (e >= 0).sum())
          for f, e in zip(found, exact, strict=True)]
  return float(np.mean(hits))


def served_rows(module: serving.IndexModule, queries: np.ndarray, k: int) -> np.ndarray:
  """``[q, k]`` layout rows the module finds for ``queries``, a bounded batch at a time."""
  batch = max(1, min(_BATCH, _FLOATS // module.floats_per_query()))
  return np.concatenate([module.top_k(queries[i:i + batch], k)[0].numpy()
                         for i in range(0, len(queries), batch)])


def tune_nprobe(module: serving.IndexModule, layout: build_lib.Layout, queries: np.ndarray,
                exact: np.ndarray, cfg: config_lib.IndexConfig
                ) -> tuple[float, list[dict[str, float]]]:
  """Sets ``module.nprobe`` (``cfg.nprobe``, or the fewest reaching ``min_recall``).

  Tuned, it stops below the bound where the lists would score more than a quarter of the
  vectors per query (:data:`_MAX_SHARE`): they no longer pay.

  Returns:
    The recall of the ``nprobe`` set, and the curve: each ``nprobe`` tried (0: exact
    search) with its recall and one query's p50 (ms, on :data:`_CURVE_TIMED` queries).
  """
  def point(nprobe: int) -> dict[str, float]:
    recall = recall_at_k(served_rows(module, queries, exact.shape[1]), exact)
    p50 = latency_ms(module.search, queries[:_CURVE_TIMED])[0]
    return {"nprobe": nprobe, "recall": recall, "p50_ms": p50}

  if layout.kind == config_lib.EXACT:
    curve = [point(0)]
    return curve[0]["recall"], curve
  tries = [cfg.nprobe] if cfg.nprobe else sorted(
      {min(1 << i, layout.nlist) for i in range(layout.nlist.bit_length() + 1)})
  curve = []
  for nprobe in tries:
    if not cfg.nprobe and nprobe > 1 and nprobe / layout.nlist > _MAX_SHARE:
      break
    module.nprobe.assign(nprobe)
    curve.append(point(nprobe))
    if curve[-1]["recall"] >= cfg.min_recall:
      break
  return (curve[-1]["recall"] if curve else 0.0), curve


def latency_ms(search: Callable[[tf.Tensor], Any], queries: np.ndarray) -> tuple[float, float]:
  """``(p50, p99)`` milliseconds of ``search`` on one query at a time (after one warm-up)."""
  one = [tf.constant(queries[i:i + 1]) for i in range(min(_TIMED, len(queries)))]
  search(one[0])
  times = []
  for query in one:
    start = time.perf_counter()
    search(query)
    times.append(1000 * (time.perf_counter() - start))
  return float(np.percentile(times, 50)), float(np.percentile(times, 99))


@dataclasses.dataclass(frozen=True)
class Verdict:
  """Whether the index is blessed; each bound's check (``name``, ``value``, ``bound``, ``ok``)."""
  blessed: bool
  message: str
  checks: tuple[dict[str, Any], ...]


def verdict(recall: float, p99_ms: float, cfg: config_lib.IndexConfig,
            churn: Optional[churn_lib.Churn] = None) -> Verdict:
  """Blessed when recall@k >= ``min_recall``, p99 <= ``max_p99_ms`` and the churn in bounds.

  Without ``churn`` (a first release) only recall and latency are checked.
  """
  checks = (
      {"name": f"recall@{cfg.k}", "value": recall, "bound": f">= {cfg.min_recall}",
       "ok": recall >= cfg.min_recall},
      {"name": "p99_ms", "value": p99_ms, "bound": f"<= {cfg.max_p99_ms}",
       "ok": p99_ms <= cfg.max_p99_ms})
  if churn is not None:
    checks += (
        {"name": f"jaccard@{cfg.k}", "value": churn.mean_jaccard,
         "bound": f">= {cfg.min_jaccard}", "ok": churn.mean_jaccard >= cfg.min_jaccard},
        {"name": "changed_share", "value": churn.changed_share,
         "bound": f"<= {cfg.max_changed_share}",
         "ok": churn.changed_share <= cfg.max_changed_share})
  failed = [f"{c['name']} {c['value']:.4g} (bound {c['bound']})" for c in checks if not c["ok"]]
  message = ("Blessed: all checks passed" if not failed
             else "Not blessed: " + "; ".join(failed))
  return Verdict(blessed=not failed, message=message, checks=checks)


@dataclasses.dataclass(frozen=True)
class Release:
  """An index built, measured and judged: what EmbeddingIndex publishes.

  Attributes:
    module: The served search (:class:`serving.IndexModule`), ``nprobe`` tuned.
    metrics: ``num_vectors``, ``dim``, ``kind``, ``metric``, ``k``, ``nlist``,
      ``nprobe``, ``recall@<k>``, ``p50_ms``, ``p99_ms``, ``exact_p50_ms``,
      ``build_s``, ``num_queries``; with a last release, ``jaccard@<k>``,
      ``changed_share``, ``churn_nodes`` (compared), ``added`` and ``removed``.
    verdict: The gate's :class:`Verdict`.
    curve: Each ``nprobe`` tried: its ``recall`` and ``p50_ms`` (:func:`tune_nprobe`).
    churn: Against the last release (None: a first release).
  """
  module: serving.IndexModule
  metrics: dict[str, Any]
  verdict: Verdict
  curve: list[dict[str, float]]
  churn: Optional[churn_lib.Churn] = None


def release(vectors: build_lib.Vectors, cfg: config_lib.IndexConfig,
            last: Optional[churn_lib.LastRelease] = None) -> Release:
  """Builds the index of ``vectors``, tunes it, measures it against exact search, judges it.

  With ``last`` (the last blessed index), the sampled nodes' neighbourhoods are compared
  with its own (:func:`churn.churn`).

  Raises:
    build_lib.IndexInputError: ``k`` is more than the vectors indexed.
  """
  n, dim = vectors.matrix.shape
  if cfg.k > n:
    raise build_lib.IndexInputError(
        f"{build_lib.WHO}: index_config k is {cfg.k}, and the index holds {n} vector(s): a "
        f"query cannot have {cfg.k} neighbours. Set k to at most {n}.")
  start = time.perf_counter()
  layout = build_lib.build(vectors, cfg)
  module = serving.IndexModule(layout, cfg.k)
  rows = query_rows(n, cfg)
  queries = vectors.matrix[rows]
  exact = build_lib.exact_neighbours(layout.vectors, queries, cfg.k)
  recall, curve = tune_nprobe(module, layout, queries, exact, cfg)
  build_s = time.perf_counter() - start
  p50, p99 = latency_ms(module.search, queries)
  exact_module = serving.IndexModule(layout.as_exact(), cfg.k)
  exact_p50, exact_p99 = latency_ms(exact_module.search, queries)
  metrics = {"num_vectors": n, "dim": dim, "kind": layout.kind, "metric": cfg.metric,
             "k": cfg.k, "nlist": layout.nlist, "nprobe": int(module.nprobe.numpy()),
             f"recall@{cfg.k}": recall, "p50_ms": p50, "p99_ms": p99,
             "exact_p50_ms": exact_p50, "build_s": build_s, "num_queries": len(queries)}
  if cfg.kind == config_lib.AUTO and layout.kind == config_lib.IVF and (
      recall < cfg.min_recall or p50 >= exact_p50):
    # The lists buy nothing here (vectors without clusters): exact search is as fast, and exact.
    logging.warning("%s: inverted lists reach recall@%d %.4f with nprobe %d of %d, at p50 "
                    "%.3f ms against exact search's %.3f ms: serving exact search.",
                    build_lib.WHO, cfg.k, recall, metrics["nprobe"], layout.nlist, p50,
                    exact_p50)
    module, recall = exact_module, recall_at_k(served_rows(exact_module, queries, cfg.k), exact)
    metrics.update({"kind": config_lib.EXACT, "fallback_from": "ivf", "ivf_p50_ms": p50,
                    f"recall@{cfg.k}": recall, "p50_ms": exact_p50, "p99_ms": exact_p99})
    p99 = exact_p99
  churn = None
  if last is not None:
    churn = churn_lib.churn(last, vectors.ids, vectors.matrix, rows, cfg.k)
    metrics.update({f"jaccard@{cfg.k}": churn.mean_jaccard, "changed_share":
                    churn.changed_share, "churn_nodes": len(churn.jaccard),
                    "added": churn.added, "removed": len(churn.removed)})
  return Release(module=module, metrics=metrics, verdict=verdict(recall, p99, cfg, churn),
                 curve=curve, churn=churn)
