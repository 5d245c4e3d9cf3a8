"""What every executor of this package does with its outputs: the small shared rules.

Atomic writes (a crash never leaves a truncated file), the phase log a crash
soak and the speed benchmark key on, where training state is backed up for a
retry (:func:`resume_dir`), and artifact custom properties. TFX-free except
for the artifact type in :func:`set_properties`; file access through
``tf.io.gfile`` so ``gs://`` URIs work.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from absl import logging
import tensorflow as tf

#: Logged (INFO) at the start of each phase of an execution, e.g.
#: ``GnnTrainer phase: train``; the crash soak (devtools/soak.py) kills on them.
PHASE_LOG = "GnnTrainer phase: %s"


def log_phase(name: str) -> None:
  """Logs the start of an execution phase.

  validate, train, export, retrieval, parity, publish, done.
  """
  logging.info(PHASE_LOG, name)


def write_atomically(path: str, data: bytes) -> None:
  """Write then rename: a crash never leaves a truncated file."""
  tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
  tmp = f"{path}.tmp"
  with tf.io.gfile.GFile(tmp, "wb") as f:
    f.write(data)
  tf.io.gfile.rename(tmp, path, overwrite=True)


def rmtree(path: str) -> None:
  """Removes ``path`` and what is under it, if it exists."""
  if tf.io.gfile.exists(path):
    tf.io.gfile.rmtree(path)


def resume_dir(model_uri: str, pipeline_run_id: Optional[str], model_run_uri: str,
               output_key: str = "model") -> str:
  """Where training state is backed up so that a retry can resume.

  Stable across retries of the same node in the same pipeline run, and unique
  per run so a new run never picks it up:
  ``<pipeline_root>/<node_id>/.resume/<pipeline_run_id>``, where the node dir
  comes from TFX's output layout ``<pipeline_root>/<node_id>/<output_key>/<execution_id>``.
  Without a run id or that layout (e.g. under the KFP v2 launcher, which retries
  a task with the same output URIs) it is ``<model_run uri>/backup``.
  GnnTuner uses it too, with its ``best_hyperparameters`` output and
  ``tuner_results`` in the roles of ``model`` and ``model_run``.
  """
  parent = os.path.dirname(model_uri.rstrip("/"))
  if (pipeline_run_id and os.path.basename(model_uri.rstrip("/")).isdigit()
      and os.path.basename(parent) == output_key):
    safe_run = "".join(c if c.isalnum() or c in "-_." else "_" for c in pipeline_run_id)
    return os.path.join(os.path.dirname(parent), ".resume", safe_run)
  return os.path.join(model_run_uri, "backup")


def set_properties(artifact: Any, props: dict[str, Any]) -> None:
  """Sets int / float / string custom properties of a TFX artifact by the values' types."""
  for name, value in props.items():
    if isinstance(value, int):
      artifact.set_int_custom_property(name, value)
    elif isinstance(value, float):
      artifact.set_float_custom_property(name, value)
    else:
      artifact.set_string_custom_property(name, str(value))


def bless(blessing: Any, verdict_blessed: bool, message: str, model: Any,
          baseline: Any) -> None:
  """Sets a ``ModelBlessing`` as TFX's Evaluator does (GraphEvaluator's, EmbeddingIndex's).

  ``blessed`` 1/0, a ``BLESSED`` or ``NOT_BLESSED`` file, ``current_model`` /
  ``current_model_id`` and ``baseline_model`` / ``baseline_model_id``: the stock Pusher,
  BulkInferrer and ``LatestBlessedModelStrategy`` read it unchanged. A model that is an
  output of the same execution has no id yet: its URI alone is written.
  """
  from tfx.components.evaluator import constants  # pylint: disable=g-import-not-at-top
  blessing.set_string_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_URI_KEY,
                                      model.uri)
  if model.id:
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY,
                                     model.id)
  if baseline is not None:
    blessing.set_string_custom_property(constants.ARTIFACT_PROPERTY_BASELINE_MODEL_URI_KEY,
                                        baseline.uri)
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY,
                                     baseline.id)
  blessing.set_string_custom_property(constants.ARTIFACT_PROPERTY_BLESSING_MESSAGE_KEY, message)
  tf.io.gfile.makedirs(blessing.uri)
  name = constants.BLESSED_FILE_NAME if verdict_blessed else constants.NOT_BLESSED_FILE_NAME
  write_atomically(os.path.join(blessing.uri, name), b"")
  blessing.set_int_custom_property(
      constants.ARTIFACT_PROPERTY_BLESSED_KEY,
      constants.BLESSED_VALUE if verdict_blessed else constants.NOT_BLESSED_VALUE)
