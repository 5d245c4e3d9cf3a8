"""The training and validation input pipelines: read, parse once, check, cache.

What is cached (``custom_config['cache']``, decided by :func:`resolve_cache`):

1. **Parsed examples** (``"memory"`` or a folder): each example is read, parsed
   (:data:`PARSE_BATCH_SIZE` at a time) into a scalar GraphTensor and checked for
   NaN/inf once; later epochs read the parsed GraphTensors. Shuffling happens after
   this cache, so every epoch still sees a new order. Nothing of the model's
   preprocessing is cached here.
2. **Finished batches** (``"memory"`` on one worker only, :class:`keras_trainer.GnnKerasTrainer`):
   the batches ``runner.run`` builds (batched, merged to components, padded,
   feature processors and ``Task.preprocess`` applied) are kept for validation,
   and for training when the whole training split is one batch (full-batch
   training: every epoch has the same examples, so only their order inside the
   merged graph would change). Only when preprocessing is deterministic
   (:func:`is_deterministic`: the first validation batch, built twice, must
   come out identical), so a random feature processor (e.g. augmentation by
   random feature masking) is never frozen.
   Validation batches are built in file order, so they are also cached when
   shuffling is on.

Memory: stage 2 keeps a second copy of the validation data (and of the training
data when full-batch) next to stage 1's parsed examples.
"""

from __future__ import annotations

import hashlib
import re
import socket
import uuid
from typing import Any, Optional, Sequence

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component import errors
from gnn_trainer_component import process
from gnn_trainer_component.trainer import validation

#: Prefix of the assertion raised in the input pipeline on a NaN/inf feature value.
NONFINITE_INPUT = "GnnTrainer: non-finite input"
_NONFINITE_INPUT_RE = re.compile(
    re.escape(NONFINITE_INPUT) + r" in (?P<what>[^\]]*)\] \[file:\] \[(?P<file>[^\]]*)\] "
    r"\[record:\] \[(?P<record>\d+)\]")

#: Parsed GraphTensors take about this many times the serialized tf.Example
#: bytes in memory (int64 ids are varints when serialized; ragged row splits).
PARSED_SIZE_FACTOR = 2.0

MEMORY = "memory"
NONE = "none"

#: Records parsed per ``tfgnn.parse_example`` call (then unbatched): one op per
#: batch instead of one per record, ~20 % more steps/s when streaming (W2).
PARSE_BATCH_SIZE = 32


def _feature_specs(gtspec: tfgnn.GraphTensorSpec):
  """(piece kind, set name, feature name, spec, key, description) of every feature.

  ``key`` is the feature's tf.Example name (``nodes/<set>.<name>``,
  ``context/<name>``); ``description`` names it for error messages.
  """
  for name, spec in sorted(gtspec.context_spec.features_spec.items()):
    key = f"context/{name}"
    yield "context", "", name, spec, key, f"feature '{key}' of the context"
  for kind, label, pieces in (("nodes", "node set", gtspec.node_sets_spec),
                              ("edges", "edge set", gtspec.edge_sets_spec)):
    for set_name, piece in sorted(pieces.items()):
      for name, spec in sorted(piece.features_spec.items()):
        key = f"{kind}/{set_name}.{name}"
        yield kind, set_name, name, spec, key, f"feature '{key}' of {label} '{set_name}'"


def _float_features(gtspec: tfgnn.GraphTensorSpec) -> list[tuple[str, str, str, str]]:
  """(piece kind, set name, feature name, description) of every float feature."""
  return [(kind, set_name, name, description)
          for kind, set_name, name, spec, _, description in _feature_specs(gtspec)
          if spec.dtype.is_floating]


def _feature(graph: tfgnn.GraphTensor, kind: str, set_name: str, name: str):
  if kind == "context":
    return graph.context[name]
  return (graph.node_sets if kind == "nodes" else graph.edge_sets)[set_name][name]


def resolve_cache(setting: str, *, data: Optional[validation.DataSize],
                  budget_mb: Optional[int], read_once: bool = False) -> str:
  """``custom_config['cache']`` -> ``"memory"``, ``"none"`` or a folder.

  Args:
    setting: The configured value.
    data: Records and serialized bytes of the training plus validation splits
      (from the pre-flight pass); None: unknown (``"auto"`` then streams).
    budget_mb: ``cache_memory_budget_mb`` (None: a quarter of the RAM).
    read_once: Training reads each split once (one epoch, one validation):
      ``"auto"`` then streams, as a cache would only hold memory.
  """
  if setting != "auto":
    return setting
  if read_once:
    logging.info("GnnTrainer cache=auto: each split is read once -> %s", NONE)
    return NONE
  if data is None:
    return NONE
  budget = (budget_mb * 2**20) if budget_mb else process.memory_bytes() // 4
  estimate = int(data.bytes * PARSED_SIZE_FACTOR)
  choice = MEMORY if estimate <= budget else NONE
  logging.info("GnnTrainer cache=auto: %d examples, %.1f MiB serialized, ~%.1f MiB parsed, "
               "budget %.1f MiB -> %s", data.records, data.bytes / 2**20, estimate / 2**20,
               budget / 2**20, choice)
  return choice


class GraphDatasetProvider(runner.DatasetProvider):
  """Examples of TFRecord files (GZIP or not), parsed once, checked, cached, shuffled.

  ``runner.TFRecordDatasetProvider`` cannot read GZIP (what ExampleGen writes).
  Files are sharded by the ``InputContext`` (one shard per input pipeline);
  with fewer files than input pipelines, records are (every pipeline reads all
  files in a fixed order and keeps every n-th record), with a warning.
  With ``check_finite`` or a cache, the records of each file are parsed right
  after reading, :data:`PARSE_BATCH_SIZE` at a time, and yielded one by one
  (the runner then only checks the spec and batches them). With
  ``check_finite`` the float features are asserted finite: the first NaN/inf
  stops training with an error naming ``what``, the file, the record index and
  the feature (see :func:`nonfinite_input_error`). Without either, the provider
  yields serialized records and the runner parses them in batches.
  With ``num_records`` (known from the pre-flight pass) and one input
  pipeline, the dataset declares its size, so Keras knows the steps per epoch
  (``steps_per_execution`` > 1 needs it) and a file that changed since the
  pre-flight pass fails loudly.
  """

  def __init__(self, files: Sequence[str], compression: Optional[str],
               gtspec: tfgnn.GraphTensorSpec, *, shuffle_buffer_size: int = 0,
               what: str = "data", check_finite: bool = True, cache: str = NONE,
               num_records: Optional[int] = None):
    self._files = list(files)
    self._num_records = num_records
    self._compression = compression or ""
    self._gtspec = gtspec
    self._shuffle_buffer_size = shuffle_buffer_size
    self._what = what
    self._check_finite = check_finite
    self._cache = cache
    self._float_features = _float_features(gtspec)

  @property
  def parsed(self) -> bool:
    """Whether the provider yields parsed GraphTensors (else serialized records)."""
    return self._check_finite or self._cache != NONE

  def _parse(self, filename, first_index, serialized):
    """A vector of serialized records -> a batch GraphTensor, checked.

    The records are ``first_index`` onwards in ``filename``.
    """
    graph = tfgnn.parse_example(self._gtspec, serialized, validate=True)
    if self._check_finite:
      for kind, set_name, name, description in self._float_features:
        finite = tf.math.is_finite(_feature(graph, kind, set_name, name))
        # One bool per record: reduce every axis but the batch axis.
        per_record = tf.reduce_all(finite, axis=list(range(1, finite.shape.rank)))
        first_bad = tf.argmin(tf.cast(per_record, tf.int32), output_type=tf.int64)
        tf.debugging.Assert(
            tf.reduce_all(per_record),
            [f"{NONFINITE_INPUT} in {self._what}: {description}", "file:", filename,
             "record:", first_index + first_bad], summarize=1)
    # parse_example's batches have int32 row splits, parse_single_example's
    # graphs the spec's: unbatched, they must be the spec's.
    return graph.with_row_splits_dtype(self._gtspec.row_splits_dtype)

  def _shard(self, context: tf.distribute.InputContext) -> tuple[list[str], bool]:
    """(files this input pipeline reads, whether it keeps only its share of records)."""
    n, i = context.num_input_pipelines, context.input_pipeline_id
    if n <= 1:
      return self._files, False
    if len(self._files) >= n:
      files = self._files[i::n]  # as tf.data's shard(n, i)
      logging.info("GnnTrainer input pipeline %d of %d reads %d of the %d files of %s: %s",
                   i, n, len(files), len(self._files), self._what, files)
      return files, False
    logging.warning(
        "GnnTrainer: %s has %d file(s) for %d input pipelines (workers), so each one reads "
        "all files and keeps every %d-th record (this is pipeline %d). Sharding by file "
        "reads less: write >= %d files (e.g. ExampleGen output_config num_shards).",
        self._what, len(self._files), n, n, i, n)
    return self._files, True

  def get_dataset(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
    file_list, by_record = self._shard(context)
    files = tf.data.Dataset.from_tensor_slices(file_list)
    shuffle = self._shuffle_buffer_size > 0
    # With a cache (or sharding by record) the file order is fixed.
    if shuffle and self._cache == NONE and not by_record:
      files = files.shuffle(len(file_list), reshuffle_each_iteration=True)
    # File order in, file order out, unless shuffled anyway (then faster).
    ordered = self._cache != NONE or not shuffle or by_record

    # Plain TF code without Python control flow on tensors: no AutoGraph needed.
    @tf.autograph.experimental.do_not_convert
    def read(filename):
      records = tf.data.TFRecordDataset(filename, compression_type=self._compression)
      if not self.parsed:
        return records
      return records.batch(PARSE_BATCH_SIZE).enumerate().map(
          tf.autograph.experimental.do_not_convert(
              lambda batch, serialized: self._parse(
                  filename, batch * PARSE_BATCH_SIZE, serialized)),
          num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered).unbatch()

    ds = files.interleave(read, cycle_length=tf.data.AUTOTUNE,
                          num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=ordered)
    if by_record:
      ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
    if self._cache == MEMORY:
      ds = ds.cache()
    elif self._cache != NONE:
      tf.io.gfile.makedirs(self._cache)  # tf.data does not create it
      ds = ds.cache(f"{self._cache}/shard-{context.input_pipeline_id}")
    if shuffle:
      ds = ds.shuffle(self._shuffle_buffer_size, reshuffle_each_iteration=True)
    if self._num_records is not None and context.num_input_pipelines == 1:
      ds = ds.apply(tf.data.experimental.assert_cardinality(self._num_records))
    return validation.without_autotune(ds.prefetch(tf.data.AUTOTUNE))


def dataset_provider(files: Sequence[str], compression: Optional[str],
                     gtspec: tfgnn.GraphTensorSpec, *, shuffle: bool,
                     shuffle_buffer_size: int = 0, what: str = "data",
                     check_finite: bool = True, cache: str = NONE,
                     num_records: Optional[int] = None) -> GraphDatasetProvider:
  """A :class:`GraphDatasetProvider`; ``shuffle=False`` keeps the file order."""
  return GraphDatasetProvider(
      files, compression, gtspec, shuffle_buffer_size=shuffle_buffer_size if shuffle else 0,
      what=what, check_finite=check_finite, cache=cache, num_records=num_records)


class DataServiceError(errors.GnnError, ConnectionError):
  """The tf.data service dispatcher cannot be reached."""


def service_job_name(resume_dir: str) -> str:
  """A tf.data service job name shared by the workers and retries of one execution."""
  return "gnntrainer-" + hashlib.sha256(resume_dir.encode()).hexdigest()[:16]


def tf_data_service_config(address: str, mode: str, job_name: str,
                           timeout_s: float = 10.0) -> runner.TFDataServiceConfig:
  """The runner's tf.data service config, after checking the dispatcher answers.

  Raises:
    DataServiceError: nothing accepts connections at ``address`` (host:port named).
  """
  host_port = address.split("://", 1)[-1]
  host, port = host_port.rsplit(":", 1)
  try:
    socket.create_connection((host, int(port)), timeout=timeout_s).close()
  except OSError as e:
    raise DataServiceError(
        f"GnnTrainer custom_config['tf_data_service_address']: no tf.data service "
        f"dispatcher answers at {host}:{port} ({e}). Start one (tf.data.experimental."
        "service.DispatchServer, with workers) or fix the address; nothing was "
        "trained.") from None
  logging.info("GnnTrainer: training input via the tf.data service at %s (job %s, %s)",
               address, job_name, mode)
  return runner.TFDataServiceConfig(tf_data_service_address=address,
                                    tf_data_service_job_name=job_name,
                                    tf_data_service_mode=mode)


def attempt_cache_dir(folder: str) -> str:
  """A fresh subfolder of a user's cache folder for one attempt.

  tf.data's file cache refuses files a killed attempt left half-written.
  """
  return f"{folder.rstrip('/')}/gnntrainer-{uuid.uuid4().hex[:12]}"


def nonfinite_input_error(message: str) -> Optional[validation.InputDataError]:
  """The InputDataError for an input-pipeline NaN/inf assertion message, else None."""
  match = _NONFINITE_INPUT_RE.search(message.replace("\\'", "'"))
  if not match:
    return None
  return validation.InputDataError(
      f"{match['what']} has a non-finite value (NaN or inf) in record #{match['record']} "
      f"of {match['file']}. Fix or drop that example (e.g. impute the value before "
      "ExampleGen); nothing was published.")


def _flat_arrays(element: Any) -> list[np.ndarray]:
  return [np.asarray(t) for t in tf.nest.flatten(element, expand_composites=True)]


def same_batches(a: Any, b: Any) -> bool:
  """Whether two dataset elements (GraphTensors, labels, ...) are identical."""
  xs, ys = _flat_arrays(a), _flat_arrays(b)
  return _same_shapes(xs, ys) and _same_values(xs, ys)


def _same_shapes(xs: list[np.ndarray], ys: list[np.ndarray]) -> bool:
  return len(xs) == len(ys) and all(
      x.shape == y.shape and x.dtype == y.dtype for x, y in zip(xs, ys, strict=True))


def _same_values(xs: list[np.ndarray], ys: list[np.ndarray]) -> bool:
  return all(np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
             for x, y in zip(xs, ys, strict=True))


def is_deterministic(dataset: tf.data.Dataset, attempts: int = 3) -> Optional[bool]:
  """Whether ``dataset``'s first element comes out the same when built twice.

  Both builds run in one iterator (``take(1).repeat(2)``): a fresh iterator
  would replay seeded random ops, as tf.data re-instantiates its functions per
  iterator. TF-GNN's runner maps batches with ``deterministic=False``, so the
  "first" element may be another batch: elements of different shapes are
  another batch (inconclusive, tried again); same shapes with different
  values mean randomness.

  Returns:
    True, False, or None when every attempt was inconclusive.
  """
  for _ in range(attempts):
    first, again = [_flat_arrays(e) for e in dataset.take(1).repeat(2)]
    if _same_shapes(first, again):
      return _same_values(first, again)
  return None


def string_inputs(model: tf.keras.Model) -> list[str]:
  """The string features of a model's GraphTensor inputs (as ``'nodes/<set>.<name>'``)."""
  return [f"'{key}'" for x in model.inputs if isinstance(x.type_spec, tfgnn.GraphTensorSpec)
          for *_, spec, key, _ in _feature_specs(x.type_spec) if spec.dtype == tf.string]
