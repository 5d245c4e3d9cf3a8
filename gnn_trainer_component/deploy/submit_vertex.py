r"""Submits a compiled GnnTrainer pipeline (PipelineJob JSON) to Vertex AI Pipelines.

Usage::

  gnn-vertex-submit --pipeline-file build/gnn-demo.json \
      --project PROJECT --region us-central1 \
      --service-account gnn-pipelines@PROJECT.iam.gserviceaccount.com \
      [--pipeline-root gs://BUCKET/pipeline_root] [--dry-run]

``--dry-run`` does everything except the API call: it checks the file (parses
as a KFP PipelineSpec, GnnTrainer task present with valid parameters, module
wheel on GCS), the arguments (project, region, gs:// pipeline root, service
account, labels, parameter values), builds the real
``google.cloud.aiplatform.PipelineJob`` offline (anonymous credentials, no
network) and prints the request it would send.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, Mapping, Optional, Sequence

from gnn_trainer_component.deploy import pipeline_job
from gnn_trainer_component.deploy import submit

_SA_RE = re.compile(r"^[^@\s]+@[^@\s]+\.iam\.gserviceaccount\.com$|^[^@\s]+@[^@\s]+$")


def _parameter_values(spec: Mapping[str, Any], raw: Mapping[str, str]) -> dict[str, Any]:
  """Checks runtime parameter values against the pipeline's root inputs."""
  declared = submit.declared_parameters(spec)
  out: dict[str, Any] = {}
  for name, text in raw.items():
    submit.check_declared(declared, name, f"--parameter {name}", "runtime parameter")
    ptype = declared[name].get("parameterType") or declared[name].get("type")
    try:
      if ptype in ("NUMBER_INTEGER", "INT"):
        out[name] = int(text)
      elif ptype in ("NUMBER_DOUBLE", "DOUBLE"):
        out[name] = float(text)
      elif ptype == "BOOLEAN":
        if text.lower() not in ("true", "false"):
          raise ValueError(text)
        out[name] = text.lower() == "true"
      elif ptype in ("STRUCT", "LIST"):
        out[name] = json.loads(text)
      else:
        out[name] = text
    except ValueError as e:
      raise pipeline_job.PipelineValidationError(
          f"--parameter {name}={text!r} is not a valid {ptype}.") from e
  return out


def _check_target(job_dict: Mapping[str, Any], *, project: str, region: str,
                  pipeline_root: Optional[str], service_account: Optional[str]) -> str:
  """Checks where the run goes; returns its ``gs://`` pipeline root."""
  if not project or not pipeline_job.PROJECT_RE.match(project):
    raise pipeline_job.PipelineValidationError(
        f"--project {project!r} is not a GCP project id (6-30 lowercase letters, digits, dashes).")
  if not region or not pipeline_job.REGION_RE.match(region):
    raise pipeline_job.PipelineValidationError(
        f"--region {region!r} is not a Vertex AI region such as 'us-central1'.")
  root = submit.pipeline_root(job_dict, pipeline_root,
                              "the file has no runtimeConfig.gcsOutputDirectory")
  if not root.startswith("gs://") or len(root) <= len("gs://"):
    raise pipeline_job.PipelineValidationError(
        f"Pipeline root {root!r} is not a gs:// path: Vertex AI Pipelines writes "
        "artifacts to Cloud Storage only. Recompile with --pipeline-root gs://BUCKET/...")
  if service_account and not _SA_RE.match(service_account):
    raise pipeline_job.PipelineValidationError(
        f"--service-account {service_account!r} is not a service account email.")
  return root


def _new_pipeline_job(pipeline_file: str, *, project: str, region: str, pipeline_root: str,
                      display_name: str, job_id: Optional[str],
                      enable_caching: Optional[bool], labels: Optional[Mapping[str, str]],
                      parameter_values: Mapping[str, Any], offline: bool):
  """``aiplatform.PipelineJob(...)``; anonymous credentials when ``offline``."""
  # Imported here: google-cloud-aiplatform loads only when a job is built.
  from google.cloud import aiplatform
  credentials = None
  if offline:
    from google.auth import credentials as auth_credentials
    credentials = auth_credentials.AnonymousCredentials()
  try:
    return aiplatform.PipelineJob(
        display_name=display_name, template_path=pipeline_file, job_id=job_id,
        pipeline_root=pipeline_root, parameter_values=parameter_values or None,
        enable_caching=enable_caching, labels=dict(labels) if labels else None,
        project=project, location=region, credentials=credentials)
  except ValueError as e:
    raise pipeline_job.PipelineValidationError(
        f"aiplatform.PipelineJob rejected the job: {e}") from e


def _images(spec: Mapping[str, Any]) -> list[str]:
  """The container images of the pipeline's tasks, sorted."""
  executors = spec["deploymentSpec"]["executors"]
  return sorted({pipeline_job.task_container(spec, t)["image"]
                 for t in spec["root"]["dag"]["tasks"]
                 if "container" in executors[
                     pipeline_job.task_component(spec, t)["executorLabel"]]})


def build_pipeline_job(*, pipeline_file: str, project: str, region: str,
                       pipeline_root: Optional[str] = None,
                       display_name: Optional[str] = None,
                       job_id: Optional[str] = None,
                       service_account: Optional[str] = None,
                       enable_caching: Optional[bool] = None,
                       labels: Optional[Mapping[str, str]] = None,
                       parameter_values: Optional[Mapping[str, str]] = None,
                       offline: bool = False):
  """Validates everything and builds the ``aiplatform.PipelineJob``.

  Args:
    pipeline_file: Compiled PipelineJob JSON (or PipelineSpec YAML).
    project: GCP project id.
    region: Vertex region, e.g. ``us-central1``.
    pipeline_root: ``gs://`` artifact root (default: the compiled
      ``runtimeConfig.gcsOutputDirectory``).
    display_name: Run display name (default: the compiled one).
    job_id: Explicit job id (default: ``<pipeline name>-<timestamp>``).
    service_account: Service account the pipeline runs as.
    enable_caching: Overrides the compiled caching option when not None.
    labels: Run labels.
    parameter_values: Runtime parameters as strings (checked against the spec).
    offline: Build with anonymous credentials (no ADC lookup, no network).

  Returns:
    ``(google.cloud.aiplatform.PipelineJob, summary dict)``.

  Raises:
    PipelineValidationError: naming the bad file or argument.
  """
  job_dict, spec, gnn_tasks = submit.load_checked(pipeline_file, require_gcs_wheels=True)
  root = _check_target(job_dict, project=project, region=region, pipeline_root=pipeline_root,
                       service_account=service_account)
  params = _parameter_values(spec, parameter_values or {})
  job = _new_pipeline_job(
      pipeline_file, project=project, region=region, pipeline_root=root,
      display_name=display_name or job_dict.get("displayName") or spec["pipelineInfo"]["name"],
      job_id=job_id, enable_caching=enable_caching, labels=labels, parameter_values=params,
      offline=offline)
  resource = job._gca_resource  # The request it would send: aiplatform has no public API.
  summary = {
      "parent": f"projects/{project}/locations/{region}",
      "pipeline_job_id": job.job_id,
      "display_name": resource.display_name,
      "pipeline_root": resource.runtime_config.gcs_output_directory,
      "service_account": service_account,
      "labels": dict(resource.labels),
      "parameter_values": params,
      "images": _images(spec),
      "gnn_trainer": submit.gnn_trainer_parameters(spec, gnn_tasks),
  }
  return job, summary


def _parser() -> argparse.ArgumentParser:
  p = submit.new_parser("gnn-vertex-submit", "Submit a compiled pipeline to Vertex AI Pipelines.",
                        "PipelineJob JSON from gnn-kfp-compile.")
  p.add_argument("--project", required=True, help="GCP project id.")
  p.add_argument("--region", required=True, help="Vertex AI region, e.g. us-central1.")
  p.add_argument("--pipeline-root", help="gs:// root (default: the compiled one).")
  p.add_argument("--service-account", help="Service account the pipeline runs as.")
  p.add_argument("--display-name", help="Run display name.")
  p.add_argument("--job-id", help="Explicit job id.")
  pipeline_job.add_caching_flags(p)
  p.add_argument("--label", action="append", help="KEY=VALUE run label (repeatable).")
  p.add_argument("--parameter", action="append",
                 help="KEY=VALUE runtime parameter (repeatable).")
  p.add_argument("--wait", action="store_true", help="Block until the run finishes.")
  p.add_argument("--dry-run", action="store_true",
                 help="Validate and print the request; no credentials or network needed.")
  return p


def _run(args: argparse.Namespace) -> int:
  job, summary = build_pipeline_job(
      pipeline_file=args.pipeline_file, project=args.project, region=args.region,
      pipeline_root=args.pipeline_root, display_name=args.display_name, job_id=args.job_id,
      service_account=args.service_account, enable_caching=args.enable_caching,
      labels=pipeline_job.parse_key_values(args.label, "--label"),
      parameter_values=pipeline_job.parse_key_values(args.parameter, "--parameter"),
      offline=args.dry_run)
  if args.dry_run:
    print("DRY RUN: would create this Vertex AI PipelineJob "
          "(PipelineServiceClient.create_pipeline_job):")
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0
  job.submit(service_account=args.service_account)
  print(f"Submitted {job.resource_name}")
  if args.wait:
    job.wait()
  return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
  """CLI entry point; returns the exit code (2: bad arguments or pipeline file)."""
  return pipeline_job.run_cli(_parser(), _run, argv)


if __name__ == "__main__":
  sys.exit(main())
