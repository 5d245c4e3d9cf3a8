r"""Submits a compiled GnnTrainer pipeline to a Kubeflow Pipelines 2.x cluster.

Usage::

  gnn-kfp-submit --pipeline-file build/gnn-demo.json \
      --host https://KFP_HOST --pipeline-root gs://BUCKET/pipeline_root \
      [--experiment gnn] [--namespace kubeflow-user] [--dry-run]

The KFP 2 client (``kfp.Client.create_run_from_pipeline_package``) only takes
PipelineSpec YAML (or a .zip/.tar.gz of it), not the PipelineJob JSON Vertex
takes, so a ``.json`` input is converted to ``<name>.yaml`` first (the YAML
holds only ``pipelineSpec``: the pipeline root must be passed explicitly).

TFX executors read and write artifact URIs with ``tf.io.gfile``, so the pipeline
root must be a store the pods can reach that way: ``gs://`` (pods need GCS
credentials, e.g. Workload Identity). KFP's default ``minio://`` root is not
readable by TF; ``--allow-any-root`` skips that check for setups where you
know better (e.g. a shared volume path).

``--dry-run`` validates the file and arguments, writes the YAML, parses it the
way the KFP client does and prints the run it would create. No network.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Mapping, Optional, Sequence

from gnn_trainer_component.deploy import pipeline_job
from gnn_trainer_component.deploy import submit

_K8S_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def yaml_package(pipeline_file: str, yaml_output: Optional[str] = None) -> str:
  """Returns a PipelineSpec YAML path for ``pipeline_file``, converting JSON if needed."""
  if pipeline_file.endswith((".yaml", ".yml")):
    pipeline_job.load_pipeline_file(pipeline_file)  # existence / parse check
    return pipeline_file
  job = pipeline_job.load_pipeline_file(pipeline_file)
  out = yaml_output or os.path.splitext(pipeline_file)[0] + ".yaml"
  with open(out, "w", encoding="utf-8") as fh:
    fh.write(f"# PipelineSpec of {os.path.basename(pipeline_file)}, for the KFP 2 client.\n")
    fh.write(pipeline_job.to_yaml(job["pipelineSpec"]))
  return out


def prepare_run(*, pipeline_file: str, pipeline_root: Optional[str] = None,
                host: Optional[str] = None, run_name: Optional[str] = None,
                experiment: Optional[str] = None, namespace: Optional[str] = None,
                service_account: Optional[str] = None,
                enable_caching: Optional[bool] = None,
                arguments: Optional[Mapping[str, Any]] = None,
                yaml_output: Optional[str] = None,
                allow_any_root: bool = False,
                require_host: bool = True) -> dict[str, Any]:
  """Validates everything and returns the keyword arguments for the KFP client.

  Args:
    pipeline_file: Compiled PipelineJob JSON or PipelineSpec YAML.
    pipeline_root: Artifact root (default: the JSON's gcsOutputDirectory).
    host: KFP API endpoint, ``http(s)://...``.
    run_name: Run name (default: ``<pipeline name> <time>`` by the client).
    experiment: Experiment name (default: the client's ``Default``).
    namespace: Kubernetes namespace (multi-user KFP).
    service_account: Kubernetes service account the run's pods use.
    enable_caching: Overrides the compiled caching option when not None.
    arguments: Pipeline (root) parameter values.
    yaml_output: Where to write the converted YAML.
    allow_any_root: Accept a non-gs:// root / local wheel path.
    require_host: Require ``host`` (False for dry runs).

  Returns:
    ``{"host", "namespace", "create_run_from_pipeline_package": kwargs, "pipeline_spec": dict}``.

  Raises:
    PipelineValidationError: naming the bad file or argument.
  """
  job, spec, gnn_tasks = submit.load_checked(pipeline_file, require_gcs_wheels=not allow_any_root)
  if require_host and not host:
    raise pipeline_job.PipelineValidationError("--host is required (the KFP API endpoint).")
  if host and not re.match(r"^https?://[^\s/]+", host):
    raise pipeline_job.PipelineValidationError(
        f"--host {host!r} must be an http(s):// URL of the KFP API, e.g. "
        "https://xxxx-dot-us-central1.pipelines.googleusercontent.com or http://localhost:8080.")
  root = submit.pipeline_root(job, pipeline_root, "a YAML file carries none")
  if not allow_any_root and not root.startswith("gs://"):
    raise pipeline_job.PipelineValidationError(
        f"Pipeline root {root!r} is not gs://: TFX executors write artifacts with "
        "tf.io.gfile, which cannot write minio:// or s3:// in this image. Use a gs:// root "
        "(or --allow-any-root if the pods can reach this path).")
  for flag, value in (("--namespace", namespace), ("--service-account", service_account)):
    if value and not _K8S_NAME_RE.match(value):
      raise pipeline_job.PipelineValidationError(
          f"{flag} {value!r} is not a valid Kubernetes name.")
  declared = submit.declared_parameters(spec)
  for name in arguments or {}:
    submit.check_declared(declared, name, f"Argument {name!r}")

  package = yaml_package(pipeline_file, yaml_output)
  # Parse the YAML exactly as kfp.Client does before uploading it.
  import yaml
  with open(package, encoding="utf-8") as fh:
    docs = [d for d in yaml.safe_load_all(fh) if d is not None]
  if not docs:
    raise pipeline_job.PipelineValidationError(f"{package} holds no YAML document.")
  pipeline_job.parse_pipeline_spec(docs[0])
  pipeline_job.validate_pipeline_spec(docs[0], require_gcs_wheels=not allow_any_root)

  kwargs = {"pipeline_file": package, "arguments": dict(arguments or {}),
            "run_name": run_name, "experiment_name": experiment, "namespace": namespace,
            "pipeline_root": root, "enable_caching": enable_caching,
            "service_account": service_account}
  return {"host": host, "namespace": namespace,
          "create_run_from_pipeline_package": kwargs,
          "gnn_trainer": submit.gnn_trainer_parameters(spec, gnn_tasks),
          "pipeline_spec": docs[0]}


def request_body(prepared: Mapping[str, Any]):
  """The ``kfp_server_api.V2beta1Run`` body the client would POST (experiment id aside)."""
  import kfp_server_api
  kw = prepared["create_run_from_pipeline_package"]
  return kfp_server_api.V2beta1Run(
      display_name=kw["run_name"] or prepared["pipeline_spec"]["pipelineInfo"]["name"],
      pipeline_spec=prepared["pipeline_spec"],
      runtime_config=kfp_server_api.V2beta1RuntimeConfig(
          pipeline_root=kw["pipeline_root"], parameters=kw["arguments"]),
      service_account=kw["service_account"])


def _parser() -> argparse.ArgumentParser:
  p = submit.new_parser("gnn-kfp-submit", "Submit a compiled pipeline to Kubeflow Pipelines 2.x.",
                        "PipelineJob JSON or PipelineSpec YAML from gnn-kfp-compile.")
  p.add_argument("--host", help="KFP API endpoint (http(s)://...).")
  p.add_argument("--pipeline-root", help="gs:// artifact root (default: the compiled one).")
  p.add_argument("--yaml-output", help="Where to write the YAML (default: next to the JSON).")
  p.add_argument("--run-name")
  p.add_argument("--experiment", help="Experiment name.")
  p.add_argument("--namespace", help="Kubernetes namespace (multi-user KFP).")
  p.add_argument("--service-account", help="Kubernetes service account of the run's pods.")
  p.add_argument("--existing-token", help="Bearer token for the KFP API.")
  pipeline_job.add_caching_flags(p)
  p.add_argument("--argument", action="append", help="KEY=VALUE pipeline parameter.")
  p.add_argument("--allow-any-root", action="store_true",
                 help="Do not insist on gs:// for the root and the module wheel.")
  p.add_argument("--dry-run", action="store_true",
                 help="Validate, write the YAML and print the run; no network.")
  return p


def _run(args: argparse.Namespace) -> int:
  prepared = prepare_run(
      pipeline_file=args.pipeline_file, pipeline_root=args.pipeline_root, host=args.host,
      run_name=args.run_name, experiment=args.experiment, namespace=args.namespace,
      service_account=args.service_account, enable_caching=args.enable_caching,
      arguments=pipeline_job.parse_key_values(args.argument, "--argument"),
      yaml_output=args.yaml_output, allow_any_root=args.allow_any_root,
      require_host=not args.dry_run)
  kwargs = prepared["create_run_from_pipeline_package"]
  if args.dry_run:
    body = {k: v for k, v in request_body(prepared).to_dict().items() if v is not None}
    body["pipeline_spec"] = {"pipelineInfo": body["pipeline_spec"]["pipelineInfo"],
                             "tasks": sorted(body["pipeline_spec"]["root"]["dag"]["tasks"])}
    print(f"DRY RUN: would call kfp.Client(host={args.host!r}).create_run_from_pipeline_package(")
    print(json.dumps(kwargs, indent=2, sort_keys=True) + ")")
    print("request body (pipeline_spec abridged):")
    print(json.dumps({"run": body, "gnn_trainer": prepared["gnn_trainer"]},
                     indent=2, sort_keys=True, default=str))
    return 0
  import kfp
  client = kfp.Client(host=args.host, namespace=args.namespace or "kubeflow",
                      existing_token=args.existing_token)
  result = client.create_run_from_pipeline_package(**kwargs)
  print(f"Submitted run {result.run_id}")
  return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
  """CLI entry point; returns the exit code (2: bad arguments or pipeline file)."""
  return pipeline_job.run_cli(_parser(), _run, argv)


if __name__ == "__main__":
  sys.exit(main())
