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

The worker pools and the cluster each replica sees are :mod:`job_spec`.

Everything here is pure (dicts in, dicts out) except :func:`run_on_vertex`.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any, Mapping, Optional

from absl import logging

from gnn_trainer_component import errors
from gnn_trainer_component.distributed import job_spec as job_spec_lib

#: What every replica runs: TFX's generic executor entry point (as
#: ``training_clients.AbstractJobClient.generate_container_command``).
CONTAINER_COMMAND = ("python", "-m", "tfx.scripts.run_executor")
#: Passes the launcher's pipeline run id to the replicas (their resume dir).
PIPELINE_RUN_ID_ENV = "GNN_TRAINER_PIPELINE_RUN_ID"
#: ``custom_config`` keys that make an execution a launcher; replicas get none of them.
LAUNCH_KEYS = ("ai_platform_training_args", "ai_platform_vertex_region",
               "ai_platform_enable_vertex", "local_workers", "local_parameter_servers")


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
  from tfx.types import artifact_utils  # Imported here: importing this module loads no TFX.
  command = list(CONTAINER_COMMAND) + [
      "--executor_class_path", executor_class_path,
      "--inputs", artifact_utils.jsonify_artifact_dict(input_dict),
      "--outputs", artifact_utils.jsonify_artifact_dict(output_dict),
      "--exec-properties", json.dumps(replica_exec_properties(exec_properties),
                                      sort_keys=True)]
  spec = copy.deepcopy(dict(job_spec))
  for pool in spec["worker_pool_specs"]:
    if not job_spec_lib.replica_count(pool):
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


class VertexJobError(errors.GnnError, RuntimeError):
  """The CustomJob could not be submitted to Vertex AI."""


#: Seconds between two polls of a running CustomJob, and reconnects allowed in a row
#: (TFX's ``google_cloud_ai_platform.runner`` uses the same values).
POLL_SECONDS = 30
RECONNECTS = 5


def run_on_vertex(job: Mapping[str, Any], *, project: str, region: str) -> None:
  """Submits ``job`` to Vertex AI in ``project``/``region`` and waits until it ends.

  Through TFX's public Vertex client (``training_clients.VertexJobClient``),
  polled as TFX's own launcher polls it: reconnecting on a dropped connection.

  Raises:
    VertexJobError: no Google Cloud credentials here, or the job failed or was
      cancelled (with Vertex AI's response).
  """
  from google.auth import exceptions as auth_exceptions
  from tfx.extensions.google_cloud_ai_platform import training_clients
  try:
    client = training_clients.VertexJobClient(vertex_region=region)
    client.launch_job(project, dict(job))
  except auth_exceptions.DefaultCredentialsError as e:
    raise VertexJobError(
        f"GnnTrainer could not submit CustomJob {job.get('display_name')!r} to Vertex AI "
        f"(project {project!r}, region {region!r}): no Google Cloud credentials in this "
        "process. On Vertex AI Pipelines the step's service account needs "
        "aiplatform.customJobs.create; elsewhere run `gcloud auth application-default "
        f"login` or set GOOGLE_APPLICATION_CREDENTIALS. ({e})") from e
  response, failures = client.get_job(), 0
  while client.get_job_state(response) not in client.JOB_STATES_COMPLETED:
    time.sleep(POLL_SECONDS)
    try:
      response, failures = client.get_job(), 0
    except ConnectionError as e:
      failures += 1
      if failures > RECONNECTS:
        raise
      logging.warning("GnnTrainer: polling CustomJob %s failed (%s); reconnecting.",
                      client.get_job_name(), e)
      client.create_client()
  if client.get_job_state(response) in client.JOB_STATES_FAILED:
    raise VertexJobError(
        f"GnnTrainer's CustomJob {client.get_job_name()} did not succeed: {response}")
  logging.info("GnnTrainer: CustomJob %s succeeded.", client.get_job_name())
