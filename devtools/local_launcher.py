"""Runs a compiled KFP v2 pipeline task by task, each in a container, as the launcher does.

Input: the PipelineJob JSON ``gnn-kfp-compile`` writes (``KubeflowV2DagRunner``).
For every task, in DAG order (``dependentTasks`` and the producers of its input
artifacts), this does what the KFP v2 / Vertex AI launcher does before and
after a container:

* **importer** tasks run no container: their output artifact is the importer's
  ``artifactUri`` with its ``typeSchema``;
* **container** tasks get an ``ExecutorInput``: input artifacts are the
  producers' output artifacts as their ``executor_output.json`` reported them
  (uri + metadata, as MLMD would hand them on), parameters are the task's
  constants (``parameterValues``, schema 2.1), each output artifact gets a fresh
  uri ``<root>/<job>/<task>_<n>/<key>`` and a resource name, and the output file
  is ``<root>/<job>/<task>_<n>/executor_output.json``. ``{{$}}`` in the
  container args becomes that JSON;
* a ``lifecycle.preCacheCheck`` command (ExampleGen's driver: span, version,
  fingerprint) runs first in the same image with the same input; its
  ``executor_output.json`` updates the output artifacts' metadata, and the TFX
  entrypoint reads its parameters (as on Vertex);
* the container's command and args are run by a ``run_container`` callable
  (``devtools.run_in_containers`` passes ``podman run``).

Not emulated (a real run differs): caching and MLMD records (there is no
metadata store here; ``executor_output.json`` files are what the launcher
would record), retries, resource limits, ``componentInputParameter`` runtime
parameters other than constants, and parameter outputs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from gnn_trainer_component.deploy import pipeline_job

#: ``{{$}}``: the whole ExecutorInput as JSON (the only placeholder TFX emits).
EXECUTOR_INPUT_PLACEHOLDER = "{{$}}"
ARTIFACT_NAME = "projects/local/locations/local/metadataStores/default/artifacts/{}"

#: ``run_container(image, argv, log_path) -> exit code``; argv[0] is the program.
RunContainer = Callable[[str, Sequence[str], str], int]


class LauncherError(RuntimeError):
  """A task failed, or the pipeline holds something this launcher cannot run."""


@dataclasses.dataclass
class TaskResult:
  """What happened to one task."""
  name: str
  kind: str  # "container" or "importer"
  seconds: float = 0.0
  task_dir: Optional[str] = None
  log: Optional[str] = None
  outputs: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)


def task_order(spec: Mapping[str, Any]) -> list[str]:
  """The tasks of ``root.dag`` in an order where producers come first.

  Ties are broken by name, so the order is stable.

  Raises:
    LauncherError: on a dependency on an unknown task, or a cycle.
  """
  tasks = spec["root"]["dag"]["tasks"]
  deps = {}
  for name, body in tasks.items():
    needs = set(body.get("dependentTasks", []))
    for arg in body.get("inputs", {}).get("artifacts", {}).values():
      if "taskOutputArtifact" in arg:
        needs.add(arg["taskOutputArtifact"]["producerTask"])
    unknown = needs - set(tasks)
    if unknown:
      raise LauncherError(f"Task {name!r} depends on {sorted(unknown)}, not tasks of the DAG.")
    deps[name] = needs
  order, done = [], set()
  while len(order) < len(tasks):
    ready = sorted(t for t in tasks if t not in done and deps[t] <= done)
    if not ready:
      raise LauncherError(f"The DAG has a cycle among {sorted(set(tasks) - done)}.")
    order += ready
    done.update(ready)
  return order


class LocalLauncher:
  """Runs one PipelineJob: ``LocalLauncher(job, run_container).run()``."""

  def __init__(self, job: Mapping[str, Any], run_container: RunContainer, *,
               job_id: str, log_dir: str, pipeline_root: Optional[str] = None):
    """Args:
      job: The PipelineJob dict (``pipelineSpec`` + ``runtimeConfig``).
      run_container: Runs a container to completion.
      job_id: Names this run's folder under the pipeline root.
      log_dir: Where each task's container log goes.
      pipeline_root: Default: ``runtimeConfig.gcsOutputDirectory``.
    """
    self.spec = job["pipelineSpec"]
    self.root = pipeline_root or job.get("runtimeConfig", {}).get("gcsOutputDirectory")
    if not self.root:
      raise LauncherError("No pipeline root: the job has no runtimeConfig.gcsOutputDirectory.")
    self.run_container = run_container
    self.job_id = job_id
    self.log_dir = log_dir
    self._next_id = 0
    self.results: dict[str, TaskResult] = {}

  def _artifact(self, uri: str, type_schema: Mapping[str, Any],
                metadata: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    self._next_id += 1
    out = {"name": ARTIFACT_NAME.format(self._next_id), "uri": uri, "type": dict(type_schema)}
    if metadata:
      out["metadata"] = dict(metadata)
    return out

  def run(self, tasks: Optional[Sequence[str]] = None) -> dict[str, TaskResult]:
    """Runs ``tasks`` (default: all) in DAG order; stops at the first failure.

    Raises:
      LauncherError: naming the failed task, its exit code and log.
    """
    os.makedirs(self.log_dir, exist_ok=True)
    for name in task_order(self.spec):
      if tasks is not None and name not in tasks:
        continue
      executor = self._executor(name)
      if "importer" in executor:
        self.results[name] = self._import(name, executor["importer"])
      elif "container" in executor:
        self.results[name] = self._run_container_task(name, executor["container"])
      else:
        raise LauncherError(f"Task {name!r}: executor kind {sorted(executor)} is not supported "
                            "here (only containers and importers).")
    return self.results

  def _executor(self, task: str) -> Mapping[str, Any]:
    label = pipeline_job.task_component(self.spec, task)["executorLabel"]
    return self.spec["deploymentSpec"]["executors"][label]

  def _import(self, task: str, importer: Mapping[str, Any]) -> TaskResult:
    comp = pipeline_job.task_component(self.spec, task)
    (key,) = comp["outputDefinitions"]["artifacts"]
    uri = importer["artifactUri"].get("constant")
    if uri is None:
      raise LauncherError(f"Importer {task!r}: only a constant artifactUri is supported.")
    artifact = self._artifact(uri, importer["typeSchema"], importer.get("metadata"))
    return TaskResult(task, "importer", outputs={key: [artifact]})

  def _inputs(self, task: str) -> dict[str, Any]:
    body = self.spec["root"]["dag"]["tasks"][task]
    artifacts = {}
    for key, arg in body.get("inputs", {}).get("artifacts", {}).items():
      if "taskOutputArtifact" not in arg:
        raise LauncherError(f"Task {task!r}: input artifact {key!r} is not a task output "
                            f"({sorted(arg)}); not supported here.")
      ref = arg["taskOutputArtifact"]
      producer = self.results[ref["producerTask"]]
      artifacts[key] = {"artifacts": producer.outputs[ref["outputArtifactKey"]]}
    for key, param in body.get("inputs", {}).get("parameters", {}).items():
      if "runtimeValue" not in param:
        raise LauncherError(f"Task {task!r}: parameter {key!r} is not a constant "
                            f"({sorted(param)}); not supported here.")
    return {"artifacts": artifacts,
            "parameterValues": pipeline_job.task_parameters(self.spec, task)}

  def _run_container_task(self, task: str, container: Mapping[str, Any]) -> TaskResult:
    comp = pipeline_job.task_component(self.spec, task)
    n = len(self.results) + 1
    task_dir = os.path.join(self.root, self.job_id, f"{task}_{n}")
    outputs = {key: [self._artifact(os.path.join(task_dir, key), definition["artifactType"])]
               for key, definition in comp.get("outputDefinitions", {}).get("artifacts", {}).items()}
    output_file = os.path.join(task_dir, "executor_output.json")
    executor_input = {"inputs": self._inputs(task),
                      "outputs": {"artifacts": {k: {"artifacts": v} for k, v in outputs.items()},
                                  "outputFile": output_file}}
    os.makedirs(task_dir, exist_ok=True)
    result = TaskResult(task, "container", task_dir=task_dir,
                        log=os.path.join(self.log_dir, f"{n:02d}-{task}.log"))
    start = time.time()
    pre = container.get("lifecycle", {}).get("preCacheCheck")
    if pre:
      self._exec(task, container["image"], pre, executor_input, result.log + ".pre")
      driver_out = _read_output(output_file)
      for key, listed in driver_out.get("artifacts", {}).items():
        for mine, theirs in zip(outputs.get(key, []), listed.get("artifacts", [])):
          mine.setdefault("metadata", {}).update(theirs.get("metadata", {}))
    self._exec(task, container["image"], container, executor_input, result.log)
    result.seconds = time.time() - start
    reported = _read_output(output_file).get("artifacts", {})
    for key, made in outputs.items():
      # What MLMD would hand on: the executor's uri/metadata; the type from the spec
      # (executor_output.json carries none).
      listed = reported.get(key, {}).get("artifacts")
      result.outputs[key] = [dict(a, type=made[0]["type"]) for a in listed] if listed else made
    return result

  def _exec(self, task: str, image: str, command: Mapping[str, Any],
            executor_input: Mapping[str, Any], log: str) -> None:
    argv = list(command["command"]) + [_fill(a, executor_input, task) for a in command["args"]]
    rc = self.run_container(image, argv, log)
    if rc != 0:
      raise LauncherError(f"Task {task!r} failed with exit code {rc} in {image}; log: {log}")


def _fill(arg: str, executor_input: Mapping[str, Any], task: str) -> str:
  if arg == EXECUTOR_INPUT_PLACEHOLDER:
    return json.dumps(executor_input)
  if "{{$" in arg:
    raise LauncherError(f"Task {task!r}: placeholder in {arg[:80]!r} is not supported here "
                        f"(only {EXECUTOR_INPUT_PLACEHOLDER}).")
  return arg


def _read_output(path: str) -> dict[str, Any]:
  if not os.path.isfile(path):
    return {}
  with open(path, encoding="utf-8") as fh:
    return json.load(fh)
