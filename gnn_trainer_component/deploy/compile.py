r"""Compiles a GnnTrainer TFX pipeline into a KFP v2 pipeline file for Vertex / Kubeflow.

Usage::

  gnn-kfp-compile --pipeline demo \
      --image us-docker.pkg.dev/PROJECT/REPO/gnn-trainer:0.1.0 \
      --pipeline-root gs://BUCKET/pipeline_root \
      --module-file module_files/demo_node_classification.py \
      --examples-dir gs://BUCKET/demo_data/examples \
      --graph-schema-dir gs://BUCKET/demo_data/graph_schema \
      --output build/gnn-demo.json        # .json: PipelineJob (Vertex)
                                          # .yaml: PipelineSpec (KFP 2 client)

What happens (TFX's own mechanism, nothing custom):

1. The pipeline factory registered under ``--pipeline`` builds the TFX pipeline.
2. ``KubeflowV2DagRunner.run`` resolves the components' pip dependencies:
   GnnTrainer registered its ``module_file`` with
   ``udf_utils.add_user_module_dependency``, so TFX builds a wheel of the
   module file's folder, copies it to ``<pipeline_root>/_wheels/`` and rewrites
   the parameter to ``module_path=<module>@<pipeline_root>/_wheels/<wheel>``.
   A ``gs://`` pipeline root therefore needs GCS write access while compiling
   (``gcloud auth application-default login``).
3. Every step becomes a container running ``python -m
   tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor
   --executor_class_path ...`` in ``--image``; a step (or a CustomJob worker
   pool) that requests GPUs runs in the GPU image instead (``--gpu-image``,
   default ``--image``'s tag + ``-gpu``:
   :func:`gnn_trainer_component.deploy.machines.gpu_image_for`), with
   ``GNN_TRAINER_GPU`` set, so that GnnTrainer refuses to train without them
   (:mod:`gnn_trainer_component.distributed.devices`).

The result is checked with
:func:`gnn_trainer_component.deploy.pipeline_job.validate_pipeline_spec`.
``--pipeline`` names the factory: ``package.module:function`` (a
:data:`PipelineFactory`, importable where this runs) or a name in
:data:`PIPELINES`: ``demo`` (the default), the repository's demo pipeline,
which lives in ``pipelines/demo`` (not installed) and is imported only when
chosen, so run it from a checkout of the repository.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import re
import shlex
import sys
from typing import Any, Callable, Mapping, Optional, Sequence

from absl import logging

from gnn_trainer_component import process
from gnn_trainer_component.deploy import beam_args
from gnn_trainer_component.deploy import machines
from gnn_trainer_component.deploy import pipeline_job
from gnn_trainer_component.deploy.errors import CompileError
from gnn_trainer_component.distributed import devices

# TFX, and the package's modules that import it (the components, spec), are imported by the
# functions that build and check the pipeline: importing this module loads none of them.

#: Vertex AI pipeline / job names: lowercase letters, digits and dashes.
_PIPELINE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")


@dataclasses.dataclass(frozen=True)
class PipelineOptions:
  """What every pipeline factory receives.

  Attributes:
    name: TFX pipeline name (also the Vertex pipeline name).
    pipeline_root: Root of all artifacts (``gs://`` for Vertex).
    module_file: Local path of the GnnTrainer user module (packaged as a wheel).
    examples_dir: Input examples folder, readable from the cluster; None: the
      factory's default.
    graph_schema_dir: Folder with ``graph_schema.pbtxt``; None: the factory's default.
    train_steps: GnnTrainer ``train_args.num_steps`` (None: the factory's default).
    eval_steps: GnnTrainer ``eval_args.num_steps`` (None: the whole split).
    custom_config: GnnTrainer ``custom_config`` (None: the factory's default).
    with_statistics: Include StatisticsGen/SchemaGen when the pipeline has them
      (False also leaves out Transform, which needs SchemaGen).
    with_transform: Include Transform (the demo: z-score + vocabulary; the
      model then serves raw examples).
    with_evaluator: Include Evaluator and Pusher (pushing to ``<root>/serving_model``).
    enable_cache: Task caching on Vertex / KFP.
    tuning_config: If set, a GnnTuner step (this search) feeds GnnTrainer its
      best hyperparameters.
    beam_pipeline_args: Beam flags of the pipeline's Beam steps (checked by
      :func:`gnn_trainer_component.deploy.beam_args.check`).
    trainer_job_config: ``custom_config`` keys that make GnnTrainer train in a
      Vertex AI CustomJob (:class:`~gnn_trainer_component.deploy.machines.TrainerJob`);
      a factory adds them to its GnnTrainer's ``custom_config`` (default or given).
  """
  name: str
  pipeline_root: str
  module_file: str
  examples_dir: Optional[str] = None
  graph_schema_dir: Optional[str] = None
  train_steps: Optional[int] = None
  eval_steps: Optional[int] = None
  custom_config: Optional[Mapping[str, Any]] = None
  with_statistics: bool = True
  with_transform: bool = True
  with_evaluator: bool = True
  enable_cache: bool = True
  tuning_config: Optional[Mapping[str, Any]] = None
  trainer_job_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  beam_pipeline_args: Sequence[str] = ()


#: A factory turns options into a ``tfx.dsl.Pipeline``.
PipelineFactory = Callable[[PipelineOptions], Any]


def _demo_factory(opts: PipelineOptions):
  """The demo pipeline (pipelines/demo): ImportExampleGen -> ... -> GnnTrainer -> Pusher.

  ``pipelines/`` is the repository's, not part of the installed package: it is
  imported here, when the demo is chosen, and found from a checkout.
  """
  try:
    from pipelines.demo import pipeline as demo_pipeline
  except ImportError as e:
    raise CompileError(
        f"--pipeline demo is the repository's pipelines/demo, which is not importable here "
        f"({e}): run from a checkout of gnn-trainer-component (its root on PYTHONPATH), or "
        f"name your own factory as --pipeline package.module:function.") from e
  root = opts.pipeline_root.rstrip("/")
  kwargs = {}
  if opts.train_steps is not None:
    kwargs["train_steps"] = opts.train_steps
  return demo_pipeline.create_pipeline(
      pipeline_name=opts.name,
      pipeline_root=opts.pipeline_root,
      examples_dir=opts.examples_dir or f"{root}/demo_data/examples",
      graph_schema_dir=opts.graph_schema_dir or f"{root}/demo_data/graph_schema",
      # KubeflowV2DagRunner ignores the connection config: Vertex / KFP bring
      # their own MLMD. The factory only needs a value.
      metadata="unused-on-kubeflow.sqlite",
      module_file=opts.module_file,
      eval_steps=opts.eval_steps,
      custom_config=dict(demo_pipeline.DEFAULT_CUSTOM_CONFIG if opts.custom_config is None
                         else opts.custom_config, **opts.trainer_job_config),
      with_statistics=opts.with_statistics,
      transform_module_file=(demo_pipeline.DEFAULT_TRANSFORM_FILE
                             if opts.with_statistics and opts.with_transform else None),
      serving_dir=f"{root}/serving_model" if opts.with_evaluator else None,
      tuning_config=opts.tuning_config,
      enable_cache=opts.enable_cache,
      beam_pipeline_args=opts.beam_pipeline_args,
      **kwargs)


#: ``--pipeline`` names: name -> (factory, default TFX pipeline name).
PIPELINES: dict[str, tuple[PipelineFactory, str]] = {
    "demo": (_demo_factory, "gnn-demo"),
}
#: TFX pipeline name of a ``package.module:function`` factory when ``--name`` is not given.
DEFAULT_PIPELINE_NAME = "gnn-pipeline"


def resolve_factory(pipeline: str) -> tuple[PipelineFactory, str]:
  """``pipeline`` -> (factory, default pipeline name).

  Args:
    pipeline: A name in :data:`PIPELINES` or ``package.module:function``, a
      function that takes :class:`PipelineOptions` and returns a
      ``tfx.dsl.Pipeline``.

  Raises:
    CompileError: unknown name, or the module or function cannot be found.
  """
  if pipeline in PIPELINES:
    return PIPELINES[pipeline]
  module_name, _, attr = pipeline.partition(":")
  if not module_name or not attr:
    raise CompileError(
        f"Unknown pipeline {pipeline!r}; choose one of {sorted(PIPELINES)} or name a "
        "factory as package.module:function.")
  try:
    module = importlib.import_module(module_name)
  except ImportError as e:
    raise CompileError(f"--pipeline {pipeline!r}: cannot import {module_name}: {e}") from e
  factory = getattr(module, attr, None)
  if not callable(factory):
    raise CompileError(f"--pipeline {pipeline!r}: {module_name} has no function {attr!r}.")
  return factory, DEFAULT_PIPELINE_NAME


def _check_args(image: str, pipeline_root: str, module_file: str,
                output_path: str, name: str, gpu_image: Optional[str] = None) -> None:
  if not image or any(c.isspace() for c in image):
    raise CompileError(f"--image {image!r} is not a container image reference.")
  if gpu_image is not None and (not gpu_image or any(c.isspace() for c in gpu_image)):
    raise CompileError(f"--gpu-image {gpu_image!r} is not a container image reference.")
  if not pipeline_root:
    raise CompileError("--pipeline-root is required (gs://BUCKET/... for Vertex).")
  if not os.path.isfile(module_file):
    raise CompileError(
        f"--module-file {module_file!r} does not exist (it must be a local .py file: "
        "compiling packages its folder into a wheel).")
  if not output_path.endswith((".json", ".yaml", ".yml")):
    raise CompileError(
        f"--output {output_path!r} must end in .json (PipelineJob, for Vertex) or "
        ".yaml/.yml (PipelineSpec, for the KFP 2 client).")
  if not _PIPELINE_NAME_RE.match(name):
    raise CompileError(
        f"Pipeline name {name!r} is not valid on Vertex: use lowercase letters, "
        "digits and dashes (regex [a-z0-9][a-z0-9-]{0,127}).")


def _warn_local_inputs(pipeline_root: str, examples_dir: Optional[str],
                       graph_schema_dir: Optional[str]) -> None:
  """Warns about local input folders that the containers of a GCS pipeline cannot see."""
  if not pipeline_root.startswith("gs://"):
    return
  for flag, value in (("--examples-dir", examples_dir), ("--graph-schema-dir", graph_schema_dir)):
    if value and "://" not in value:
      logging.warning("%s %s is a local path but the pipeline root is on GCS: the "
                      "containers will not see it. Upload it and pass a gs:// path.",
                      flag, value)


def _check_beam_args(beam_pipeline_args: Sequence[str]) -> None:
  """Checks the Beam steps' flags (:func:`beam_args.check`) as a :class:`CompileError`."""
  try:
    runner_name = beam_args.check(beam_pipeline_args)
  except beam_args.BeamArgsError as e:
    raise CompileError(str(e)) from e
  logging.info("Beam steps run on %s with %s", runner_name, list(beam_pipeline_args))


def _check_trainer_job(trainer_job: Optional[machines.TrainerJob],
                       trainer_resources: Optional[machines.TrainerResources],
                       pipeline_root: str) -> None:
  """A trainer CustomJob excludes step resources and wants a GCS pipeline root."""
  if trainer_job is None:
    return
  if trainer_resources is not None:
    raise CompileError("With a trainer CustomJob (--trainer-workers) the machines are "
                       "--trainer-machine-type / --trainer-gpu; --trainer-cpu, "
                       "--trainer-memory-gb would only size the launching step.")
  if not pipeline_root.startswith("gs://"):
    logging.warning("The trainer CustomJob's replicas read and write the artifacts: "
                    "pipeline root %s must be on GCS for Vertex AI.", pipeline_root)


def _build_pipeline(factory: PipelineFactory, opts: PipelineOptions,
                    trainer_resources: Optional[machines.TrainerResources], pipeline_name: str):
  """Calls the factory and gives every GnnTrainer of its pipeline ``trainer_resources``."""
  from gnn_trainer_component import GnnTrainer
  pipeline = factory(opts)
  if trainer_resources is not None:
    resource_spec = trainer_resources.to_proto()
    trainers = [c for c in pipeline.components if isinstance(c, GnnTrainer)]
    if not trainers:
      raise CompileError(f"Pipeline {pipeline_name!r} has no GnnTrainer to give resources to.")
    for trainer in trainers:
      trainer.with_platform_config(resource_spec)
  return pipeline


def _run_dag_runner(pipeline, *, image: str, display_name: str, output_path: Optional[str],
                    use_pipeline_spec_2_1: bool) -> dict[str, Any]:
  """``KubeflowV2DagRunner.run``: the PipelineJob dict, also written to ``output_path``."""
  from tfx import v1 as tfx
  config = tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
      display_name=display_name, default_image=image,
      use_pipeline_spec_2_1=use_pipeline_spec_2_1)
  runner_kwargs = {}
  if output_path:
    runner_kwargs = {"output_dir": os.path.dirname(os.path.abspath(output_path)),
                     "output_filename": os.path.basename(output_path)}
  runner = tfx.orchestration.experimental.KubeflowV2DagRunner(config=config, **runner_kwargs)
  return runner.run(pipeline, write_out=bool(output_path))


def _check_module_wheels(spec: Mapping[str, Any], tasks: Sequence[str],
                         pipeline_root: str) -> None:
  """Every GnnTrainer / GnnTuner task loads its user module from a wheel under the root."""
  from tfx.dsl.io import fileio
  from gnn_trainer_component import spec as gnn_spec
  for task in tasks:
    module_path = pipeline_job.task_parameters(spec, task).get(gnn_spec.MODULE_PATH_KEY) or ""
    wheel = module_path.split("@", 1)[1] if "@" in module_path else ""
    if not wheel.startswith(pipeline_root.rstrip("/") + "/_wheels/"):
      raise CompileError(
          f"Task {task!r}: expected the module file packaged under {pipeline_root}/_wheels/, "
          f"got {gnn_spec.MODULE_PATH_KEY}={module_path!r}. "
          "Is UNSUPPORTED_DO_NOT_PACKAGE_USER_MODULES set?")
    if not fileio.exists(wheel):
      raise CompileError(f"Task {task!r}: the module wheel {wheel} was not written.")
    logging.info("Task %s: user module packaged as %s", task, module_path)


def _check_custom_job_tasks(spec: Mapping[str, Any], gnn_tasks: Sequence[str], image: str,
                            gpu_image: Optional[str], pipeline_name: str) -> None:
  """Every GnnTrainer task got the CustomJob's worker pools: GPU pools in ``gpu_image``."""
  from gnn_trainer_component import spec as gnn_spec

  def wanted(pool):
    return gpu_image if (pool.get("machine_spec") or {}).get("accelerator_count") else image

  for task in gnn_tasks:
    config = json.loads(pipeline_job.task_parameters(spec, task).get(
        gnn_spec.CUSTOM_CONFIG_KEY) or "{}")
    pools = ((config.get("ai_platform_training_args") or {}).get("job_spec") or {}).get(
        "worker_pool_specs")
    if not pools or any(p["container_spec"]["image_uri"] != wanted(p) for p in pools):
      raise CompileError(
          f"Task {task!r}: the pipeline factory {pipeline_name!r} did not give GnnTrainer "
          f"the CustomJob (PipelineOptions.trainer_job_config) with image {image}"
          f"{f' (GPU pools: {gpu_image})' if gpu_image else ''}.")
    logging.info("Task %s: trains in a Vertex AI CustomJob, pools %s", task,
                 [(p["replica_count"], p["machine_spec"]) for p in pools])


def _check_compiled(spec: Mapping[str, Any], *, pipeline_root: str, image: str,
                    gpu_image: Optional[str], pipeline_name: str,
                    trainer_job: Optional[machines.TrainerJob]) -> None:
  """Validates the compiled PipelineSpec, its module wheels and its trainer CustomJob."""
  try:
    gnn_tasks = pipeline_job.validate_pipeline_spec(spec)
  except pipeline_job.PipelineValidationError as e:
    raise CompileError(f"Compiled pipeline is not valid: {e}") from e
  _check_module_wheels(
      spec, gnn_tasks + pipeline_job.find_tasks(spec, pipeline_job.GNN_TUNER_EXECUTOR_CLASS),
      pipeline_root)
  if trainer_job is not None:
    _check_custom_job_tasks(spec, gnn_tasks, image, gpu_image, pipeline_name)


def compile_pipeline(pipeline_name: str, image: str, pipeline_root: str, module_file: str,
                     output_path: Optional[str], *, name: Optional[str] = None,
                     display_name: Optional[str] = None, examples_dir: Optional[str] = None,
                     graph_schema_dir: Optional[str] = None, train_steps: Optional[int] = None,
                     eval_steps: Optional[int] = None,
                     custom_config: Optional[Mapping[str, Any]] = None,
                     with_statistics: bool = True, with_transform: bool = True,
                     with_evaluator: bool = True, enable_cache: bool = True,
                     tuning_config: Optional[Mapping[str, Any]] = None,
                     use_pipeline_spec_2_1: bool = True,
                     trainer_resources: Optional[machines.TrainerResources] = None,
                     trainer_job: Optional[machines.TrainerJob] = None,
                     beam_pipeline_args: Sequence[str] = (),
                     gpu_image: Optional[str] = None) -> dict[str, Any]:
  """Compiles a registered pipeline with ``KubeflowV2DagRunner``.

  Args:
    pipeline_name: Key in :data:`PIPELINES` (e.g. ``"demo"``) or
      ``package.module:function`` (:func:`resolve_factory`).
    image: Container image of the steps (kubeflow/Dockerfile) that request no GPU.
    pipeline_root: Artifact root; the module wheel goes to ``<root>/_wheels``.
      ``gs://`` for Vertex (needs GCS write access now); a local path works
      for tests.
    module_file: Local path of the user module.
    output_path: ``.json`` (PipelineJob) or ``.yaml`` (PipelineSpec) file to
      write, or None to only return the dict.
    name: TFX pipeline name (default: the factory's, e.g. ``gnn-demo``).
    display_name: Vertex display name (default: ``name``).
    examples_dir: See :class:`PipelineOptions`.
    graph_schema_dir: See :class:`PipelineOptions`.
    train_steps: See :class:`PipelineOptions`.
    eval_steps: See :class:`PipelineOptions`.
    custom_config: See :class:`PipelineOptions`.
    with_statistics: See :class:`PipelineOptions`.
    with_transform: See :class:`PipelineOptions`.
    with_evaluator: See :class:`PipelineOptions`.
    enable_cache: See :class:`PipelineOptions`.
    tuning_config: See :class:`PipelineOptions`.
    use_pipeline_spec_2_1: Emit PipelineSpec schema 2.1 (typed parameters,
      ``parameterValues``), which the KFP 2.x backend and Vertex both read.
      False gives TFX's legacy 2.0 schema.
    trainer_resources: CPU / memory / GPUs of every GnnTrainer step.
    trainer_job: Train in a Vertex AI CustomJob on these machines (the step
      launches it); its keys are added to ``custom_config``.
    beam_pipeline_args: Beam flags of the Beam steps, checked for the runner
      they name (:mod:`gnn_trainer_component.deploy.beam_args`).
    gpu_image: Image of the steps and CustomJob pools that request GPUs, which also get
      ``GNN_TRAINER_GPU``: :func:`machines.use_gpu_image` (default ``gpu_image_for(image)``).

  Returns:
    The PipelineJob dict (``displayName``, ``runtimeConfig``, ``pipelineSpec``).

  Raises:
    CompileError: on bad arguments or if the result fails validation.
  """
  factory, default_name = resolve_factory(pipeline_name)
  name = name or default_name
  _check_args(image, pipeline_root, module_file, output_path or "x.json", name, gpu_image)
  _warn_local_inputs(pipeline_root, examples_dir, graph_schema_dir)
  _check_beam_args(beam_pipeline_args)
  _check_trainer_job(trainer_job, trainer_resources, pipeline_root)
  opts = PipelineOptions(
      name=name, pipeline_root=pipeline_root, module_file=os.path.abspath(module_file),
      examples_dir=examples_dir, graph_schema_dir=graph_schema_dir,
      train_steps=train_steps, eval_steps=eval_steps, custom_config=custom_config,
      with_statistics=with_statistics, with_transform=with_transform,
      with_evaluator=with_evaluator, enable_cache=enable_cache, tuning_config=tuning_config,
      trainer_job_config=trainer_job.custom_config(image, gpu_image) if trainer_job else {},
      beam_pipeline_args=tuple(beam_pipeline_args))
  pipeline = _build_pipeline(factory, opts, trainer_resources, pipeline_name)
  logging.info("Compiling pipeline %r (%s) with image %s, root %s", name, pipeline_name,
               image, pipeline_root)
  job = _run_dag_runner(pipeline, image=image, display_name=display_name or name,
                        output_path=output_path, use_pipeline_spec_2_1=use_pipeline_spec_2_1)
  gpu_image = machines.use_gpu_image(job, image, gpu_image, trainer_job, output_path)
  _check_compiled(job["pipelineSpec"], pipeline_root=pipeline_root, image=image,
                  gpu_image=gpu_image, pipeline_name=pipeline_name, trainer_job=trainer_job)
  if output_path:
    logging.info("Wrote %s", output_path)
  return job


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(
      prog="gnn-kfp-compile",
      description="Compile a GnnTrainer pipeline for Vertex AI Pipelines / Kubeflow Pipelines 2.")
  p.add_argument("--pipeline", default="demo",
                 help="Pipeline to compile: package.module:function (called with "
                      "PipelineOptions, returns a tfx.dsl.Pipeline) or a registered name: "
                      f"{', '.join(sorted(PIPELINES))} (default: demo, the repository's "
                      "pipelines/demo; run from a checkout).")
  p.add_argument("--image", required=True, help="Container image (see kubeflow/Dockerfile).")
  p.add_argument("--pipeline-root", required=True,
                 help="Artifact root, gs://BUCKET/... for Vertex (the module wheel is "
                      "written to <root>/_wheels now, so GCS access is needed).")
  p.add_argument("--module-file", required=True, help="Local path of the user module.")
  p.add_argument("--output", required=True,
                 help=".json (PipelineJob, Vertex) or .yaml (PipelineSpec, KFP 2 client).")
  p.add_argument("--examples-dir", help="Examples folder (train/*, eval/*) readable from "
                                        "the cluster; default <root>/demo_data/examples.")
  p.add_argument("--graph-schema-dir", help="Folder with graph_schema.pbtxt; default "
                                            "<root>/demo_data/graph_schema.")
  p.add_argument("--name", help="Pipeline name (lowercase, digits, dashes).")
  p.add_argument("--display-name", help="Vertex display name (default: --name).")
  p.add_argument("--train-steps", type=int, help="GnnTrainer train_args.num_steps.")
  p.add_argument("--eval-steps", type=int, help="GnnTrainer eval_args.num_steps.")
  p.add_argument("--custom-config", help="GnnTrainer custom_config as a JSON object.")
  p.add_argument("--tuning-config", help="Add a GnnTuner step with this tuning_config (a "
                 "JSON object, e.g. '{\"max_trials\": 8}'); it feeds GnnTrainer its best "
                 "hyperparameters. The module must define hyperparameter_space(hp).")
  p.add_argument("--no-statistics", action="store_true",
                 help="Leave out StatisticsGen/SchemaGen (and so Transform).")
  p.add_argument("--no-transform", action="store_true", help="Leave out Transform.")
  p.add_argument("--no-evaluator", action="store_true", help="Leave out Evaluator and Pusher.")
  p.add_argument("--disable-cache", action="store_true", help="Disable task caching.")
  p.add_argument("--trainer-cpu", type=float, help="vCPUs of the GnnTrainer step.")
  p.add_argument("--trainer-memory-gb", type=float, help="Memory (GB) of the GnnTrainer step.")
  p.add_argument("--trainer-gpu", metavar="TYPE:COUNT",
                 help="GPUs of the GnnTrainer step, e.g. NVIDIA_TESLA_T4:1 (per replica "
                      "with --trainer-workers). The step runs in --gpu-image.")
  p.add_argument("--gpu-image",
                 help="Image of the steps that request GPUs (kubeflow/Dockerfile.gpu); "
                      "default: --image's tag + '-gpu' (IMAGE:TAG-gpu).")
  p.add_argument("--trainer-workers", type=int,
                 help="Train in a Vertex AI CustomJob on this many machines (chief "
                      "included; the step launches it and waits). Needs --vertex-project "
                      "and --vertex-region.")
  p.add_argument("--trainer-parameter-servers", type=int, default=0,
                 help="With --trainer-workers: parameter-server machines "
                      "(ParameterServerStrategy instead of MultiWorkerMirroredStrategy).")
  p.add_argument("--trainer-machine-type", default="n1-standard-8",
                 help="With --trainer-workers: machine type of every replica.")
  p.add_argument("--vertex-project", help="With --trainer-workers: the CustomJob's project.")
  p.add_argument("--vertex-region", help="With --trainer-workers: the CustomJob's region.")
  p.add_argument("--beam-pipeline-args", default="",
                 help="Beam flags of the Beam steps, one string: "
                      "--beam-pipeline-args='--runner=DataflowRunner --project=P "
                      "--region=R --temp_location=gs://B/tmp --sdk_container_image=I'. "
                      "Checked now for the runner they name "
                      "(gnn_trainer_component/deploy/beam_args.py).")
  p.add_argument("--pipeline-spec-2-0", action="store_true",
                 help="Emit TFX's legacy PipelineSpec schema 2.0.0 instead of 2.1.0.")
  return p


def _gpu(args: argparse.Namespace) -> tuple[Optional[str], int]:
  """``--trainer-gpu TYPE:COUNT`` -> (type, count); (None, 0) without it."""
  try:
    request = devices.parse_gpu_request(args.trainer_gpu, "--trainer-gpu")
  except devices.GpuRequestError as e:
    raise CompileError(str(e)) from None
  if request is None:
    return None, 0
  return request.accelerator_type, request.count


def _trainer_job(args: argparse.Namespace) -> Optional[machines.TrainerJob]:
  """``--trainer-workers`` and its companions -> a CustomJob (None: train in the step)."""
  if args.trainer_workers is None:
    for flag in ("vertex_project", "vertex_region"):
      if getattr(args, flag):
        raise CompileError(f"--{flag.replace('_', '-')} only applies with --trainer-workers.")
    return None
  if not (args.vertex_project and args.vertex_region):
    raise CompileError("--trainer-workers needs --vertex-project and --vertex-region "
                       "(where the CustomJob runs).")
  gpu_type, gpu_count = _gpu(args)
  return machines.TrainerJob(project=args.vertex_project, region=args.vertex_region,
                             workers=args.trainer_workers,
                             machine_type=args.trainer_machine_type,
                             parameter_servers=args.trainer_parameter_servers,
                             accelerator_type=gpu_type, accelerator_count=gpu_count)


def _trainer_resources(args: argparse.Namespace) -> Optional[machines.TrainerResources]:
  """``--trainer-cpu/--trainer-memory-gb/--trainer-gpu`` -> resources (None: none given)."""
  if args.trainer_workers is not None:  # the GPUs go to the CustomJob's machines
    return (machines.TrainerResources(cpu_limit=args.trainer_cpu,
                                      memory_limit=args.trainer_memory_gb)
            if args.trainer_cpu or args.trainer_memory_gb else None)
  if not (args.trainer_cpu or args.trainer_memory_gb or args.trainer_gpu):
    return None
  gpu_type, gpu_count = _gpu(args)
  return machines.TrainerResources(cpu_limit=args.trainer_cpu,
                                   memory_limit=args.trainer_memory_gb,
                                   accelerator_type=gpu_type, accelerator_count=gpu_count)


def _json_flag(value: Optional[str], flag: str) -> Optional[Any]:
  if not value:
    return None
  try:
    return json.loads(value)
  except json.JSONDecodeError as e:
    raise CompileError(f"{flag} is not valid JSON: {e}") from e


def _run(args: argparse.Namespace) -> int:
  custom_config = _json_flag(args.custom_config, "--custom-config")
  job = compile_pipeline(
      args.pipeline, args.image, args.pipeline_root, args.module_file, args.output,
      name=args.name, display_name=args.display_name, examples_dir=args.examples_dir,
      graph_schema_dir=args.graph_schema_dir, train_steps=args.train_steps,
      eval_steps=args.eval_steps, custom_config=custom_config,
      with_statistics=not args.no_statistics, with_transform=not args.no_transform,
      with_evaluator=not args.no_evaluator, enable_cache=not args.disable_cache,
      tuning_config=_json_flag(args.tuning_config, "--tuning-config"),
      use_pipeline_spec_2_1=not args.pipeline_spec_2_0,
      trainer_resources=_trainer_resources(args), trainer_job=_trainer_job(args),
      beam_pipeline_args=shlex.split(args.beam_pipeline_args), gpu_image=args.gpu_image)
  from gnn_trainer_component import spec as gnn_spec
  spec = job["pipelineSpec"]
  for task in pipeline_job.find_tasks(spec) + pipeline_job.find_tasks(
      spec, pipeline_job.GNN_TUNER_EXECUTOR_CLASS):
    params = pipeline_job.task_parameters(spec, task)
    print(f"{task}: image={pipeline_job.task_container(spec, task)['image']} "
          f"{gnn_spec.MODULE_PATH_KEY}={params.get(gnn_spec.MODULE_PATH_KEY)}")
  print(f"Wrote {args.output}")
  return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
  """CLI entry point; returns the exit code (2: bad arguments or an invalid result).

  Besides :class:`CompileError`, a ``ValueError`` from the pipeline factory
  (e.g. GnnTrainer rejecting its ``custom_config``) is reported the same way.
  """
  process.setup_process()  # before the pipeline factory imports TFX / TensorFlow
  return pipeline_job.run_cli(_parser(), _run, argv, errors=ValueError)


if __name__ == "__main__":
  sys.exit(main())
