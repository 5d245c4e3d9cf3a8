"""Child process for the kill/resume tests: runs the demo pipeline under a run id.

The demo on its raw examples (ImportExampleGen -> GnnTrainer, GnnTuner before it when asked),
or with StatisticsGen, SchemaGen and Transform first (``"transform": true``).

Usage: python -m devtools.pipeline_child '<json args>'

Every Keras ``fit`` in this process gets one more callback that counts the
train batches it really runs and prints them (``soak.FIT_LINE``) when the fit
ends: the tests' own measure of what an attempt trained, independent of the
optimizer step and the checkpoints the trainer reports from.
"""

import functools
import json
import os
import sys

# pylint: disable=g-import-not-at-top,wrong-import-position
import gnn_trainer_component
gnn_trainer_component.setup_process()  # first: Keras 2, before TensorFlow
from absl import logging
import tensorflow as tf

from devtools import soak
from pipelines.demo import pipeline as demo_pipeline
from pipelines.local_run import run_pipeline


class _FitCounter(tf.keras.callbacks.Callback):
  """Counts the train batches (and the epochs begun) of one fit; prints them at its end."""

  def __init__(self):
    super().__init__()
    self.batches, self.epochs = 0, []

  def on_epoch_begin(self, epoch, logs=None):
    self.epochs.append(epoch + 1)

  def on_train_batch_end(self, batch, logs=None):
    self.batches += 1  # once per step while steps_per_execution is 1 (the demo's)

  def on_train_end(self, logs=None):
    print(soak.FIT_LINE + json.dumps({"batches": self.batches, "epochs": self.epochs}),
          flush=True)


def count_fits() -> None:
  """Adds a ``_FitCounter`` to every ``tf.keras.Model.fit`` call of this process."""
  fit = tf.keras.Model.fit

  @functools.wraps(fit)
  def counted_fit(model, *args, callbacks=None, **kwargs):
    return fit(model, *args, callbacks=[*(callbacks or []), _FitCounter()], **kwargs)

  tf.keras.Model.fit = counted_fit


def main(args: dict) -> None:
  logging.set_verbosity(logging.INFO)
  count_fits()
  run_pipeline(demo_pipeline.create_pipeline(
      pipeline_name=args["pipeline_name"],
      pipeline_root=os.path.join(args["root"], "pipeline_root"),
      examples_dir=args["examples"], graph_schema_dir=args["graph_schema"],
      metadata=os.path.join(args["root"], "metadata.sqlite"),
      train_steps=args["train_steps"], custom_config=args["custom_config"],
      tuning_config=args.get("tuning_config"), **demo_pipeline.transform_stages(args["transform"])),
      run_id=args["run_id"])


if __name__ == "__main__":
  main(json.loads(sys.argv[1]))
