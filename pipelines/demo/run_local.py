"""`make demo`: runs the demo pipeline on LocalDagRunner with a SQLite MLMD.

Everything goes under ``$DEMO_OUTPUT_DIR`` (default ``./demo_output``):
``data/`` (generated graph examples + graph schema), ``pipeline_root/``
(artifacts), ``metadata.sqlite`` and ``logs/run.log`` (the full TFX, Beam and
TensorFlow output). The terminal shows one line per component and per training
epoch, then the model URI, its metrics, the training curves and how to look at
MLMD and TensorBoard.

  python -m pipelines.demo.run_local [--verbose] [--no-transform]

``--verbose`` or ``GNN_VERBOSE=1`` prints the full output instead (no log file).
``--no-transform``: GnnTrainer on the raw examples (no StatisticsGen, SchemaGen and
Transform before it).

ML Metadata on a MySQL/MariaDB server instead of the SQLite file
(``pipelines/runtime/mlmd_connection.py``; the password from ``$GNN_MLMD_PASSWORD`` or a
file, never on the command line)::

  GNN_MLMD_PASSWORD_FILE=~/.mlmd-password python -m pipelines.demo.run_local \
      --mlmd mysql://mlmd@127.0.0.1:3306/gnn_demo
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
# Only light imports here: TensorFlow and TFX are imported inside main(), once
# their import-time output goes to the log file.
from pipelines.runtime import console as console_lib

PIPELINE_NAME = "gnn-demo"


def summary_lines(*, metadata, seconds: float, log_path: str = None,
                  pipeline_name: str = PIPELINE_NAME) -> list[str]:
  """The end summary: model, Evaluator, Pusher, MLMD, curves, TensorBoard.

  ``metadata``: the SQLite file or the ``ConnectionConfig`` the pipeline ran on.
  """
  from gnn_trainer_component.trainer import curves as curves_lib
  from pipelines.runtime import mlmd_connection
  from pipelines.runtime import mlmd_utils
  model = mlmd_utils.latest_artifact(metadata, "Model", pipeline_name)
  model_run = mlmd_utils.latest_artifact(metadata, "ModelRun", pipeline_name)
  props = mlmd_utils.custom_properties(model)
  lines = ["", "=== GnnTrainer demo finished in %.0f s ===" % seconds,
           f"Model artifact (id {model.id}): {model.uri}",
           f"  SavedModel: {os.path.join(model.uri, 'Format-Serving')}"]
  lines += [f"  {key}: {props[key]}" for key in sorted(props)]
  blessing = mlmd_utils.latest_artifact(metadata, "ModelBlessing", pipeline_name)
  pushed = mlmd_utils.latest_artifact(metadata, "PushedModel", pipeline_name)
  evaluation = mlmd_utils.latest_artifact(metadata, "ModelEvaluation", pipeline_name)
  lines.append(f"Evaluator (TFMA on raw eval examples): {evaluation.uri}")
  lines += [f"  {name}: {value:.4f}"
            for name, value in sorted(mlmd_utils.tfma_metrics(evaluation.uri).items())]
  lines.append(f"  blessed: {bool(mlmd_utils.custom_properties(blessing).get('blessed'))}")
  pushed_props = mlmd_utils.custom_properties(pushed)
  lines.append(f"Pusher: pushed={bool(pushed_props.get('pushed'))} "
               f"{pushed_props.get('pushed_destination', '')}")
  where = mlmd_connection.describe(metadata)
  if not where.startswith("mysql://"):
    lines.append(f"MLMD (SQLite): {where}")
    lines.append(
        "  inspect: python -c \"from ml_metadata import metadata_store; "
        "from ml_metadata.proto import metadata_store_pb2 as p; c=p.ConnectionConfig(); "
        f"c.sqlite.filename_uri='{where}'; "
        "s=metadata_store.MetadataStore(c); print(s.get_artifacts_by_type('Model'))\"")
  else:
    lines.append(f"MLMD (MySQL/MariaDB server): {where}")
    lines.append(
        "  inspect: python -c \"from pipelines.runtime import mlmd_connection as m; "
        f"s=m.connect(m.parse('{where}')); print(s.get_artifacts_by_type('Model'))\"  "
        f"(password from ${mlmd_connection.PASSWORD_ENV} or ${mlmd_connection.PASSWORD_FILE_ENV})")
  curves = os.path.join(model_run.uri, curves_lib.CURVES_FILE)
  lines.append(f"Training curves: {curves}"
               + ("" if os.path.exists(curves) else "  (not written by this run)"))
  lines.append(f"TensorBoard: tensorboard --logdir {model_run.uri}")
  if log_path:
    lines.append(f"Full log: {log_path}  (--verbose or {console_lib.VERBOSE_ENV}=1 "
                 "prints it here instead)")
  return lines


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--verbose", action="store_true",
                      help="print the full TFX/Beam/TensorFlow output instead of progress "
                           f"lines (also: {console_lib.VERBOSE_ENV}=1)")
  parser.add_argument("--mlmd", default=None, metavar="URI",
                      help="where ML Metadata lives: a SQLite file (default: "
                           "$DEMO_OUTPUT_DIR/metadata.sqlite) or "
                           "mysql://USER@HOST:PORT/DATABASE, password from "
                           "$GNN_MLMD_PASSWORD or --mlmd-password-file")
  parser.add_argument("--mlmd-password-file", default=None, metavar="FILE",
                      help="file holding the MLMD server's password (also: "
                           "$GNN_MLMD_PASSWORD_FILE)")
  parser.add_argument("--pipeline-name", default=PIPELINE_NAME,
                      help="the pipeline's name in MLMD (default: %(default)s)")
  parser.add_argument("--transform", action=argparse.BooleanOptionalAction, default=True,
                      help="StatisticsGen, SchemaGen and Transform before GnnTrainer "
                           "(--no-transform: GnnTrainer on the raw examples)")
  args = parser.parse_args(argv)
  out = os.path.abspath(os.environ.get("DEMO_OUTPUT_DIR", "demo_output"))
  start = time.time()
  # Before anything runs or logs: a bad URI or an unreachable server fails
  # here, with nothing published, and the password is masked in every log.
  from pipelines.runtime import mlmd_connection
  metadata = mlmd_connection.prepare_or_exit(
      args.mlmd or os.path.join(out, "metadata.sqlite"), password_file=args.mlmd_password_file,
      hide_password_in_logs=True)
  with console_lib.pipeline_console(os.path.join(out, "logs", "run.log"),
                                    verbose=args.verbose) as con:
    if not con.verbose:
      con.echo(f"GnnTrainer demo in {out} (full log: {con.log_path})")
    with con.step("Loading TensorFlow and TFX"):
      from absl import logging
      from tfx import v1 as tfx
      from pipelines.demo import data as demo_data
      from pipelines.demo import pipeline as demo_pipeline
    logging.set_verbosity(logging.INFO)
    with con.step("Writing the demo graph data"):
      paths = demo_data.write_demo_data(os.path.join(out, "data"))
    pipeline = demo_pipeline.create_pipeline(
        pipeline_name=args.pipeline_name, pipeline_root=os.path.join(out, "pipeline_root"),
        examples_dir=paths["examples"], graph_schema_dir=paths["graph_schema"],
        metadata=metadata, serving_dir=os.path.join(out, "serving_model"),
        **demo_pipeline.transform_stages(args.transform))
    con.set_total(len(pipeline.components))
    tfx.orchestration.LocalDagRunner().run(pipeline)
    for line in summary_lines(metadata=metadata, seconds=time.time() - start,
                              log_path=con.log_path, pipeline_name=args.pipeline_name):
      con.echo(line)
  return 0


if __name__ == "__main__":
  sys.exit(main())
