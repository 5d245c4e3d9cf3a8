"""Running a pipeline on LocalDagRunner under a chosen pipeline run id.

LocalDagRunner stamps every ``run()`` with a fresh run id (the current time).
An orchestrator that retries a failed node (Kubeflow, Vertex) keeps the run id;
``run_pipeline(p, run_id="...")`` does the same locally, so a GnnTrainer killed
mid-training resumes from its checkpoints when its pipeline run is retried.
"""

from __future__ import annotations

from typing import Optional

from tfx import v1 as tfx
from tfx.orchestration.portable import runtime_parameter_utils
from tfx.orchestration.portable import tfx_runner
from tfx.dsl.compiler import constants


def run_pipeline(pipeline: tfx.dsl.Pipeline, run_id: Optional[str] = None) -> None:
  """Runs ``pipeline`` locally; with ``run_id``, as (a retry of) that pipeline run."""
  runner = tfx.orchestration.LocalDagRunner()
  if run_id is None:
    runner.run(pipeline)
    return
  # pylint: disable=protected-access
  pipeline_ir = tfx_runner._make_pipeline_proto(pipeline)
  runtime_parameter_utils.substitute_runtime_parameter(
      pipeline_ir, {constants.PIPELINE_RUN_ID_PARAMETER_NAME: run_id})
  runner.run_with_ir(pipeline_ir)
