"""GnnTrainer's launcher: runs an execution as a CustomJob whose replicas run the trainer.

With ``custom_config['ai_platform_training_args']`` (Vertex AI) or
``local_workers`` > 1 (this machine), :class:`~gnn_trainer_component.GnnTrainer`
declares this executor instead of the trainer's, as TFX's Vertex extension
(``tfx.extensions.google_cloud_ai_platform.trainer.executor``) wraps the stock
Trainer's executor: it validates the inputs here first (bad input fails before
any replica starts), builds the job (``distributed.custom_job``), runs it on
Vertex AI or as local processes (``distributed.local_cluster``), and publishes
the chief's result into this execution's ``Model``.
"""

from __future__ import annotations

import os
from typing import Any

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_executor

from gnn_trainer_component import outputs
from gnn_trainer_component.distributed import custom_job
from gnn_trainer_component.distributed import local_cluster
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import executor as trainer_executor
from gnn_trainer_component.trainer import publish
from gnn_trainer_component.trainer import inputs as inputs_lib

Artifacts = dict[str, list[types.Artifact]]


class Executor(base_executor.BaseExecutor):
  """Launches GnnTrainer's training as a CustomJob and publishes what its chief wrote."""

  #: What every replica runs (TFX's Vertex executor: ``_GetExecutorClass``).
  REPLICA_EXECUTOR = trainer_executor.Executor

  def Do(self, input_dict: Artifacts, output_dict: Artifacts,
         exec_properties: dict[str, Any]) -> None:
    """Runs the job (unless an earlier attempt published) and sets the Model's properties.

    Args:
      input_dict: GnnTrainer's input artifacts (see the trainer's ``Executor.Do``).
      output_dict: ``model`` and ``model_run``; replica logs of a local job go
        to ``<model_run>/cluster``.
      exec_properties: GnnTrainer's execution properties; ``custom_config``
        names the job (``ai_platform_training_args`` and
        ``ai_platform_vertex_region``, or ``local_workers`` and
        ``local_parameter_servers``). The replicas get them without those keys.

    Raises:
      config_lib.ConfigError: custom_config names no job. Bad input raises what
        the trainer's executor raises, before the job starts;
        local_cluster.ClusterError / custom_job.VertexJobError when the job fails.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    cfg = config_lib.from_exec_properties(exec_properties)
    if not cfg.launches:
      raise config_lib.ConfigError(
          "GnnTrainer's launcher got a custom_config without a job ('local_workers' > 1 "
          "or 'ai_platform_training_args'); the trainer's executor trains in place.")
    run_id = trainer_executor.pipeline_run_id(self._context)
    dirs = trainer_executor.OutputDirs.of(output_dict, run_id)
    properties = publish.published_properties(dirs.serving_dir, dirs.staging_dir,
                                             dirs.model_run_dir)
    if properties is None:
      inputs_lib.resolve_execution(input_dict, output_dict, exec_properties, cfg,
                                   model_run_dir=dirs.model_run_dir,
                                   staging_dir=dirs.staging_dir, backup_dir=dirs.backup_dir)
      job = self.custom_job(cfg, input_dict, output_dict, exec_properties, run_id)
      properties = self._run(job, cfg, dirs)
    else:
      logging.info("GnnTrainer: %s was published by an earlier attempt of this execution; "
                   "not training again.", dirs.serving_dir)
    outputs.set_properties(dirs.model, properties)
    outputs.rmtree(dirs.backup_dir)  # published: a retry must not resume any more
    outputs.log_phase("done")

  def custom_job(self, cfg: config_lib.TrainerConfig, input_dict: Artifacts,
                 output_dict: Artifacts, exec_properties: dict[str, Any],
                 pipeline_run_id: Any) -> dict[str, Any]:
    """The CustomJob whose replicas run :attr:`REPLICA_EXECUTOR` on this execution's artifacts."""
    model_uri = trainer_executor.OutputDirs.of(output_dict, pipeline_run_id).model.uri
    vertex = cfg.ai_platform_training_args or {}
    replica = self.REPLICA_EXECUTOR
    job = custom_job.custom_job(
        job_spec=config_lib.launch_job_spec(cfg),
        display_name=vertex.get("display_name") or custom_job.display_name(
            model_uri, pipeline_run_id),
        executor_class_path=f"{replica.__module__}.{replica.__name__}",
        input_dict=input_dict, output_dict=output_dict, exec_properties=exec_properties,
        pipeline_run_id=pipeline_run_id, labels=vertex.get("labels"))
    if vertex.get("encryption_spec"):
      job["encryption_spec"] = vertex["encryption_spec"]
    return job

  def _run(self, job: dict[str, Any], cfg: config_lib.TrainerConfig,
           dirs: trainer_executor.OutputDirs) -> dict[str, Any]:
    """Runs ``job`` on Vertex AI or here; the properties the chief published."""
    vertex = cfg.ai_platform_training_args
    if vertex:
      logging.info("GnnTrainer: submitting CustomJob %r to Vertex AI (%s, %s), %d replicas",
                   job["display_name"], vertex["project"], cfg.ai_platform_vertex_region,
                   len(local_cluster.tasks(job["job_spec"])))
      custom_job.run_on_vertex(job, project=vertex["project"],
                               region=cfg.ai_platform_vertex_region)
    else:
      local_cluster.run_job(job, log_dir=os.path.join(dirs.model_run_dir, "cluster"))
    properties = publish.published_properties(dirs.serving_dir, dirs.staging_dir,
                                             dirs.model_run_dir)
    if properties is None:
      raise local_cluster.ClusterError(
          f"GnnTrainer job {job['display_name']!r}: every replica finished but the chief "
          f"published nothing in {dirs.serving_dir}; see the chief's log"
          f"{'' if vertex else f' in {dirs.model_run_dir}/cluster'}.")
    return properties
