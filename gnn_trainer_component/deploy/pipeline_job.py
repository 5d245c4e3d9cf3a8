"""Reading and checking compiled KFP v2 pipelines (``KubeflowV2DagRunner`` output).

Works on the plain JSON/YAML dicts, so the compile step, the submitters and the
tests share one definition of "a valid GnnTrainer pipeline". Also holds what the
three CLIs share (:func:`run_cli`, :func:`add_caching_flags`,
:func:`parse_key_values`). Nothing here talks to the network or imports TFX.

Layout of a compiled pipeline (``pipelineSpec`` of a PipelineJob JSON, or the
whole YAML file)::

  pipelineInfo.name
  root.dag.tasks.<task>        componentRef.name, inputs.parameters.<p>.runtimeValue.constant
  components.<comp>            executorLabel, inputDefinitions, outputDefinitions
  deploymentSpec.executors.<label>.container   image, command, args
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Callable, Mapping, Optional, Sequence, Type, Union

from absl import logging

# Pure Python (keys and both configs import no TFX): the submitters and their dry runs
# stay TFX-free (~0.1 s instead of ~13 s).
from gnn_trainer_component import errors
from gnn_trainer_component import keys
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.tuner import config as tuning_config_lib

#: A Google Cloud project id (optionally domain-scoped, ``example.com:proj``).
PROJECT_RE = re.compile(r"^([a-z][a-z0-9.:-]*:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$")
#: A Vertex AI region such as ``us-central1``.
REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")

#: Executor class paths of a compiled GnnTrainer step: the trainer's, or the launcher's
#: (custom_config with a job), as GnnTrainer declares them.
GNN_EXECUTOR_CLASSES = (keys.TRAINER_EXECUTOR_CLASS, keys.TRAINER_LAUNCHER_CLASS)
#: Executor class path of a compiled GnnTuner step.
GNN_TUNER_EXECUTOR_CLASS = keys.TUNER_EXECUTOR_CLASS
#: The container entrypoint TFX uses for every KubeflowV2 step.
TFX_ENTRYPOINT_MODULE = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"
#: The stock TFX images lack our package; GnnTrainer steps must not use them.
STOCK_TFX_IMAGE_PREFIX = "gcr.io/tfx-oss-public/tfx"


class PipelineValidationError(errors.GnnError, ValueError):
  """A compiled pipeline file or a submission argument is not valid."""


def parse_key_values(items: Optional[Sequence[str]], flag: str) -> dict[str, str]:
  """``["K=V", ...]`` from a repeatable CLI flag -> ``{"K": "V"}``.

  Raises:
    PipelineValidationError: naming the flag, for an item without ``=``.
  """
  out = {}
  for item in items or ():
    if "=" not in item:
      raise PipelineValidationError(f"{flag} {item!r} must be KEY=VALUE.")
    key, value = item.split("=", 1)
    out[key] = value
  return out


def load_pipeline_file(path: str) -> dict[str, Any]:
  """Loads a compiled pipeline as a PipelineJob-shaped dict.

  Args:
    path: ``.json`` (a PipelineJob: displayName, runtimeConfig, pipelineSpec)
      or ``.yaml``/``.yml`` (a bare PipelineSpec, as KFP 2 clients expect).

  Returns:
    ``{"pipelineSpec": ..., "runtimeConfig": ..., ...}``; a YAML PipelineSpec is
    wrapped with an empty runtimeConfig.

  Raises:
    PipelineValidationError: if the file is missing or not a pipeline.
  """
  if not os.path.isfile(path):
    raise PipelineValidationError(
        f"Pipeline file {path!r} does not exist. Compile it first: "
        "gnn-kfp-compile --pipeline demo ... --output FILE.json")
  with open(path, encoding="utf-8") as fh:
    text = fh.read()
  try:
    if path.endswith((".yaml", ".yml")):
      import yaml
      data = yaml.safe_load(text)
    else:
      data = json.loads(text)
  except Exception as e:  # Whatever json or yaml raises: the file does not parse.
    raise PipelineValidationError(f"Pipeline file {path!r} does not parse: {e}") from e
  if not isinstance(data, dict):
    raise PipelineValidationError(f"Pipeline file {path!r} does not hold a JSON/YAML object.")
  if "pipelineSpec" in data:
    return data
  if "root" in data and "pipelineInfo" in data:
    return {"pipelineSpec": data, "runtimeConfig": {}}
  raise PipelineValidationError(
      f"Pipeline file {path!r} is neither a PipelineJob (no 'pipelineSpec') nor a "
      "PipelineSpec (no 'root'/'pipelineInfo').")


def parse_pipeline_spec(spec: Mapping[str, Any]):
  """Parses a PipelineSpec dict into the KFP proto, rejecting unknown fields.

  Returns:
    ``kfp.pipeline_spec.pipeline_spec_pb2.PipelineSpec``.

  Raises:
    PipelineValidationError: if it does not parse.
  """
  from google.protobuf import json_format
  from kfp.pipeline_spec import pipeline_spec_pb2
  proto = pipeline_spec_pb2.PipelineSpec()
  try:
    json_format.ParseDict(dict(spec), proto)
  except json_format.ParseError as e:
    raise PipelineValidationError(f"pipelineSpec is not a valid KFP PipelineSpec: {e}") from e
  return proto


def _constant(param: Mapping[str, Any]) -> Any:
  """The constant value of a task input parameter (schema 2.0 or 2.1 form)."""
  rv = param.get("runtimeValue") or {}
  if "constant" in rv:  # schema 2.1: google.protobuf.Value
    return rv["constant"]
  const = rv.get("constantValue")  # schema 2.0: {"stringValue"|"intValue"|"doubleValue": ...}
  if isinstance(const, Mapping) and const:
    (kind, value), = const.items()
    return int(value) if kind == "intValue" else value
  return None


def task_parameters(spec: Mapping[str, Any], task: str) -> dict[str, Any]:
  """Constant input parameters of one task, e.g. ``{"module_path": ...}``."""
  params = spec["root"]["dag"]["tasks"][task].get("inputs", {}).get("parameters", {})
  return {name: _constant(p) for name, p in params.items()}


def task_component(spec: Mapping[str, Any], task: str) -> dict[str, Any]:
  """The component definition (inputDefinitions, outputDefinitions) of a task."""
  return spec["components"][spec["root"]["dag"]["tasks"][task]["componentRef"]["name"]]


def task_container(spec: Mapping[str, Any], task: str) -> dict[str, Any]:
  """``{"image", "command", "args", ...}`` of the container that runs a task."""
  label = task_component(spec, task)["executorLabel"]
  return spec["deploymentSpec"]["executors"][label]["container"]


def executor_class_of(container: Mapping[str, Any]) -> Optional[str]:
  """The ``--executor_class_path`` argument of a TFX container, if any."""
  args = list(container.get("args", []))
  if "--executor_class_path" in args:
    i = args.index("--executor_class_path")
    if i + 1 < len(args):
      return args[i + 1]
  return None


def find_tasks(spec: Mapping[str, Any],
               executor_class: Union[str, Sequence[str]] = GNN_EXECUTOR_CLASSES) -> list[str]:
  """Names of the tasks whose container runs ``executor_class`` (or one of them)."""
  classes = (executor_class,) if isinstance(executor_class, str) else tuple(executor_class)
  out = []
  for t in spec.get("root", {}).get("dag", {}).get("tasks", {}):
    label = task_component(spec, t).get("executorLabel")
    container = spec.get("deploymentSpec", {}).get("executors", {}).get(label, {}).get("container")
    if container and executor_class_of(container) in classes:
      out.append(t)
  return sorted(out)


def validate_pipeline_spec(spec: Mapping[str, Any], *,
                           require_gcs_wheels: bool = False) -> list[str]:
  """Checks a compiled GnnTrainer pipeline before it is sent anywhere.

  Checks: it parses as a KFP PipelineSpec; pipeline name, tasks and executors
  are present and cross-reference; every container has an image and the TFX
  entrypoint; at least one task runs the GnnTrainer executor; its parameters
  (and a GnnTuner task's, with its tuning_config) are valid (train_args /
  eval_args / custom_config pass the executor's own validation; the module
  file was packaged into ``module_path=<mod>@<wheel>``).

  Args:
    spec: The PipelineSpec dict.
    require_gcs_wheels: Require the user-module wheel on ``gs://`` (Vertex).

  Returns:
    The GnnTrainer task names.

  Raises:
    PipelineValidationError: naming the first problem found.
  """
  parse_pipeline_spec(spec)
  name = spec.get("pipelineInfo", {}).get("name")
  if not name:
    raise PipelineValidationError("pipelineSpec.pipelineInfo.name is missing.")
  tasks = spec.get("root", {}).get("dag", {}).get("tasks", {})
  if not tasks:
    raise PipelineValidationError("pipelineSpec.root.dag.tasks is empty: nothing to run.")
  executors = spec.get("deploymentSpec", {}).get("executors", {})
  for task, body in tasks.items():
    comp_name = body.get("componentRef", {}).get("name")
    comp = spec.get("components", {}).get(comp_name)
    if comp is None:
      raise PipelineValidationError(
          f"Task {task!r} refers to component {comp_name!r}, which is not in "
          "pipelineSpec.components.")
    label = comp.get("executorLabel")
    executor = executors.get(label)
    if not executor:
      raise PipelineValidationError(
          f"Task {task!r}: executor {label!r} is not in deploymentSpec.executors.")
    if "container" not in executor:
      if "importer" in executor or "resolver" in executor:
        continue  # system steps (tfx.dsl.Importer / resolvers) run no container
      raise PipelineValidationError(
          f"Task {task!r}: executor {label!r} has no container, importer or resolver.")
    container = executor["container"]
    if not container.get("image"):
      raise PipelineValidationError(f"Task {task!r}: container image is empty.")
    if executor_class_of(container) and TFX_ENTRYPOINT_MODULE not in container.get("command", []):
      raise PipelineValidationError(
          f"Task {task!r}: container command {container.get('command')} does not run "
          f"{TFX_ENTRYPOINT_MODULE}.")
  gnn_tasks = find_tasks(spec)
  if not gnn_tasks:
    raise PipelineValidationError(
        f"No task runs {' or '.join(GNN_EXECUTOR_CLASSES)}; is this a GnnTrainer pipeline?")
  for task in gnn_tasks + find_tasks(spec, GNN_TUNER_EXECUTOR_CLASS):
    image = task_container(spec, task)["image"]
    if image.startswith(STOCK_TFX_IMAGE_PREFIX):
      raise PipelineValidationError(
          f"Task {task!r} uses the stock TFX image {image!r}, which does not contain "
          "gnn_trainer_component or tensorflow-gnn. Build kubeflow/Dockerfile and compile "
          "with --image <your image>.")
    validate_gnn_trainer_parameters(task, task_parameters(spec, task),
                                    require_gcs_wheels=require_gcs_wheels)
  return gnn_tasks


def validate_gnn_trainer_parameters(task: str, params: Mapping[str, Any], *,
                                    require_gcs_wheels: bool = False) -> None:
  """Validates the constant parameters of a compiled GnnTrainer (or GnnTuner) task.

  Raises:
    PipelineValidationError: on a bad module reference or trainer config.
  """
  module_file, module_path = params.get(keys.MODULE_FILE_KEY), params.get(keys.MODULE_PATH_KEY)
  if module_file:
    raise PipelineValidationError(
        f"Task {task!r} still has {keys.MODULE_FILE_KEY}={module_file!r}: a local path the "
        "container "
        "cannot read. Compile with gnn-kfp-compile (it packages the module as a wheel) "
        "and do not set UNSUPPORTED_DO_NOT_PACKAGE_USER_MODULES.")
  if not module_path:
    raise PipelineValidationError(
        f"Task {task!r} has neither {keys.MODULE_FILE_KEY} nor {keys.MODULE_PATH_KEY}.")
  if "@" in module_path:
    wheel = module_path.split("@", 1)[1]
    if not wheel.endswith(".whl"):
      raise PipelineValidationError(
          f"Task {task!r}: {keys.MODULE_PATH_KEY} {module_path!r} does not point at a wheel.")
    if require_gcs_wheels and not wheel.startswith("gs://"):
      raise PipelineValidationError(
          f"Task {task!r}: the user-module wheel {wheel!r} is not on GCS, so Vertex "
          "workers cannot read it. Recompile with --pipeline-root gs://BUCKET/...")
  try:
    config_lib.make_trainer_config(params.get(keys.TRAIN_ARGS_KEY), params.get(keys.EVAL_ARGS_KEY),
                                   params.get(keys.CUSTOM_CONFIG_KEY))
    if keys.TUNING_CONFIG_KEY in params:  # a GnnTuner task
      tuning_config_lib.make_tuning_config(params[keys.TUNING_CONFIG_KEY])
  except config_lib.ConfigError as e:
    raise PipelineValidationError(f"Task {task!r}: {e}") from e


def to_yaml(spec: Mapping[str, Any]) -> str:
  """Serializes a PipelineSpec dict as YAML (the format KFP 2 clients upload)."""
  import yaml
  return yaml.safe_dump(dict(spec), sort_keys=True)


# ------------------------------------------------------------- command-line helpers
# Shared by the three CLIs: gnn-kfp-compile, gnn-vertex-submit, gnn-kfp-submit.


def add_caching_flags(parser: argparse.ArgumentParser) -> None:
  """``--enable-caching`` / ``--disable-caching`` -> ``args.enable_caching``.

  ``None`` when neither is given: the compiled pipeline's setting stands.
  """
  group = parser.add_mutually_exclusive_group()
  group.add_argument("--enable-caching", dest="enable_caching", action="store_true",
                     default=None, help="Turn task caching on (default: as compiled).")
  group.add_argument("--disable-caching", dest="enable_caching", action="store_false",
                     help="Turn task caching off.")


def run_cli(parser: argparse.ArgumentParser,
            run: Callable[[argparse.Namespace], int],
            argv: Optional[Sequence[str]] = None,
            errors: Union[Type[Exception], tuple[Type[Exception], ...]] = PipelineValidationError
           ) -> int:
  """A CLI's ``main``: parses ``argv`` (default ``sys.argv[1:]``) and calls ``run(args)``.

  Returns:
    ``run``'s exit code; 2 after printing ``error: <message>`` to stderr if it
    raises one of ``errors`` (a bad argument or pipeline file).
  """
  args = parser.parse_args(sys.argv[1:] if argv is None else argv)
  logging.set_verbosity(logging.INFO)
  try:
    return run(args)
  except errors as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
