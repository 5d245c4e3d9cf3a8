"""Fused epochs: an epoch of one step validates inside its training step, as Keras would.

``custom_config["fused_epochs"]`` (default on): when training is one cached batch
and validation one batch (the whole graph in memory), each epoch is one call.
The logs, history, best weights, checkpoints and the numerics guard must be
what Keras' own epoch loop (a separate ``evaluate`` call) gives.
"""

import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from gnn_trainer_component.trainer import callbacks
from gnn_trainer_component.trainer import publish
from gnn_trainer_component.trainer import keras_trainer
from tests import helpers
from tests.test_inferrer import _write_tables


def _model():
  tf.keras.utils.set_random_seed(3)
  model = tf.keras.Sequential([tf.keras.layers.Dense(8, "relu"), tf.keras.layers.Dense(3)])
  model.compile(tf.keras.optimizers.Adam(0.05),
                tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=[tf.keras.metrics.SparseCategoricalAccuracy("acc")])
  return model


def test_a_fused_step_logs_what_fit_and_evaluate_log():
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=(40, 5)).astype("float32"), rng.integers(0, 3, 40)
  vx, vy = rng.normal(size=(12, 5)).astype("float32"), rng.integers(0, 3, 12)
  train = tf.data.Dataset.from_tensors((x, y))
  keras = _model().fit(train, epochs=6, verbose=0,
                       validation_data=tf.data.Dataset.from_tensors((vx, vy))).history
  fused_model = keras_trainer.fuse_validation(
      _model(), (tf.constant(vx), tf.constant(vy)))
  fused = fused_model.fit(train.repeat(), steps_per_epoch=1, epochs=6, verbose=0).history
  assert sorted(fused) == sorted(keras) == ["acc", "loss", "val_acc", "val_loss"]
  for key, values in keras.items():
    np.testing.assert_allclose(fused[key], values, rtol=1e-5, err_msg=key)


class _EagerOnlyAccuracy(tf.keras.metrics.SparseCategoricalAccuracy):
  """A metric whose reset reads a variable's value in Python: it only runs eagerly."""

  def reset_state(self):
    self.total.assign(self.total.numpy() * 0.0)
    self.count.assign(0.0)


def test_one_call_reset_resets_metrics_built_later_and_eager_only_ones():
  model = _model()
  model.compile(model.optimizer, model.loss,
                metrics=[tf.keras.metrics.SparseCategoricalAccuracy("acc"),
                         _EagerOnlyAccuracy("acc2")])
  reset = keras_trainer.one_call_reset(model)
  reset()  # before the first step built the compiled metrics
  rng = np.random.default_rng(1)
  model.fit(rng.normal(size=(16, 5)).astype("float32"), rng.integers(0, 3, 16), verbose=0)

  def values():
    return [float(np.sum(np.abs(v.numpy()))) for m in model.metrics for v in m.variables]

  assert len(values()) >= 6 and all(values()[:4])  # loss and acc: total, count
  reset()  # traced again for the built metrics; the eager-only one falls back to eager
  assert values() == [0.0] * len(values())


def _run(tmp_path, tables, **custom_config):
  """GnnTrainer's executor on the graph in memory, the whole graph every step."""
  _, model_run = helpers.run_executor(
      str(tmp_path), examples_uri=None, graph_schema_dir=tables,
      module_file=os.path.join(tables, "module.py"), train_steps=0,
      custom_config={"global_batch_size": 48, "epochs": 8, "seed": 1,
                     "graph_mode": "full_graph", "summarize_every_n_steps": "never",
                     "restore_best_weights": True, **custom_config},
      seeds={"train": "seeds-all.csv", "eval": "seeds-eval.csv"},
      sampling_config={"seed_node_set": "v", "hops": [{"e": 8}, {"e": 8}]})
  return model_run.uri


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("tables"))
  _write_tables(d)
  return d


def _run_file(model_run, name):
  with open(os.path.join(model_run, name)) as f:
    return json.load(f)


def _checkpoint(model_run, name):
  reader = tf.train.load_checkpoint(os.path.join(model_run, "ckpnt", name))
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if "OPTIMIZER" not in k and "_CHECKPOINTABLE" not in k}


@pytest.mark.slow
def test_fused_epochs_train_and_pick_the_best_epoch_as_keras_epochs_do(tmp_path, tables,
                                                                       caplog):
  caplog.set_level(logging.INFO, logger="absl")
  settings = {"epochs": 12, "checkpoint_every_n_steps": "epoch",
              "restore_best_weights_by": "max:val_sparse_categorical_accuracy"}
  fused = _run(tmp_path / "fused", tables, **settings)
  assert "one call per epoch" in caplog.text
  caplog.clear()
  keras = _run(tmp_path / "keras", tables, **settings, fused_epochs=False)
  assert "one call per epoch" not in caplog.text
  got, want = (_run_file(r, publish.HISTORY_FILE) for r in (fused, keras))
  assert len(got) == len(want) == 12
  for epoch, (g, w) in enumerate(zip(got, want, strict=True)):
    assert sorted(g) == sorted(w) and "val_loss" in w, (g, w)
    for key in w:
      np.testing.assert_allclose(g[key], w[key], rtol=1e-4, err_msg=f"epoch {epoch} {key}")
  # The same epoch's weights exported (by validation accuracy: not the last epoch
  # here), and TF-GNN's checkpoints ("best" by val_loss) hold the same weights.
  exported = _run_file(fused, "metrics.json")["exported_epoch"]
  assert exported == _run_file(keras, "metrics.json")["exported_epoch"] < 12
  for name in ("best", "latest"):
    got, want = _checkpoint(fused, name), _checkpoint(keras, name)
    assert sorted(got) == sorted(want) and got
    for key in want:
      np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-6, err_msg=key)


@pytest.mark.slow
def test_the_numerics_guard_stops_a_fused_epoch_and_nothing_is_published(tmp_path, tables):
  with pytest.raises(callbacks.TrainingError, match=r"Exploding loss at training step 1: .* > "
                     r"loss_upper_bound 1e-06.*No good state to roll back to yet"):
    _run(tmp_path, tables, loss_upper_bound=1e-6, recovery_max_trials=1)
  helpers.assert_nothing_published(str(tmp_path))
