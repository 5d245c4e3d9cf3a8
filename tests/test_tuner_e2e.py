"""GnnTuner end to end: a LocalDagRunner pipeline (Tuner -> HyperParameters ->
GnnTrainer -> Model in ML Metadata), a failing trial, and a SIGKILLed search
retried under the same run."""

import glob
import json
import os
import time

import pytest

from devtools import soak
from pipelines.runtime import mlmd_utils
from tests.helpers import DEMO_MODULE, demo_examples_artifact, execution_inputs, producer

pytestmark = [pytest.mark.slow]

ACCURACY = "val_sparse_categorical_accuracy"
CONFIG = {"global_batch_size": 16, "epochs": 2, "summarize_every_n_steps": 5, "seed": 1,
          "deterministic": True}  # the trainer then retrains the best trial exactly
TUNING = {"max_trials": 3, "seed": 0, "objective": f"max:{ACCURACY}"}


@pytest.fixture(scope="module")
def tuned_pipeline(tmp_path_factory, demo_data):
  """The demo pipeline (no statistics/Transform) with GnnTuner feeding GnnTrainer."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from pipelines.demo import pipeline as demo_pipeline  # pylint: disable=g-import-not-at-top
  root = str(tmp_path_factory.mktemp("tuned"))
  metadata = os.path.join(root, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(demo_pipeline.create_pipeline(
      pipeline_name="gnn-tuned", pipeline_root=os.path.join(root, "pipeline_root"),
      examples_dir=demo_data["examples"], graph_schema_dir=demo_data["graph_schema"],
      metadata=metadata, train_steps=20, custom_config=CONFIG, with_statistics=False,
      transform_module_file=None, tuning_config=TUNING))
  return {"root": root, "metadata": metadata}


@pytest.mark.compat
def test_lineage_tuner_hyperparameters_trainer_model(tuned_pipeline):
  store = mlmd_utils.store(tuned_pipeline["metadata"])
  [hparams] = store.get_artifacts_by_type("HyperParameters")
  [results] = store.get_artifacts_by_type("TunerResults")
  [model] = store.get_artifacts_by_type("Model")
  tuner_exec, tuner_type = producer(store, hparams.id)
  assert tuner_type.endswith("GnnTuner")
  assert producer(store, results.id)[0].id == tuner_exec.id
  trainer_exec, trainer_type = producer(store, model.id)
  assert trainer_type.endswith("GnnTrainer")
  trainer_inputs = execution_inputs(store, trainer_exec.id)
  assert trainer_inputs["HyperParameters"].id == hparams.id
  # The tuner read the same Examples and graph schema as the trainer.
  tuner_inputs = execution_inputs(store, tuner_exec.id)
  assert tuner_inputs["Examples"].id == trainer_inputs["Examples"].id
  assert (tuner_inputs["gnn_trainer_component.GraphSchema"].id ==
          trainer_inputs["gnn_trainer_component.GraphSchema"].id)
  props = mlmd_utils.custom_properties(hparams)
  assert props["trials_completed"] == 3 and props["trials_failed"] == 0
  assert props["objective"] == f"max:{ACCURACY}"
  assert mlmd_utils.custom_properties(results)["best_trial_id"] == props["best_trial_id"]


@pytest.mark.compat
def test_best_hyperparameters_in_the_stock_tuner_format(tuned_pipeline):
  import keras_tuner  # pylint: disable=g-import-not-at-top
  store = mlmd_utils.store(tuned_pipeline["metadata"])
  [hparams] = store.get_artifacts_by_type("HyperParameters")
  [results] = store.get_artifacts_by_type("TunerResults")
  assert os.listdir(hparams.uri) == ["best_hyperparameters.txt"]
  config = json.load(open(os.path.join(hparams.uri, "best_hyperparameters.txt")))
  assert set(config) == {"space", "values"}
  hp = keras_tuner.HyperParameters.from_config(config)  # what the stock Trainer gets
  assert set(hp.values) == {"learning_rate", "units", "dropout"}
  rows = json.load(open(os.path.join(results.uri, "tuner_results.json")))
  assert len(rows) == 3 and all(r["status"] == "COMPLETED" for r in rows)
  assert rows[0]["score"] == max(r["score"] for r in rows)
  assert {k: rows[0][k] for k in hp.values} == hp.values
  for row in rows:
    assert row["steps"] == 20 and row["epochs"] == 2 and row["wall_seconds"] > 0
  csv_lines = open(os.path.join(results.uri, "tuner_results.csv")).read().splitlines()
  assert len(csv_lines) == 4 and csv_lines[0].startswith(f"trial_id,status,score,{ACCURACY}")
  # Each trial's TensorBoard logs, side by side.
  trials = sorted(os.listdir(os.path.join(results.uri, "trials")))
  assert trials == sorted(f"trial_{r['trial_id']}" for r in rows)
  assert glob.glob(os.path.join(results.uri, "trials", trials[0], "**", "events.out.*"),
                   recursive=True)
  # The search state is gone once published.
  assert not glob.glob(os.path.join(tuned_pipeline["root"], "pipeline_root", "GnnTuner",
                                    ".resume", "*"))


@pytest.mark.compat
def test_trainer_reproduces_the_best_trial(tuned_pipeline):
  """GnnTrainer fed best_hyperparameters (same config and seed) matches the best trial."""
  store = mlmd_utils.store(tuned_pipeline["metadata"])
  [hparams] = store.get_artifacts_by_type("HyperParameters")
  [model] = store.get_artifacts_by_type("Model")
  best = mlmd_utils.custom_properties(hparams)[f"best_{ACCURACY}"]
  trained = mlmd_utils.custom_properties(model)["eval_sparse_categorical_accuracy"]
  assert trained == pytest.approx(best, abs=0.01)


POISONABLE_MODULE = """
import importlib.util
import tensorflow as tf
from tensorflow_gnn import runner
_spec = importlib.util.spec_from_file_location("demo", {demo!r})
demo = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(demo)
model_fn, optimizer_fn = demo.model_fn, demo.optimizer_fn
HPARAMS = dict(demo.HPARAMS, poison=False)

def hyperparameter_space(hp):
  hp.Choice("learning_rate", [1e-2, 5e-3, 1e-3])
  hp.Boolean("poison")  # True: every loss is NaN (IEEE arithmetic, as a diverged run)

class MaybePoisoned(runner.RootNodeMulticlassClassification):
  def __init__(self, poison, **kwargs):
    super().__init__(**kwargs)
    self._poison = poison
  def losses(self):
    base = super().losses()
    factor = float("nan") if self._poison else 1.0
    return lambda y_true, y_pred: base(y_true, y_pred) * factor

def task(hparams):
  return MaybePoisoned(hparams["poison"], node_set_name="paper", num_classes=3,
                       label_fn=runner.RootNodeLabelFn("paper", feature_name="label"))
"""


def test_failing_trials_are_recorded_and_the_search_goes_on(tmp_path, demo_data):
  from tfx.types import artifact_utils, standard_artifacts  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component import GraphSchema  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.tuner.executor import Executor  # pylint: disable=g-import-not-at-top
  module = tmp_path / "poisonable.py"
  module.write_text(POISONABLE_MODULE.format(demo=DEMO_MODULE))
  examples = standard_artifacts.Examples()
  examples.uri = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
  schema = GraphSchema()
  schema.uri = demo_data["graph_schema"]
  best, results = standard_artifacts.HyperParameters(), standard_artifacts.TunerResults()
  best.uri, results.uri = str(tmp_path / "best"), str(tmp_path / "results")
  Executor().Do({"examples": [examples], "graph_schema": [schema]},
                {"best_hyperparameters": [best], "tuner_results": [results]}, {
                    "module_file": str(module),
                    "train_args": json.dumps({"splits": ["train"], "num_steps": 10}),
                    "eval_args": json.dumps({"splits": ["eval"], "num_steps": 0}),
                    "custom_config": json.dumps({"global_batch_size": 16, "epochs": 1,
                                                 "summarize_every_n_steps": "never",
                                                 "seed": 1}),
                    "tuning_config": json.dumps({"max_trials": 5, "seed": 3,
                                                 "objective": f"max:{ACCURACY}"}),
                })
  rows = json.load(open(os.path.join(results.uri, "tuner_results.json")))
  assert len(rows) == 5
  poisoned = [r for r in rows if r["poison"]]
  clean = [r for r in rows if not r["poison"]]
  assert poisoned and clean, rows  # the seed gives both kinds
  for row in poisoned:
    assert row["status"] == "FAILED" and row["score"] is None
    assert "TrainingError" in row["error"] and "nan" in row["error"].lower()
  assert all(r["status"] == "COMPLETED" for r in clean)
  assert rows[:len(clean)] == sorted(clean, key=lambda r: -r["score"])  # completed first
  values = json.load(open(os.path.join(best.uri, "best_hyperparameters.txt")))["values"]
  assert values["poison"] is False
  props = mlmd_utils.custom_properties(best.mlmd_artifact)
  assert props["trials_failed"] == len(poisoned) and props["trials_completed"] == len(clean)


def _ended_in_keras_tuner(search_glob: str) -> int:
  """Trials keras-tuner's saved state holds as ended (what a reloaded oracle skips)."""
  ended = 0
  for oracle_path in glob.glob(os.path.join(search_glob, "oracle.json")):
    try:
      ongoing = set(json.load(open(oracle_path)).get("ongoing_trials", {}).values())
      trials = [json.load(open(p)) for p in glob.glob(
          os.path.join(os.path.dirname(oracle_path), "trial_*", "trial.json"))]
    except (OSError, ValueError):  # a file being written
      continue
    ended += sum(t["status"] == "COMPLETED" and t["trial_id"] not in ongoing for t in trials)
  return ended


@pytest.mark.reliability
def test_killed_search_resumes_without_rerunning_finished_trials(tmp_path, demo_data):
  root, run_id = str(tmp_path), "tuner-run"
  kwargs = dict(pipeline_name="gnn-tuner-resume", train_steps=20, config=CONFIG,
                tuning_config=dict(TUNING, max_trials=4))
  records = os.path.join(root, "pipeline_root", "GnnTuner", ".resume", "*", "search",
                         "trial_*", "gnn_trial.json")
  log1 = os.path.join(root, "attempt1.log")
  proc = soak.start_child(root, demo_data, run_id, log1, **kwargs)
  deadline = time.time() + 900
  # Kill once keras-tuner saved two ended trials (our record is written just before
  # keras-tuner saves the trial and its oracle: a kill in between re-runs that trial).
  while _ended_in_keras_tuner(os.path.dirname(os.path.dirname(records))) < 2:
    assert proc.poll() is None, "finished before 2 trials ended:\n" + open(log1).read()[-3000:]
    assert time.time() < deadline, "timed out waiting for 2 trials"
    time.sleep(0.05)
  soak.kill_group(proc)
  finished = {json.load(open(p))["trial_id"]: json.load(open(p)) for p in glob.glob(records)}
  assert len(finished) == 2 and all(r["status"] == "COMPLETED" for r in finished.values())
  store = mlmd_utils.store(soak.metadata_path(root))
  assert not store.get_artifacts_by_type("HyperParameters")  # nothing published yet

  log2 = os.path.join(root, "attempt2.log")
  retry = soak.start_child(root, demo_data, run_id, log2, **kwargs)
  assert retry.wait(timeout=900) == 0, open(log2).read()[-5000:]
  log = open(log2).read()
  assert "GnnTuner: resuming the search" in log and "2 trials ended before" in log
  for trial_id in finished:  # not trained again ...
    assert f"GnnTuner: trial {trial_id}: {{" not in log
  ran_again = [t for t in ("0", "1", "2", "3") if f"GnnTuner: trial {t}: {{" in log]
  assert sorted(ran_again) == sorted(set("0123") - set(finished))
  store = mlmd_utils.store(soak.metadata_path(root))
  [hparams] = store.get_artifacts_by_type("HyperParameters")
  [model] = store.get_artifacts_by_type("Model")
  assert execution_inputs(store, producer(store, model.id)[0].id)["HyperParameters"].id == (
      hparams.id)
  rows = json.load(open(os.path.join(
      store.get_artifacts_by_type("TunerResults")[0].uri, "tuner_results.json")))
  assert len(rows) == 4
  for row in rows:  # ... and their results are the first attempt's
    if row["trial_id"] in finished:
      assert row["wall_seconds"] == finished[row["trial_id"]]["wall_seconds"]
