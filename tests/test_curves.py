"""Training curves PNG (gnn_trainer_component/trainer/curves.py): fast, no training."""

import math
import sys
import types

import numpy as np
import pytest

from gnn_trainer_component.trainer import curves

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
W = int(curves.PANEL_WIDTH_IN * curves.DPI)
H = int(curves.PANEL_HEIGHT_IN * curves.DPI)


def _single_task(n=5, with_val=True):
  history = []
  for i in range(n):
    logs = {"loss": 1.0 / (i + 1), "sparse_categorical_accuracy": 0.5 + 0.05 * i}
    if with_val:
      logs.update(val_loss=1.1 / (i + 1), val_sparse_categorical_accuracy=0.55 + 0.04 * i)
    history.append(logs)
  return history


def _multi_task(n=4):
  return [{"loss": 2.0 - 0.1 * i, "paper/loss": 1.0 - 0.05 * i,
           "paper/sparse_categorical_accuracy": 0.3 + 0.1 * i, "author/loss": 1.0 - 0.04 * i,
           "val_loss": 2.1 - 0.1 * i, "val_paper/loss": 1.1 - 0.05 * i,
           "val_paper/sparse_categorical_accuracy": 0.2 + 0.1 * i,
           "val_author/loss": 1.05 - 0.05 * i} for i in range(n)]


def _read_png(path):
  from PIL import Image
  with open(path, "rb") as f:
    assert f.read(8) == PNG_MAGIC
  with Image.open(path) as im:
    im.load()
    return np.asarray(im.convert("RGB"))


def test_single_task_png(tmp_path):
  path = tmp_path / "sub" / "curves.png"  # Parent folders are created.
  assert curves.write_training_curves(_single_task(), str(path), title="demo")
  pixels = _read_png(path)
  assert pixels.shape == (H, 2 * W, 3)  # One row: loss, accuracy.
  # matplotlib reads it back as well.
  import matplotlib.image
  assert matplotlib.image.imread(str(path)).shape[:2] == (H, 2 * W)
  # Both panels have something drawn (blue train / orange validation lines).
  for col in range(2):
    panel = pixels[:, col * W:(col + 1) * W].astype(int)
    bluish = (panel[..., 2] - panel[..., 0]) > 80
    orangish = (panel[..., 0] - panel[..., 2]) > 80
    assert bluish.sum() > 50 and orangish.sum() > 50, col


def test_panels_single_task_and_without_validation():
  rows = curves.curve_panels(_single_task())
  assert [[(p.title, p.train_key, p.val_key) for p in r] for r in rows] == [[
      ("loss", "loss", "val_loss"),
      ("sparse_categorical_accuracy", "sparse_categorical_accuracy",
       "val_sparse_categorical_accuracy")]]
  rows = curves.curve_panels(_single_task(with_val=False))
  assert [[(p.metric, p.val_key) for p in r] for r in rows] == [
      [("loss", None), ("sparse_categorical_accuracy", None)]]


def test_without_validation_png(tmp_path):
  path = tmp_path / "curves.png"
  assert curves.write_training_curves(_single_task(with_val=False), str(path))
  pixels = _read_png(path).astype(int)
  assert pixels.shape == (H, 2 * W, 3)
  assert ((pixels[..., 0] - pixels[..., 2]) > 80).sum() == 0  # No validation line.


def test_multi_task_layout(tmp_path):
  rows = curves.curve_panels(_multi_task())
  assert [[p.title for p in r] for r in rows] == [
      ["loss"], ["paper: loss", "paper: sparse_categorical_accuracy"], ["author: loss"]]
  assert rows[1][0].val_key == "val_paper/loss"
  path = tmp_path / "curves.png"
  assert curves.write_training_curves(_multi_task(), str(path))
  pixels = _read_png(path)
  assert pixels.shape == (3 * H, 2 * W, 3)  # Rows: totals, paper, author.
  # Row 0 and row 2 have one panel: their right halves are blank.
  for row in (0, 2):
    blank = pixels[row * H + 10:(row + 1) * H - 10, W + 10:2 * W - 10]
    assert (blank > 250).all(), row
  assert not (pixels[H + 10:2 * H - 10, W + 10:2 * W - 10] > 250).all()


def test_gaps_and_odd_values(tmp_path):
  history = _single_task(6)
  for i, logs in enumerate(history):
    if i % 2:  # validation_freq=2
      del logs["val_loss"], logs["val_sparse_categorical_accuracy"]
  history[2]["loss"] = math.nan
  history[3]["lr"] = np.float32(0.01)  # Appears later; numpy scalars count.
  history[4]["note"] = "text"  # Not a number: left out.
  rows = curves.curve_panels(history)
  assert [p.metric for p in rows[0]] == ["loss", "sparse_categorical_accuracy", "lr"]
  assert curves.write_training_curves(history, str(tmp_path / "c.png"), first_epoch=11)
  assert _read_png(tmp_path / "c.png").shape == (H, 3 * W, 3)


def test_single_epoch_and_validation_only_metric(tmp_path):
  history = [{"loss": 0.5, "val_loss": 0.6, "val_auc": 0.7}]
  rows = curves.curve_panels(history)
  assert [(p.metric, p.train_key, p.val_key) for p in rows[0]] == [
      ("loss", "loss", "val_loss"), ("auc", None, "val_auc")]
  assert curves.write_training_curves(history, str(tmp_path / "c.png"))


def test_empty_history_writes_nothing(tmp_path):
  path = tmp_path / "curves.png"
  assert not curves.write_training_curves([], str(path))
  assert not curves.write_training_curves([{"note": "x"}, {}], str(path))
  assert not path.exists()


def test_remote_path_uses_gfile(tmp_path, monkeypatch):
  """gs:// and other URIs go through tf.io.gfile (a stand-in here: no TF import)."""
  written = {}

  class GFile:
    def __init__(self, path, mode):
      assert mode == "wb"
      self.path = path

    def __enter__(self):
      return self

    def __exit__(self, *exc):
      return False

    def write(self, data):
      written[self.path] = data

  made = []
  fake_tf = types.SimpleNamespace(io=types.SimpleNamespace(gfile=types.SimpleNamespace(
      GFile=GFile, makedirs=made.append)))
  monkeypatch.setitem(sys.modules, "tensorflow", fake_tf)
  uri = "gs://bucket/root/GnnTrainer/model_run/6/curves.png"
  assert curves.write_training_curves(_single_task(), uri)
  assert made == ["gs://bucket/root/GnnTrainer/model_run/6"]
  assert written[uri].startswith(PNG_MAGIC)


def test_render_does_not_use_pyplot():
  """Object API on the Agg canvas: no pyplot, no global backend switch (notebook-safe)."""
  import subprocess
  code = ("import sys; from gnn_trainer_component.trainer import curves; "
          "assert curves.render_training_curves([{'loss': 1.0}, {'loss': 0.5}]); "
          "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'")
  subprocess.run([sys.executable, "-c", code], check=True, cwd=curves.__file__.rsplit(
      "/gnn_trainer_component/", 1)[0])


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-v"]))
