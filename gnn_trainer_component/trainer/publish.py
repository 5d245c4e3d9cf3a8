"""Publish: the parity check, the run files, the atomic publish of the export.

During ``runner.run`` the export (:class:`gnn_trainer_component.model.export.ServingExporter`)
writes the SavedModel into a staging folder; then, on the chief, the executor
makes one call, :func:`publish`: reload the staged export and compare its
predictions with the in-memory model's (:func:`parity_check`), write the run
files into ``model_run`` (``metrics.json``, ``history.json``, ``curves.png``,
``parity/``, ``held_out/`` of link prediction in memory,
``model_properties.json``) and rename the export into
``<model uri>/Format-Serving``. Nothing reaches ``Format-Serving`` unless all
of that succeeded; :func:`published_properties` lets a retry that finds a
published model only re-publish.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping, Optional, Sequence

import tensorflow as tf

from gnn_trainer_component import errors
from gnn_trainer_component import outputs
from gnn_trainer_component.model import embeddings as embeddings_lib
from gnn_trainer_component.model import export as export_lib
from gnn_trainer_component.trainer import curves

#: Files written into the ModelRun folder.
METRICS_FILE = "metrics.json"
HISTORY_FILE = "history.json"
# The eval examples of the pre-publish parity check and the in-memory model's
# predictions on them (to re-check serving anywhere later).
PARITY_EXAMPLES_FILE = "parity/examples.tfrecord"
PARITY_PREDICTIONS_FILE = "parity/predictions.json"
PARITY_EMBEDDINGS_FILE = "parity/embeddings.json"
#: Folder in the ModelRun of the held-out pairs of link prediction in memory, a CSV per split.
HELD_OUT_DIR = "held_out"
# The Model's custom properties, written before the export is renamed into
# place, so that a retry after that point only re-publishes.
MODEL_PROPERTIES_FILE = "model_properties.json"
#: Under the Model URI: where runner.run writes the export before publish.
STAGING_DIR = "_staging_Format-Serving"


class ExportError(errors.GnnError, RuntimeError):
  """The exported model does not reproduce the trained one; nothing was published."""


def metric_prefixes(model: tf.keras.Model) -> dict[str, str]:
  """Keras metric-name prefix -> task name, for a model with one output per task.

  Keras names the metrics of a model with several outputs by the output
  layer's name (``classification_logits_loss``, the task's ``name``
  argument), not by the task's key in ``tasks``; this maps one to the other.
  Empty for a model with a single output (Keras adds no prefix).
  """
  if len(model.output_names) < 2 or not isinstance(model.output, Mapping):
    return {}
  return dict(zip(model.output_names, tf.nest.flatten(export_lib.output_names(model.output, None)),
                  strict=False))


def by_task(metrics: Mapping[str, float], prefixes: Mapping[str, str]) -> dict[str, float]:
  """``metrics`` with each output-layer prefix replaced by its task name.

  ``prefixes`` is :func:`metric_prefixes` of the model.
  """
  renamed = {}
  for key, value in metrics.items():
    for prefix in sorted(prefixes, key=len, reverse=True):
      if key.startswith(prefix + "_") or key.startswith("val_" + prefix + "_"):
        start = key.index(prefix)
        key = key[:start] + prefixes[prefix] + key[start + len(prefix):]
        break
    renamed[key] = value
  return renamed


@dataclasses.dataclass(frozen=True)
class TrainedModel:
  """What training hands to :func:`publish`."""
  train_metrics: dict[str, float]  # of the exported epoch
  eval_metrics: dict[str, float]  # its (or the last earlier) validation, no ``val_`` prefix
  history: list[dict[str, float]]  # Keras logs per epoch, resumed epochs included
  steps: int
  epochs: int
  task_names: list[str]
  resumed_from_step: int
  recoveries: int
  output_names: Any  # signature output names, nested like the model output
  training_model: Any  # in-memory tf.keras.Model on training-format examples
  parity_signature: str  # the export signature matching training_model
  exported_epoch: int  # 1-based epoch whose weights were exported (restore_best_weights)
  graph_mode: str = "examples"  # what training read: examples, sampled or full_graph
  embeddings_model: Any = None  # in-memory embeddings model on training-format examples
  # Model properties {"retrieval_splits": "test", "retrieval_mrr": ...} ({}: not run);
  # see in_memory/retrieval.py
  retrieval: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  # custom_config refresh_only: the base model whose weights were exported untrained
  refreshed_from: Optional[str] = None

  @property
  def embeddings_signature(self) -> str:
    """The export signature matching ``embeddings_model``."""
    transformed = self.parity_signature == export_lib.TRANSFORMED_SIGNATURE
    return embeddings_lib.TRANSFORMED_SIGNATURE if transformed else embeddings_lib.SIGNATURE


def parity_check(model: tf.keras.Model, output_names: Any, export_dir: str,
                 serialized_examples: Sequence[bytes], *, atol: float = 1e-4,
                 signature: str = export_lib.SERVING_SIGNATURE, saved_model: Any = None) -> dict:
  """Reloads the export and compares its predictions with the in-memory model's.

  Args:
    model: The in-memory model that was exported as ``signature``.
    output_names: Signature output names, nested like ``model.output``.
    export_dir: The SavedModel directory.
    serialized_examples: Examples to predict on.
    atol: Allowed absolute difference.
    signature: The signature to call.
    saved_model: ``export_dir`` already loaded (else it is loaded here).

  Returns:
    ``{"max_abs_diff": float, "examples": n, "predictions": {output: nested list}}``
    where predictions are the in-memory model's.

  Raises:
    ExportError: if they differ beyond ``atol`` (nothing is then published).
  """
  import numpy as np
  if not serialized_examples:
    return {"max_abs_diff": 0.0, "examples": 0, "predictions": {}}
  batch = tf.constant(list(serialized_examples))
  expected = dict(zip(tf.nest.flatten(output_names),
                      tf.nest.flatten(model(batch, training=False)), strict=False))
  saved_model = saved_model or tf.saved_model.load(export_dir)
  got = saved_model.signatures[signature](examples=batch)
  if sorted(got) != sorted(expected):
    raise ExportError(f"Exported model at {export_dir} has outputs {sorted(got)}, "
                      f"expected {sorted(expected)}; not publishing it.")
  worst = max(float(np.max(np.abs(expected[k].numpy() - got[k].numpy()), initial=0.0))
              for k in expected)
  if worst > atol:
    raise ExportError(
        f"Exported model at {export_dir} disagrees with the trained model on "
        f"{len(serialized_examples)} eval examples in signature {signature!r} "
        f"(max |diff| = {worst:.3g} > {atol}); "
        "not publishing it.")
  return {"max_abs_diff": worst, "examples": len(serialized_examples),
          "predictions": {k: v.numpy().tolist() for k, v in expected.items()}}


def read_examples(files: Sequence[str], compression: Optional[str], n: int) -> list[bytes]:
  """The first ``n`` serialized records of ``files``."""
  if n <= 0:
    return []
  ds = tf.data.TFRecordDataset(list(files), compression_type=compression or "")
  return [r.numpy() for r in ds.take(n)]


def model_properties(trained: TrainedModel, parity: Mapping[str, Any]) -> dict[str, Any]:
  """The Model's custom properties (name -> int, float or str)."""
  props: dict[str, Any] = {}
  for prefix, metrics in (("train", trained.train_metrics), ("eval", trained.eval_metrics)):
    for name, value in sorted(metrics.items()):
      props[f"{prefix}_{name}"] = float(value)
  props.update(
      train_steps=int(trained.steps), resumed_from_step=int(trained.resumed_from_step),
      recoveries=int(trained.recoveries), epochs=int(trained.epochs),
      exported_epoch=int(trained.exported_epoch), graph_mode=trained.graph_mode,
      tasks=",".join(trained.task_names),
      serving_outputs=",".join(sorted(tf.nest.flatten(trained.output_names))),
      parity_max_abs_diff=float(parity["max_abs_diff"]))
  if trained.embeddings_model is not None:
    props["embeddings_outputs"] = ",".join(sorted(trained.embeddings_model.output))
  props.update(trained.retrieval)
  if trained.refreshed_from:
    props["refreshed_from"] = trained.refreshed_from
  return props


def _write_json(path: str, value: Any) -> None:
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(json.dumps(value, indent=2, sort_keys=True))


def _write_run_files(model_run_dir: str, trained: TrainedModel, parity: dict[str, Any],
                     parity_examples: Sequence[bytes], held_out: Mapping[str, str]) -> None:
  """metrics.json, history.json, curves.png, parity/ and held_out/ in the ModelRun folder."""
  parity = dict(parity)
  predictions = parity.pop("predictions")
  embeddings = parity.pop("embeddings", None)
  tf.io.gfile.makedirs(model_run_dir)  # (refresh_only: no training wrote there)
  _write_json(os.path.join(model_run_dir, METRICS_FILE),
              {"train": trained.train_metrics, "eval": trained.eval_metrics,
               "steps": trained.steps, "epochs": trained.epochs,
               "exported_epoch": trained.exported_epoch, "parity": parity,
               **({"retrieval": dict(trained.retrieval)} if trained.retrieval else {})})
  _write_json(os.path.join(model_run_dir, HISTORY_FILE), trained.history)
  curves.write_training_curves(trained.history, os.path.join(model_run_dir, curves.CURVES_FILE),
                               title=f"GnnTrainer: {', '.join(trained.task_names)}")
  tf.io.gfile.makedirs(os.path.join(model_run_dir, "parity"))
  with tf.io.TFRecordWriter(os.path.join(model_run_dir, PARITY_EXAMPLES_FILE)) as w:
    for record in parity_examples:
      w.write(record)
  _write_json(os.path.join(model_run_dir, PARITY_PREDICTIONS_FILE), predictions)
  if embeddings is not None:
    _write_json(os.path.join(model_run_dir, PARITY_EMBEDDINGS_FILE), embeddings)
  for split, table in held_out.items():
    tf.io.gfile.makedirs(os.path.join(model_run_dir, HELD_OUT_DIR))
    with tf.io.gfile.GFile(os.path.join(model_run_dir, HELD_OUT_DIR, f"{split}.csv"), "w") as f:
      f.write(table)


def _rename_into_place(staging: str, final: str) -> None:
  """Moves the staged SavedModel into place (atomic rename where supported)."""
  from tfx.utils import io_utils  # Imported here: nothing else in this module needs TFX.
  if tf.io.gfile.exists(final):
    tf.io.gfile.rmtree(final)
  try:
    tf.io.gfile.rename(staging, final)
  except (tf.errors.UnimplementedError, tf.errors.FailedPreconditionError):
    io_utils.copy_dir(staging, final)
    tf.io.gfile.rmtree(staging)


def publish(trained: TrainedModel, *, staging_dir: str, serving_dir: str, model_run_dir: str,
            parity_examples: Sequence[bytes],
            held_out: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
  """Checks the staged export, writes the run files and renames the export into place.

  Call on the chief only, after ``runner.run`` wrote ``staging_dir``.

  Args:
    trained: From training.
    staging_dir: The staged SavedModel.
    serving_dir: Where it is published (``<model uri>/Format-Serving``).
    model_run_dir: The ModelRun folder.
    parity_examples: Serialized validation examples the reloaded export must
      predict as the trained model does (none: no check).
    held_out: Split -> CSV text of its held-out pairs (``held_out/<split>.csv``).

  Returns:
    The Model's custom properties (also written to ``model_properties.json``).

  Raises:
    ExportError: if the export does not reproduce the trained model.
  """
  outputs.log_phase("parity")
  saved_model = tf.saved_model.load(staging_dir) if parity_examples else None
  parity = parity_check(trained.training_model, trained.output_names, staging_dir,
                        parity_examples, signature=trained.parity_signature,
                        saved_model=saved_model)
  if trained.embeddings_model is not None:
    checked = parity_check(trained.embeddings_model, export_lib.own_names(trained.embeddings_model),
                           staging_dir, parity_examples,
                           signature=trained.embeddings_signature, saved_model=saved_model)
    parity["embeddings_max_abs_diff"] = checked["max_abs_diff"]
    parity["embeddings"] = checked["predictions"]
  del saved_model
  _write_run_files(model_run_dir, trained, parity, parity_examples, held_out or {})
  properties = model_properties(trained, parity)
  _write_json(os.path.join(model_run_dir, MODEL_PROPERTIES_FILE), properties)
  outputs.log_phase("publish")
  _rename_into_place(staging_dir, serving_dir)
  return properties


def published_properties(serving_dir: str, staging_dir: str,
                         model_run_dir: str) -> Optional[dict[str, Any]]:
  """The Model properties if an earlier attempt of this execution published, else None.

  A retry reuses the execution's output URIs (TFX's launcher reuses a RUNNING
  execution; the KFP launcher keeps a task's URIs). Once the staged export
  has been renamed into place, the model is complete and its properties were
  written before the rename: a retry must not train again or read the
  (possibly half-deleted) resume dir.
  """
  path = os.path.join(model_run_dir, MODEL_PROPERTIES_FILE)
  if (tf.io.gfile.exists(staging_dir) or not tf.io.gfile.exists(serving_dir)
      or not tf.io.gfile.exists(path)):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)
