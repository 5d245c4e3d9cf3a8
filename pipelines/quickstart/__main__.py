"""`python -m pipelines.quickstart`: the quickstart pipeline on LocalDagRunner, then one request.

Runs ``pipelines/quickstart/pipeline.py`` on the tables in ``--data-dir`` with
the module ``--module-file``, ML Metadata in ``<output-dir>/metadata.sqlite``;
then serves one test example with the pushed model in a fresh process
(``pipelines/quickstart/serve.py``) and asks the pushed index of the users' embeddings for
the first user's nearest users. The terminal shows one line per component
and per epoch, then what the run made; the full TFX/Beam/TensorFlow output
goes to ``<output-dir>/logs/run.log`` (``--verbose`` prints it instead).

  python -m pipelines.quickstart [--output-dir DIR] [--data-dir DIR] [--module-file FILE]
                                 [--min-accuracy X] [--epochs N] [--hparams JSON] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Optional, Sequence

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
# TensorFlow and TFX are imported inside main(), once their output goes to the log file.
from pipelines.runtime import console as console_lib

DEFAULT_OUTPUT_DIR = "quickstart_output"
SERVE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve.py")


def shown(path: str) -> str:
  """``path`` as the person typed it: relative when it is below the current folder."""
  relative = os.path.relpath(path)
  return path if relative.startswith("..") else relative


def write_request(examples_uri: str, label_key: str, path: str) -> int:
  """Writes the first test example, without its label, as a request; returns the label."""
  import tensorflow as tf
  from pipelines import serving
  record = next(iter(tf.data.TFRecordDataset(
      serving.split_files(examples_uri, "test"), compression_type="GZIP"))).numpy()
  example = tf.train.Example.FromString(record)
  label = example.features.feature.pop(label_key).int64_list.value[0]
  with open(path, "wb") as f:
    f.write(example.SerializeToString())
  return int(label)


def serve_in_fresh_process(saved_model_dir: str, request_path: str) -> dict:
  """``serve.py`` in a new Python process: the pushed model scores the request."""
  proc = subprocess.run([sys.executable, SERVE_SCRIPT, saved_model_dir, request_path],
                        stdout=subprocess.PIPE, text=True, check=True, timeout=300)
  return json.loads(proc.stdout.strip().splitlines()[-1])


def count_records(folder: str) -> int:
  """Records in the GZIP TFRecord files of a folder (BulkInferrer's PredictionLogs)."""
  import tensorflow as tf
  files = tf.io.gfile.glob(os.path.join(folder, "*.gz"))
  return sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))


def index_lines(latest, con) -> list[str]:
  """What EmbeddingIndex made of the users' embeddings, and the first user's nearest users."""
  from pipelines import serving
  from pipelines.runtime import mlmd_utils
  index = mlmd_utils.custom_properties(latest("Model", "user_index"))
  churn = (f", Jaccard@10 {index['jaccard@10']:.3f} against the last index"
           if "jaccard@10" in index else "")
  lines = [f"EmbeddingIndex (user embeddings): {index['num_vectors']} users, "
           f"{index['kind']} search, recall@10 {index['recall@10']:.4f}, p99 "
           f"{index['p99_ms']:.2f} ms{churn}; blessed: {bool(index['blessed'])}"]
  pushed = mlmd_utils.custom_properties(latest("PushedModel", "user_index_pusher"))
  if pushed.get("pushed"):
    with con.step("Asking the pushed index for similar users in a fresh process"):
      first = serving.first_embedded_id(latest("gnn_trainer_component.Embeddings",
                                               "user_embeddings").uri)
      similar = serving.neighbours_in_fresh_process(pushed["pushed_destination"], first)
    lines.append(f"Index pushed: {shown(pushed['pushed_destination'])}; users like {first}: "
                 f"{', '.join(similar['neighbours'][:5])}")
  return lines


def validation_lines(metadata: str, pipeline_name: str) -> tuple[bool, list[str]]:
  """Whether GraphValidator found the graph valid, and what it found."""
  from pipelines import validation
  got = validation.verdict(metadata, pipeline_name)
  lines = [f"GraphValidator: {got['nodes']} nodes, {got['edges']} edges, {got['seeds']} seeds; "
           f"{got['errors']} error(s), {got['warnings']} warning(s); valid: {got['valid']}"]
  lines += [f"  {a['severity']}: {a['name']}: {a['description']}" for a in got["anomalies"]]
  return got["valid"], lines


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR,
                      help="artifacts, ML Metadata, serving dir and log (default: %(default)s)")
  parser.add_argument("--data-dir", default=None,
                      help="the tables folder (default: pipelines/quickstart/data)")
  parser.add_argument("--module-file", default=None,
                      help="the GnnTrainer module (default: module_files/quickstart.py)")
  parser.add_argument("--min-accuracy", type=float, default=0.8,
                      help="test accuracy GraphEvaluator blesses if every baseline is beaten too "
                           "(then BulkInferrer and Pusher run) (default: %(default)s)")
  parser.add_argument("--epochs", type=int, default=None,
                      help="passes over the train split (default: 30)")
  parser.add_argument("--hparams", type=json.loads, default=None,
                      help='overrides of the module\'s HPARAMS, as JSON, e.g. \'{"units": 64}\'')
  parser.add_argument("--verbose", action="store_true",
                      help="print the full TFX/Beam/TensorFlow output instead of progress "
                           f"lines (also: {console_lib.VERBOSE_ENV}=1)")
  args = parser.parse_args(argv)
  out = os.path.abspath(args.output_dir)
  start = time.time()
  with console_lib.pipeline_console(os.path.join(out, "logs", "run.log"),
                                    verbose=args.verbose) as con:
    if not con.verbose:
      con.echo(f"Quickstart in {shown(out)} (full log: {shown(con.log_path)})")
    with con.step("Loading TensorFlow and TFX"):
      from absl import logging
      from tfx import v1 as tfx
      from pipelines.quickstart import pipeline as quickstart
      from pipelines.runtime import mlmd_utils
    logging.set_verbosity(logging.INFO)
    metadata = os.path.join(out, "metadata.sqlite")
    module_file = os.path.abspath(args.module_file or quickstart.MODULE_FILE)
    pipeline = quickstart.create_pipeline(
        pipeline_root=os.path.join(out, "pipeline_root"), metadata_path=metadata,
        serving_dir=os.path.join(out, "serving"),
        index_serving_dir=os.path.join(out, "index_serving"),
        data_dir=os.path.abspath(args.data_dir or quickstart.DATA_DIR), module_file=module_file,
        min_accuracy=args.min_accuracy, epochs=args.epochs or quickstart.TRAINING["epochs"],
        hparams=args.hparams)
    con.set_total(len(pipeline.components))
    tfx.orchestration.LocalDagRunner().run(pipeline)

    def latest(type_name, producer=None):
      return mlmd_utils.latest_artifact(metadata, type_name, quickstart.PIPELINE_NAME,
                                        producer=producer)

    valid, lines = validation_lines(metadata, quickstart.PIPELINE_NAME)
    if not valid:
      lines.append("The graph is not valid: nothing after GraphValidator ran. Fix the tables, "
                   "or change GraphValidator's validation_config in "
                   "pipelines/quickstart/pipeline.py.")
      con.echo(f"\n=== Quickstart stopped in {time.time() - start:.0f} s ===")
      con.echo("\n".join(lines))
      return 1
    from gnn_trainer_component.evaluator import evaluation as evaluation_lib
    model = latest("Model", "GnnTrainer")
    evaluation = latest("ModelEvaluation", "GraphEvaluator")
    result = evaluation_lib.read(evaluation.uri)
    blessing = mlmd_utils.custom_properties(latest("ModelBlessing", "GraphEvaluator"))
    blessed = bool(blessing.get("blessed"))
    baselines = ", ".join(f"{name.replace('_', ' ')} {result['metrics'][name]['all']['accuracy']:.4f}"
                          for name in result["baselines"])
    lines += [f"Model: {shown(model.uri)}",
             f"GraphEvaluator (test users): accuracy "
             f"{result['metrics']['model']['all']['accuracy']:.4f} on {result['num_nodes']} "
             f"nodes; baselines: {baselines}; blessed: {blessed}",
             f"Evaluation report: {shown(os.path.join(evaluation.uri, 'report.png'))}"]
    if blessed:
      inference = latest("InferenceResult")
      lines.append(f"BulkInferrer: {count_records(inference.uri)} predictions (PredictionLog) "
                   f"in {shown(inference.uri)}")
      pushed_to = mlmd_utils.custom_properties(
          latest("PushedModel", "Pusher"))["pushed_destination"]
      lines.append(f"Pusher: {shown(pushed_to)}")
      with con.step("Serving one test example in a fresh process"):
        label_key = quickstart.label_feature(quickstart.task_of(module_file))
        request = os.path.join(out, "request.pb")
        label = write_request(latest("Examples").uri, label_key, request)
        prediction = serve_in_fresh_process(pushed_to, request)
      lines.append(f"Served prediction (fresh process): {json.dumps(prediction)}  "
                   f"(request {shown(request)}; its label: {label})")
      lines += index_lines(latest, con)
    else:
      lines.append(f"{blessing.get('blessing_message')}: BulkInferrer and Pusher did nothing.")
    lines.append(f"MLMD (SQLite): {shown(metadata)}")
    con.echo(f"\n=== Quickstart finished in {time.time() - start:.0f} s ===")
    con.echo("\n".join(lines))
  return 0 if blessed else 1


if __name__ == "__main__":
  sys.exit(main())
