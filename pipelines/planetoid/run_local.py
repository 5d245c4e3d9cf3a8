"""Runs the Planetoid pipeline once on LocalDagRunner and prints test accuracy as JSON.

  python -m pipelines.planetoid.run_local --dataset cora \
      --data_dir ../shared/data/planetoid --module module_files/planetoid_gcn.py \
      --output_dir /tmp/planetoid --seed 0

Two tasks (topic + citations): ``--multitask --module module_files/planetoid_multitask.py``.
ML Metadata on a MySQL/MariaDB server instead of ``<output_dir>/metadata.sqlite``:
``--mlmd mysql://USER@HOST:PORT/DATABASE`` with the password in ``$GNN_MLMD_PASSWORD``
or a file (``--mlmd_password_file``; ``pipelines/runtime/mlmd_connection.py``).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping, Optional, Sequence

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
# Only light imports here: the command checks its MLMD connection first, then imports
# TensorFlow and TFX (in the functions that use them).
from absl import app
from absl import flags
from absl import logging

from pipelines import planetoid as planetoid_names
from pipelines.runtime import mlmd_connection

#: GnnTrainer settings of the published setups: the full train split (140
#: seeds) per step, 200 epochs, validation on the 500 public validation nodes
#: after every epoch, and the weights with the lowest validation loss exported
#: (``restore_best_weights``: kept in memory at each improvement of val_loss).
#: This is early stopping on validation loss with the patience running to the
#: end of the epoch budget.
DEFAULT_CUSTOM_CONFIG = {"global_batch_size": 140, "epochs": 200,
                         "validation_freq": 1, "summarize_every_n_steps": "never",
                         "restore_best_weights": True,
                         "shuffle_buffer_size": 0}


def prepare_tables(dataset: str, data_dir: str, output_dir: str,
                   with_citations: bool = False) -> dict:
  """Writes the tables once (reused when ``<output_dir>/tables_<dataset>`` exists).

  ``with_citations``: with node feature ``citations`` (in ``tables_<dataset>_citations``).
  """
  tables_dir = os.path.join(output_dir, f"tables_{dataset}" + (
      "_citations" if with_citations else ""))
  from pipelines.planetoid import data as planetoid
  marker = os.path.join(tables_dir, "DONE")
  if not os.path.exists(marker):
    planetoid.write_planetoid_tables(data_dir, dataset, tables_dir, with_citations)
    open(marker, "w").close()
  return {"dir": tables_dir, "seeds": dict(planetoid.SPLIT_FILES)}


def run_once(*, dataset: str, data_dir: str, module_file: str, output_dir: str,
             seed: int, fan_outs: Sequence[int] = planetoid_names.DEFAULT_FAN_OUTS,
             custom_config: Optional[Mapping[str, Any]] = None,
             with_statistics: bool = True, multitask: bool = False,
             metadata: Optional[mlmd_connection.Metadata] = None,
             tuning_config: Optional[Mapping[str, Any]] = None,
             mode: str = planetoid_names.IN_MEMORY) -> dict:
  """Runs the pipeline once (sampling/statistics cached across calls) and evaluates.

  ``multitask``: the tables carry ``citations`` and the module predicts the
  topic and the citations (``module_files/planetoid_multitask.py``); the
  result adds ``test_citations_mae``. ``metadata``: where MLMD lives (default:
  ``<output_dir>/metadata.sqlite``; a server: ``mlmd_connection.prepare``).
  ``tuning_config``: a GnnTuner searches first and feeds GnnTrainer its best
  hyperparameters (the result adds ``tuner_results_uri`` and
  ``best_hyperparameters_uri``). ``mode``: GnnTrainer samples the graph in
  memory or trains on GraphSampler's examples (``planetoid_pipeline.MODES``).
  A GraphEvaluator scores the model on the test papers (subgraphs sampled from
  the tables with the same fan-outs) beside its baselines; a multi-task model
  is scored here on the test split's subgraphs, and GraphEvaluator scores its
  citations (regression) beside the training papers' mean.

  Returns:
    ``{"seed", "test_accuracy", "num_test_examples", "model_uri", "seconds"}``;
    single-task also ``"baselines"`` (``{baseline: test accuracy}``),
    ``"blessed"`` and ``"evaluation_uri"``; multi-task also
    ``"evaluator_citations_mae"`` and ``"evaluator_citations_mae_of_mean"``.
  """
  from tfx import v1 as tfx
  from pipelines.planetoid import data as planetoid
  from pipelines.planetoid import pipeline as planetoid_pipeline
  from pipelines.runtime import mlmd_utils
  start = time.time()
  tables = prepare_tables(dataset, data_dir, output_dir, with_citations=multitask)
  config = dict(DEFAULT_CUSTOM_CONFIG)
  config.update(custom_config or {})
  config["seed"] = seed
  # The module's one required option, recorded with the execution in MLMD.
  config["hparams"] = {"num_classes": planetoid.NUM_CLASSES[dataset],
                       **(config.get("hparams") or {})}
  name = f"planetoid-{dataset}" + ("-multitask" if multitask else "")
  metadata = metadata or os.path.join(output_dir, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(planetoid_pipeline.create_pipeline(
      pipeline_name=name, pipeline_root=os.path.join(output_dir, "pipeline_root"),
      tables_dir=tables["dir"], metadata=metadata, seeds=tables["seeds"],
      module_file=module_file, fan_outs=fan_outs, custom_config=config,
      with_statistics=with_statistics, tuning_config=tuning_config, mode=mode,
      evaluation=(planetoid_pipeline.eval_config(tables["seeds"], "regression", "citations",
                                                 "citations")
                  if multitask else planetoid_pipeline.eval_config(tables["seeds"]))))
  model = mlmd_utils.latest_artifact(metadata, "Model", name)
  if multitask:
    result, extra = _multitask_result(metadata, name, model, tables, fan_outs, output_dir,
                                      dataset, mode)
    from gnn_trainer_component.evaluator import evaluation as evaluation_lib
    citations = evaluation_lib.read(
        mlmd_utils.latest_artifact(metadata, "ModelEvaluation", name).uri)["metrics"]
    extra.update(evaluator_citations_mae=citations["model"]["all"]["mae"],
                 evaluator_citations_mae_of_mean=citations["mean"]["all"]["mae"])
  else:
    result, extra = _evaluation(metadata, name)
  if tuning_config is not None:
    extra["tuner_results_uri"] = mlmd_utils.latest_artifact(metadata, "TunerResults", name).uri
    extra["best_hyperparameters_uri"] = mlmd_utils.latest_artifact(
        metadata, "HyperParameters", name).uri
  return {"seed": seed, "test_accuracy": result["accuracy"], **extra,
          "num_test_examples": result["num_examples"], "model_uri": model.uri,
          "seconds": round(time.time() - start, 1)}


def _evaluation(metadata: mlmd_connection.Metadata, name: str) -> tuple[dict, dict]:
  """The GraphEvaluator's test accuracy, its baselines' and the blessing."""
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  from pipelines.runtime import mlmd_utils
  artifact = mlmd_utils.latest_artifact(metadata, "ModelEvaluation", name)
  evaluation = evaluation_lib.read(artifact.uri)
  overall = {p: m["all"] for p, m in evaluation["metrics"].items()}
  return ({"accuracy": overall["model"]["accuracy"], "num_examples": evaluation["num_nodes"]},
          {"baselines": {b: overall[b]["accuracy"] for b in evaluation["baselines"]},
           "blessed": evaluation["blessed"], "evaluation_uri": artifact.uri})


def _multitask_result(metadata, name, model, tables, fan_outs, output_dir, dataset,
                      mode) -> tuple[dict, dict]:
  """A multi-task model's test metrics, on the test split's subgraphs."""
  from pipelines.planetoid import pipeline as planetoid_pipeline
  from pipelines.runtime import mlmd_utils
  if mode == planetoid_pipeline.IN_MEMORY:
    examples_uri = planetoid_pipeline.write_sampled_split(
        tables["dir"], tables["seeds"], "test", fan_outs,
        os.path.join(output_dir, f"in_memory_test_{dataset}"))
  else:
    examples_uri = mlmd_utils.latest_artifact(metadata, "Examples", name).uri
  result = planetoid_pipeline.evaluate_multitask_model(
      os.path.join(model.uri, "Format-Serving"), examples_uri, "test")
  return result, {"test_citations_mae": result["citations_mae"],
                  "test_citations_mae_of_mean": result["citations_mae_of_mean"]}


FLAGS = flags.FLAGS
flags.DEFINE_enum("dataset", "cora", list(planetoid_names.DATASETS), "Planetoid dataset.")
flags.DEFINE_string("data_dir", None, "Folder with ind.<dataset>.* files.")
flags.DEFINE_string("module", planetoid_names.GCN_MODULE, "GnnTrainer module file.")
flags.DEFINE_string("output_dir", "planetoid_output", "Pipeline root, MLMD and tables.")
flags.DEFINE_integer("seed", 0, "Training seed.")
flags.DEFINE_integer("epochs", DEFAULT_CUSTOM_CONFIG["epochs"], "Training epochs.")
flags.DEFINE_list("fan_outs", [str(f) for f in planetoid_names.DEFAULT_FAN_OUTS],
                  "Per-hop fan-outs.")
flags.DEFINE_enum("mode", planetoid_names.IN_MEMORY, list(planetoid_names.MODES),
                  "in_memory: GnnTrainer samples the tables in memory every epoch; sampled: "
                  "GraphSampler pre-samples the subgraphs with Beam.")
flags.DEFINE_bool("multitask", False, "Tables with the `citations` node property and the "
                  "topic + citations scores (with --module module_files/planetoid_multitask.py).")
flags.DEFINE_string("mlmd", None, "Where ML Metadata lives: a SQLite file (default: "
                    "<output_dir>/metadata.sqlite) or mysql://USER@HOST:PORT/DATABASE, password "
                    "from $GNN_MLMD_PASSWORD or --mlmd_password_file.")
flags.DEFINE_string("mlmd_password_file", None, "File holding the MLMD server's password "
                    "(also: $GNN_MLMD_PASSWORD_FILE).")
flags.DEFINE_bool("verbose", False, "Print the full TFX/Beam/TensorFlow output instead of "
                  "one line per component and epoch (also: GNN_VERBOSE=1).")


def main(argv) -> int:
  del argv
  from pipelines.runtime import console  # pylint: disable=g-import-not-at-top
  output_dir = os.path.abspath(FLAGS.output_dir)
  # First: a bad URI or an unreachable server fails before anything runs, and
  # the password is masked in every log record.
  metadata = mlmd_connection.prepare_or_exit(
      FLAGS.mlmd or os.path.join(output_dir, "metadata.sqlite"),
      password_file=FLAGS.mlmd_password_file, hide_password_in_logs=True)
  # Progress lines on stderr, the full output in <output_dir>/logs/run.log
  # (--verbose or GNN_VERBOSE=1: all of it on the terminal); stdout: the JSON only.
  with console.pipeline_console(os.path.join(output_dir, "logs", "run.log"),
                                verbose=FLAGS.verbose, stream="stderr") as con:
    logging.set_verbosity(logging.INFO)
    out = run_once(dataset=FLAGS.dataset, data_dir=FLAGS.data_dir,
                   module_file=os.path.abspath(FLAGS.module),
                   output_dir=output_dir, seed=FLAGS.seed,
                   fan_outs=[int(f) for f in FLAGS.fan_outs],
                   custom_config={"epochs": FLAGS.epochs}, multitask=FLAGS.multitask,
                   metadata=metadata, mode=FLAGS.mode)
    if con.log_path:
      con.echo(f"Full log: {con.log_path}")
  print(json.dumps(out))
  return 0


if __name__ == "__main__":
  flags.mark_flag_as_required("data_dir")
  app.run(main)
