"""The export's JSON assets beside its graph schema (``assets.extra``): one writer, one reader."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional

import tensorflow as tf


def write_json(folder: str, filename: str, value: Mapping[str, Any]) -> None:
  """Writes ``value`` as ``folder/filename`` (keys sorted), creating ``folder``."""
  tf.io.gfile.makedirs(folder)
  with tf.io.gfile.GFile(os.path.join(folder, filename), "w") as f:
    f.write(json.dumps(dict(value), sort_keys=True))


def read_json(folder: str, filename: str) -> Optional[dict[str, Any]]:
  """``folder/filename`` as :func:`write_json` wrote it (None: there is none)."""
  path = os.path.join(folder, filename)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)
