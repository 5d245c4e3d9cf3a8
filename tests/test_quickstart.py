"""docs/quickstart.md is what runs.

Fast: each block of the page marked with a file (first line ``# <path>``, ``# <path>
(excerpt)`` or ``# <path> (first lines)``) is that committed file, a verbatim part of it or its
beginning; the table of tables names every data file with its header and row count; the data is
what ``pipelines/quickstart/make_data.py`` writes; GraphSampler accepts the tables with the
module's sampling settings.

Slow: the page's own command (its ``python -m pipelines.quickstart`` line) runs with the page's
module block as the module file; then ML Metadata holds the tables' statistics and
GraphValidator's verdict (valid, no anomaly), the blessed Model trained from that
module on the committed tables (lineage GraphSchema -> GraphSampler -> GnnTrainer -> Model),
GraphEvaluator's accuracy beside its baselines, BulkInferrer's predictions and the pushed
model; the request served in a fresh process got a probability distribution over the classes, the page's serving command
gets the same, and the page's ML Metadata example prints the Model and its GnnTrainer execution.
The command on a copy of the tables with a dangling edge stops after GraphValidator: its
anomaly is printed and published, nothing trains, no Model.
"""

import contextlib
import io
import json
import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from tests import test_docs
from tests.helpers import REPO_ROOT, assert_validated, execution_inputs, producer

DOC = os.path.join(REPO_ROOT, "docs", "quickstart.md")
DATA_DIR = os.path.join(REPO_ROOT, "pipelines", "quickstart", "data")
MODULE_FILE = os.path.join(REPO_ROOT, "module_files", "quickstart.py")
_MARKER = re.compile(r"# ((?:pipelines|module_files)/\S+)(?: \((excerpt|first lines)\))?\n")
_TABLE_ROW = re.compile(r"^\| `([\w.-]+\.csv)` \| `([\w,]+)` \| (\d+) \|", re.M)
#: The files the page must show.
SHOWN = ("module_files/quickstart.py", "pipelines/quickstart/pipeline.py",
         "pipelines/quickstart/data/graph_schema.pbtxt")


def _read(path: str) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


def doc_blocks() -> list[tuple[str, str]]:
  """``(language, code)`` of each fenced block of the page (indented ones too)."""
  return test_docs.code_blocks(_read(DOC))


def file_blocks() -> list[tuple[str, str, str]]:
  """``(path, how, body)`` of each block marked with a file: how is None (the whole file),
  ``excerpt`` or ``first lines``; body is the block without its marker line."""
  out = []
  for _, code in doc_blocks():
    match = _MARKER.match(code)
    if match:
      out.append((match.group(1), match.group(2), code[match.end():]))
  return out


def doc_module() -> str:
  """The page's module file: its block, marker line included (a comment)."""
  (code,) = [code for _, code in doc_blocks() if code.startswith(f"# {SHOWN[0]}\n")]
  return code


def doc_command(what: str) -> tuple[dict, list]:
  """The page's first shell command whose python runs ``what`` (``-m pipelines.quickstart``,
  a script): (its environment, its arguments after ``what``)."""
  for lang, code in doc_blocks():
    for line in code.splitlines():
      if lang in ("sh", "bash") and f" {what} " in f"{line} ":
        words = shlex.split(line)
        env = {}
        while "=" in words[0]:
          key, _, value = words.pop(0).partition("=")
          env[key] = value
        python, *words = words
        assert python in (".venv-tfx121/bin/python", ".venv/bin/python"), line
        assert words[:len(what.split())] == what.split(), line
        return env, words[len(what.split()):]
  raise AssertionError(f"docs/quickstart.md shows no `python {what}` command")


def doc_python_block(containing: str) -> str:
  """The page's python block that contains ``containing``."""
  (code,) = [code for lang, code in doc_blocks() if lang == "python" and containing in code]
  return code


# ---- fast: the page is the code ----

def test_marked_blocks_are_the_committed_files():
  blocks = file_blocks()
  assert set(SHOWN) <= {path for path, _, _ in blocks}
  for path, how, body in blocks:
    text = _read(os.path.join(REPO_ROOT, path))
    if how is None:
      assert body == text, f"docs/quickstart.md's block of {path} is not the file"
    elif how == "excerpt":
      assert body in text, f"docs/quickstart.md's excerpt of {path} is not in the file"
    else:
      assert text.startswith(body), f"docs/quickstart.md's first lines of {path} are not its"


def test_the_table_of_tables_names_every_data_file_with_its_columns_and_rows():
  rows = _TABLE_ROW.findall(_read(DOC))
  files = sorted(f for f in os.listdir(DATA_DIR) if f.endswith(".csv"))
  assert sorted(name for name, _, _ in rows) == files
  for name, header, count in rows:
    lines = _read(os.path.join(DATA_DIR, name)).splitlines()
    assert (lines[0], len(lines) - 1) == (header, int(count)), name


def test_the_data_is_what_make_data_writes_and_is_small(tmp_path):
  from pipelines.quickstart import make_data
  written = make_data.write_data(str(tmp_path))
  assert sorted(written) == sorted(os.listdir(DATA_DIR))
  for name, path in written.items():
    assert _read(path) == _read(os.path.join(DATA_DIR, name)), f"{name}: run make_data.py"
  assert sum(os.path.getsize(os.path.join(DATA_DIR, f)) for f in written) < 100_000


def test_graph_sampler_accepts_the_tables_with_the_modules_settings():
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component.graph import sampling
  from gnn_trainer_component.graph import tables
  from pipelines.quickstart import pipeline as quickstart
  schema = tfgnn.read_schema(os.path.join(DATA_DIR, "graph_schema.pbtxt"))
  task = quickstart.task_of(MODULE_FILE)
  seed_set = task["SEED_NODE_SET"]
  sampling.plan_from_hops(schema, seed_set, task["HOPS"], who="GraphSampler")
  assert tables.check_graph(schema, DATA_DIR, seed_set, quickstart.SEEDS, "GraphSampler")[2] == {
      "train": 180, "eval": 60, "test": 60}
  assert task["LABEL"] in schema.node_sets[seed_set].features
  # The label write_request takes out of a test example is the seed's: no hop leads back to
  # the seed node set.
  assert all(schema.edge_sets[name].target != seed_set for hop in task["HOPS"] for name in hop)
  assert runpy.run_path(MODULE_FILE)["NUM_CLASSES"] == 3


# ---- slow: the page's command, with the page's module ----

@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory):
  """Runs the page's command with the page's module file into a fresh output folder."""
  tmp = tmp_path_factory.mktemp("quickstart")
  module_file = tmp / "quickstart.py"
  module_file.write_text(doc_module(), encoding="utf-8")
  env, args = doc_command("-m pipelines.quickstart")
  assert env.get("TF_USE_LEGACY_KERAS") == "1"
  out = tmp / "out"
  # The page's command, with this run's python, output folder and module file (the last
  # --output-dir / --module-file given wins).
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.quickstart", *args, "--output-dir", str(out),
       "--module-file", str(module_file)],
      cwd=REPO_ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=600,
      check=False)
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
  return {"stdout": proc.stdout, "out": str(out), "metadata": str(out / "metadata.sqlite")}


@pytest.mark.slow
def test_the_pages_command_trains_evaluates_pushes_and_serves(quickstart_run):
  from ml_metadata.proto import metadata_store_pb2
  from pipelines.quickstart import pipeline as quickstart
  from pipelines.runtime import mlmd_utils
  metadata = quickstart_run["metadata"]
  store = mlmd_utils.store(metadata)

  def latest(type_name, producer=None):
    return mlmd_utils.latest_artifact(metadata, type_name, quickstart.PIPELINE_NAME,
                                      producer=producer)

  # The committed tables -> GraphStatisticsGen -> GraphValidator: valid, no anomaly; TFDV's
  # statistics of each table.
  tables = latest("gnn_trainer_component.GraphSchema", "graph_tables")
  anomalies = latest("ExampleAnomalies", "GraphValidator")
  validator, _ = producer(store, anomalies.id)
  statistics = execution_inputs(store, validator.id)["gnn_trainer_component.GraphStatistics"]
  statistics_gen, statistics_type = producer(store, statistics.id)
  assert statistics_type.endswith("GraphStatisticsGen")
  assert execution_inputs(store, statistics_gen.id)[
      "gnn_trainer_component.GraphSchema"].id == tables.id
  counts = mlmd_utils.custom_properties(statistics)
  assert (counts["nodes"], counts["edges"], counts["seeds"]) == (420, 1702, 300)
  verdict = mlmd_utils.custom_properties(anomalies)
  assert (verdict["valid"], verdict["errors"], verdict["warnings"]) == (1, 0, 0)
  from gnn_trainer_component.graph import feature_statistics
  users = feature_statistics.load(latest("ExampleStatistics", "GraphStatisticsGen").uri,
                                  "nodes-user")
  assert users.datasets[0].num_examples == 300

  # Lineage: the committed tables -> GraphSampler -> GnnTrainer (the page's module) -> Model.
  model = latest("Model", "GnnTrainer")
  assert os.path.isfile(os.path.join(model.uri, "Format-Serving", "saved_model.pb"))
  trainer, trainer_type = producer(store, model.id)
  assert trainer_type.endswith("GnnTrainer")
  # The module it ran is the page's block: the file, or the wheel TFX packaged it into
  # ("<module>@<wheel>", where TFX packages user modules: TFX 1.16).
  properties = mlmd_utils.custom_properties(trainer)
  if properties.get("module_path"):
    module, _, wheel = properties["module_path"].partition("@")
    with zipfile.ZipFile(wheel) as packaged:
      ran = packaged.read(f"{module}.py").decode("utf-8")
  else:
    ran = _read(properties["module_file"])
  assert ran == doc_module()
  trainer_inputs = execution_inputs(store, trainer.id)
  assert_validated(store, trainer.id)  # it ran under GraphValidator's verdict
  sampler, sampler_type = producer(store, trainer_inputs["Examples"].id)
  assert sampler_type.endswith("GraphSampler")
  assert producer(store, trainer_inputs["gnn_trainer_component.GraphSchema"].id)[0].id == sampler.id
  assert execution_inputs(store, sampler.id)["gnn_trainer_component.GraphSchema"].id == tables.id
  assert os.path.realpath(tables.uri) == os.path.realpath(DATA_DIR)
  assert producer(store, tables.id)[1].endswith("Importer")

  # GraphEvaluator scored this model on the 60 test users, sampled from the committed tables,
  # beside its baselines, and blessed it.
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  evaluation = latest("ModelEvaluation", "GraphEvaluator")
  blessing = latest("ModelBlessing", "GraphEvaluator")
  for artifact in (evaluation, blessing):
    evaluator, evaluator_type = producer(store, artifact.id)
    assert evaluator_type.endswith("GraphEvaluator")
    evaluator_inputs = execution_inputs(store, evaluator.id)
    assert evaluator_inputs["Model"].id == model.id
    assert evaluator_inputs["gnn_trainer_component.GraphSchema"].id == tables.id
  result = evaluation_lib.read(evaluation.uri)
  overall = {name: by_slice["all"]["accuracy"] for name, by_slice in result["metrics"].items()}
  assert result["num_nodes"] == 60
  # Chance: 1/3; neither the purchases nor the age alone tell the segment.
  assert overall["model"] >= 0.8 > max(overall["majority_class"], overall["label_propagation"])
  assert mlmd_utils.custom_properties(blessing)["blessed"] == 1

  # BulkInferrer scored the test split with it; Pusher pushed it.
  inference = latest("InferenceResult")
  bulk_inferrer, bulk_type = producer(store, inference.id)
  assert bulk_type.endswith("BulkInferrer")
  assert execution_inputs(store, bulk_inferrer.id)["Model"].id == model.id
  from pipelines.quickstart import __main__ as quickstart_main
  assert quickstart_main.count_records(inference.uri) == 60
  pushed = mlmd_utils.custom_properties(latest("PushedModel", "Pusher"))
  assert pushed["pushed"] == 1
  assert os.path.isfile(os.path.join(pushed["pushed_destination"], "saved_model.pb"))
  assert all(e.last_known_state == metadata_store_pb2.Execution.COMPLETE
             for e in store.get_executions())

  # What the run printed: the Model, the accuracy beside the baselines, the blessing, the
  # report, BulkInferrer's output, the served prediction.
  stdout = quickstart_run["stdout"]
  assert f"Model: {model.uri}\n" in stdout
  assert (f"accuracy {overall['model']:.4f} on 60 nodes; baselines: majority class "
          f"{overall['majority_class']:.4f}, label propagation "
          f"{overall['label_propagation']:.4f}; blessed: True") in stdout, stdout
  assert f"Evaluation report: {evaluation.uri}/report.png" in stdout
  assert os.path.isfile(os.path.join(evaluation.uri, "report.png"))
  assert "blessed: True" in stdout and inference.uri in stdout
  served = re.search(r"^Served prediction \(fresh process\): (\{.*?\})  ", stdout, re.M)
  assert served, stdout
  prediction = json.loads(served.group(1))
  probabilities = prediction["probabilities"]
  assert len(probabilities) == 3 and all(0 <= p <= 1 for p in probabilities)
  assert sum(probabilities) == pytest.approx(1, abs=1e-3)
  assert prediction["class_id"] == probabilities.index(max(probabilities))
  # The users' embeddings from the blessed model -> EmbeddingIndex -> Pusher: a first release
  # (no last index), exact search at this size; the command asked the pushed index for the
  # first user's neighbours in a fresh process, and they are the nearest by cosine.
  from gnn_trainer_component.model import embeddings_table
  index = latest("Model", "user_index")
  index_exec, _ = producer(store, index.id)
  embeddings = execution_inputs(store, index_exec.id)["gnn_trainer_component.Embeddings"]
  inferrer, inferrer_type = producer(store, embeddings.id)
  assert inferrer_type.endswith("GraphInferrer")
  assert execution_inputs(store, inferrer.id)["Model"].id == model.id
  props = mlmd_utils.custom_properties(index)
  assert (props["kind"], props["blessed"], props["model_id"]) == ("exact", 1, model.id)
  assert props["recall@10"] >= 0.99  # exact search: near-ties may order apart (float sums)
  assert "jaccard@10" not in props
  pushed_index = mlmd_utils.custom_properties(latest("PushedModel", "user_index_pusher"))
  index_push, _ = producer(store, latest("PushedModel", "user_index_pusher").id)
  assert execution_inputs(store, index_push.id)["Model"].id == index.id
  frame = embeddings_table.read(embeddings.uri)
  vectors = np.stack(frame["embedding"])
  vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
  scores = vectors @ vectors[0]
  scores[0] = -np.inf
  ids = list(frame["id"])
  near = ", ".join(ids[i] for i in np.argsort(-scores, kind="stable")[:5])
  assert (f"Index pushed: {pushed_index['pushed_destination']}; users like {ids[0]}: "
          f"{near}\n") in stdout, stdout

  # The page's serving command, on this run's pushed model and request: the same prediction.
  env, args = doc_command("pipelines/quickstart/serve.py")
  args = [a.replace("quickstart_output", quickstart_run["out"]).replace(
      "<version>", os.path.basename(pushed["pushed_destination"])) for a in args]
  proc = subprocess.run([sys.executable, "pipelines/quickstart/serve.py", *args], cwd=REPO_ROOT,
                        env=dict(os.environ, **env), capture_output=True, text=True,
                        timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == prediction

  # The page's ML Metadata example lists the Model and the GnnTrainer execution that made it.
  code = doc_python_block("metadata_store.MetadataStore").replace(
      "quickstart_output/metadata.sqlite", metadata)
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    exec(compile(code, DOC, "exec"), {})  # pylint: disable=exec-used
  assert f"{model.uri} made by execution [{trainer.id}]\n" in printed.getvalue()

  # The page's sample output has the lines this run printed.
  (sample,) = [code for _, code in doc_blocks() if "=== Quickstart finished" in code]
  for line in sample.split("=== Quickstart finished", 1)[1].splitlines()[1:]:
    assert re.search(rf"^{re.escape(line.split(': ', 1)[0])}: ", stdout, re.M), line


@pytest.mark.slow
def test_on_an_invalid_graph_the_command_stops_after_the_validator(tmp_path):
  from ml_metadata.proto import metadata_store_pb2
  from pipelines.quickstart import pipeline as quickstart
  from pipelines.runtime import mlmd_utils
  data = tmp_path / "tables"
  shutil.copytree(DATA_DIR, data)
  with open(data / "bought.csv", "a", encoding="utf-8") as f:
    f.write("u7,i999\n")  # a purchase of an item that is not in items.csv
  env, _ = doc_command("-m pipelines.quickstart")
  out = tmp_path / "out"
  proc = subprocess.run(
      [sys.executable, "-m", "pipelines.quickstart", "--output-dir", str(out), "--data-dir",
       str(data)], cwd=REPO_ROOT, env=dict(os.environ, **env), capture_output=True, text=True,
      timeout=600, check=False)
  assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]
  assert ("  error: dangling_edges: edge set 'bought' (table 'bought.csv'): 1 edge end(s) not "
          "in their node table (0 source ids not in 'user', 1 target ids not in 'item'; "
          "max_dangling_edges 0).\n") in proc.stdout, proc.stdout
  metadata = str(out / "metadata.sqlite")
  store = mlmd_utils.store(metadata)
  anomalies = mlmd_utils.latest_artifact(metadata, "ExampleAnomalies", quickstart.PIPELINE_NAME)
  assert mlmd_utils.custom_properties(anomalies)["valid"] == 0
  validator, validator_type = producer(store, anomalies.id)
  assert validator_type.endswith("GraphValidator")
  assert validator.last_known_state == metadata_store_pb2.Execution.COMPLETE
  assert not store.get_artifacts_by_type("Model")  # nothing trained, nothing published
  ran = {store.get_execution_types_by_id([e.type_id])[0].name.rsplit(".", 1)[-1]
         for e in store.get_executions()}
  assert not ran & {"GraphSampler", "GnnTrainer", "Pusher"}, ran
