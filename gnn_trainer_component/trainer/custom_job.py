"""GnnTrainer's training as a Vertex AI CustomJob: worker pools and what each replica sees.

A multi-machine GnnTrainer execution is a launcher: the pipeline step builds a
`CustomJob <https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.customJobs>`_
whose worker pools all run this same executor on the same artifacts, waits for
it, and publishes what the chief wrote. This is TFX's own pattern
(``tfx.extensions.google_cloud_ai_platform``: ``training_clients.VertexJobClient``
builds the job, ``runner`` submits and polls it) with GnnTrainer's executor in
the replicas. The same job runs on Vertex AI (``ai_platform_training_args``) or
on this machine (``local_workers``, :mod:`local_cluster`), where each replica
gets the environment Vertex AI gives it.

Worker pool ``i`` holds task type :data:`TASK_OF_POOL` ``[i]``, as Vertex AI maps
pools for TensorFlow: 0 the chief (one replica), 1 the workers, 2 the parameter
servers. Vertex AI sets ``CLUSTER_SPEC`` (pools by name) and ``TF_CONFIG`` in
every replica; :func:`tf_config_from_cluster_spec` derives the second from the
first when only ``CLUSTER_SPEC`` is there.

Everything here is pure (dicts in, dicts out) except :func:`run_on_vertex`.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping, Optional, Sequence

#: Task type of each worker pool, by position (Vertex AI's mapping for TensorFlow).
TASK_OF_POOL = ("chief", "worker", "ps", "evaluator")
#: What every replica runs: TFX's generic executor entry point (as
#: ``training_clients.AbstractJobClient.generate_container_command``).
CONTAINER_COMMAND = ("python", "-m", "tfx.scripts.run_executor")
#: Passes the launcher's pipeline run id to the replicas (their resume dir).
PIPELINE_RUN_ID_ENV = "GNN_TRAINER_PIPELINE_RUN_ID"
#: ``custom_config`` keys that make an execution a launcher; replicas get none of them.
LAUNCH_KEYS = ("ai_platform_training_args", "ai_platform_vertex_region",
               "ai_platform_enable_vertex", "local_workers", "local_parameter_servers")


def local_job_spec(workers: int, parameter_servers: int = 0) -> dict[str, Any]:
  """The ``job_spec`` of a job on this machine: a chief, workers, parameter servers."""
  pools = [{"replica_count": 1}, {"replica_count": workers - 1}]
  if parameter_servers:
    pools.append({"replica_count": parameter_servers})
  return {"worker_pool_specs": pools}


def replica_count(pool: Mapping[str, Any]) -> int:
  """Replicas of a worker pool (an empty placeholder pool ``{}`` has none)."""
  return int(pool.get("replica_count", 1 if pool else 0))


def training_replicas(job_spec: Mapping[str, Any]) -> int:
  """Replicas that train in sync (chief + workers) under MultiWorkerMirroredStrategy."""
  return sum(replica_count(p) for p in job_spec["worker_pool_specs"][:2])


def replica_exec_properties(exec_properties: Mapping[str, Any]) -> dict[str, Any]:
  """The launcher's execution properties with the launch keys removed (replicas train)."""
  out = dict(exec_properties)
  custom_config = out.get("custom_config")
  if custom_config:
    as_json = isinstance(custom_config, str)
    config = json.loads(custom_config) if as_json else dict(custom_config)
    for key in LAUNCH_KEYS:
      config.pop(key, None)
    out["custom_config"] = json.dumps(config, sort_keys=True) if as_json else config
  return out


def custom_job(*, job_spec: Mapping[str, Any], display_name: str, executor_class_path: str,
               input_dict, output_dict, exec_properties: Mapping[str, Any],
               pipeline_run_id: Optional[str],
               labels: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
  """The CustomJob (REST/gapic dict) whose replicas run ``executor_class_path``.

  As TFX's ``VertexJobClient.create_training_job``: every pool's
  ``container_spec.command`` becomes ``python -m tfx.scripts.run_executor
  --executor_class_path ... --inputs ... --outputs ... --exec-properties ...``
  (the artifacts as TFX serializes them), with the launch keys removed from
  ``custom_config``; the pipeline run id goes to ``container_spec.env``.
  """
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  command = list(CONTAINER_COMMAND) + [
      "--executor_class_path", executor_class_path,
      "--inputs", artifact_utils.jsonify_artifact_dict(input_dict),
      "--outputs", artifact_utils.jsonify_artifact_dict(output_dict),
      "--exec-properties", json.dumps(replica_exec_properties(exec_properties),
                                      sort_keys=True)]
  spec = copy.deepcopy(dict(job_spec))
  for pool in spec["worker_pool_specs"]:
    if not replica_count(pool):
      continue
    container = pool.setdefault("container_spec", {})
    container["command"] = command
    container.pop("args", None)
    if pipeline_run_id:
      env = [e for e in container.get("env", []) if e.get("name") != PIPELINE_RUN_ID_ENV]
      container["env"] = env + [{"name": PIPELINE_RUN_ID_ENV, "value": pipeline_run_id}]
  job = {"display_name": display_name, "job_spec": spec}
  if labels:
    job["labels"] = dict(labels)
  return job


def display_name(model_uri: str, pipeline_run_id: Optional[str]) -> str:
  """A CustomJob display name naming the run and the execution (<= 128 chars)."""
  execution = model_uri.rstrip("/").rsplit("/", 1)[-1]
  return "-".join(p for p in ("gnn-trainer", pipeline_run_id, execution) if p)[:128]


def cluster_spec(addresses: Sequence[Sequence[str]], pool: int, index: int) -> dict[str, Any]:
  """The ``CLUSTER_SPEC`` Vertex AI sets in replica ``index`` of worker pool ``pool``.

  Args:
    addresses: ``host:port`` of every replica, per pool (empty for an empty pool).
    pool: This replica's pool.
    index: Its index in the pool.
  """
  cluster = {f"workerpool{i}": list(a) for i, a in enumerate(addresses) if a}
  return {"cluster": cluster, "environment": "cloud",
          "task": {"type": f"workerpool{pool}", "index": index}}


class VertexJobError(RuntimeError):
  """The CustomJob could not be submitted to Vertex AI."""


class ClusterSpecError(ValueError):
  """``CLUSTER_SPEC`` is not what Vertex AI sets."""


def tf_config_from_cluster_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
  """The ``TF_CONFIG`` Vertex AI sets next to ``CLUSTER_SPEC``: pools renamed to tasks.

  ``workerpool0`` -> ``chief``, ``workerpool1`` -> ``worker``, ``workerpool2`` ->
  ``ps``; an evaluator (``workerpool3``) is not part of the training cluster.

  Raises:
    ClusterSpecError: a pool name other than ``workerpool0``..``workerpool3``.
  """
  def task_type(pool_name: str) -> str:
    number = pool_name[len("workerpool"):]
    if not pool_name.startswith("workerpool") or not number.isdigit() or int(number) > 3:
      raise ClusterSpecError(
          f"CLUSTER_SPEC names pool {pool_name!r}; Vertex AI names them workerpool0 "
          f"(chief) .. workerpool3 (evaluator). CLUSTER_SPEC: {json.dumps(dict(spec))}")
    return TASK_OF_POOL[int(number)]

  cluster = {task_type(name): list(addrs) for name, addrs in spec.get("cluster", {}).items()}
  cluster.pop("evaluator", None)
  task = spec.get("task", {})
  return {"cluster": cluster,
          "task": {"type": task_type(task.get("type", "workerpool0")),
                   "index": int(task.get("index", 0))},
          "environment": spec.get("environment", "cloud")}


def run_on_vertex(job: Mapping[str, Any], *, project: str, region: str) -> None:
  """Submits ``job`` to Vertex AI in ``project``/``region`` and waits until it ends.

  TFX's own launch loop (``tfx.extensions.google_cloud_ai_platform.runner``:
  ``VertexJobClient.launch_job``, then polling with reconnects).

  Raises:
    VertexJobError: no Google Cloud credentials here.
    RuntimeError: the job failed or was cancelled (TFX's message, with the response).
  """
  # pylint: disable=g-import-not-at-top,protected-access
  from google.auth import exceptions as auth_exceptions
  from tfx.extensions.google_cloud_ai_platform import runner
  try:
    runner._launch_cloud_training(project=project, training_job=dict(job), enable_vertex=True,
                                  vertex_region=region)
  except auth_exceptions.DefaultCredentialsError as e:
    raise VertexJobError(
        f"GnnTrainer could not submit CustomJob {job.get('display_name')!r} to Vertex AI "
        f"(project {project!r}, region {region!r}): no Google Cloud credentials in this "
        "process. On Vertex AI Pipelines the step's service account needs "
        "aiplatform.customJobs.create; elsewhere run `gcloud auth application-default "
        f"login` or set GOOGLE_APPLICATION_CREDENTIALS. ({e})") from e
