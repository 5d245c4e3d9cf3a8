"""The image built with podman and the compiled demo pipeline run in it (issue 16).

One module-scoped run of the documented command,
``python -m devtools.run_in_containers``, in a fresh process with a private
podman work dir: build ``kubeflow/Dockerfile`` (base images made locally), compile
the full demo pipeline, run every task's container command from the compiled
PipelineJob in the image as the KFP v2 launcher would, serve the pushed model.
Everything is removed afterwards (``Podman.clean``).

A ``host`` test: it runs only with ``GNN_REQUIRE_CONTAINERS=1`` (``make test-all``;
CI, on its native stack, once: the image is the same whichever stack compiles) and
skips with that reason otherwise. It needs root and podman (installed with apt-get
when missing); where that is not possible, it fails.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from devtools import containers
from devtools import local_launcher
from devtools import run_in_containers
from gnn_trainer_component.deploy import pipeline_job
from tests.helpers import REPO_ROOT

pytestmark = [pytest.mark.container, pytest.mark.host, pytest.mark.slow]

DEMO_ORDER = ["ImportExampleGen", "graph_schema_importer", "StatisticsGen", "SchemaGen",
              "Transform", "GnnTrainer", "Evaluator", "Pusher"]


def _locked_version(package: str) -> str:
  with open(os.path.join(REPO_ROOT, "requirements", "lock-tfx121-py313.txt")) as fh:
    return re.search(rf"^{package}==(\S+)", fh.read(), re.M).group(1)


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
  p = containers.Podman(str(tmp_path_factory.mktemp("podman")))
  try:
    if os.geteuid() == 0:
      p.install_packages()
    p.check_available()
  except containers.ContainerError as e:
    # Only reached with GNN_REQUIRE_CONTAINERS=1 (conftest skips the module otherwise).
    pytest.fail(f"GNN_REQUIRE_CONTAINERS=1 but podman cannot run here: {e}")
  yield p
  p.clean()
  assert not os.path.exists(p.workdir)


@pytest.fixture(scope="module")
def demo(podman, tmp_path_factory):
  """The documented command, in a fresh process; its summary.json."""
  out = str(tmp_path_factory.mktemp("container_demo"))
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run(
      [sys.executable, "-m", "devtools.run_in_containers", "--workdir", podman.workdir,
       "--output-dir", out],
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=3600, check=False)
  assert proc.returncode == 0, proc.stderr[-6000:]
  with open(os.path.join(out, "summary.json")) as fh:
    summary = json.load(fh)
  print(json.dumps({k: summary[k] for k in ("compile_seconds", "run_seconds")}),
        {t: r["seconds"] for t, r in summary["tasks"].items()},
        f"build {summary['image']['seconds']:.0f} s, {summary['image']['size_bytes'] / 1e9:.2f} GB")
  summary["output_dir"] = out
  return summary


def test_image_builds_and_imports_the_package(demo):
  image = demo["image"]
  check = image["check"]
  assert check["tfx"] == _locked_version("tfx")
  assert check["tensorflow"] == _locked_version("tensorflow")
  assert check["tensorflow_gnn"] == _locked_version("tensorflow-gnn")
  assert check["python"].startswith("3.13.")
  assert check["gnn_trainer_component"].endswith("gnn_trainer_component/__init__.py")
  assert check["malloc_arena_max"] == "2"  # TensorFlow's threads share two malloc arenas
  # User modules travel as wheels, never in the image.
  assert check["user_module_in_image"] is False
  assert image["size_bytes"] > 1e9


def test_every_task_ran_in_dag_order_in_the_image(demo):
  assert list(demo["tasks"]) == DEMO_ORDER
  for name, task in demo["tasks"].items():
    assert task["kind"] == ("importer" if name == "graph_schema_importer" else "container")
  root = os.path.join(demo["output_dir"], "pipeline_root", "local-run")
  for name in DEMO_ORDER:
    if name == "graph_schema_importer":
      continue
    (task_dir,) = [d for d in os.listdir(root) if d.rsplit("_", 1)[0] == name]
    with open(os.path.join(root, task_dir, "executor_output.json")) as fh:
      assert json.load(fh)["artifacts"], name
  # ExampleGen's driver ran first (preCacheCheck) and its span/fingerprint reached the artifact.
  with open(demo["tasks"]["ImportExampleGen"]["log"] + ".pre") as fh:
    assert "Calculated fingerprint" in fh.read()
  assert demo["model_metadata"]["tfx_version"] == _locked_version("tfx")


def test_user_module_came_from_the_wheel(demo):
  with open(demo["pipeline_file"]) as fh:
    spec = json.load(fh)["pipelineSpec"]
  wheels = os.path.join(demo["output_dir"], "pipeline_root", "_wheels")
  for task in ("Transform", "GnnTrainer"):
    module_path = pipeline_job.task_parameters(spec, task)["module_path"]
    assert module_path.split("@")[1].startswith(wheels + os.sep), module_path
  with open(demo["tasks"]["GnnTrainer"]["log"]) as fh:
    log = fh.read()
  # Imported from that wheel itself (a zip archive), not pip-installed first.
  assert re.search(r"user module \w+ imported from the wheel \S*_wheels/tfx_user_code_gnntrainer"
                   r"\S*\.whl", log, re.I), log[-3000:]


def test_pushed_model_serves_raw_examples_without_tfgnn(demo):
  assert demo["pushed"]["pushed"] == 1
  assert os.path.isfile(os.path.join(demo["pushed"]["pushed_destination"], "saved_model.pb"))
  with open(demo["pipeline_file"]) as fh:
    spec = json.load(fh)["pipelineSpec"]
  train_args = json.loads(pipeline_job.task_parameters(spec, "GnnTrainer")["train_args"])
  assert demo["model_metadata"]["train_steps"] == float(train_args["num_steps"])
  serving = demo["serving"]
  assert serving["tfgnn_imported"] is False
  assert serving["outputs"] == {"logits": [8, 3]}


def test_a_failing_task_is_named_and_stops_the_run(podman, demo, tmp_path):
  """ExampleGen on an empty input folder: the error names the task and its log; nothing
  downstream runs."""
  with open(demo["pipeline_file"]) as fh:
    job = json.load(fh)
  empty = tmp_path / "no_examples"
  empty.mkdir()
  params = job["pipelineSpec"]["root"]["dag"]["tasks"]["ImportExampleGen"]["inputs"]["parameters"]
  params["input_base"]["runtimeValue"]["constant"] = str(empty)
  launcher = local_launcher.LocalLauncher(
      job, run_in_containers.podman_runner(podman, [str(tmp_path), demo["output_dir"]]),
      job_id="bad-run", log_dir=str(tmp_path / "logs"))
  with pytest.raises(local_launcher.LauncherError,
                     match=r"Task 'ImportExampleGen' failed with exit code \d+ .*log: "):
    launcher.run()
  assert set(launcher.results) == set()
  log = str(tmp_path / "logs" / "01-ImportExampleGen.log.pre")
  with open(log) as fh:
    assert str(empty) in fh.read()
