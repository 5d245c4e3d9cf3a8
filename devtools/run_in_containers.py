"""Builds the image and runs the compiled demo pipeline in containers, on this machine.

One command (``make demo-containers``)::

  python -m devtools.run_in_containers [--install] [--output-dir build/container_demo]

1. builds ``kubeflow/Dockerfile`` with podman (``devtools.containers``: base
   images made locally, private storage under ``--workdir``);
2. checks the image: size, ``import gnn_trainer_component`` in it, and that
   the demo's user module is *not* in it;
3. writes the demo data and compiles the demo pipeline
   (ExampleGen → StatisticsGen → SchemaGen → Transform → GnnTrainer →
   Evaluator → Pusher) with ``gnn_trainer_component.deploy.compile`` for that
   image; the user modules become wheels under ``<pipeline root>/_wheels``;
4. runs every task's container command from the compiled PipelineJob in the
   image, in DAG order, as the KFP v2 launcher would (``devtools.local_launcher``),
   with ``--network none`` and the output folder mounted at the same path in
   every container (the shared pipeline root);
5. serves raw eval examples with the pushed model in a fresh container
   process that does not import ``tensorflow_gnn``.

Prints a JSON summary (also written to ``<output-dir>/summary.json``). Exit
code 2 with ``error: ...`` when podman cannot run or a task fails (the task's
log is named).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Optional, Sequence

from devtools import REPO_ROOT
from devtools import containers
from devtools import local_launcher

DEFAULT_OUTPUT_DIR = os.path.join(REPO_ROOT, "build", "container_demo")
DEMO_MODULE = os.path.join(REPO_ROOT, "module_files", "demo_node_classification.py")
USER_MODULE_NAME = "demo_node_classification"

_IMAGE_CHECK = r"""
import json, os, sys, importlib.util
import tensorflow as tf, tensorflow_gnn as tfgnn, tfx.version, gnn_trainer_component
print(json.dumps({"python": sys.version.split()[0], "tensorflow": tf.__version__,
                  "tensorflow_gnn": tfgnn.__version__, "tfx": tfx.version.__version__,
                  "gnn_trainer_component": gnn_trainer_component.__file__,
                  "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"),
                  "user_module_in_image": importlib.util.find_spec(sys.argv[1]) is not None}))
"""

def podman_runner(podman: containers.Podman, mounts: Sequence[str]):
  """A ``local_launcher.RunContainer`` on ``podman run`` (no network, shared mounts)."""

  def run(image: str, argv: Sequence[str], log_path: str) -> int:
    cmd = podman.run_args(mounts) + ["--entrypoint", argv[0], image, *argv[1:]]
    with open(log_path, "wb") as log:
      return subprocess.run(["podman", *cmd], env=podman.env, stdout=log,
                            stderr=subprocess.STDOUT, check=False).returncode

  return run


def _run_json(podman: containers.Podman, image: str, mounts: Sequence[str], script: str,
              *args: str) -> dict[str, Any]:
  """Runs ``python -c script args`` in a fresh container; its last stdout line as JSON."""
  proc = podman.cmd(*podman.run_args(mounts), "--entrypoint", "python", image, "-c", script,
                    *args, check=False)
  if proc.returncode != 0:
    raise containers.ContainerError(
        f"python in {image} failed ({proc.returncode}): {proc.stderr.decode()[-3000:]}")
  return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def run(*, workdir: str, output_dir: str, tag: str = containers.DEFAULT_TAG,
        install: bool = False, train_steps: Optional[int] = None) -> dict[str, Any]:
  """Steps 1-5 of the module docstring; returns the summary.

  Raises:
    containers.ContainerError: podman cannot run, or the build fails.
    local_launcher.LauncherError: a task fails (its log is named).
  """
  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.deploy import compile as kfp_compile
  from pipelines import serving
  from pipelines.demo import data as demo_data
  # pylint: enable=g-import-not-at-top
  podman = containers.Podman(workdir)
  summary: dict[str, Any] = {"image": containers.build_image(podman, tag, install=install)}
  output_dir = os.path.abspath(output_dir)
  shutil.rmtree(output_dir, ignore_errors=True)
  os.makedirs(output_dir)
  mounts = [output_dir]
  summary["image"]["check"] = _run_json(podman, tag, mounts, _IMAGE_CHECK, USER_MODULE_NAME)

  paths = demo_data.write_demo_data(os.path.join(output_dir, "data"))
  root = os.path.join(output_dir, "pipeline_root")
  job_file = os.path.join(output_dir, "gnn-demo.json")
  start = time.time()
  job = kfp_compile.compile_pipeline(
      "demo", tag, root, DEMO_MODULE, job_file, examples_dir=paths["examples"],
      graph_schema_dir=paths["graph_schema"], train_steps=train_steps)
  summary["compile_seconds"] = round(time.time() - start, 1)
  summary["pipeline_file"] = job_file

  launcher = local_launcher.LocalLauncher(
      job, podman_runner(podman, mounts), job_id="local-run",
      log_dir=os.path.join(output_dir, "logs"))
  start = time.time()
  results = launcher.run()
  summary["run_seconds"] = round(time.time() - start, 1)
  summary["tasks"] = {name: {"kind": r.kind, "seconds": round(r.seconds, 1), "log": r.log,
                             "outputs": {k: [a["uri"] for a in v] for k, v in r.outputs.items()}}
                      for name, r in results.items()}

  pushed = results["Pusher"].outputs["pushed_model"][0]
  summary["pushed"] = pushed.get("metadata", {})
  model = results["GnnTrainer"].outputs["model"][0]
  summary["model_metadata"] = model.get("metadata", {})
  serving_dir = os.path.join(model["uri"], "Format-Serving")
  requests = os.path.join(paths["examples"], "eval", "data.tfrecord")
  served = _run_json(podman, tag, mounts, serving.FRESH_PROCESS_SCRIPT, serving_dir, requests, "8")
  summary["serving"] = {"model": serving_dir, "requests": 8,
                        "tfgnn_imported": served["tfgnn_imported"],
                        "outputs": {k: [len(v), len(v[0]) if v and isinstance(v[0], list) else 1]
                                    for k, v in served["outputs"].items()}}
  with open(os.path.join(output_dir, "summary.json"), "w", encoding="utf-8") as fh:
    json.dump(summary, fh, indent=2)
  return summary


def main(argv: Optional[Sequence[str]] = None) -> int:
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()  # Keras 2 for the demo data and serving check
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  parser.add_argument("--workdir", default=containers.DEFAULT_WORKDIR,
                      help="podman configuration and image storage (kept: rebuilds are cached).")
  parser.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR,
                      help="Data, pipeline root, logs and summary.json (emptied first).")
  parser.add_argument("--tag", default=containers.DEFAULT_TAG)
  parser.add_argument("--install", action="store_true",
                      help="apt-get install podman, buildah, runc, debootstrap if missing.")
  parser.add_argument("--train-steps", type=int, help="GnnTrainer train_args.num_steps.")
  args = parser.parse_args(argv)
  try:
    summary = run(workdir=args.workdir, output_dir=args.output_dir, tag=args.tag,
                  install=args.install, train_steps=args.train_steps)
  except (containers.ContainerError, local_launcher.LauncherError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(json.dumps(summary, indent=2))
  return 0


if __name__ == "__main__":
  sys.exit(main())
