"""Pre-flight checks of the input data, with errors that say what, where and how to fix.

Before training, every data file is read end to end (catching corrupt or
truncated TFRecords by file name) and a sample of examples per file is checked
against the GraphSchema: ``#size`` present, every feature present with the
right value type and count, float values finite (no NaN/inf), edge endpoints
in range. The training input pipeline checks every example for non-finite
floats as well (``input_data.dataset_provider``). TF-GNN's own parser would
fail deep inside ``tf.data`` with a message that names neither the file nor the
feature; this names both.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import errors
from gnn_trainer_component import graph_schema


class InputDataError(errors.GnnError, ValueError):
  """The training/eval data do not match the graph schema or are unreadable."""


def _values(example: tf.train.Example, key: str):
  feature = example.features.feature.get(key)
  if feature is None:
    return None, None
  kind = feature.WhichOneof("kind")
  return kind, (list(getattr(feature, kind).value) if kind else [])


def _per_item(feature) -> Optional[int]:
  """Values per node/edge for a fixed shape, None if ragged."""
  n = 1
  for dim in feature.shape.dim:
    if dim.size < 0:
      return None
    n *= dim.size
  return n


def _check_features(example, prefix: str, features, count: int, where: str) -> list[str]:
  problems = []
  for name, feature in sorted(features.items()):
    key = f"{prefix}{name}"
    kind, values = _values(example, key)
    expected_kind = graph_schema.example_kind(feature.dtype)
    dtype_name = tf.dtypes.as_dtype(feature.dtype).name
    if kind is None:
      problems.append(f"feature '{key}' ({dtype_name}) is missing from {where}")
      continue
    if values and kind != expected_kind:
      problems.append(f"feature '{key}' has {kind} values but the graph schema says "
                      f"{dtype_name} ({expected_kind}) in {where}")
      continue
    per_item = _per_item(feature)
    if per_item is not None and len(values) != per_item * count:
      problems.append(f"feature '{key}' has {len(values)} values, expected {per_item} per "
                      f"item x {count} items = {per_item * count} (shape "
                      f"{[d.size for d in feature.shape.dim]}) in {where}")
      continue
    if kind == graph_schema.FLOAT and values:
      bad = np.flatnonzero(~np.isfinite(np.asarray(values, dtype=np.float32)))
      if bad.size:
        i = int(bad[0])
        item = f"item {i // per_item}, " if per_item else ""
        problems.append(f"feature '{key}' has a non-finite value ({values[i]}) at {item}"
                        f"value index {i} ({bad.size} non-finite in all) in {where}")
  return problems


def check_example(example: tf.train.Example, schema: tfgnn.GraphSchema) -> list[str]:
  """Problems of one tf.Example against the GraphSchema (empty list: fine)."""
  problems = []
  sizes = {}
  for set_name, node_set in sorted(schema.node_sets.items()):
    _, size = _values(example, f"nodes/{set_name}.#size")
    where = f"node set '{set_name}'"
    if size is None:
      problems.append(f"'nodes/{set_name}.#size' is missing ({where} would silently be empty)")
      continue
    sizes[set_name] = int(sum(size))
    problems += _check_features(example, f"nodes/{set_name}.", node_set.features,
                                sizes[set_name], where)
  problems += _check_features(example, "context/", schema.context.features, 1, "the context")
  for set_name, edge_set in sorted(schema.edge_sets.items()):
    where = f"edge set '{set_name}'"
    _, size = _values(example, f"edges/{set_name}.#size")
    if size is None:
      problems.append(f"'edges/{set_name}.#size' is missing ({where})")
      continue
    n_edges = int(sum(size))
    for tag, node_set in (("#source", edge_set.source), ("#target", edge_set.target)):
      _, idx = _values(example, f"edges/{set_name}.{tag}")
      idx = idx or []
      if len(idx) != n_edges:
        problems.append(f"'edges/{set_name}.{tag}' has {len(idx)} indices but "
                        f"'edges/{set_name}.#size' is {n_edges}")
        continue
      limit = sizes.get(node_set)
      bad = [i for i in idx if limit is not None and not 0 <= i < limit]
      if bad:
        problems.append(f"'edges/{set_name}.{tag}' has index {bad[0]} out of range for "
                        f"node set '{node_set}' of size {limit}")
    problems += _check_features(example, f"edges/{set_name}.", edge_set.features, n_edges, where)
  return problems


#: Bytes TFRecord adds around each record: length (8), its CRC (4), data CRC (4).
TFRECORD_FRAMING = 16


def _truncated(role: str, split: str, path: str, count: int, detail: str) -> InputDataError:
  return InputDataError(
      f"{role} split '{split}': {path} is corrupt or truncated after {count} records "
      f"({detail}). Re-create it (e.g. rerun ExampleGen) or remove it from the split.")


def gzip_complete(path: str, uncompressed_bytes: int) -> bool:
  """Whether a GZIP file ends with its trailer (is not cut off).

  TensorFlow's GZIP reader stops without an error when a cut-off file happens
  to end at a record boundary, so a truncated file can silently lose records.
  A complete single-stream file ends with ISIZE (the uncompressed size mod
  2**32), which is compared with what was read; on a mismatch (a truncated
  file, or several concatenated GZIP members) the file is decompressed to its
  end with Python's zlib, member by member, to decide.
  """
  with tf.io.gfile.GFile(path, "rb") as f:
    file_size = f.size()
    if file_size < 18:  # header + trailer
      return False
    f.seek(file_size - 4)
    if int.from_bytes(f.read(4), "little") == uncompressed_bytes % 2**32:
      return True
    f.seek(0)
    decompressor, next_member = zlib.decompressobj(wbits=31), b""
    while True:
      chunk = next_member or f.read(1 << 20)
      if not chunk:
        return decompressor.eof
      try:
        decompressor.decompress(chunk)
      except zlib.error:
        return False
      next_member = decompressor.unused_data if decompressor.eof else b""
      if next_member:
        decompressor = zlib.decompressobj(wbits=31)


@dataclasses.dataclass(frozen=True)
class DataSize:
  """What the pre-flight pass measured: records and their serialized bytes."""
  records: int = 0
  bytes: int = 0

  def __add__(self, other: "DataSize") -> "DataSize":
    return DataSize(self.records + other.records, self.bytes + other.bytes)


def without_autotune(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """``dataset`` with tf.data autotuning off, so its iterators run no model thread.

  Destroying a tf.data iterator waits for its autotuning thread, and in TF 2.16
  that thread can miss the cancellation and sleep out its optimization period
  first (it doubles up to 60 s while the iterator lives). Measured: 18-20 s
  between the last epoch and the export in about 1 of 5 W1 runs (gdb: the main
  thread in ``~RootDataset::Iterator`` waiting for ``Model::OptimizeLoop``), and
  a 4.2 s teardown after 6 s of iterating in 1 of 12 runs of a plain
  ``range().map(AUTOTUNE).prefetch(AUTOTUNE)`` pipeline. Without autotuning the
  ``AUTOTUNE`` parallelism is the number of cores and prefetch buffers still
  grow on demand: W2 streaming measured 28.5 ms/step either way
  (benchmarks/README.md).
  The options carry over to every dataset derived from this one (the runner's
  batching and parsing, Keras).
  """
  options = tf.data.Options()
  options.autotune.enabled = False
  return dataset.with_options(options)


def _sizes(files: Sequence[str], compression: Optional[str]) -> Optional[list[DataSize]]:
  """Records and serialized bytes of each file, read in parallel inside tf.data.

  None if some file cannot be read to its end (:func:`check_files` then finds
  which record of which file).
  """

  @tf.autograph.experimental.do_not_convert
  def count(path):
    lengths = tf.data.TFRecordDataset(path, compression_type=compression or "").map(
        lambda record: tf.cast(tf.strings.length(record), tf.int64))
    return lengths.reduce((tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
                          lambda acc, n: (acc[0] + 1, acc[1] + n))

  counts = without_autotune(tf.data.Dataset.from_tensor_slices(list(files)).map(
      count, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))
  try:
    return [DataSize(int(n), int(b)) for n, b in counts.as_numpy_iterator()]
  except (tf.errors.DataLossError, tf.errors.InvalidArgumentError):
    return None


def check_files(files: Sequence[str], compression: Optional[str], schema: tfgnn.GraphSchema,
                *, split: str, role: str, sample_per_file: int = 100) -> DataSize:
  """Reads every record of ``files``; checks the first ``sample_per_file`` of each.

  The records are counted in parallel inside tf.data (W2's 1.5 GB: 12.6 s one
  record at a time in Python); only the sample, and every record of a file
  that cannot be read to its end, go through Python.

  Returns:
    The number of records and their total serialized (uncompressed) size.

  Raises:
    InputDataError: naming file, record, split and the problem.
  """
  sizes = _sizes(files, compression)
  total = DataSize()
  for i, path in enumerate(files):
    ds = tf.data.TFRecordDataset(path, compression_type=compression or "")
    if sizes is not None:
      ds = ds.take(sample_per_file)
    count = size = 0
    try:
      for record in ds.map(lambda r: (r, tf.strings.length(r))):
        record, length = record
        size += int(length)
        if count < sample_per_file:
          try:
            example = tf.train.Example.FromString(record.numpy())
          except Exception as e:  # Whatever the parser raises: the record is no tf.Example.
            raise InputDataError(
                f"{role} split '{split}': record #{count} of {path} is not a tf.Example "
                f"({e}).") from None
          problems = check_example(example, schema)
          if problems:
            raise InputDataError(
                f"{role} split '{split}': record #{count} of {path} does not match the "
                "graph schema:\n  - " + "\n  - ".join(problems[:10]) +
                "\nFix the data (or the graph_schema.pbtxt) so that they agree.")
        count += 1
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      raise _truncated(role, split, path, count,
                       f"{type(e).__name__}: {e.message.splitlines()[0]}") from None
    if sizes is not None:
      count, size = sizes[i].records, sizes[i].bytes
    if compression == "GZIP" and not gzip_complete(path, size + TFRECORD_FRAMING * count):
      raise _truncated(role, split, path, count, "the GZIP stream ends before its trailer")
    total += DataSize(count, size)
  if total.records == 0:
    raise InputDataError(
        f"{role} split '{split}' holds no examples ({len(files)} files, all empty).")
  return total
