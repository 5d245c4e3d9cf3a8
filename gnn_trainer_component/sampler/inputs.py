"""What both samplers read: unigraph tables, hop-by-hop sampling configs, JSON properties.

Nothing here builds a Beam pipeline; everything is a plain function so it can
be unit-tested quickly. Tables follow TF-GNN's "unigraph" convention (see
``tensorflow_gnn/data/unigraph.py``): a node table has an ``id`` column (CSV)
or a ``#id`` bytes feature (TFRecord of tf.Examples); an edge table has
``source``/``target`` (CSV) or ``#source``/``#target`` (TFRecord). Seed tables
are node tables (only the id is read).
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph
import tensorflow_gnn.sampler as sampler_lib

from gnn_trainer_component import errors

#: How many offending ids an error message lists.
MAX_IDS_IN_MESSAGE = 10


class GraphInputError(errors.GnnError, ValueError):
  """The graph tables, seeds or sampling spec given to a sampler are invalid."""


def build_sampling_spec(schema: tfgnn.GraphSchema, seed_node_set: str,
                        hops: Sequence[Mapping[str, int]], *,
                        who: str = "GraphSampler") -> sampler_lib.SamplingSpec:
  """Builds a SamplingSpec from a simple hop-by-hop fan-out config.

  Hop ``i`` expands, for every edge set ``e`` named in ``hops[i]``, the nodes
  reached in hop ``i-1`` (the seeds for hop 0) that belong to ``e``'s source
  node set, sampling up to ``hops[i][e]`` outgoing edges per node (uniformly:
  the 1.0.3 Beam sampler ignores the strategy).

  Args:
    schema: The input graph schema.
    seed_node_set: Node set of the seeds.
    hops: One ``{edge_set_name: sample_size}`` mapping per hop.
    who: The component named in errors.

  Returns:
    The SamplingSpec.

  Raises:
    GraphInputError: on unknown sets, bad sizes, or a hop that expands nothing.
  """
  if seed_node_set not in schema.node_sets:
    raise GraphInputError(
        f"{who}: seed node set {seed_node_set!r} is not in the graph schema "
        f"(node sets: {sorted(schema.node_sets)}).")
  if not hops:
    raise GraphInputError(f"{who}: the sampling config needs at least one hop.")
  spec = sampler_lib.SamplingSpec()
  spec.seed_op.op_name = "seed"
  spec.seed_op.node_set_name = seed_node_set
  frontier = {seed_node_set: ["seed"]}  # node set -> op names reaching it last hop
  for hop, fan_outs in enumerate(hops, 1):
    if not fan_outs:
      raise GraphInputError(f"{who}: hop {hop} samples no edge set.")
    next_frontier: dict[str, list[str]] = {}
    for edge_set_name, size in sorted(fan_outs.items()):
      if edge_set_name not in schema.edge_sets:
        raise GraphInputError(
            f"{who}: hop {hop} names unknown edge set {edge_set_name!r} "
            f"(edge sets: {sorted(schema.edge_sets)}).")
      if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise GraphInputError(
            f"{who}: hop {hop}, edge set {edge_set_name!r}: sample size must "
            f"be a positive int, got {size!r}.")
      edge_set = schema.edge_sets[edge_set_name]
      inputs = frontier.get(edge_set.source)
      if not inputs:
        raise GraphInputError(
            f"{who}: hop {hop} samples edge set {edge_set_name!r} from node set "
            f"{edge_set.source!r}, which the previous hop does not reach.")
      op = spec.sampling_ops.add()
      op.op_name = f"hop{hop}_{edge_set_name}"
      op.input_op_names.extend(inputs)
      op.edge_set_name = edge_set_name
      op.sample_size = size
      op.strategy = sampler_lib.SamplingStrategy.RANDOM_UNIFORM
      next_frontier.setdefault(edge_set.target, []).append(op.op_name)
    frontier = next_frontier
  return spec


def output_graph_schema(schema: tfgnn.GraphSchema) -> tfgnn.GraphSchema:
  """The schema that parses sampled examples: the input without table metadata."""
  out = copy.deepcopy(schema)
  for _, _, piece in tfgnn.iter_sets(out):
    piece.ClearField("metadata")
  return out


# ----------------------------------------------------------------------------
# Tables.


def resolve_table(data_dir: str, filename: str, who: str = "GraphSampler") -> list[str]:
  """Files of a (possibly sharded ``name@N`` or glob) table, relative to data_dir.

  Raises:
    GraphInputError: no such files, or a CSV table named ``name@N`` (TF-GNN's
      CSV reader globs the name unexpanded and fails; a glob works).
  """
  shards = re.fullmatch(r"(.*)@(\d+)", filename)
  if shards and unigraph.guess_file_format(filename) == "csv":
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


def _iter_table_rows(data_dir: str, filename: str, columns: Sequence[str],
                     who: str = "GraphSampler"
                     ) -> Iterator[tuple[str, int, tuple[bytes, ...]]]:
  """Yields (file, row_number, values of ``columns``) for a CSV or TFRecord table.

  Column names are unigraph CSV names (``id``, ``source``, ``target``); in
  TFRecord tables they are read from the ``#``-prefixed bytes features.
  """
  fmt = unigraph.guess_file_format(filename)
  for path in resolve_table(data_dir, filename, who):
    if fmt == "csv":
      with tf.io.gfile.GFile(path, "r") as f:
        reader = csv.reader(f)
        header = next(reader, None) or []
        missing = [c for c in columns if c not in header]
        if missing:
          raise GraphInputError(
              f"{who}: CSV table {path} lacks column(s) {missing} (header: {header}).")
        idx = [header.index(c) for c in columns]
        for n, row in enumerate(reader, 2):
          if not row:
            continue
          yield path, n, tuple(row[i].encode("utf-8") for i in idx)
    else:
      keys = ["#" + c for c in columns]
      for n, record in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator(), 1):
        ex = tf.train.Example.FromString(record)
        values = []
        for k in keys:
          feat = ex.features.feature.get(k)
          if feat is None or not feat.bytes_list.value:
            raise GraphInputError(
                f"{who}: record {n} of TFRecord table {path} lacks bytes feature {k!r}.")
          values.append(feat.bytes_list.value[0])
        yield path, n, tuple(values)


def read_node_ids(data_dir: str, filename: str) -> list[bytes]:
  """Node ids of a node (or seed) table, in table order."""
  return [v[0] for _, _, v in _iter_table_rows(data_dir, filename, ("id",))]


def format_ids(ids: Iterable[bytes]) -> str:
  """Up to :data:`MAX_IDS_IN_MESSAGE` of ``ids`` for an error message, sorted, deduplicated."""
  ids = sorted(set(ids))
  shown = ", ".join(i.decode("utf-8", "replace") for i in ids[:MAX_IDS_IN_MESSAGE])
  more = f" and {len(ids) - MAX_IDS_IN_MESSAGE} more" if len(ids) > MAX_IDS_IN_MESSAGE else ""
  return f"[{shown}{more}]"


def validate_tables(schema: tfgnn.GraphSchema, data_dir: str, *,
                    keep_edges: Optional[str] = None, who: str = "GraphSampler"
                    ) -> tuple[dict[str, set[bytes]], list[tuple[bytes, bytes]]]:
  """Checks the node and edge tables a sampler will read.

  Checks: every node and edge set has a ``metadata.filename`` table that
  exists; node ids are unique per node set; every edge's source and target id
  is in its node table.

  Args:
    schema: Input graph schema (unigraph: tables in ``metadata.filename``).
    data_dir: Folder the table file names are relative to.
    keep_edges: An edge set whose ``(source, target)`` ids to return.
    who: The component named in errors.

  Returns:
    Node set -> its ids, and the edges of ``keep_edges`` in table order.

  Raises:
    GraphInputError: naming the file, set and offending ids.
  """
  node_ids: dict[str, set[bytes]] = {}
  for name, node_set in schema.node_sets.items():
    if not node_set.metadata.HasField("filename"):
      raise GraphInputError(
          f"{who}: node set {name!r} has no metadata.filename table in the graph schema.")
    ids: set[bytes] = set()
    dups = []
    for _, _, (node_id,) in _iter_table_rows(data_dir, node_set.metadata.filename, ("id",), who):
      if node_id in ids:
        dups.append(node_id)
      ids.add(node_id)
    if dups:
      raise GraphInputError(
          f"{who}: node table {node_set.metadata.filename!r} of node set {name!r} "
          f"has duplicate ids {format_ids(dups)}.")
    node_ids[name] = ids
  kept = []
  for name, edge_set in schema.edge_sets.items():
    if not edge_set.metadata.HasField("filename"):
      raise GraphInputError(
          f"{who}: edge set {name!r} has no metadata.filename table in the graph schema.")
    bad_src, bad_tgt = [], []
    src_ids, tgt_ids = node_ids[edge_set.source], node_ids[edge_set.target]
    for _, _, (src, tgt) in _iter_table_rows(data_dir, edge_set.metadata.filename,
                                             ("source", "target"), who):
      if src not in src_ids:
        bad_src.append(src)
      if tgt not in tgt_ids:
        bad_tgt.append(tgt)
      if name == keep_edges:
        kept.append((src, tgt))
    problems = []
    if bad_src:
      problems.append(f"source ids not in node set {edge_set.source!r}: {format_ids(bad_src)}")
    if bad_tgt:
      problems.append(f"target ids not in node set {edge_set.target!r}: {format_ids(bad_tgt)}")
    if problems:
      raise GraphInputError(
          f"{who}: edge table {edge_set.metadata.filename!r} of edge set {name!r} "
          f"has unknown node ids: " + "; ".join(problems) + ".")
  return node_ids, kept


def loads_json(value: Any, what: str, who: str = "GraphSampler") -> Any:
  """Decodes a JSON execution property (TFX stores dicts as JSON strings)."""
  if value is None or value == "":
    return None
  if isinstance(value, (dict, list)):
    return value
  try:
    return json.loads(value)
  except json.JSONDecodeError as e:
    raise GraphInputError(f"{who}: {what} is not valid JSON: {e}") from None
