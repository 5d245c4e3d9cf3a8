"""Small ML Metadata queries used by the demo runner and the tests."""

from __future__ import annotations

from typing import Any

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from pipelines.runtime import mlmd_connection
from pipelines.runtime.mlmd_connection import Metadata


def store(metadata: Metadata) -> metadata_store.MetadataStore:
  """A store on a ``ConnectionConfig``, or on a SQLite file opened read-only."""
  if isinstance(metadata, metadata_store_pb2.ConnectionConfig):
    return metadata_store.MetadataStore(metadata)
  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = metadata
  config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
  return metadata_store.MetadataStore(config)


def producer(store_: metadata_store.MetadataStore, artifact_id: int):
  """``(execution, its type name)`` that first output the artifact, from MLMD's events.

  A cached execution outputs the artifact of the execution it reused again; the first
  output event is the one that made it.

  Raises:
    ValueError: no execution output the artifact.
  """
  events = [e for e in store_.get_events_by_artifact_ids([artifact_id])
            if e.type == metadata_store_pb2.Event.OUTPUT]
  if not events:
    raise ValueError(f"artifact {artifact_id} has no producing execution")
  first = min(events, key=lambda e: e.milliseconds_since_epoch)
  [execution] = store_.get_executions_by_id([first.execution_id])
  [execution_type] = store_.get_execution_types_by_id([execution.type_id])
  return execution, execution_type.name


def execution_inputs(store_: metadata_store.MetadataStore,
                     execution_id: int) -> dict[str, list]:
  """``{artifact type name: [artifacts]}`` of an execution's inputs."""
  ids = [e.artifact_id for e in store_.get_events_by_execution_ids([execution_id])
         if e.type == metadata_store_pb2.Event.INPUT]
  artifacts = store_.get_artifacts_by_id(ids)
  types = {t.id: t.name for t in store_.get_artifact_types_by_id(
      list({a.type_id for a in artifacts}))}
  out: dict[str, list] = {}
  for artifact in artifacts:
    out.setdefault(types[artifact.type_id], []).append(artifact)
  return out


def latest_artifact(metadata: Metadata, type_name: str, pipeline_name: str = None,
                    producer: str = None):
  """The newest LIVE artifact of a type (optionally in a pipeline's context).

  Args:
    metadata: The store.
    type_name: The artifact type, e.g. ``"Model"``.
    pipeline_name: Only artifacts of this pipeline.
    producer: Only artifacts this component id of ``pipeline_name`` output (a pipeline's
      trained model and its index are both ``Model`` artifacts).
  """
  s = store(metadata)
  if pipeline_name:
    ctx = s.get_context_by_type_and_name("pipeline", pipeline_name)
    arts = [a for a in s.get_artifacts_by_context(ctx.id) if a.type == type_name]
  else:
    arts = s.get_artifacts_by_type(type_name)
  if producer:
    node = s.get_context_by_type_and_name("node", f"{pipeline_name}.{producer}")
    executions = [e.id for e in s.get_executions_by_context(node.id)] if node else []
    made = {e.artifact_id for e in s.get_events_by_execution_ids(executions)
            if e.type == metadata_store_pb2.Event.OUTPUT}
    arts = [a for a in arts if a.id in made]
  arts = [a for a in arts if a.state == metadata_store_pb2.Artifact.LIVE]
  if not arts:
    raise LookupError(f"No LIVE {type_name} artifact{f' of {producer}' if producer else ''} "
                      f"in {mlmd_connection.describe(metadata)}")
  return max(arts, key=lambda a: a.id)


def custom_properties(artifact) -> dict[str, Any]:
  out = {}
  for key, value in artifact.custom_properties.items():
    kind = value.WhichOneof("value")
    out[key] = getattr(value, kind)
  return out


def tfma_metrics(evaluation_uri: str) -> dict[str, float]:
  """Overall-slice metrics of an Evaluator output, as ``{name[ class]: value}``."""
  import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
  result = tfma.load_eval_result(evaluation_uri)
  out = {}
  for slice_key, metrics in result.slicing_metrics:
    if slice_key:
      continue
    for sub_key, values in metrics[""].items():
      for name, value in values.items():
        value = value.get("doubleValue", value) if isinstance(value, dict) else value
        if isinstance(value, (int, float)):
          out[f"{name} [{sub_key}]" if sub_key else name] = float(value)
  return out
