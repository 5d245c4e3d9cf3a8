"""Scoring an Examples split with an exported GnnTrainer model, as a client would.

The pipelines' evaluations outside TFX (test accuracy, link AUC, cycle-count
error) share this loop: read the split's GZIP TFRecords, turn each record into
a serving request (e.g. drop its label), call ``serving_default`` in batches.
"""

from __future__ import annotations

import glob
import os
from typing import Callable, Iterator, Optional

import numpy as np
import tensorflow as tf


def split_files(examples_uri: str, split: str) -> list[str]:
  """The record files of ``Split-<split>`` of an Examples artifact."""
  files = sorted(glob.glob(os.path.join(examples_uri, f"Split-{split}", "*.gz")))
  if not files:
    raise FileNotFoundError(f"No examples for split {split!r} under {examples_uri}.")
  return files


def serve_split(saved_model_dir: str, examples_uri: str, split: str, *, batch_size: int = 256,
                to_request: Optional[Callable[[bytes], bytes]] = None,
                output: Optional[str] = None) -> Iterator[tuple[list[bytes], np.ndarray]]:
  """Yields ``(records, predictions)`` per batch of the split.

  Args:
    saved_model_dir: ``<model uri>/Format-Serving``.
    examples_uri: Examples artifact uri.
    split: Split name.
    batch_size: Serving batch size.
    to_request: Turns a record into the request sent (default: the record).
    output: Signature output to return (default: the only or first one).
  """
  serve = tf.saved_model.load(saved_model_dir).signatures["serving_default"]
  files = split_files(examples_uri, split)
  for batch in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(batch_size):
    records = list(batch.numpy())
    requests = [to_request(r) for r in records] if to_request else records
    outputs = serve(examples=tf.constant(requests))
    yield records, (outputs[output] if output else next(iter(outputs.values()))).numpy()
