"""Pure logic of GraphSampler: its sampling spec, seed checks and example keys.

The tables, the hop-by-hop config and the errors are both samplers'
(:mod:`gnn_trainer_component.sampler.inputs`).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from absl import logging
import tensorflow_gnn as tfgnn
import tensorflow_gnn.sampler as sampler_lib

from google.protobuf import text_format

from gnn_trainer_component.sampler import inputs
from gnn_trainer_component.sampler.inputs import GraphInputError


def parse_sampling_spec(text: str) -> sampler_lib.SamplingSpec:
  """Parses a text-format ``tensorflow_gnn.sampler.SamplingSpec``."""
  try:
    return text_format.Parse(text, sampler_lib.SamplingSpec())
  except text_format.ParseError as e:
    raise GraphInputError(f"GraphSampler: invalid sampling_spec text proto: {e}") from None


def sampling_spec_from_config(schema: tfgnn.GraphSchema, sampling_spec: Optional[str],
                              sampling_config: Optional[Mapping[str, Any]], *,
                              who: str = "GraphSampler") -> sampler_lib.SamplingSpec:
  """The SamplingSpec from exactly one of a text proto or a builder config.

  Args:
    schema: The input graph schema.
    sampling_spec: Text-format SamplingSpec, or None.
    sampling_config: ``{"seed_node_set": str, "hops": [{edge_set: size}, ...]}``,
      or None.
    who: The component named in errors.

  Returns:
    The SamplingSpec, checked against the schema.

  Raises:
    GraphInputError: if both or neither are given, or either is invalid.
  """
  if bool(sampling_spec) == bool(sampling_config):
    raise GraphInputError(
        f"{who} needs exactly one of 'sampling_spec' (text SamplingSpec) or "
        "'sampling_config' ({'seed_node_set': ..., 'hops': [{edge_set: size}, ...]}).")
  if sampling_spec:
    spec = parse_sampling_spec(sampling_spec)
    if not spec.HasField("seed_op"):
      raise GraphInputError(f"{who}: sampling_spec must set seed_op "
                            f"(link seeds are not supported by {who}).")
    if spec.seed_op.node_set_name not in schema.node_sets:
      raise GraphInputError(
          f"{who}: sampling_spec seeds unknown node set "
          f"{spec.seed_op.node_set_name!r}.")
    for op in spec.sampling_ops:
      if op.edge_set_name not in schema.edge_sets:
        raise GraphInputError(
            f"{who}: sampling op {op.op_name!r} names unknown edge set "
            f"{op.edge_set_name!r}.")
      if op.strategy not in (sampler_lib.SamplingStrategy.RANDOM_UNIFORM,
                             sampler_lib.SamplingStrategy.TOP_K):
        logging.warning("%s: op %s asks for strategy %s; the TF-GNN 1.0.3 "
                        "Beam sampler samples uniformly at random.", who, op.op_name,
                        sampler_lib.SamplingStrategy.Name(op.strategy))
    return spec
  config = dict(sampling_config)
  unknown = set(config) - {"seed_node_set", "hops"}
  if unknown:
    raise GraphInputError(f"{who}: unknown sampling_config keys {sorted(unknown)}; "
                          "allowed: seed_node_set, hops.")
  return inputs.build_sampling_spec(schema, config.get("seed_node_set"),
                                    config.get("hops") or [], who=who)


def validate_graph(schema: tfgnn.GraphSchema, data_dir: str,
                   seed_node_set: str, seeds: Mapping[str, str], *,
                   who: str = "GraphSampler") -> dict[str, int]:
  """Checks the tables (:func:`inputs.validate_tables`) and the seeds GraphSampler will read.

  Checks also that every split's seed table exists, is non-empty, and holds
  only ids of ``seed_node_set``.

  Args:
    schema: Input graph schema (unigraph: tables in ``metadata.filename``).
    data_dir: Folder the table file names are relative to.
    seed_node_set: Node set the seeds belong to.
    seeds: Split name -> seed table file name (relative to data_dir).
    who: The component named in errors.

  Returns:
    Split name -> number of seeds.

  Raises:
    GraphInputError: naming the file, split and offending ids.
  """
  if not seeds:
    raise GraphInputError(f"{who}: no splits given (seeds is empty).")
  node_ids, _ = inputs.validate_tables(schema, data_dir, who=who)
  counts = {}
  for split, filename in seeds.items():
    ids = inputs.read_node_ids(data_dir, filename)
    if not ids:
      raise GraphInputError(
          f"{who}: split {split!r} has no seeds (seed table {filename!r} is empty).")
    missing = [i for i in ids if i not in node_ids[seed_node_set]]
    if missing:
      raise GraphInputError(
          f"{who}: split {split!r}: seed table {filename!r} has ids missing from "
          f"the {seed_node_set!r} node table: {inputs.format_ids(missing)}.")
    if len(set(ids)) != len(ids):
      raise GraphInputError(
          f"{who}: split {split!r}: seed table {filename!r} has duplicate ids.")
    counts[split] = len(ids)
  return counts


def seed_key(split: str, node_id: bytes) -> bytes:
  """The example id GraphSampler gives the seed ``node_id`` of ``split``."""
  return split.encode("utf-8") + b"\x00" + node_id


def split_of_key(key: bytes) -> str:
  """Inverse of :func:`seed_key` (the split name)."""
  return key.split(b"\x00", 1)[0].decode("utf-8")
