"""Unit tests for GnnTuner's pure parts: tuning_config, the module's search space,
and the search loop (real keras-tuner oracles; the training function is plain
Python here, so no TF-GNN training runs)."""

import glob
import json
import math
import os
import textwrap

import pytest

from gnn_trainer_component.trainer import module_contract
from gnn_trainer_component.tuner import config
from gnn_trainer_component.tuner import search
from tests.helpers import DEMO_MODULE


# --- tuning_config ---------------------------------------------------------

def test_defaults():
  cfg = config.make_tuning_config(None)
  assert (cfg.algorithm, cfg.max_trials, cfg.objective, cfg.direction) == (
      "random", 10, "val_loss", "min")
  assert cfg.metric == "loss" and cfg.seed is None and cfg.default_trial
  assert not config.make_tuning_config({"algorithm": "hyperband"}).default_trial


def test_json_string_and_objective_direction():
  cfg = config.make_tuning_config(json.dumps(
      {"algorithm": "bayesian", "max_trials": 4, "seed": 3,
       "objective": "max:val_sparse_categorical_accuracy", "bayesian_initial_points": 2}))
  assert cfg.objective == "val_sparse_categorical_accuracy" and cfg.direction == "max"
  assert cfg.metric == "sparse_categorical_accuracy"
  assert (cfg.max_trials, cfg.seed, cfg.bayesian_initial_points) == (4, 3, 2)


@pytest.mark.parametrize("raw, match", [
    ({"algoritm": "random"}, r"unknown keys \['algoritm'\]"),
    ({"algorithm": "grid"}, "algorithm'] must be one of random, bayesian, hyperband"),
    ({"max_trials": 0}, r"max_trials'] must be an int >= 1"),
    ({"max_trials": True}, r"max_trials'] must be an int >= 1"),
    ({"objective": "accuracy"}, "must be a validation metric"),
    ({"objective": "val_accuracy"}, "say whether higher or lower is better"),
    ({"seed": 1.5}, r"seed'] must be an int or null"),
    ({"algorithm": "hyperband", "max_trials": 3}, "does not apply to algorithm 'hyperband'"),
    ({"hyperband_factor": 3}, "only applies with algorithm 'hyperband'"),
    ({"algorithm": "hyperband", "hyperband_factor": 1}, "an int >= 2"),
    ({"bayesian_initial_points": 2}, "only applies with algorithm 'bayesian'"),
    ({"default_trial": "yes"}, r"default_trial'] must be a bool"),
    ({"algorithm": "hyperband", "default_trial": True}, "does not apply to algorithm 'hyperband'"),
    ("[1, 2]", "must be a JSON object"),
    ("{", "not valid JSON"),
])
def test_bad_tuning_config_names_the_key(raw, match):
  with pytest.raises(config.TuningConfigError, match=match):
    config.make_tuning_config(raw)


# --- the search space in the module file -------------------------------------

def _module(tmp_path, body):
  path = tmp_path / "space_module.py"
  path.write_text(textwrap.dedent(body))
  return module_contract.load_module(str(path), None)


def test_demo_module_space():
  space = module_contract.search_space(*module_contract.load_module(DEMO_MODULE, None))
  assert [p.name for p in space.space] == ["learning_rate", "units", "dropout"]


@pytest.mark.parametrize("body, match", [
    ("HPARAMS = {'lr': 1}\n", r"does not define hyperparameter_space\(hp\)"),
    ("def hyperparameter_space():\n  pass\n", "function of one argument `hp`"),
    ("def hyperparameter_space(hp):\n  pass\n", "declared no hyperparameter"),
    ("def hyperparameter_space(hp):\n  raise KeyError('x')\n", "raised KeyError"),
    ("HPARAMS = {'lr': 1}\ndef hyperparameter_space(hp):\n  hp.Choice('lrate', [1, 2])\n",
     r"declares \['lrate'\], which are not in its HPARAMS \['lr'\]"),
    ("def hyperparameter_space(hp):\n  hp.Int('tuner/epochs', 1, 3)\n", "keras-tuner's own"),
])
def test_bad_space_says_what_to_write(tmp_path, body, match):
  with pytest.raises(module_contract.ModuleContractError, match=match) as e:
    module_contract.search_space(*_module(tmp_path, body))
  assert "hyperparameter_space(hp):" in str(e.value)  # the example


# --- the search loop (keras-tuner's oracles, plain-Python trials) --------------

def _space():
  import keras_tuner  # pylint: disable=g-import-not-at-top
  hp = keras_tuner.HyperParameters()
  hp.Choice("lr", [0.001, 0.01, 0.1, 10.0])
  hp.Int("units", 8, 64, step=8)
  return hp


def _score(values):
  """A known landscape: best near lr 0.01, more units a little better; lr 10 diverges."""
  if values["lr"] >= 10:
    raise FloatingPointError("loss is NaN at step 3")
  return 0.9 - abs(math.log10(values["lr"]) + 2) * 0.2 + values["units"] / 1000


class _Trainer:
  def __init__(self):
    self.calls = []

  def __call__(self, trial):
    self.calls.append(trial)
    acc = _score(trial.values)
    return search.TrialOutcome(eval_metrics={"accuracy": acc, "loss": 1 - acc},
                               train_metrics={"loss": 0.5}, steps=10, epochs=trial.epochs or 2)


ACC = config.make_tuning_config({"objective": "max:val_accuracy", "max_trials": 8, "seed": 2})


@pytest.mark.parametrize("algorithm", ["random", "bayesian"])
def test_search_finds_best_and_records_every_trial(tmp_path, algorithm):
  cfg = config.make_tuning_config({"algorithm": algorithm, "objective": "max:val_accuracy",
                                   "max_trials": 8, "seed": 2})
  trainer = _Trainer()
  result = search.run_search(cfg, _space(), str(tmp_path), trainer, default_epochs=2)
  assert len(trainer.calls) == 8 and len(result.rows) == 8
  completed = [r for r in result.rows if r["status"] == "COMPLETED"]
  scores = [r["score"] for r in completed]
  assert scores == sorted(scores, reverse=True)  # best first
  assert result.best_score == max(_score(c.values) for c in trainer.calls
                                  if c.values["lr"] < 10)
  best_values = result.best_hyperparameters["values"]
  assert _score(best_values) == pytest.approx(result.best_score)
  assert {p["config"]["name"] for p in result.best_hyperparameters["space"]} == {"lr", "units"}
  for row in result.rows:
    assert row["steps"] == 10 or row["status"] == "FAILED"
    assert row["val_accuracy"] == row["score"]
    assert row["wall_seconds"] is not None


def test_failed_trial_is_recorded_and_search_goes_on(tmp_path):
  trainer = _Trainer()
  import keras_tuner  # pylint: disable=g-import-not-at-top
  hp = keras_tuner.HyperParameters()
  hp.Choice("lr", [10.0, 0.01])
  hp.Int("units", 8, 64, step=8)
  cfg = config.make_tuning_config({"objective": "max:val_accuracy", "max_trials": 6, "seed": 0})
  result = search.run_search(cfg, hp, str(tmp_path), trainer, default_epochs=2)
  failed = [r for r in result.rows if r["status"] == "FAILED"]
  assert failed and len(result.rows) == 6
  assert all("FloatingPointError: loss is NaN" in r["error"] for r in failed)
  assert result.rows[-1]["status"] == "FAILED" and result.rows[0]["status"] == "COMPLETED"
  assert result.best_hyperparameters["values"]["lr"] == 0.01
  csv_text = search.results_csv(result.rows)
  assert csv_text.splitlines()[0].startswith("trial_id,status,score,val_accuracy,lr,units")
  assert "FloatingPointError" in csv_text


def test_all_trials_failing_is_a_clear_error(tmp_path):
  import keras_tuner  # pylint: disable=g-import-not-at-top
  hp = keras_tuner.HyperParameters()
  hp.Float("lr", 10.0, 20.0)
  hp.Fixed("units", 8)
  cfg = config.make_tuning_config({"objective": "max:val_accuracy", "max_trials": 3})
  with pytest.raises(search.TunerError, match="none of the 3 trials completed") as e:
    search.run_search(cfg, hp, str(tmp_path), _Trainer(), default_epochs=2)
  assert "FloatingPointError: loss is NaN" in str(e.value)


def test_objective_the_model_does_not_log_stops_the_search(tmp_path):
  cfg = config.make_tuning_config({"objective": "max:val_auc", "max_trials": 5, "seed": 0})
  trainer = _Trainer()
  with pytest.raises(search.TunerError, match=r"'val_auc' is not a validation metric.*"
                     r"\['val_accuracy', 'val_loss'\]"):
    # Trial 0 completes (a fixed, converging configuration): the first completed
    # trial already shows the objective is not logged, so the search stops there.
    search.run_search(cfg, _space(), str(tmp_path), trainer, default_epochs=2,
                      first_values={"lr": 0.01, "units": 16})
  assert len(trainer.calls) == 1


def test_resumed_search_does_not_rerun_ended_trials(tmp_path):
  first = _Trainer()

  class Killed(BaseException):  # like SIGKILL: nothing in the search catches it
    pass

  def dies_in_trial_3(trial):
    if len(first.calls) == 3:
      raise Killed()
    return first(trial)

  with pytest.raises(Killed):
    search.run_search(ACC, _space(), str(tmp_path), dies_in_trial_3, default_epochs=2)
  done = {c.trial_id: dict(c.values) for c in first.calls}
  assert len(done) == 3
  second = _Trainer()
  result = search.run_search(ACC, _space(), str(tmp_path), second, default_epochs=2)
  rerun = [c.trial_id for c in second.calls]
  assert not set(rerun) & set(done), rerun
  assert rerun[0] == "3"  # the trial that was running is retried first, same id
  assert len(result.rows) == 8 and len(second.calls) == 5
  for row in result.rows:
    if row["trial_id"] in done:
      assert {k: row[k] for k in ("lr", "units")} == done[row["trial_id"]]


def test_hyperband_gives_each_trial_its_epochs(tmp_path):
  cfg = config.make_tuning_config({"algorithm": "hyperband", "objective": "max:val_accuracy",
                                   "hyperband_max_epochs": 4, "hyperband_factor": 2, "seed": 1})
  trainer = _Trainer()
  result = search.run_search(cfg, _space(), str(tmp_path), trainer, default_epochs=9)
  epochs = {c.epochs for c in trainer.calls}
  assert epochs <= {1, 2, 4} and max(epochs) == 4 and len(epochs) > 1
  assert all(not k.startswith("tuner/") for c in trainer.calls for k in c.values)
  assert result.best_score > 0


def test_default_trial_trains_the_untuned_configuration_first(tmp_path):
  first = search.default_values(_space(), {"lr": 0.1, "units": 16, "other": 3})
  assert first == {"lr": 0.1, "units": 16}
  trainer = _Trainer()
  result = search.run_search(ACC, _space(), str(tmp_path), trainer, default_epochs=2,
                             first_values=first)
  assert dict(trainer.calls[0].values) == first
  assert all(dict(c.values) != first for c in trainer.calls[1:])  # not drawn again
  defaults = [r for r in result.rows if r["default_trial"]]
  assert [r["trial_id"] for r in defaults] == ["0"]
  assert result.best_score >= defaults[0]["score"]


def test_default_values_must_be_in_the_space():
  import keras_tuner  # pylint: disable=g-import-not-at-top
  hp = keras_tuner.HyperParameters()
  hp.Choice("lr", [0.01, 0.1])
  hp.Int("units", 8, 64)
  hp.Boolean("norm")
  assert search.default_values(hp, {}) == {"lr": 0.01, "units": 8, "norm": False}
  for hparams, match in [({"lr": 0.5}, r"'lr' = 0.5 .* allows one of \[0.01, 0.1\]"),
                         ({"units": 128}, r"'units' = 128 .* allows in \[8, 64\]"),
                         ({"norm": 1}, "'norm' = 1 .* allows a bool")]:
    with pytest.raises(config.TuningConfigError, match=match + ".*default_trial'] to false"):
      search.default_values(hp, hparams)


def test_the_search_state_is_written_whole(tmp_path, monkeypatch):
  """keras-tuner writes its state in place (a kill mid-write left a truncated tuner JSON that
  the resumed search could not parse): every state file of this search goes through a temp
  file and a rename instead, and parses."""
  from keras_tuner.src import utils as kt_utils
  in_place = []
  original = kt_utils.save_json

  def save_json(path, obj):  # keras-tuner's in-place writer, watched
    in_place.append(path)
    return original(path, obj)
  monkeypatch.setattr(kt_utils, "save_json", save_json)
  search.run_search(ACC, _space(), str(tmp_path), _Trainer(), default_epochs=2)
  assert in_place == []
  states = glob.glob(str(tmp_path / "**" / "*.json"), recursive=True)
  assert any(p.endswith("oracle.json") for p in states)
  assert sum(p.endswith(os.sep + "trial.json") for p in states) == 8
  for path in states:
    with open(path) as f:
      json.load(f)
  assert not glob.glob(str(tmp_path / "**" / "*.tmp"), recursive=True)
