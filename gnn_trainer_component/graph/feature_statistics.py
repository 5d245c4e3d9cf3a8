"""TensorFlow Data Validation's feature statistics of a graph's tables, one dataset per table.

A table's features become one Arrow record batch (:func:`record_batch`: a list
column per feature, as TFDV reads tf.Examples), and TFDV computes its
``DatasetFeatureStatisticsList`` (:func:`table_statistics`), so TFDV's own tools
read them: ``tfdv.visualize_statistics``, ``tfdv.infer_schema``,
``tfdv.validate_statistics`` with drift and skew comparators. Each table is one
split of a TFX ``ExampleStatistics`` artifact, named by :func:`split_name`
(``nodes-<node set>``, ``edges-<edge set>``).
"""

from __future__ import annotations

import os
import re
from typing import Mapping

import numpy as np
import pyarrow as pa
import tensorflow_data_validation as tfdv
from tensorflow_data_validation.statistics import stats_impl
from tensorflow_metadata.proto.v0 import statistics_pb2

#: TFDV's statistics of one table in its split's folder (TFX StatisticsGen's file name).
FEATURE_STATS_FILE = "FeatureStats.pb"
#: The ExampleStatistics split of a node set's table and an edge set's.
NODES_PREFIX, EDGES_PREFIX = "nodes-", "edges-"


def split_name(kind: str, name: str) -> str:
  """The split of a node (``kind`` ``"node"``) or edge set's table in ExampleStatistics.

  A character TFX does not allow in a split name (letters, digits, ``_``, ``-``) is ``_``.
  """
  return (NODES_PREFIX if kind == "node" else EDGES_PREFIX) + re.sub(r"[^A-Za-z0-9_-]", "_",
                                                                     name)


def _column(values: np.ndarray) -> pa.Array:
  """A feature's values, one row per node or edge, as an Arrow list column."""
  values = np.asarray(values)
  rows = len(values)
  if values.dtype != object:
    flat = values.reshape(rows, -1)
    offsets = np.arange(0, flat.size + 1, max(flat.shape[1], 1), dtype=np.int64)[:rows + 1]
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat.reshape(-1)))
  if all(isinstance(v, bytes) for v in values.tolist()):
    return pa.LargeListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int64)),
                                         pa.array(values.tolist(), pa.large_binary()))
  return pa.array([np.atleast_1d(v).tolist() for v in values.tolist()])


def record_batch(features: Mapping[str, np.ndarray]) -> pa.RecordBatch:
  """A table's features (name -> one value per row; at least one) as one record batch."""
  names = sorted(features)
  return pa.RecordBatch.from_arrays([_column(features[n]) for n in names], names)


def table_statistics(features: Mapping[str, np.ndarray], rows: int, name: str
                     ) -> statistics_pb2.DatasetFeatureStatisticsList:
  """TFDV's statistics of one table's features, as one dataset named ``name``.

  A table without features: a dataset of ``rows`` examples and no feature.
  """
  stats = statistics_pb2.DatasetFeatureStatisticsList()
  if features:
    stats = stats_impl.generate_statistics_in_memory(record_batch(features),
                                                     tfdv.StatsOptions())
  if not stats.datasets:
    stats.datasets.add()
  stats.datasets[0].name = name
  stats.datasets[0].num_examples = rows
  return stats


def stats_path(uri: str, split: str) -> str:
  """Where an ExampleStatistics artifact at ``uri`` holds ``split``'s statistics."""
  return os.path.join(uri, f"Split-{split}", FEATURE_STATS_FILE)


def load(uri: str, split: str) -> statistics_pb2.DatasetFeatureStatisticsList:
  """``split``'s statistics in the ExampleStatistics artifact at ``uri``."""
  return tfdv.load_stats_binary(stats_path(uri, split))
