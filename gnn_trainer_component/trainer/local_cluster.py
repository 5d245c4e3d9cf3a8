"""A multi-worker job on this machine: one process per replica, as Vertex AI runs them.

``custom_config["local_workers"] = N`` makes the GnnTrainer executor a launcher:
it starts N processes on 127.0.0.1 (a ``chief`` and N-1 ``worker`` tasks, each
with its own ``TF_CONFIG`` and free ports; with ``local_parameter_servers = K``
also K ``ps`` tasks), each running the same executor on the same artifacts, as
a Vertex AI custom job or a Kubeflow TFJob runs its replicas. Their strategy is
``MultiWorkerMirroredStrategy``, or ``ParameterServerStrategy`` with ps tasks
(``strategy.make_strategy``); the chief publishes, the others write nothing
shared. The launcher waits for all of them; when one fails it stops the others
and raises :class:`ClusterError` naming the task, its exit code and the end of
its log (``<model_run>/cluster/<task>.log``).

The worker entry point is ``python -m gnn_trainer_component.trainer.local_cluster
<job.json> <task>``, with ``TF_CONFIG`` in the environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Optional

from absl import logging

#: Seconds the other tasks get to exit after one failed, before SIGKILL.
STOP_GRACE_S = 10.0
_LOG_TAIL_LINES = 12


class ClusterError(RuntimeError):
  """A task of a local multi-worker job failed."""


def free_ports(n: int) -> list[int]:
  """``n`` distinct TCP ports free on 127.0.0.1 right now."""
  with contextlib.ExitStack() as stack:
    socks = [stack.enter_context(socket.socket()) for _ in range(n)]
    for s in socks:
      s.bind(("127.0.0.1", 0))
    return [s.getsockname()[1] for s in socks]


@dataclasses.dataclass(frozen=True)
class Job:
  """A local job: ``workers`` training processes (chief included) and, for
  ParameterServerStrategy, ``parameter_servers`` ps tasks."""
  workers: int
  parameter_servers: int = 0

  @property
  def tasks(self) -> list[str]:
    """``["chief:0", "worker:0", ..., "ps:0", ...]``."""
    return (["chief:0"] + [f"worker:{i}" for i in range(self.workers - 1)]
            + [f"ps:{i}" for i in range(self.parameter_servers)])


def tf_config(job: Job, ports: list[int], task: str) -> dict[str, Any]:
  """The ``TF_CONFIG`` of ``task`` (``"chief:0"``, ``"worker:1"``) in a local job."""
  addresses = [f"127.0.0.1:{p}" for p in ports]
  cluster = {"chief": addresses[:1], "worker": addresses[1:job.workers]}
  if job.parameter_servers:
    cluster["ps"] = addresses[job.workers:]
  task_type, index = task.split(":")
  return {"cluster": cluster, "task": {"type": task_type, "index": int(index)}}


def _tail(path: str) -> str:
  try:
    with open(path, errors="replace") as f:
      return "".join(f.readlines()[-_LOG_TAIL_LINES:])
  except OSError:
    return "(no log)"


def _stop(procs: dict[str, subprocess.Popen]) -> None:
  for proc in procs.values():
    if proc.poll() is None:
      proc.terminate()
  deadline = time.monotonic() + STOP_GRACE_S
  for proc in procs.values():
    try:
      proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()


def run_job(job: Job, *, executor_class: str, input_dict, output_dict,
            exec_properties: dict[str, Any], pipeline_run_id: Optional[str],
            log_dir: str) -> None:
  """Runs ``executor_class`` in one process per task, with a ``TF_CONFIG`` each.

  With MultiWorkerMirroredStrategy every task trains and must finish; with
  parameter servers the chief trains (workers and ps tasks serve until stopped),
  and the job is done when the chief is.

  Args:
    job: The tasks.
    executor_class: ``module.Class`` of the executor each process runs.
    input_dict, output_dict, exec_properties: The execution, as the launcher got it.
    pipeline_run_id: Passed on, so the tasks find the run's resume dir.
    log_dir: Where the job file and each task's log go.

  Raises:
    ClusterError: a task exited non-zero (the others are stopped).
  """
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  os.makedirs(log_dir, exist_ok=True)
  job_file = os.path.join(log_dir, "job.json")
  with open(job_file, "w") as f:
    json.dump({"executor_class": executor_class,
               "inputs": artifact_utils.jsonify_artifact_dict(input_dict),
               "outputs": artifact_utils.jsonify_artifact_dict(output_dict),
               "exec_properties": exec_properties,
               "pipeline_run_id": pipeline_run_id}, f)
  tasks = job.tasks
  ports = free_ports(len(tasks))
  # The tasks import what this process imports (e.g. a module file's folder).
  path = os.pathsep.join(p for p in sys.path if p)
  procs: dict[str, subprocess.Popen] = {}
  logs = {task: os.path.join(log_dir, task.replace(":", "-") + ".log") for task in tasks}
  try:
    for task in tasks:
      env = dict(os.environ, TF_CONFIG=json.dumps(tf_config(job, ports, task)),
                 TF_USE_LEGACY_KERAS="1", PYTHONPATH=path)
      with open(logs[task], "w") as log:
        procs[task] = subprocess.Popen(
            [sys.executable, "-m", __name__, job_file, task],
            env=env, stdout=log, stderr=subprocess.STDOUT)
    logging.info("GnnTrainer local job: %d tasks on 127.0.0.1 ports %s: %s; logs in %s",
                 len(tasks), ports, {t: p.pid for t, p in procs.items()}, log_dir)
    finished = set()
    # Done when every task finished; with parameter servers when the chief did
    # (the others serve until stopped). Any task failing fails the job.
    while not ("chief:0" in finished
               and (job.parameter_servers or len(finished) == len(procs))):
      time.sleep(0.2)
      for task, proc in procs.items():
        code = proc.poll()
        if code is None or task in finished:
          continue
        if code != 0:
          _stop(procs)
          how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
          raise ClusterError(
              f"GnnTrainer local job: task {task} (pid {proc.pid}) {how}; the other tasks "
              f"were stopped. Its log {logs[task]} ends:\n{_tail(logs[task])}")
        finished.add(task)
        logging.info("GnnTrainer local job: task %s finished.", task)
  finally:
    _stop(procs)


def main(argv: list[str]) -> None:
  """Worker entry point: ``<job.json> <task>`` with ``TF_CONFIG`` set."""
  import gnn_trainer_component  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from tfx.dsl.components.base import base_executor  # pylint: disable=g-import-not-at-top
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.utils import import_utils  # pylint: disable=g-import-not-at-top
  job_file, task = argv[1], argv[2]
  logging.set_verbosity(logging.INFO)
  # The launcher stops tasks with SIGTERM: exit at once (no atexit waits on peers).
  signal.signal(signal.SIGTERM, lambda *_: os._exit(128 + signal.SIGTERM))  # pylint: disable=protected-access
  with open(job_file) as f:
    job = json.load(f)
  logging.info("GnnTrainer local job task %s, TF_CONFIG %s", task, os.environ.get("TF_CONFIG"))
  executor_cls = import_utils.import_class_by_path(job["executor_class"])
  executor = executor_cls(base_executor.BaseExecutor.Context(
      pipeline_run_id=job["pipeline_run_id"]))
  executor.Do(artifact_utils.parse_artifact_dict(job["inputs"]),
              artifact_utils.parse_artifact_dict(job["outputs"]), job["exec_properties"])


if __name__ == "__main__":
  main(sys.argv)
