"""Negatives of link prediction: the pairs that are no edge, and the popularity they follow.

One rule for every engine and for GraphEvaluator's rankings (:func:`is_negative`):
a negative is no edge of the whole edge set (any split; with ``undirected``
in neither direction, :class:`EdgeKeys`), no self pair within one node set,
with ``node_time`` a target that had appeared by the pair's time, and, drawn
``distinct``, no pair twice. Targets are drawn uniformly or, with
``"negative_sampling": "popularity"``, by :func:`popularity_cdf`.

:func:`popularity` is the one definition of a node's popularity, which the
popularity negatives, the retrieval baseline and GraphEvaluator's baseline all
count: a target node's degree among given pairs (the message split's distinct
edges, no self loops), counting both ends of each pair when ``undirected``.
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from gnn_trainer_component.graph import csr
from gnn_trainer_component.graph.errors import GraphInputError

#: Candidate pairs drawn per wanted negative before giving up (a graph too dense).
NEGATIVE_TRIES_PER_PAIR = 50


class EdgeKeys:
  """Membership of ``(u, v)`` node-index pairs in a set of edges, vectorized (sorted keys)."""

  def __init__(self, source: np.ndarray, target: np.ndarray, num_targets: int,
               undirected: bool):
    self._n = max(int(num_targets), 1)
    self._undirected = undirected
    self.keys = np.unique(self.key(np.asarray(source, np.int64), np.asarray(target, np.int64)))

  def key(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The int64 key of each pair (the sorted pair's, if undirected)."""
    if self._undirected:
      u, v = np.minimum(u, v), np.maximum(u, v)
    return u * self._n + v

  def contains(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    key = self.key(u, v)
    at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
    return self.keys[at] == key if len(self.keys) else np.zeros(len(key), bool)

  def neighbours(self, num_sources: int) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, targets)``: CSR of the pairs ``(u, w)`` held (both ways if undirected).

    ``num_sources``: the nodes ``u`` ranges over (``indptr`` has one more entry).
    """
    source, target = np.divmod(self.keys, self._n)
    if self._undirected:
      source, target = np.r_[source, target], np.r_[target, source]
    indptr, order = csr.by_row(source, num_sources, within=target)
    return indptr, target[order]

  def with_pairs(self, pairs: np.ndarray) -> "EdgeKeys":
    """These edges and ``pairs`` (``[N, 2]`` node indices), as one :class:`EdgeKeys`."""
    if not len(pairs):
      return self
    source, target = np.divmod(self.keys, self._n)
    return EdgeKeys(np.r_[source, pairs[:, 0]], np.r_[target, pairs[:, 1]], self._n,
                    self._undirected)


def is_negative(u: np.ndarray, v: np.ndarray, known: EdgeKeys, *, one_node_set: bool,
                taken: Optional[np.ndarray] = None, born: Optional[np.ndarray] = None,
                at: Optional[np.ndarray] = None) -> np.ndarray:
  """Which pairs ``(u[i], v[i])`` (node indices) may be negatives: the one rule of negatives.

  Args:
    u: Sources.
    v: Targets.
    known: Every edge of the link edge set: a negative is none of them.
    one_node_set: Both ends are in one node set: no self pair ``(u, u)``.
    taken: The keys (``known.key``) of the negatives so far: none taken again,
      nor drawn twice here (the first counts); None: no such rule.
    born: ``node_time``: when each target node appears, with ``at``: each
      pair's time; the target must have appeared by then.
    at: See ``born``.
  """
  ok = ~known.contains(u, v)
  if one_node_set:
    ok &= u != v
  if born is not None:
    ok &= born[v] <= at
  if taken is not None:
    key = known.key(u, v)
    first = np.zeros(len(u), bool)
    first[np.unique(key, return_index=True)[1]] = True
    ok &= first & ~np.isin(key, taken)
  return ok


def draw_negatives_at(rng: np.random.Generator, times: np.ndarray,
                      node_times: tuple[np.ndarray, np.ndarray], known: EdgeKeys, *,
                      one_node_set: bool, what: str, who: str, distinct: bool = False,
                      target_cdf: Optional[np.ndarray] = None) -> np.ndarray:
  """A negative per time in ``times``, both ends among the nodes appeared by it ([n, 2]).

  As :func:`draw_negatives`, for ``node_time``: pair ``i``'s source and target
  are drawn among the nodes whose time (``node_times``: sources', targets') is
  at or before ``times[i]``, uniformly (or the targets by ``target_cdf``, a
  target not yet there drawn again).

  Raises:
    GraphInputError: no node appeared by a time, or too few non-edges among those that did.
  """
  born_s, born_t = (np.asarray(b, np.float64) for b in node_times)
  times = np.asarray(times, np.float64)
  order_s, order_t = np.argsort(born_s, kind="stable"), np.argsort(born_t, kind="stable")
  n_s = np.searchsorted(born_s[order_s], times, side="right")
  n_t = np.searchsorted(born_t[order_t], times, side="right")
  empty = np.flatnonzero((n_s == 0) | (n_t == 0))
  if len(empty):
    raise GraphInputError(
        f"{who}: no node had appeared (node_time) by time {times[empty[0]]:g}, the time of a "
        f"negative of {what}: every pair's ends must exist at its time.")
  out = np.zeros((len(times), 2), np.int64)
  pending, keys, tries = np.arange(len(times)), np.zeros(0, np.int64), 0
  while len(pending):
    if tries > NEGATIVE_TRIES_PER_PAIR * max(len(times), 1):
      raise GraphInputError(
          f"{who}: found only {len(times) - len(pending)} of {len(times)} negatives for {what} "
          f"after {tries} random pairs among the nodes that had appeared by each pair's time: "
          "the graph is too dense for negatives_per_positive.")
    draw = rng.random((2, len(pending)))
    u = order_s[(draw[0] * n_s[pending]).astype(np.int64)]
    v = (order_t[(draw[1] * n_t[pending]).astype(np.int64)] if target_cdf is None else
         np.searchsorted(target_cdf, draw[1], side="right"))
    tries += len(pending)
    ok = is_negative(u, v, known, one_node_set=one_node_set, taken=keys if distinct else None,
                     born=born_t, at=times[pending])
    if distinct:
      keys = np.r_[keys, known.key(u[ok], v[ok])]
    out[pending[ok]] = np.stack([u[ok], v[ok]], axis=1)
    pending = pending[~ok]
  return out


def draw_negatives(rng: np.random.Generator, count: int, num_sources: int, num_targets: int,
                   known: EdgeKeys, *, one_node_set: bool, what: str, who: str,
                   distinct: bool = False, target_cdf: Optional[np.ndarray] = None
                   ) -> np.ndarray:
  """``count`` random (source node, target node) pairs that are no known edge ([count, 2]).

  Sources are uniform; targets too, or drawn by ``target_cdf``.

  Args:
    rng: The random generator.
    count: How many.
    num_sources: Nodes in the edge set's source node set (sources are drawn from
      ``range(num_sources)``).
    num_targets: Nodes in the edge set's target node set (targets are drawn from
      ``range(num_targets)``).
    known: The pairs a negative must not be (every edge; for ``distinct``,
      also the negatives drawn before).
    one_node_set: Both ends are in one node set: no self pair ``(u, u)``.
    what: The negatives' purpose, for the error.
    who: The component named in errors.
    distinct: No pair twice among the ones drawn.
    target_cdf: The cumulative distribution of the targets (:func:`popularity_cdf`),
      or None: uniform.

  Raises:
    GraphInputError: if the graph is too dense to find that many non-edges.
  """
  found, keys, tries, missing = [], np.zeros(0, np.int64), 0, count
  while missing > 0:
    if tries > NEGATIVE_TRIES_PER_PAIR * max(count, 1):
      raise GraphInputError(
          f"{who}: found only {count - missing} of {count} negatives for {what} after {tries} "
          "random pairs: the graph is too dense for negatives_per_positive.")
    u = rng.integers(num_sources, size=2 * missing + 16)
    v = (rng.integers(num_targets, size=2 * missing + 16) if target_cdf is None else
         np.searchsorted(target_cdf, rng.random(2 * missing + 16), side="right"))
    tries += len(u)
    ok = is_negative(u, v, known, one_node_set=one_node_set,
                     taken=keys if distinct else None)
    pairs = np.stack([u[ok], v[ok]], axis=1)[:missing]
    keys = np.r_[keys, known.key(pairs[:, 0], pairs[:, 1])]
    found.append(pairs)
    missing -= len(pairs)
  return np.concatenate(found).astype(np.int64) if found else np.zeros((0, 2), np.int64)


def fixed_negatives(counts: Mapping[str, int], rngs: Mapping[str, np.random.Generator],
                    known: EdgeKeys, *, num_sources: int, num_targets: int,
                    one_node_set: bool, who: str, target_cdf: Optional[np.ndarray] = None,
                    at: Optional[tuple[Mapping[str, np.ndarray],
                                       tuple[np.ndarray, np.ndarray]]] = None
                    ) -> dict[str, np.ndarray]:
  """Each split's fixed negatives: ``counts[split]`` pairs, none twice across the splits.

  Split by split in the order of ``counts``, each drawn with its own
  ``rngs[split]`` (:func:`draw_negatives`), no edge of ``known`` nor a negative
  of a split before.

  Args:
    counts: Split -> how many negatives.
    rngs: Split -> its seeded generator.
    known: Every edge of the link edge set.
    num_sources: Nodes of the source node set.
    num_targets: Nodes of the target node set.
    one_node_set: Both ends are in one node set: no self pair.
    who: The component named in errors.
    target_cdf: Popularity negatives' target distribution (:func:`popularity_cdf`), or None.
    at: ``node_time``: ``(split -> each negative's time, (sources', targets' node
      times))``: a negative's ends had appeared by its time
      (:func:`draw_negatives_at`); None: any node.

  Raises:
    GraphInputError: the graph is too dense for that many negatives.
  """
  out, taken = {}, known
  for split, count in counts.items():
    what = f"split {split!r}"
    if at is not None and count:
      out[split] = draw_negatives_at(rngs[split], at[0][split], at[1], taken,
                                     one_node_set=one_node_set, what=what, who=who,
                                     distinct=True, target_cdf=target_cdf)
    else:
      out[split] = draw_negatives(rngs[split], count, num_sources, num_targets, taken,
                                  one_node_set=one_node_set, what=what, who=who, distinct=True,
                                  target_cdf=target_cdf)
    taken = taken.with_pairs(out[split])
  return out


def query_negatives(queries: np.ndarray, count: int, known: EdgeKeys, num_targets: int, *,
                    one_node_set: bool, seed: int,
                    appeared: Optional[tuple[np.ndarray, np.ndarray]] = None,
                    what: str = "negatives_per_query", who: str = "") -> np.ndarray:
  """``[Q, count]`` distinct negative targets per query: seeded, no ``known`` edge, not its source.

  The negatives a query's target is ranked among (:func:`ranking.sampled_ranks`,
  as ogbl-citation2), each a negative by :func:`is_negative`. ``appeared``:
  ``node_time``: (each query's time, each target's time): a query's negatives
  are among the targets there at its time.

  Raises:
    GraphInputError: a source with fewer than ``count`` such targets, naming
      ``who`` and ``what`` asked for them.
  """
  rng = np.random.default_rng(seed)
  out = np.empty((len(queries), count), np.int64)
  for i, source in enumerate(queries[:, 0]):

    def allowed(candidates, source=source, i=i):  # the graph core's rule of negatives
      return candidates[is_negative(
          np.full(len(candidates), source), candidates, known, one_node_set=one_node_set,
          born=None if appeared is None else appeared[1],
          at=None if appeared is None else appeared[0][i])]

    drawn = np.unique(allowed(rng.integers(0, num_targets, 2 * count + 8)))
    if len(drawn) < count:  # few non-edges: draw from all of them
      drawn = allowed(np.arange(num_targets))
      if len(drawn) < count:
        raise GraphInputError(
            f"{who}: {what} {count}: source node index {source} has "
            f"{len(drawn)} non-edges among the {num_targets} candidate targets"
            + ("" if appeared is None else
               f" that had appeared by its query's time {appeared[0][i]:g} (node_time)") + ".")
    out[i] = rng.choice(drawn, count, replace=False)
  return out


def popular_ends(pairs: np.ndarray, undirected: bool) -> np.ndarray:
  """The node of the target node set each pair counts for in :func:`popularity`.

  ``[P]`` targets of ``pairs`` (``[P, 2]`` node indices), then, when
  ``undirected``, their ``[P]`` sources (an undirected edge counts at both ends).
  """
  return np.r_[pairs[:, 1], pairs[:, 0]] if undirected else pairs[:, 1]


def popularity(pairs: np.ndarray, num_targets: int, undirected: bool) -> np.ndarray:
  """Each target node's popularity: its degree among ``pairs``, ``[num_targets]`` floats.

  The one definition (the module doc): ``pairs`` are the link edge set's
  distinct edges without self loops, as :func:`links.supervise` splits them
  (the message split's for the popularity negatives and the static baselines),
  each counted at its target and, when ``undirected``, at its source too
  (:func:`popular_ends`).
  """
  return np.bincount(popular_ends(pairs, undirected), minlength=num_targets).astype(np.float64)


def popularity_cdf(pairs: np.ndarray, num_targets: int, undirected: bool) -> np.ndarray:
  """The cumulative distribution of "popularity" negatives' targets.

  Each target node in proportion to one plus its :func:`popularity` among
  ``pairs`` (the message split's positives).
  """
  cdf = np.cumsum(popularity(pairs, num_targets, undirected) + 1.0)
  return cdf / cdf[-1]
