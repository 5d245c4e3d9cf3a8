"""The Beam pipeline of GraphSampler: the subgraphs of every split at once, written by split.

The subgraphs are sampled on Beam by the Beam samplers' own engine
(:mod:`gnn_trainer_component.beam.subgraphs`); each example is keyed by its split
and seed (:func:`seed_key`) and written as GZIP TFRecords, as ExampleGen writes
them (:func:`staging.write_splits`).
"""

from __future__ import annotations

from typing import Dict, Optional

import apache_beam as beam
import numpy as np
import tensorflow_gnn as tfgnn

from gnn_trainer_component.beam import subgraphs
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.sampler import staging as staging_lib


def build_sampling_pipeline(root: beam.Pipeline, *, schema: tfgnn.GraphSchema, data_dir: str,
                            plan: sampling.SamplingPlan, seeds: Dict[str, str],
                            seed_times: Optional[Dict[str, tuple[np.ndarray, np.ndarray]]],
                            staging: staging_lib.Staging, num_shards: int,
                            broadcast: bool) -> None:
  """Adds the sampling of every split to the Beam pipeline ``root``.

  Args:
    root: The Beam pipeline.
    schema: Input graph schema with table file names in ``metadata.filename``.
    data_dir: Folder table names are relative to.
    plan: The sampling plan (any strategy).
    seeds: Split name -> seed table file name (relative to data_dir).
    seed_times: A time-aware plan: split -> (seed ids, their times), read from
      the seed tables by the launcher; None: the seed tables are read on Beam.
    staging: Where the examples go (its split folders).
    num_shards: Output shards per split (0: the runner decides).
    broadcast: Node features from a side input (small tables), else joined
      (:mod:`gnn_trainer_component.beam.sampling`).
  """
  if seed_times is None:
    roots = _read_seeds(root, data_dir, seeds)
  else:
    rows = [(seed_key(split, node_id), (node_id, float(times[i])))
            for split, (ids, times) in sorted(seed_times.items())
            for i, node_id in enumerate(ids)]
    roots = root | "Seeds" >> beam.Create(rows, reshuffle=False)
  examples = subgraphs.own_examples(root, schema=schema, data_dir=data_dir, plan=plan,
                                    roots=roots, broadcast=broadcast, who="GraphSampler")
  serialized = examples | "Serialize" >> beam.MapTuple(
      lambda key, example: (key, example.SerializeToString()))
  staging_lib.write_splits(serialized, split_of=split_of_key, staging=staging,
                           num_shards=num_shards, who="GraphSampler")


def seed_key(split: str, node_id: bytes) -> bytes:
  """The example id GraphSampler gives the seed ``node_id`` of ``split``."""
  return split.encode("utf-8") + b"\x00" + node_id


def split_of_key(key: bytes) -> str:
  """Inverse of :func:`seed_key` (the split name)."""
  return key.split(b"\x00", 1)[0].decode("utf-8")


def _read_seeds(root: beam.Pipeline, data_dir: str, seeds: Dict[str, str]
                ) -> beam.PCollection:
  """``(seed key, (seed id, 0.0))`` of every split's seeds (:func:`seed_key`)."""
  seed_pcolls = []
  for split, filename in sorted(seeds.items()):
    seed_pcolls.append(
        subgraphs.read_node_ids(root, data_dir, filename, f"seeds_{split}", "GraphSampler")
        | f"MakeSeeds/{split}" >> beam.Map(
            lambda node_id, s=split: (seed_key(s, node_id), (node_id, 0.0))))
  return tuple(seed_pcolls) | "FlattenSeeds" >> beam.Flatten()
