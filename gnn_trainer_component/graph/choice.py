"""One node's choice of out-edges per sampling strategy, and the time bound each hop applies.

This is the definition of each strategy (:data:`sampling.ALL_STRATEGIES`) for
one node at a time, what the Beam samplers run per (example, node, op). The
in-memory kernel runs the same laws vectorized over a batch
(``in_memory/choosers.py``); tests hold the two to the same distribution at
partial fan-outs and the same edges at full ones.

A node's candidates come in a fixed order (the Beam samplers: by target id);
"ties" below are broken in that order.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from gnn_trainer_component.graph import sampling


def before(times: np.ndarray, bound, inclusive: bool) -> np.ndarray:
  """Which ``times`` are before ``bound`` (``inclusive``: at or before).

  ``bound`` may be one per time. The one time rule: what a time-aware op may
  sample, and what the leak checks refuse.
  """
  times = np.asarray(times, dtype=np.float64)
  return times <= bound if inclusive else times < bound


def choose(op: sampling.FanOut, rng: np.random.Generator, num: int, *,
           weights: Optional[np.ndarray] = None, times: Optional[np.ndarray] = None,
           bound: Optional[float] = None) -> np.ndarray:
  """Offsets (ascending) of up to ``op.size`` of a node's ``num`` candidate edges.

  Args:
    op: The hop's fan-out and strategy.
    rng: Seeded per (example, op, node) by the caller.
    num: How many candidates the node has.
    weights: ``weighted`` / ``top_k``: each candidate's weight.
    times: ``uniform_before`` / ``latest``: each candidate's time.
    bound: ``uniform_before`` / ``latest``: the node's time bound.

  Returns:
    The chosen offsets in ``[0, num)``, distinct and sorted.
  """
  k = op.size
  if op.strategy == sampling.UNIFORM:
    return _uniform(rng, np.arange(num), k)
  if op.strategy in sampling.BY_WEIGHT:
    w = np.asarray(weights, dtype=np.float64)
    if op.strategy == sampling.TOP_K:
      return np.sort(np.argsort(-w, kind="stable")[:k])
    positive = np.flatnonzero(w > 0)
    if len(positive) <= k:
      return positive
    keys = rng.standard_exponential(len(positive)) / w[positive]  # Efraimidis-Spirakis
    return np.sort(positive[np.argsort(keys, kind="stable")[:k]])
  t = np.asarray(times, dtype=np.float64)
  eligible = np.flatnonzero(before(t, bound, op.time_inclusive))
  if op.strategy == sampling.UNIFORM_BEFORE:
    return _uniform(rng, eligible, k)
  by_time = eligible[np.argsort(t[eligible], kind="stable")]
  return np.sort(by_time[len(by_time) - min(k, len(by_time)):])


def _uniform(rng: np.random.Generator, items: np.ndarray, k: int) -> np.ndarray:
  if len(items) <= k:
    return items
  return items[np.sort(rng.choice(len(items), k, replace=False))]


def hop_bound(op: sampling.FanOut, seed_time: float, reached: float) -> float:
  """The bound of a time-aware op at a node.

  The seed's time, or (``time_respecting``) ``reached``, the bound the node was
  reached with (:func:`reached_bound`).
  """
  return reached if op.time_respecting else seed_time


def reached_bound(op: sampling.FanOut, seed_time: float, bound: float,
                  edge_time: Optional[float]) -> float:
  """The bound a node reached by ``op`` carries to a later ``time_respecting`` op.

  The time of the edge that reached it (time-aware ops), else the bound ``op``
  applied (``time_respecting``) or the seed's time. A node reached several
  ways keeps the latest.
  """
  if op.time:
    return float(edge_time)
  return bound if op.time_respecting else seed_time
