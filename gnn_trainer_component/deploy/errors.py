"""The error of compiling a pipeline for Vertex AI Pipelines / Kubeflow Pipelines."""

from __future__ import annotations

from gnn_trainer_component import errors


class CompileError(errors.GnnError, ValueError):
  """Bad compile arguments or a compiled pipeline that would not run."""
