"""A GnnTrainer CustomJob run on this machine: one process per replica, as Vertex AI runs them.

``custom_config["local_workers"] = N`` makes the GnnTrainer executor a launcher
of the job it would submit to Vertex AI (:mod:`custom_job`): a chief and N-1
workers (with ``local_parameter_servers = K`` also K ``ps`` tasks) on
127.0.0.1 with free ports. Each replica runs its worker pool's container
command (``python -m tfx.scripts.run_executor`` with the same artifacts, in
this Python environment instead of the image) with the environment Vertex AI
gives a replica: ``CLUSTER_SPEC`` and ``TF_CONFIG``, plus the pool's
``container_spec.env``. Their strategy is ``MultiWorkerMirroredStrategy``, or
``ParameterServerStrategy`` with ps tasks (``strategy.make_strategy``); the
chief publishes, the others write nothing shared. The launcher waits for all
of them; when one fails it stops the others and raises :class:`ClusterError`
naming the task, its exit code and the end of its log
(``<model_run>/cluster/<task>.log``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

from absl import logging

from gnn_trainer_component import errors
from gnn_trainer_component.distributed import job_spec as job_spec_lib


#: Seconds the other tasks get to exit after one failed, before SIGKILL.
STOP_GRACE_S = 10.0
_LOG_TAIL_LINES = 12


class ClusterError(errors.GnnError, RuntimeError):
  """A task of a local multi-worker job failed."""


def free_ports(n: int) -> list[int]:
  """``n`` distinct TCP ports free on 127.0.0.1 right now."""
  with contextlib.ExitStack() as stack:
    socks = [stack.enter_context(socket.socket()) for _ in range(n)]
    for s in socks:
      s.bind(("127.0.0.1", 0))
    return [s.getsockname()[1] for s in socks]


def tasks(job_spec: dict[str, Any]) -> list[tuple[int, int, str]]:
  """``(pool, index, "chief:0")`` of every replica of a CustomJob's ``job_spec``."""
  return [(pool, i, f"{job_spec_lib.TASK_OF_POOL[pool]}:{i}")
          for pool, spec in enumerate(job_spec["worker_pool_specs"])
          for i in range(job_spec_lib.replica_count(spec))]


def replica_env(job_spec: dict[str, Any], ports: list[int], pool: int, index: int, *,
                with_tf_config: bool = True) -> dict[str, str]:
  """What Vertex AI sets in a replica: ``CLUSTER_SPEC``, ``TF_CONFIG`` and the pool's env."""
  addresses, it = [], iter(ports)
  for spec in job_spec["worker_pool_specs"]:
    addresses.append([f"127.0.0.1:{next(it)}" for _ in range(job_spec_lib.replica_count(spec))])
  cluster = job_spec_lib.cluster_spec(addresses, pool, index)
  env = {"CLUSTER_SPEC": json.dumps(cluster)}
  if with_tf_config:
    env["TF_CONFIG"] = json.dumps(job_spec_lib.tf_config_from_cluster_spec(cluster))
  container = job_spec["worker_pool_specs"][pool].get("container_spec", {})
  env.update({e["name"]: e["value"] for e in container.get("env", [])})
  return env


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


def run_job(job: dict[str, Any], *, log_dir: str, with_tf_config: bool = True) -> None:
  """Runs every replica of the CustomJob ``job`` as a process here and waits.

  With MultiWorkerMirroredStrategy every replica trains and must finish; with
  parameter servers the chief trains (workers and ps tasks serve until
  stopped), and the job is done when the chief is.

  Args:
    job: A CustomJob dict (:func:`custom_job.custom_job`).
    log_dir: Where each task's log goes (``chief-0.log``, ``worker-1.log``, ...).
    with_tf_config: Also set ``TF_CONFIG`` (Vertex AI does); False leaves only
      ``CLUSTER_SPEC``, from which the executor reads its cluster.

  Raises:
    ClusterError: a task exited non-zero (the others are stopped).
  """
  os.makedirs(log_dir, exist_ok=True)
  spec = job["job_spec"]
  replicas = tasks(spec)
  ports = free_ports(len(replicas))
  has_ps = len(spec["worker_pool_specs"]) > 2
  # The tasks import what this process imports (e.g. a module file's folder).
  path = os.pathsep.join(p for p in sys.path if p)
  procs: dict[str, subprocess.Popen] = {}
  logs = {task: os.path.join(log_dir, task.replace(":", "-") + ".log") for _, _, task in replicas}
  try:
    for pool, index, task in replicas:
      command = list(spec["worker_pool_specs"][pool]["container_spec"]["command"])
      if command[0] == "python":
        command[0] = sys.executable  # this environment stands in for the image
      env = dict(os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=path)
      env.pop("TF_CONFIG", None)
      env.update(replica_env(spec, ports, pool, index, with_tf_config=with_tf_config))
      with open(logs[task], "w") as log:
        procs[task] = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    logging.info("GnnTrainer local job %s: %d tasks on 127.0.0.1 ports %s: %s; logs in %s",
                 job.get("display_name"), len(replicas), ports,
                 {t: p.pid for t, p in procs.items()}, log_dir)
    finished = set()
    # Done when every task finished; with parameter servers when the chief did
    # (the others serve until stopped). Any task failing fails the job.
    while not ("chief:0" in finished and (has_ps or len(finished) == len(procs))):
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
