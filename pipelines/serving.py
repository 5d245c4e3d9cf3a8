"""Scoring an Examples split with an exported GnnTrainer model, as a client would.

The pipelines' evaluations outside TFX (test accuracy, link AUC, cycle-count
error) share this loop: read the split's GZIP TFRecords, turn each record into
a serving request and a label (the request holds no label), call
``serving_default`` in batches.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow as tf


#: ``python -c FRESH_PROCESS_SCRIPT SAVED_MODEL RECORDS.tfrecord [N]``: ``serving_default`` and,
#: where the export has it, ``embeddings`` on the file's (first N) serialized examples in a
#: process that imports nothing of ours; prints ``{"outputs": {name: nested list},
#: "embeddings": {name: nested list} or null, "signatures": [...], "tfgnn_imported": bool}``
#: as its last line.
FRESH_PROCESS_SCRIPT = r"""
import json, sys
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
records = tf.data.TFRecordDataset(sys.argv[2])
if len(sys.argv) > 3:
  records = records.take(int(sys.argv[3]))
batch = tf.constant([r.numpy() for r in records])
def serve(name):
  if name not in model.signatures:
    return None
  return {k: v.numpy().tolist() for k, v in model.signatures[name](examples=batch).items()}
print(json.dumps({"outputs": serve("serving_default"), "embeddings": serve("embeddings"),
                  "signatures": sorted(model.signatures),
                  "tfgnn_imported": "tensorflow_gnn" in sys.modules}))
"""


#: ``python -c RECOMMEND_SCRIPT PUSHED_MODEL USER K``: the export's ``recommend`` for one user id
#: (its ``K`` best items, the user's own items left out) in a process where neither TF-GNN nor
#: this package can be imported; prints ``{"user", "items", "scores", "status"}`` as its last line.
RECOMMEND_SCRIPT = r"""
import json, sys
class Refuse:
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in ("tensorflow_gnn", "gnn_trainer_component", "pipelines"):
      raise ImportError(name + " is not installed where the model is served")
sys.meta_path.insert(0, Refuse())
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
got = model.signatures["recommend"](node_ids=tf.constant([sys.argv[2]]),
                                    k=tf.constant([int(sys.argv[3])], tf.int64),
                                    exclude_linked=tf.constant([True]))
print(json.dumps({"user": sys.argv[2],
                  "items": [i.decode() for i in got["target_ids"].numpy()[0]],
                  "scores": [round(float(s), 4) for s in got["scores"].numpy()[0]],
                  "status": int(got["status"].numpy()[0])}))
"""


#: ``python -c NEIGHBOURS_SCRIPT PUSHED_INDEX ID``: a pushed EmbeddingIndex's ``neighbours`` of one
#: indexed id in a process that imports TensorFlow alone; prints ``{"id", "neighbours",
#: "scores"}`` as its last line.
NEIGHBOURS_SCRIPT = r"""
import json, sys
import tensorflow as tf
index = tf.saved_model.load(sys.argv[1])
got = index.signatures["neighbours"](ids=tf.constant([sys.argv[2]]))
print(json.dumps({"id": sys.argv[2],
                  "neighbours": [i.decode() for i in got["ids"].numpy()[0]],
                  "scores": [round(float(s), 4) for s in got["scores"].numpy()[0]]}))
"""


def neighbours_in_fresh_process(pushed_index: str, node_id: str) -> dict:
  """:data:`NEIGHBOURS_SCRIPT` on a pushed index: ``{"id", "neighbours", "scores"}``."""
  done = subprocess.run([sys.executable, "-c", NEIGHBOURS_SCRIPT, pushed_index, node_id],
                        check=True, capture_output=True, text=True, cwd="/", timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  return json.loads(done.stdout.strip().splitlines()[-1])


def first_embedded_id(embeddings_uri: str) -> str:
  """The first node id of an Embeddings artifact's table (GraphInferrer's node order)."""
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.model import embeddings_table  # pylint: disable=g-import-not-at-top
  first = pq.ParquetFile(os.path.join(embeddings_uri, embeddings_table.FILE)).read_row_group(
      0, columns=[embeddings_table.ID_COLUMN]).column(0)[0].as_py()
  return first.decode("utf-8", "backslashreplace") if isinstance(first, bytes) else first


def latest_push(serving_dir: str) -> str | None:
  """The newest model version Pusher wrote under ``serving_dir`` (None: none was pushed)."""
  versions = sorted(v for v in os.listdir(serving_dir) if v.isdigit()) if os.path.isdir(
      serving_dir) else []
  return os.path.join(serving_dir, versions[-1]) if versions else None


def split_files(examples_uri: str, split: str) -> list[str]:
  """The record files of ``Split-<split>`` of an Examples artifact."""
  files = sorted(glob.glob(os.path.join(examples_uri, f"Split-{split}", "*.gz")))
  if not files:
    raise FileNotFoundError(f"No examples for split {split!r} under {examples_uri}.")
  return files


def serve_split(saved_model_dir: str, examples_uri: str, split: str, *,
                split_request: Callable[[bytes], tuple[bytes, Any]], batch_size: int = 256
                ) -> Iterator[tuple[list[Any], dict[str, np.ndarray]]]:
  """Yields ``(labels, outputs)`` per batch of the split.

  Args:
    saved_model_dir: ``<model uri>/Format-Serving``.
    examples_uri: Examples artifact uri.
    split: Split name.
    split_request: Turns a record into ``(request sent, label kept)``, e.g.
      the record without its label features and that label.
    batch_size: Serving batch size.

  Yields:
    The batch's labels and the signature's outputs (name -> numpy array).
  """
  serve = tf.saved_model.load(saved_model_dir).signatures["serving_default"]
  files = split_files(examples_uri, split)
  for batch in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(batch_size):
    requests, labels = zip(*(split_request(r) for r in batch.numpy()))
    outputs = serve(examples=tf.constant(requests))
    yield list(labels), {name: value.numpy() for name, value in outputs.items()}


def single_output(outputs: dict[str, np.ndarray]) -> np.ndarray:
  """The only output of a one-task model's signature."""
  (value,) = outputs.values()
  return value
