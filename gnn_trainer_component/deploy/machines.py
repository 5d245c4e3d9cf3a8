"""What a compiled pipeline's steps run on and in: machines, a trainer CustomJob, the GPU image.

* :class:`TrainerResources`: the machine shape of the GnnTrainer step (a KFP
  ``ResourceSpec``);
* :class:`TrainerJob`: GnnTrainer trains in a Vertex AI CustomJob on several
  machines (the ``custom_config`` keys of its worker pools);
* the GPU image: a step or CustomJob pool that requests GPUs runs the GPU image
  (:func:`gpu_image_for` ``--image`` by default) with ``GNN_TRAINER_GPU`` set
  (:func:`use_gpu_image`, :mod:`gnn_trainer_component.distributed.devices`).

:mod:`gnn_trainer_component.deploy.compile` compiles the pipeline with them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from absl import logging

from gnn_trainer_component.deploy import pipeline_job
from gnn_trainer_component.deploy.errors import CompileError
from gnn_trainer_component.distributed import devices


#: The tag suffix of the GPU image (kubeflow/Dockerfile.gpu) beside the CPU image.
GPU_TAG_SUFFIX = "-gpu"


def gpu_image_for(image: str) -> str:
  """The GPU image that goes with ``image``: its tag + ``-gpu`` (``:latest-gpu`` untagged).

  ``REGION-docker.pkg.dev/P/R/gnn-trainer:0.1.0`` -> ``...gnn-trainer:0.1.0-gpu``, the tag
  docs/deployment.md builds kubeflow/Dockerfile.gpu with. A tag that already ends in
  ``-gpu`` is kept.

  Raises:
    CompileError: ``image`` names a digest (``@sha256:...``): no tag to derive from.
  """
  if "@" in image:
    raise CompileError(f"--image {image!r} names a digest, from which no GPU image tag "
                       "follows: pass the GPU image with --gpu-image.")
  name, sep, tag = image.rpartition(":")
  if not sep or "/" in tag:  # no tag (the ':' was a registry port, or there is none)
    name, tag = image, "latest"
  return image if tag.endswith(GPU_TAG_SUFFIX) else f"{name}:{tag}{GPU_TAG_SUFFIX}"


def _gpu_env(request: devices.GpuRequest) -> dict[str, str]:
  """The container env entry that tells GnnTrainer it must train on ``request``."""
  return {"name": devices.GPU_REQUEST_ENV, "value": request.env_value()}


@dataclasses.dataclass(frozen=True)
class TrainerResources:
  """Machine shape of the GnnTrainer step (a KFP ``ResourceSpec``).

  Vertex AI Pipelines picks the smallest machine type that fits; KFP sets the
  pod's limits. One step = one container: worker pools / several replicas are
  not a pipeline-step concept (see :class:`TrainerJob`; docs/deployment.md,
  "How custom_config and distribution map onto machines").

  Attributes:
    cpu_limit: vCPUs (e.g. 8).
    memory_limit: Memory in GB (e.g. 32).
    accelerator_type: e.g. ``NVIDIA_TESLA_T4``, ``NVIDIA_L4``.
    accelerator_count: GPUs on the one machine (>1 -> MirroredStrategy).
  """
  cpu_limit: Optional[float] = None
  memory_limit: Optional[float] = None
  accelerator_type: Optional[str] = None
  accelerator_count: int = 0

  def to_proto(self):
    """The ``PipelineContainerSpec.ResourceSpec`` for ``with_platform_config``."""
    from kfp.pipeline_spec import pipeline_spec_pb2
    spec_cls = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec
    spec = spec_cls()
    if self.cpu_limit is not None:
      if self.cpu_limit <= 0:
        raise CompileError(f"Trainer cpu limit must be > 0, got {self.cpu_limit}.")
      spec.cpu_limit = self.cpu_limit
    if self.memory_limit is not None:
      if self.memory_limit <= 0:
        raise CompileError(f"Trainer memory limit must be > 0 GB, got {self.memory_limit}.")
      spec.memory_limit = self.memory_limit
    if self.accelerator_type:
      if self.accelerator_count < 1:
        raise CompileError("An accelerator type needs an accelerator count >= 1.")
      spec.accelerator.type = self.accelerator_type
      spec.accelerator.count = self.accelerator_count
    elif self.accelerator_count:
      raise CompileError("An accelerator count needs an accelerator type (e.g. NVIDIA_TESLA_T4).")
    return spec


@dataclasses.dataclass(frozen=True)
class TrainerJob:
  """GnnTrainer trains in a Vertex AI CustomJob on several machines.

  The pipeline step becomes a launcher: it submits a CustomJob whose worker
  pools (pool 0: the chief; 1: ``workers - 1`` workers; 2: parameter servers)
  run the GnnTrainer executor in the pipeline's image, waits for it, and
  publishes what the chief wrote (custom_config ``ai_platform_training_args``,
  TFX's Vertex Trainer keys). Vertex AI sets ``TF_CONFIG`` in every replica;
  the executor picks MultiWorkerMirroredStrategy (or ParameterServerStrategy).

  Attributes:
    project: Google Cloud project of the CustomJob.
    region: Its region, e.g. ``us-central1``.
    workers: Training replicas, the chief included (>= 1).
    machine_type: Machine of every replica, e.g. ``n1-standard-8``.
    parameter_servers: Parameter-server replicas (0: MultiWorkerMirroredStrategy).
    accelerator_type: GPU of every training replica, e.g. ``NVIDIA_TESLA_T4``.
    accelerator_count: GPUs per training replica.
  """
  project: str
  region: str
  workers: int
  machine_type: str = "n1-standard-8"
  parameter_servers: int = 0
  accelerator_type: Optional[str] = None
  accelerator_count: int = 0

  def custom_config(self, image: str, gpu_image: Optional[str] = None) -> dict[str, Any]:
    """The GnnTrainer ``custom_config`` keys that launch this job with ``image``.

    With GPUs, the training pools run ``gpu_image`` (default: :func:`gpu_image_for`)
    with ``GNN_TRAINER_GPU`` set; the parameter servers run ``image``.
    """
    if not self.project or not pipeline_job.PROJECT_RE.match(self.project):
      raise CompileError(f"--vertex-project {self.project!r} is not a Google Cloud project id.")
    if not self.region or not pipeline_job.REGION_RE.match(self.region):
      raise CompileError(f"--vertex-region {self.region!r} is not a region like us-central1.")
    if self.workers < 1 or self.parameter_servers < 0:
      raise CompileError(f"--trainer-workers must be >= 1 and --trainer-parameter-servers "
                         f">= 0, got {self.workers} and {self.parameter_servers}.")
    if self.parameter_servers and self.workers < 2:
      raise CompileError("--trainer-parameter-servers needs --trainer-workers >= 2 (the "
                         "chief coordinates, the workers train).")
    if bool(self.accelerator_type) != bool(self.accelerator_count):
      raise CompileError("A trainer GPU needs a type and a count, e.g. NVIDIA_TESLA_T4:1.")
    machine = {"machine_type": self.machine_type}
    container: dict[str, Any] = {"image_uri": image}
    if self.accelerator_type:
      machine.update(accelerator_type=self.accelerator_type,
                     accelerator_count=self.accelerator_count)
      container = {"image_uri": gpu_image or gpu_image_for(image),
                   "env": [_gpu_env(devices.GpuRequest(self.accelerator_count,
                                                       self.accelerator_type))]}
    pools = [{"machine_spec": machine, "replica_count": 1, "container_spec": container}]
    if self.workers > 1:
      pools.append({"machine_spec": machine, "replica_count": self.workers - 1,
                    "container_spec": container})
    if self.parameter_servers:
      pools.append({"machine_spec": {"machine_type": self.machine_type},
                    "replica_count": self.parameter_servers,
                    "container_spec": {"image_uri": image}})
    return {"ai_platform_training_args": {"project": self.project,
                                          "job_spec": {"worker_pool_specs": pools}},
            "ai_platform_vertex_region": self.region}


def _accelerators(container: Mapping[str, Any]) -> Optional[devices.GpuRequest]:
  """The GPUs a compiled container requests (``resources.accelerator``), or None."""
  accelerator = (container.get("resources") or {}).get("accelerator") or {}
  count = int(accelerator.get("count") or accelerator.get("resourceCount") or 0)
  if count < 1:
    return None
  return devices.GpuRequest(count, accelerator.get("type") or accelerator.get("resourceType"))


def gpu_containers(spec: Mapping[str, Any]) -> dict[str, devices.GpuRequest]:
  """Executor label -> the GPUs its container requests, for every container that does."""
  found = {}
  for label, executor in spec.get("deploymentSpec", {}).get("executors", {}).items():
    request = _accelerators(executor.get("container") or {})
    if request:
      found[label] = request
  return found


def use_gpu_image(job: dict[str, Any], image: str, gpu_image: Optional[str],
                  trainer_job: Optional[TrainerJob], output_path: Optional[str]) -> Optional[str]:
  """Every container of ``job`` that requests GPUs runs the GPU image, with ``GNN_TRAINER_GPU``.

  TFX's compiler gives every step the one default image and no environment; a
  step's accelerators are in its ``container.resources``. The file at
  ``output_path`` is written again when a container changed. (A trainer CustomJob's
  GPU pools got the GPU image from :meth:`TrainerJob.custom_config`.)

  Returns:
    The GPU image (``gpu_image``, default :func:`gpu_image_for` ``image``), or None
    when nothing requests GPUs.
  """
  spec = job["pipelineSpec"]
  requests = gpu_containers(spec)
  if not requests and not (trainer_job and trainer_job.accelerator_count):
    if gpu_image:
      logging.warning("--gpu-image %s is not used: no step requests GPUs.", gpu_image)
    return None
  gpu_image = gpu_image or gpu_image_for(image)
  for label, request in requests.items():
    container = spec["deploymentSpec"]["executors"][label]["container"]
    container["image"] = gpu_image
    env = [e for e in container.get("env", []) if e.get("name") != devices.GPU_REQUEST_ENV]
    container["env"] = env + [_gpu_env(request)]
    logging.info("Executor %s requests %s: image %s, %s=%s", label, request, gpu_image,
                 devices.GPU_REQUEST_ENV, request.env_value())
  if requests and output_path:
    _rewrite(job, output_path)
  return gpu_image


def _rewrite(job: Mapping[str, Any], output_path: str) -> None:
  """Writes ``job`` to ``output_path`` again, as ``KubeflowV2DagRunner`` wrote it."""
  from tfx import version
  from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner
  # pylint: disable-next=protected-access
  kubeflow_v2_dag_runner._write_pipeline_spec_to_file(
      dict(job), f"This is converted from TFX pipeline from tfx-{version.__version__}.",
      output_path)
