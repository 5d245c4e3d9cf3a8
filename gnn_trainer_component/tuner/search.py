"""keras-tuner's search algorithms around a training function; the results table.

keras-tuner 1.4 checks models against Keras 3 and rejects tf_keras ones
(keras-team/keras-tuner#1039), and TF-GNN needs tf_keras. So the tuners here
are keras-tuner's own (``RandomSearch``, ``BayesianOptimization``,
``Hyperband``: their oracles, state files and resume) with ``hypermodel=None``
and ``run_trial`` overridden to call a training function; keras-tuner never
sees a model. The training function is GnnTrainer's training path (see
``tuner/executor.py``); here it is any ``Trial -> metrics`` callable, so the
loop is testable without TF-GNN.

State lives in ``<directory>/search`` (keras-tuner's ``oracle.json`` and
``trial_<id>/trial.json``, plus our ``trial_<id>/gnn_trial.json``): a search
started again on the same directory skips the trials that ended and retries
the one that was running.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import time
from typing import Any, Callable, Mapping, Optional

from absl import logging

from gnn_trainer_component import errors
from gnn_trainer_component.tuner import config as config_lib

# keras-tuner and TensorFlow are imported by the functions that use them: importing this module
# loads neither.

PROJECT = "search"
TRIAL_RECORD = "gnn_trial.json"
RESULTS_JSON = "tuner_results.json"
RESULTS_CSV = "tuner_results.csv"
BEST_HPARAMS_FILE = "best_hyperparameters.txt"  # the stock Tuner's name


class TunerError(errors.GnnError, RuntimeError):
  """The search could not produce a best trial (e.g. every trial failed)."""


@dataclasses.dataclass(frozen=True)
class Trial:
  """What a training function gets for one trial.

  Attributes:
    trial_id: keras-tuner's id ("00", "01", ...).
    values: The trial's hyperparameter values (keras-tuner's ``tuner/*``
      bookkeeping removed).
    epochs: Epochs to train (Hyperband's budget for this trial), or None: the
      trainer config's.
    directory: The trial's own folder (stable across retries of the search).
  """
  trial_id: str
  values: Mapping[str, Any]
  epochs: Optional[int]
  directory: str


@dataclasses.dataclass(frozen=True)
class TrialOutcome:
  """What a training function returns: the metrics of the trained model."""
  eval_metrics: Mapping[str, float]
  train_metrics: Mapping[str, float] = dataclasses.field(default_factory=dict)
  steps: int = 0
  epochs: int = 0


TrainFn = Callable[[Trial], TrialOutcome]


@dataclasses.dataclass(frozen=True)
class SearchResult:
  """The finished search.

  Attributes:
    best_hyperparameters: keras-tuner's ``{"space": [...], "values": {...}}``
      of the best trial (what the stock Tuner writes).
    best_trial_id: Its id.
    best_score: Its objective value.
    rows: One dict per trial (best completed first, then the others by id).
  """
  best_hyperparameters: dict
  best_trial_id: str
  best_score: float
  rows: list


def _tuner_class(algorithm: str):
  import keras_tuner
  base = {"random": keras_tuner.RandomSearch,
          "bayesian": keras_tuner.BayesianOptimization,
          "hyperband": keras_tuner.Hyperband}[algorithm]

  class GnnSearch(base):
    """A keras-tuner tuner whose trials call ``run_fn`` (no hypermodel)."""

    def __init__(self, run_fn, **kwargs):
      self._run_fn = run_fn
      super().__init__(hypermodel=None, **kwargs)
      # keras-tuner writes its state files in place: a kill mid-write leaves a truncated
      # JSON that the resumed search cannot read. This tuner's oracle writes them whole.
      oracle = self.oracle
      oracle.save = lambda: _write_json(oracle._get_oracle_fname(), oracle.get_state())
      oracle._save_trial = lambda trial: _write_json(
          os.path.join(oracle._get_trial_dir(trial.trial_id), "trial.json"), trial.get_state())

    def save(self):
      if not self._is_worker():
        self.oracle.save()
      _write_json(self._get_tuner_fname(), self.get_state())

    def run_trial(self, trial, *args, **kwargs):
      del args, kwargs
      return self._run_fn(self, trial)

  return GnnSearch


def _tuner_kwargs(cfg: config_lib.TuningConfig, space, default_epochs: int) -> dict:
  import keras_tuner
  kwargs: dict[str, Any] = dict(
      objective=keras_tuner.Objective(cfg.objective, cfg.direction),
      hyperparameters=space, tune_new_entries=False, allow_new_entries=False,
      seed=cfg.seed, max_retries_per_trial=0)
  if cfg.algorithm == "hyperband":
    kwargs.update(max_epochs=cfg.hyperband_max_epochs or default_epochs,
                  factor=cfg.hyperband_factor, hyperband_iterations=1)
    # No limit from failures: a failed trial is recorded and the search goes on.
    kwargs["max_consecutive_failed_trials"] = 10**6
  else:
    kwargs.update(max_trials=cfg.max_trials, max_consecutive_failed_trials=cfg.max_trials + 1)
    if cfg.algorithm == "bayesian" and cfg.bayesian_initial_points:
      kwargs["num_initial_points"] = cfg.bayesian_initial_points
  return kwargs


def _write_json(path: str, data: Any) -> None:
  """Writes ``data`` as JSON to ``path`` whole or not at all (a temp file, renamed)."""
  import tensorflow as tf
  tmp = path + ".tmp"
  with tf.io.gfile.GFile(tmp, "w") as f:
    f.write(json.dumps(data, indent=1, sort_keys=True))
  tf.io.gfile.rename(tmp, path, overwrite=True)


def _read_json(path: str) -> Optional[Any]:
  import tensorflow as tf
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.loads(f.read())


def _finite(value: Any) -> Any:
  return value if not isinstance(value, float) or math.isfinite(value) else str(value)


def default_values(space, hparams: Mapping[str, Any]) -> dict[str, Any]:
  """The values of the space's names in ``hparams`` (else the space's own defaults).

  Raises:
    config_lib.TuningConfigError: if one is not a value of its hyperparameter.
  """
  values = {}
  for p in space.space:
    value = hparams.get(p.name, p.default)
    kind = type(p).__name__  # keras-tuner's hyperparameter classes
    if kind == "Choice":
      ok = value in p.values
      allowed = f"one of {list(p.values)}"
    elif kind in ("Int", "Float"):
      ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
            and p.min_value <= value <= p.max_value)
      allowed = f"in [{p.min_value}, {p.max_value}]"
    elif kind == "Boolean":
      ok, allowed = isinstance(value, bool), "a bool"
    else:  # Fixed
      ok, allowed = value == p.default, repr(p.default)
    if not ok:
      raise config_lib.TuningConfigError(
          f"GnnTuner default trial: {p.name!r} = {value!r} (the value GnnTrainer would "
          f"train with) is not in hyperparameter_space, which allows {allowed}. Add it to "
          "the space, or set tuning_config['default_trial'] to false.")
    values[p.name] = value
  return values


def _trial_runner(cfg: config_lib.TuningConfig, train_fn: TrainFn,
                  objective_errors: list[str]) -> Callable[[Any, Any], dict]:
  """keras-tuner's ``run_trial`` for GnnTuner: trains with ``train_fn``, records the trial.

  A failed trial is recorded and raised as keras-tuner's ``FailedTrialError``;
  an objective the model does not log is appended to ``objective_errors`` and
  ends the search (``FatalValueError``).
  """
  import keras_tuner

  def run(tuner, kt_trial) -> dict:
    values = {k: v for k, v in kt_trial.hyperparameters.values.items()
              if not k.startswith("tuner/")}
    epochs = kt_trial.hyperparameters.values.get("tuner/epochs")
    trial_dir = tuner.get_trial_dir(kt_trial.trial_id)
    record_path = os.path.join(trial_dir, TRIAL_RECORD)
    logging.info("GnnTuner: trial %s: %s%s", kt_trial.trial_id, values,
                 f", {epochs} epochs" if epochs else "")
    start = time.monotonic()
    record = {"trial_id": kt_trial.trial_id, "values": values, "epochs_budget": epochs}
    try:
      outcome = train_fn(Trial(trial_id=kt_trial.trial_id, values=values,
                               epochs=int(epochs) if epochs else None, directory=trial_dir))
    except Exception as e:  # Any failure of a trial is recorded; the search goes on.
      record.update(status="FAILED", error=f"{type(e).__name__}: {e}",
                    wall_seconds=round(time.monotonic() - start, 2))
      _write_json(record_path, record)
      logging.warning("GnnTuner: trial %s failed: %s", kt_trial.trial_id, record["error"])
      raise keras_tuner.errors.FailedTrialError(record["error"]) from e
    metrics = {f"val_{k}": float(v) for k, v in outcome.eval_metrics.items()}
    record.update(status="COMPLETED", eval_metrics=dict(metrics),
                  train_metrics={k: float(v) for k, v in outcome.train_metrics.items()},
                  steps=outcome.steps, epochs=outcome.epochs,
                  wall_seconds=round(time.monotonic() - start, 2))
    _write_json(record_path, {k: _finite(v) for k, v in record.items()})
    if cfg.objective not in metrics:
      objective_errors.append(
          f"GnnTuner tuning_config['objective']={cfg.objective!r} is not a validation metric "
          f"of this model; it logs {sorted(metrics)}. Set the objective to one of them "
          "(with 'max:' or 'min:').")
      raise keras_tuner.errors.FatalValueError(objective_errors[-1])
    logging.info("GnnTuner: trial %s: %s = %s", kt_trial.trial_id, cfg.objective,
                 metrics[cfg.objective])
    return metrics
  return run


def run_search(cfg: config_lib.TuningConfig, space, directory: str, train_fn: TrainFn,
               default_epochs: int,
               first_values: Optional[Mapping[str, Any]] = None) -> SearchResult:
  """Runs (or resumes) the search; every trial calls ``train_fn``.

  A trial whose ``train_fn`` raises is recorded as failed (with the error) and
  the search goes on.

  Args:
    cfg: The search settings.
    space: A ``keras_tuner.HyperParameters`` with the search space.
    directory: Where the search state lives (reused: resume).
    train_fn: Trains one trial.
    default_epochs: The trainer config's epochs (Hyperband's default budget).
    first_values: With ``cfg.default_trial``: trial 0's values (see
      :func:`default_values`); then the algorithm picks the others.

  Returns:
    The best trial and the results table.

  Raises:
    TunerError: if no trial completed, or the objective is not a metric the
      model logs.
  """
  import keras_tuner
  objective_errors: list[str] = []
  run = _trial_runner(cfg, train_fn, objective_errors)
  tuner = _tuner_class(cfg.algorithm)(
      run, directory=directory, project_name=PROJECT, overwrite=False,
      **_tuner_kwargs(cfg, space, default_epochs))
  if cfg.default_trial and first_values is not None and not tuner.oracle.trials:
    _first_trial_values(tuner.oracle, dict(first_values))
  ended = [t for t in tuner.oracle.trials.values()
           if t.status in ("COMPLETED", "FAILED", "INVALID")]
  if ended:
    logging.info("GnnTuner: resuming the search in %s: %d trials ended before (%s), "
                 "not run again.", directory, len(ended),
                 ", ".join(sorted(t.trial_id for t in ended)))
  try:
    tuner.search(verbose=0)
  except keras_tuner.errors.FatalError as e:
    raise TunerError(objective_errors[-1] if objective_errors else str(e)) from e
  rows = results_rows(tuner, cfg)
  completed = [t for t in tuner.oracle.trials.values()
               if t.status == "COMPLETED" and t.score is not None and math.isfinite(t.score)]
  if not completed:
    failures = [f"trial {r['trial_id']}: {r.get('error') or r['status']}" for r in rows]
    raise TunerError(
        f"GnnTuner: none of the {len(rows)} trials completed, so there is no best "
        f"hyperparameter set and nothing was published. Failures:\n  "
        + "\n  ".join(failures[:5]))
  best = tuner.oracle.get_best_trials(1)[0]
  return SearchResult(best_hyperparameters=best.hyperparameters.get_config(),
                      best_trial_id=best.trial_id, best_score=float(best.score), rows=rows)


def _first_trial_values(oracle, values: dict) -> None:
  """Makes the oracle's first trial use ``values``; the algorithm picks the others.

  keras-tuner records them like its own choice (no duplicate later; a
  Gaussian process also learns from them).
  """
  populate_space = oracle.populate_space

  def first_then_search(trial_id):
    if not oracle.trials:
      logging.info("GnnTuner: trial %s trains the default configuration %s", trial_id, values)
      return {"status": "RUNNING", "values": dict(values)}
    return populate_space(trial_id)

  oracle.populate_space = first_then_search


def results_rows(tuner, cfg: config_lib.TuningConfig) -> list[dict]:
  """One row per trial: id, status, objective, values, steps, epochs, wall time, default?, error.

  Completed trials come first, best first (as the stock Tuner's
  ``tuner_results.json``), then the others by id.
  """
  rows = []
  starts = tuner.oracle.start_order
  first = starts[0] if cfg.default_trial and starts else None
  for trial_id, kt_trial in sorted(tuner.oracle.trials.items()):
    record = _read_json(os.path.join(tuner.get_trial_dir(trial_id), TRIAL_RECORD)) or {}
    score = kt_trial.score if kt_trial.status == "COMPLETED" else None
    rows.append({
        "trial_id": trial_id, "status": kt_trial.status,
        "score": _finite(float(score)) if score is not None else None,
        cfg.objective: _finite(float(score)) if score is not None else None,
        **kt_trial.hyperparameters.values,
        "steps": record.get("steps"), "epochs": record.get("epochs"),
        "wall_seconds": record.get("wall_seconds"),
        "default_trial": trial_id == first,
        "error": record.get("error"),
    })
  sign = -1 if cfg.direction == "max" else 1
  done = sorted((r for r in rows if isinstance(r["score"], float)),
                key=lambda r: sign * r["score"])
  return done + [r for r in rows if not isinstance(r["score"], float)]


def results_csv(rows: list[dict]) -> str:
  """The results table as CSV (columns: every key of every row, first seen first)."""
  columns: list[str] = []
  for row in rows:
    columns += [k for k in row if k not in columns]
  out = io.StringIO()
  writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
  writer.writeheader()
  for row in rows:
    writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
  return out.getvalue()
