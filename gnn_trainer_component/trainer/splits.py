"""Finding the record files of an Examples split, exactly as ExampleGen lays them out.

ExampleGen (and Transform) write ``<examples.uri>/Split-<name>/*.gz``: GZIP
TFRecords. Pure functions on paths, testable without TFX; `tf.io.gfile` is used
so ``gs://`` URIs work too.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from gnn_trainer_component import errors

SPLIT_PREFIX = "Split-"


class SplitError(errors.GnnError, ValueError):
  """A requested split is missing or has no data files."""


@dataclasses.dataclass(frozen=True)
class ExamplesLocation:
  """One Examples artifact as the executor sees it."""
  uri: str
  split_names: Sequence[str]
  file_format: Optional[str] = None  # the artifact's 'file_format' custom property


def compression_type(file_format: Optional[str], filenames: Sequence[str]) -> Optional[str]:
  """Returns the tf.data compression for a split ("GZIP" or None).

  Args:
    file_format: The Examples artifact's ``file_format`` custom property
      ('tfrecords_gzip' is ExampleGen's default; 'tfrecord' is uncompressed).
    filenames: The files; a '.gz' suffix decides when the property is absent.
  """
  if file_format:
    if file_format in ("tfrecords_gzip", "tfrecord_gzip"):
      return "GZIP"
    if file_format in ("tfrecord", "tfrecords"):
      return None
    raise SplitError(
        f"Examples file_format {file_format!r} is not supported by GnnTrainer; "
        "expected 'tfrecords_gzip' (ExampleGen's default) or 'tfrecord'.")
  if filenames and all(f.endswith(".gz") for f in filenames):
    return "GZIP"
  return None


def split_files(location: ExamplesLocation, split: str, *, role: str) -> list[str]:
  """Lists the data files of one split of one Examples artifact.

  Args:
    location: The artifact.
    split: The split name, e.g. "train".
    role: "train_args" or "eval_args", for the error message.

  Returns:
    Sorted file paths (at least one).

  Raises:
    SplitError: if the split is not in the artifact or holds no files.
  """
  import tensorflow as tf  # Imported here: importing this module loads no TensorFlow.

  split_dir = f"{location.uri.rstrip('/')}/{SPLIT_PREFIX}{split}"
  if location.split_names and split not in location.split_names:
    raise SplitError(
        f"{role}.splits asks for split {split!r}, but the Examples artifact at "
        f"{location.uri} has splits {list(location.split_names)}. Fix {role}.splits "
        "or the ExampleGen output_config.")
  if not tf.io.gfile.isdir(split_dir):
    raise SplitError(
        f"{role}.splits asks for split {split!r}, but {split_dir} does not exist.")
  files = sorted(
      f"{split_dir}/{name}" for name in tf.io.gfile.listdir(split_dir)
      if not name.endswith("/") and not name.startswith((".", "_")))
  files = [f for f in files if tf.io.gfile.stat(f).length > 0]
  if not files:
    raise SplitError(
        f"Split {split!r} of the Examples artifact at {location.uri} is empty: "
        f"{split_dir} holds no non-empty data files.")
  return files


def resolve_splits(locations: Sequence[ExamplesLocation], splits: Sequence[str],
                   *, role: str) -> tuple[dict[str, list[str]], Optional[str]]:
  """Files of each of ``splits`` (over all artifacts) and their one compression.

  Returns:
    ``({split: files}, compression)``; each file is listed once.

  Raises:
    SplitError: on a missing/empty split, or mixed compression.
  """
  if not locations:
    raise SplitError("GnnTrainer got no Examples artifact.")
  by_split: dict[str, list[str]] = {split: [] for split in splits}
  compressions = set()
  for loc in locations:
    for split in splits:
      found = split_files(loc, split, role=role)
      compressions.add(compression_type(loc.file_format, found))
      by_split[split].extend(found)
  if len(compressions) > 1:
    raise SplitError(
        f"{role}.splits {list(splits)} mix GZIP and uncompressed files; "
        "use Examples artifacts with one file_format.")
  return by_split, compressions.pop()


def resolve_split(locations: Sequence[ExamplesLocation], splits: Sequence[str],
                  *, role: str) -> tuple[list[str], Optional[str]]:
  """Files and compression for the union of ``splits`` over all artifacts.

  Raises:
    SplitError: on a missing/empty split, or mixed compression.
  """
  by_split, compression = resolve_splits(locations, splits, role=role)
  return [f for files in by_split.values() for f in files], compression
