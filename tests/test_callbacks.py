"""The backup cadence and the in-memory best weights (trainer/callbacks.py), on a tiny Keras model."""

import glob
import os

import numpy as np
import pytest

import gnn_trainer_component
gnn_trainer_component.setup_process()  # Keras 2, before TensorFlow
import tensorflow as tf  # pylint: disable=g-bad-import-order

from gnn_trainer_component.trainer import callbacks

STEPS_PER_EPOCH = 3


def _fit(callback_list, *, epochs=6, steps_per_epoch=STEPS_PER_EPOCH, seed=0):
  tf.keras.utils.set_random_seed(seed)
  x = np.random.default_rng(seed).normal(size=(12, 4)).astype("float32")
  y = (x @ np.arange(1, 5, dtype="float32"))[:, None]
  model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
  model.compile(tf.keras.optimizers.SGD(0.01), "mse")
  train = tf.data.Dataset.from_tensor_slices((x, y)).batch(4).repeat()
  model.fit(train, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=0,
            validation_data=(x, y), callbacks=callback_list)
  return model


def _backup(tmp_path, **kwargs):
  return callbacks.Backup(str(tmp_path / "backup"), steps_per_epoch=STEPS_PER_EPOCH, **kwargs)


@pytest.mark.parametrize("kwargs,expected_backups", [
    ({"every_seconds": 0}, 6),                 # every epoch
    ({"every_seconds": 3600}, 1),              # only after the last epoch
    ({"every_n_steps": 4}, 1 + 4),             # steps 4, 8, 12, 16 and the end (18)
])
def test_backup_cadence(tmp_path, kwargs, expected_backups):
  calls = []
  backup = _backup(tmp_path, before_backup=[lambda: calls.append("before")],
                   after_backup=[lambda: calls.append("after")], **kwargs)
  _fit([backup])
  assert backup.backups == expected_backups
  assert calls == ["before", "after"] * expected_backups
  assert glob.glob(str(tmp_path / "backup" / "**" / "checkpoint"), recursive=True)


def test_backup_cadence_without_a_known_epoch_length_is_per_epoch(tmp_path):
  backup = callbacks.Backup(str(tmp_path / "b"), steps_per_epoch=None, every_seconds=0)
  assert not backup._implements_train_batch_hooks()  # pylint: disable=protected-access
  _fit([backup])
  assert backup.backups == 6


def test_best_weights_are_restored_and_survive_a_resume(tmp_path):
  state = str(tmp_path / "backup")
  best = callbacks.BestWeights(state)
  model = _fit([best, _backup(tmp_path, every_seconds=0, before_backup=[best.persist],
                               after_backup=[best.drop_older])])
  assert best.best_epoch is not None
  # The model holds the best epoch's weights, and exactly one file is left: the last backup's.
  np.testing.assert_array_equal(model.get_weights()[0], best._weights[0])  # pylint: disable=protected-access
  files = glob.glob(os.path.join(state, "best_weights-step*.npz"))
  assert [os.path.basename(f) for f in files] == [f"best_weights-step{6 * STEPS_PER_EPOCH}.npz"]

  # A retry that resumes from that backup (nothing left to train) gets them back.
  again = callbacks.BestWeights(state)
  resumed = _fit([again, _backup(tmp_path, every_seconds=0)], seed=1)
  assert (again.best, again.best_epoch) == (best.best, best.best_epoch)
  np.testing.assert_array_equal(resumed.get_weights()[0], model.get_weights()[0])


def test_best_weights_by_the_highest_metric_and_an_unknown_metric_fails(tmp_path):
  state = str(tmp_path / "backup")
  lowest = callbacks.BestWeights(state, "val_loss", "min")
  highest = callbacks.BestWeights(state, "val_loss", "max")  # the worst epoch, on purpose
  history = _fit([lowest, highest]).history.history["val_loss"]
  assert lowest.best == min(history) and highest.best == max(history)
  assert (lowest.best_epoch, highest.best_epoch) == (
      int(np.argmin(history)), int(np.argmax(history)))
  from gnn_trainer_component.trainer import config  # pylint: disable=g-import-not-at-top
  with pytest.raises(config.ConfigError, match=r"logs no 'val_auc'; its validation metrics "
                                               r"are \['val_loss'\]"):
    _fit([callbacks.BestWeights(state, "val_auc", "max")], epochs=1)


def test_ranking_validation_feeds_the_best_weights_the_epoch_that_ranks_best(tmp_path):
  """What ``rank`` returns reaches the logs before BestWeights reads them; epochs without
  validation are not ranked; the queries count is not a metric."""
  seen = []

  def rank(model):  # a number that follows the weights of the moment, best at 1.0 each
    weights = model.get_weights()[0].ravel().copy()
    seen.append(weights)
    return {"retrieval_mrr": 1.0 / (1.0 + float(np.abs(weights - 1.0).sum())),
            "retrieval_queries": 7.0}

  best = callbacks.BestWeights(str(tmp_path / "backup"), "val_retrieval_mrr", "max")
  tf.keras.utils.set_random_seed(0)
  x = np.random.default_rng(0).normal(size=(12, 4)).astype("float32")
  y = (x @ np.arange(1, 5, dtype="float32"))[:, None]
  model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
  model.compile(tf.keras.optimizers.SGD(0.05), "mse")
  history = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4).repeat(), epochs=6,
                      steps_per_epoch=3, validation_data=(x, y), validation_freq=2, verbose=0,
                      callbacks=[callbacks.RankingValidation(rank), best]).history
  ranked = history["val_retrieval_mrr"]
  assert len(seen) == len(ranked) == 3 and "val_retrieval_queries" not in history
  assert best.best == max(ranked) and best.best_epoch == 1 + 2 * int(np.argmax(ranked))
  np.testing.assert_array_equal(model.get_weights()[0].ravel(), seen[int(np.argmax(ranked))])


def test_a_trainings_seeds_are_given_back_after_it():
  """GnnTrainer seeds Python, numpy and TensorFlow for its training only: what runs next in
  the process (GraphEvaluator in a LocalDagRunner, a test) finds the seeds as they were."""
  import random  # pylint: disable=g-import-not-at-top
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.trainer import config  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.trainer import training  # pylint: disable=g-import-not-at-top
  np.random.seed(11)
  random.seed(12)
  before = (np.random.get_state()[1].copy(), random.getstate(), context.global_seed())
  with training._determinism(config.make_trainer_config(None, None, {"seed": 5})):
    assert context.global_seed() == 5
    np.random.random(), random.random()  # the training draws
  assert context.global_seed() == before[2]
  np.testing.assert_array_equal(np.random.get_state()[1], before[0])
  assert random.getstate() == before[1]


def test_metrics_of_an_epoch():
  recorder = callbacks.RunRecorder()
  recorder.history = [{"loss": 3.0, "val_loss": 2.0}, {"loss": 2.0}, {"loss": 1.0, "val_loss": 2.5}]
  assert recorder.metrics() == ({"loss": 1.0}, {"loss": 2.5})
  assert recorder.metrics(epoch=1) == ({"loss": 2.0}, {"loss": 2.0})


def _summaries(log_dir: str) -> dict:
  """(run, tag, step) -> the value written (None for text and rates), and 'graph' if written."""
  found = {}
  for path in glob.glob(os.path.join(log_dir, "*", "events.out.tfevents.*")):
    run = os.path.basename(os.path.dirname(path))
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      if event.graph_def:
        found[(run, "graph", 0)] = True
      for value in event.summary.value:
        array = tf.make_ndarray(value.tensor)
        # Text (the model's config, its layer names numbered per process) and rates: present.
        found[(run, value.tag, event.step)] = (
            None if array.dtype == object or "steps_per_second" in value.tag else float(array))
  return found


@pytest.mark.parametrize("update_freq,steps_per_execution", [(4, 2), ("epoch", 1)])
def test_tensorboard_writes_what_keras_writes(tmp_path, update_freq, steps_per_execution):
  """GnnTrainer's TensorBoard runs Keras' step hook only at the steps it records: the event
  files hold the same scalars, at the same steps, with the same values, and the graph."""
  written = {}
  for name, kind in (("keras", tf.keras.callbacks.TensorBoard),
                     ("ours", callbacks.TensorBoard)):
    tf.keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(12, 4)).astype("float32")
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(4,))])
    model.compile(tf.keras.optimizers.SGD(0.01), "mse", metrics=["mae"],
                  steps_per_execution=steps_per_execution)
    train = tf.data.Dataset.from_tensor_slices((x, x.sum(1, keepdims=True))).batch(2).repeat()
    model.fit(train, epochs=3, steps_per_epoch=6, verbose=0, validation_data=(x, x[:, :1]),
              callbacks=[kind(log_dir=str(tmp_path / name), update_freq=update_freq,
                              write_steps_per_second=True)])
    written[name] = _summaries(str(tmp_path / name))
  assert written["ours"] == written["keras"]
  steps = sorted(step for run, tag, step in written["ours"] if tag == "batch_loss")
  assert steps == ([] if update_freq == "epoch" else list(range(4, 19, 4)))
  assert ("train", "graph", 0) in written["ours"]
  assert ("validation", "epoch_loss", 2) in written["ours"]
