"""Link prediction's split and supervision, one definition for LinkSampler and GnnTrainer in memory.

The seeded split of an edge set's distinct edges (:func:`split_links`, or
:func:`split_by_time` for ``time_split``) and each split's supervised pairs
with their fixed negatives (:func:`supervise`, which both engines build their
pairs with); the config is :mod:`link_config`, the negatives' rule and draws
:mod:`negatives`.

Leakage rules (tested exactly in ``tests/test_link_sampler.py`` and
``tests/test_in_memory.py``):

* a positive of a held-out split (every split but ``message_split``) is not
  an edge of the message-passing graph of any example (both directions when
  ``undirected``);
* the supervised pair of an example is never a message edge of that example
  (so a training positive is not handed to the model as input);
* a negative is no edge of the whole edge set (any split; with ``undirected``
  in neither direction) and no self pair (:func:`negatives.is_negative`);
  fixed negatives repeat no other.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import math
from typing import Any, Collection, Iterable, Mapping, Optional, Sized

import numpy as np
import pandas as pd

from gnn_trainer_component.graph import errors
from gnn_trainer_component.graph import ids as graph_ids
from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph.errors import GraphInputError

Pair = tuple[bytes, bytes]


def split_rng(seed: int, *parts: Any) -> np.random.Generator:
  """A generator seeded by ``seed`` and ``parts`` (stable across processes)."""
  digest = hashlib.sha256(repr((seed,) + parts).encode("utf-8")).digest()
  return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def edge_key(u: bytes, v: bytes, undirected: bool) -> Pair:
  """The key of edge ``(u, v)``: the ordered pair, or the sorted one if undirected."""
  return (min(u, v), max(u, v)) if undirected else (u, v)


def split_links(pairs: Iterable[Pair], link: link_config_lib.LinkConfig, *,
                who: str) -> dict[str, list[Pair]]:
  """The positives of each split: a seeded permutation of the distinct edges, cut by fraction.

  Self loops are dropped (they cannot be held out of a GNN that adds them) and
  duplicates (and, if undirected, reverse duplicates) count once. Split sizes
  are the fractions rounded down, the rest going to the largest split, so
  every split gets its share to within one edge.

  Raises:
    GraphInputError: if some split would get no edge.
  """
  keys = sorted({edge_key(u, v, link.undirected) for u, v in pairs if u != v})
  order = split_rng(link.seed, "split").permutation(len(keys))
  names = sorted(link.splits)
  sizes = {s: int(math.floor(link.splits[s] * len(keys))) for s in names}
  largest = max(names, key=lambda s: (link.splits[s], s))
  sizes[largest] += len(keys) - sum(sizes.values())
  empty = [s for s in names if sizes[s] == 0]
  if empty:
    raise GraphInputError(
        f"{who}: edge set {link.edge_set!r} has {len(keys)} distinct edges (no self "
        f"loops), too few to give split(s) {empty} any edge with fractions {dict(link.splits)}.")
  out, start = {}, 0
  for s in names:
    out[s] = [keys[i] for i in sorted(order[start:start + sizes[s]])]
    start += sizes[s]
  return out


@dataclasses.dataclass(frozen=True)
class Supervision:
  """The supervised pairs of each split, as node indices.

  Attributes:
    positives: Split -> ``[P, 2]`` (source, target) node indices.
    negatives: Split -> fixed ``[Q, 2]`` negatives (empty where none were asked).
    known: Every edge of the link edge set (negatives avoid them).
    held_out: The held-out splits' positives (kept out of message passing).
    held_out_pairs: The same as ``[H, 2]`` node indices.
    target_cdf: How negative targets are drawn (``negative_sampling``): None,
      uniform; else their cumulative distribution (:func:`negatives.popularity_cdf`).
    times: ``time_split``: split -> each positive's time (its edge's); else empty.
    negative_times: ``time_split``: split -> each fixed negative's time (that
      of a positive of its split, drawn seeded); else empty.
    values: ``edge_label``: split -> each positive's label, float32
      (:func:`edge_columns`); else empty.
    features: ``edge_features``: split -> feature -> each positive's values
      (:func:`edge_columns`); else empty.
  """
  positives: Mapping[str, np.ndarray]
  negatives: Mapping[str, np.ndarray]
  known: negatives_lib.EdgeKeys
  held_out: negatives_lib.EdgeKeys
  held_out_pairs: np.ndarray
  target_cdf: Optional[np.ndarray] = None
  times: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  negative_times: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  values: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  features: Mapping[str, Mapping[str, np.ndarray]] = dataclasses.field(default_factory=dict)


def pair_labels(positives: Sized, negatives: Sized,
                values: Optional[np.ndarray] = None) -> np.ndarray:
  """The labels of a split's positives then its negatives, float32.

  Link prediction: 1.0 each positive, 0.0 each negative; ``values``
  (``edge_label``: :attr:`Supervision.values` of the split): the edges' values.
  """
  if values is not None:
    return np.asarray(values, np.float32)
  return np.r_[np.ones(len(positives)), np.zeros(len(negatives))].astype(np.float32)


def _check_finite(link: link_config_lib.LinkConfig, source_ids: pd.Index, target_ids: pd.Index,
                  source: np.ndarray, target: np.ndarray, values: np.ndarray, what: str, *,
                  who: str, table: str) -> None:
  """Refuses a NaN or infinite value of an edge's ``what``, naming the edge and the table."""
  bad = np.flatnonzero(~np.isfinite(values.reshape(len(source), -1)).all(axis=1))
  if len(bad):
    i = bad[0]
    raise GraphInputError(
        f"{who}: edge {errors.shown_id(source_ids[source[i]])!r} -> "
        f"{errors.shown_id(target_ids[target[i]])!r} of edge set {link.edge_set!r}"
        f"{f' (table {table})' if table else ''} has {what} = {values[i]}; {len(bad)} such "
        "edge(s). Every labelled edge needs finite values: fix or drop those rows.")


def edge_rows(link: link_config_lib.LinkConfig, source: np.ndarray, target: np.ndarray,
              num_targets: int, positives: Mapping[str, np.ndarray], *,
              times: Optional[np.ndarray] = None) -> dict[str, np.ndarray]:
  """Split -> each positive's row in the edge table: the edge it is.

  A pair repeated in the table (a multi-edge) is its first edge: the earliest
  with ``time_split`` (the edge it is split as), else the first in table order.
  """
  keys = negatives_lib.EdgeKeys(np.zeros(0), np.zeros(0), num_targets, link.undirected)
  key = keys.key(np.asarray(source, np.int64), np.asarray(target, np.int64))
  order = np.lexsort((np.arange(len(key)) if times is None else times, key))
  distinct, first = np.unique(key[order], return_index=True)
  first = order[first]
  return {split: first[np.searchsorted(distinct, keys.key(pairs[:, 0], pairs[:, 1]))]
          for split, pairs in positives.items()}


def edge_columns(link: link_config_lib.LinkConfig, source_ids: pd.Index, target_ids: pd.Index,
                 source: np.ndarray, target: np.ndarray, columns: Mapping[str, np.ndarray],
                 positives: Mapping[str, np.ndarray], *, times: Optional[np.ndarray] = None,
                 who: str, table: str = ""
                 ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
  """``(values, features)`` of each positive: its edge's (:func:`edge_rows`).

  ``values``: ``edge_label``: split -> each positive's label, float32 (empty
  without); ``features``: ``edge_features``: split -> feature -> each
  positive's values (empty without). ``columns``: the edge set's features,
  table order.

  Raises:
    GraphInputError: a NaN or infinite label or feature value, naming the edge,
      the feature and the table.
  """
  labels = (np.asarray(columns[link.edge_label], np.float64).reshape(len(source), -1)[:, 0]
            if link.edge_label else None)
  if labels is not None:
    _check_finite(link, source_ids, target_ids, source, target, labels,
                  f"edge_label {link.edge_label!r}", who=who, table=table)
  for name in link.edge_features:
    _check_finite(link, source_ids, target_ids, source, target,
                  np.asarray(columns[name], np.float64), f"edge_features {name!r}", who=who,
                  table=table)
  rows = edge_rows(link, source, target, len(target_ids), positives, times=times)
  values = ({split: labels[r].astype(np.float32) for split, r in rows.items()}
            if labels is not None else {})
  features = ({split: {name: np.asarray(columns[name])[r] for name in link.edge_features}
               for split, r in rows.items()} if link.edge_features else {})
  return values, features


def split_by_time(link: link_config_lib.LinkConfig, source: np.ndarray, target: np.ndarray,
                  times: np.ndarray, num_targets: int, *, one_node_set: bool, who: str
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
  """``time_split``'s positives: each distinct edge at its first time, in the split of that time.

  Returns:
    ``({split: [P, 2] pairs}, {split: [P] times})``.

  Raises:
    GraphInputError: a split whose time range holds no edge.
  """
  keep = source != target if one_node_set else np.ones(len(source), bool)
  source, target, times = source[keep], target[keep], np.asarray(times, np.float64)[keep]
  key = negatives_lib.EdgeKeys(np.zeros(0), np.zeros(0), num_targets, link.undirected).key(
      source, target)
  order = np.lexsort((times, key))
  first = order[np.unique(key[order], return_index=True)[1]]
  names = sorted(link.starts, key=lambda name: link.starts[name])
  split_of = np.searchsorted([link.starts[n] for n in names], times[first], side="right") - 1
  pairs, out_times = {}, {}
  for i, name in enumerate(names):
    rows = first[split_of == i]
    if not len(rows):
      raise GraphInputError(
          f"{who}: time_split split {name!r} (from {link.starts[name]:g}) holds no edge of "
          f"{link.edge_set!r}: its edges' first times run from {times.min(initial=0):g} to "
          f"{times.max(initial=0):g}.")
    pairs[name] = np.stack([source[rows], target[rows]], axis=1).astype(np.int64)
    out_times[name] = times[rows]
  return pairs, out_times


def supervise(link: link_config_lib.LinkConfig, source_ids: pd.Index, target_ids: pd.Index,
              source: np.ndarray, target: np.ndarray, *, one_node_set: bool,
              negatives_for: Collection[str], who: str,
              times: Optional[np.ndarray] = None,
              node_times: Optional[tuple[np.ndarray, np.ndarray]] = None,
              columns: Optional[Mapping[str, np.ndarray]] = None,
              table: str = "") -> Supervision:
  """Splits the link edge set's edges and draws the fixed negatives of ``negatives_for``.

  Args:
    link: The config.
    source_ids: Ids of the edge set's source node set.
    target_ids: Ids of the edge set's target node set.
    source: The edges' sources, as node indices (table order).
    target: The edges' targets, as node indices (table order), one per source.
    one_node_set: The edge set joins one node set to itself (no self pairs).
    negatives_for: The splits that get fixed negatives (distinct across them,
      split by split in sorted order, each seeded by ``link.seed`` and its name).
    who: The component named in errors.
    times: ``time_split``: each edge's time (the link's time feature). Each
      pair is then a query at its time: none is held out of message passing
      (time-aware sampling keeps each query's own and later edges out).
    node_times: ``node_time``: when each source and each target node appears;
      a negative at time ``t`` is drawn among the nodes that appeared by ``t``
      (:func:`negatives.draw_negatives_at`), and no edge may be earlier than
      its ends (:func:`check_node_times`).
    columns: The edge set's features, table order: with ``edge_label`` each
      positive gets its edge's label and none a negative; with ``edge_features``
      its edge's values of those (:func:`edge_columns`).
    table: The edge set's table, as errors name it.
  """
  positive_times = {}
  if node_times is not None:
    check_node_times(link, source_ids, target_ids, source, target, times, node_times,
                     who=who, table=table)
  if link.time:
    positives, positive_times = split_by_time(link, source, target, times, len(target_ids),
                                              one_node_set=one_node_set, who=who)
  else:
    positives = _split_pairs(link, source_ids, target_ids, source, target, who=who)
  counts = {split: link.negatives_for(split, len(positives[split])) if split in negatives_for
            else 0 for split in sorted(positives)}
  # A time split's fixed negative is at the time of a positive of its split, drawn seeded.
  negative_times = {
      split: split_rng(link.seed, "negative_times", split).choice(positive_times[split], count)
      for split, count in counts.items() if count and split in positive_times}
  rngs = {split: split_rng(link.seed, "negatives", split) for split in counts}
  known = negatives_lib.EdgeKeys(source, target, len(target_ids), link.undirected)
  cdf = (negatives_lib.popularity_cdf(positives[link.message_split], len(target_ids),
                                      link.undirected)
         if link.negative_sampling == "popularity" else None)
  negatives = negatives_lib.fixed_negatives(
      counts, rngs, known, num_sources=len(source_ids), num_targets=len(target_ids),
      one_node_set=one_node_set, who=who, target_cdf=cdf,
      at=(negative_times, node_times) if link.node_time else None)
  held = np.concatenate([positives[s] for s in link.held_out_splits if not link.time] or
                        [np.zeros((0, 2), np.int64)])
  values, features = edge_columns(link, source_ids, target_ids, source, target, columns or {},
                                  positives, times=times if link.time else None, who=who,
                                  table=table)
  return Supervision(positives=positives, negatives=negatives, known=known,
                     held_out=negatives_lib.EdgeKeys(held[:, 0], held[:, 1], len(target_ids),
                                                     link.undirected),
                     held_out_pairs=held, target_cdf=cdf, times=positive_times,
                     negative_times=negative_times, values=values, features=features)


def check_node_times(link: link_config_lib.LinkConfig, source_ids: pd.Index, target_ids: pd.Index,
                     source: np.ndarray, target: np.ndarray, times: np.ndarray,
                     node_times: tuple[np.ndarray, np.ndarray], *, who: str,
                     table: str = "") -> None:
  """Refuses an edge of the link's edge set earlier than an end's ``node_time``.

  A pair's ends must exist at its time, and a node reached by an edge before a
  query's time must have appeared by then: no edge precedes its nodes.

  Raises:
    GraphInputError: the first such edge, with its ends' ids and the times.
  """
  times = np.asarray(times, np.float64)
  for end, nodes, ids, appears in (("source", source, source_ids, node_times[0]),
                                   ("target", target, target_ids, node_times[1])):
    appears = np.asarray(appears, np.float64).reshape(len(ids), -1)[:, 0]
    bad = np.flatnonzero(times < appears[nodes])
    if len(bad):
      i = bad[0]
      raise GraphInputError(
          f"{who}: edge {errors.shown_id(source_ids[source[i]])!r} -> "
          f"{errors.shown_id(target_ids[target[i]])!r} "
          f"of edge set {link.edge_set!r}{f' (table {table})' if table else ''} is at time "
          f"{times[i]:g} ({link.time!r}), before "
          f"its {end} appears (node_time {link.node_time!r}: {appears[nodes[i]]:g}); "
          f"{len(bad)} such edge(s). An edge cannot be earlier than its nodes: fix the "
          "times in the tables, or leave \"node_time\" out of link_config[\"time_split\"].")


def _split_pairs(link: link_config_lib.LinkConfig, source_ids: pd.Index, target_ids: pd.Index,
                 source: np.ndarray, target: np.ndarray, *, who: str) -> dict[str, np.ndarray]:
  """The random split's positives of each split, as ``[P, 2]`` node indices.

  The split orders the edges by their ends' ids as bytes (integer ids as their text).
  """
  ids_s, ids_t = graph_ids.id_bytes(source_ids), graph_ids.id_bytes(target_ids)
  find_s, find_t = graph_ids.IdFinder(source_ids), graph_ids.IdFinder(target_ids)
  positives = {}
  edges = zip(ids_s[source], ids_t[target], strict=True)
  for split, pairs in split_links(edges, link, who=who).items():
    positives[split] = np.stack([
        find_s(np.asarray([p[0] for p in pairs], dtype=object)),
        find_t(np.asarray([p[1] for p in pairs], dtype=object))],
                                axis=1).astype(np.int64).reshape(-1, 2)
  return positives


def pairs_csv(positives: np.ndarray, negatives: np.ndarray, source_ids: pd.Index,
              target_ids: pd.Index, values: Optional[np.ndarray] = None) -> str:
  """``source,target,label`` rows of node-index pairs by node id (labels: :func:`pair_labels`).

  Positives 1, negatives 0; ``values`` (``edge_label``): each positive's value
  instead (there are no negatives), as the shortest text that reads back as it.
  """
  out = io.StringIO()
  writer = csv.writer(out, lineterminator="\n")
  writer.writerow(["source", "target", "label"])
  pairs = np.concatenate([positives, negatives]).reshape(-1, 2)
  for (u, v), label in zip(id_pairs(pairs, source_ids, target_ids),
                           pair_labels(positives, negatives, values), strict=True):
    writer.writerow([_text(u), _text(v), np.format_float_positional(label, trim="-")])
  return out.getvalue()


def _text(node_id: Any) -> str:
  return node_id.decode("utf-8", "backslashreplace") if isinstance(node_id, bytes) else str(node_id)


def id_pairs(pairs: np.ndarray, source_ids: pd.Index, target_ids: pd.Index) -> list[Pair]:
  """Node-index pairs ``[N, 2]`` as (source id, target id) pairs of bytes ids."""
  return list(zip(graph_ids.id_bytes(source_ids, pairs[:, 0]),
                  graph_ids.id_bytes(target_ids, pairs[:, 1]), strict=True))
