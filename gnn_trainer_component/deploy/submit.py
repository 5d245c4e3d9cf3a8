"""What the two submitters share: the compiled file, its pipeline root and its parameters.

:mod:`gnn_trainer_component.deploy.submit_vertex` (``gnn-vertex-submit``) and
:mod:`gnn_trainer_component.deploy.submit_kfp` (``gnn-kfp-submit``) read and
check a compiled pipeline the same way before each builds its own request; the
wording that differs between them (which flag, what a file lacks) is theirs.
TFX-free, like both submitters.
"""

from __future__ import annotations

import argparse
from typing import Any, Mapping, Optional, Sequence

from gnn_trainer_component.deploy import pipeline_job


def new_parser(prog: str, description: str, pipeline_file_help: str) -> argparse.ArgumentParser:
  """A submitter's parser, starting with the required ``--pipeline-file``."""
  p = argparse.ArgumentParser(prog=prog, description=description)
  p.add_argument("--pipeline-file", required=True, help=pipeline_file_help)
  return p


def load_checked(pipeline_file: str, *,
                 require_gcs_wheels: bool) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
  """Reads a compiled pipeline file and validates its PipelineSpec.

  Args:
    pipeline_file: Compiled PipelineJob JSON or PipelineSpec YAML.
    require_gcs_wheels: The user-module wheels must be on ``gs://``.

  Returns:
    ``(PipelineJob dict, its pipelineSpec, the GnnTrainer task names)``.

  Raises:
    PipelineValidationError: naming the bad file or task.
  """
  job = pipeline_job.load_pipeline_file(pipeline_file)
  spec = job["pipelineSpec"]
  gnn_tasks = pipeline_job.validate_pipeline_spec(spec, require_gcs_wheels=require_gcs_wheels)
  return job, spec, gnn_tasks


def pipeline_root(job: Mapping[str, Any], given: Optional[str], missing: str) -> str:
  """``--pipeline-root`` if given, else the compiled ``runtimeConfig.gcsOutputDirectory``.

  Args:
    job: The PipelineJob dict from :func:`load_checked`.
    given: The ``--pipeline-root`` value, or None.
    missing: Why the file may carry no root, said in the error.

  Raises:
    PipelineValidationError: neither gives a root.
  """
  root = given or job.get("runtimeConfig", {}).get("gcsOutputDirectory")
  if not root:
    raise pipeline_job.PipelineValidationError(
        f"No pipeline root: pass --pipeline-root gs://BUCKET/... ({missing}).")
  return root


def declared_parameters(spec: Mapping[str, Any]) -> Mapping[str, Any]:
  """The pipeline's runtime parameters: root input name -> its definition."""
  return spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})


def check_declared(declared: Mapping[str, Any], name: str, subject: str,
                   noun: str = "parameter") -> None:
  """Raises PipelineValidationError, starting with ``subject``, if ``name`` is not declared."""
  if name not in declared:
    raise pipeline_job.PipelineValidationError(
        f"{subject}: the pipeline has no such {noun}; declared: {sorted(declared) or 'none'}.")


def gnn_trainer_parameters(spec: Mapping[str, Any],
                           gnn_tasks: Sequence[str]) -> dict[str, dict[str, Any]]:
  """GnnTrainer task name -> its parameters, as a dry run prints them."""
  return {t: pipeline_job.task_parameters(spec, t) for t in gnn_tasks}
