"""The devices GnnTrainer trains on, and its refusal to train on the CPU when GPUs were asked for.

The contract: ``GNN_TRAINER_GPU`` in the trainer's environment says that the job asked
for GPUs, as ``TYPE:COUNT`` (the format of ``gnn-kfp-compile --trainer-gpu``, e.g.
``NVIDIA_TESLA_T4:1``), ``TYPE`` (one GPU) or a bare ``COUNT``. ``gnn-kfp-compile`` sets
it on every pipeline step and every CustomJob worker pool that requests accelerators
(and runs those in the GPU image); on a ``LocalDagRunner`` set it in the pipeline's
environment (``GNN_TRAINER_GPU=1``), and the replicas of a ``local_workers`` job inherit
it. Unset, empty or ``0``: nothing was asked for, and TensorFlow trains where it can.

At the start of every execution the trainer calls :func:`check_gpus`: it logs what
TensorFlow sees (``tf.config.list_physical_devices``) and raises
:class:`GpuUnavailableError` when fewer GPUs are visible than were asked for, naming the
likely cause (a CPU-only image without the CUDA libraries, no NVIDIA driver in the
container, ``CUDA_VISIBLE_DEVICES``), instead of training for hours on the CPU.
:func:`log_strategy` then logs the devices the distribution strategy uses.

:func:`check_gpu_image` prints the same facts as JSON (TensorFlow's build, the devices it
sees, the CUDA wheels) and fails unless the CUDA libraries TensorFlow was built with are
installed and load: the GPU image's build runs it (kubeflow/Dockerfile.gpu), and so does
CI's check of the GPU lock (requirements/gpu-lock.sh).

Importing this module imports no TensorFlow (the compile tool reads the contract here).
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import importlib.metadata
import importlib.util
import json
import os
import re
import sys
from typing import Any, Mapping, Optional, Sequence

from absl import logging

from gnn_trainer_component import errors

#: The environment variable that says the trainer was asked to run on GPUs (module doc).
GPU_REQUEST_ENV = "GNN_TRAINER_GPU"
#: Present in a container only when the NVIDIA driver is loaded and passed in.
NVIDIA_DRIVER_FILE = "/proc/driver/nvidia/version"
#: The libraries TensorFlow's CUDA build loads (``lib<name>.so.<major>``), by the folder
#: of the nvidia-* wheel (``tensorflow[and-cuda]``) that ships each.
CUDA_LIBRARIES = {
    "cuda_runtime": ("cudart",), "cublas": ("cublas", "cublasLt"), "cufft": ("cufft",),
    "curand": ("curand",), "cusolver": ("cusolver",), "cusparse": ("cusparse",),
    "cudnn": ("cudnn",), "nccl": ("nccl",), "cuda_cupti": ("cupti",),
    "nvjitlink": ("nvJitLink",),
}
#: The GPU image's Dockerfile, for the messages.
GPU_DOCKERFILE = "kubeflow/Dockerfile.gpu"


class GpuRequestError(errors.GnnError, ValueError):
  """A GPU request (``GNN_TRAINER_GPU``, ``--trainer-gpu``) that is not TYPE:COUNT."""


class GpuUnavailableError(errors.GnnError, RuntimeError):
  """The trainer was asked to run on GPUs, and TensorFlow sees fewer of them."""


@dataclasses.dataclass(frozen=True)
class GpuRequest:
  """GPUs a job asked for: ``count`` of ``accelerator_type`` (None: any type)."""
  count: int
  accelerator_type: Optional[str] = None

  def __str__(self) -> str:
    what = f"{self.accelerator_type} " if self.accelerator_type else ""
    return f"{self.count} {what}GPU{'s' if self.count != 1 else ''}"

  def env_value(self) -> str:
    """The value of ``GNN_TRAINER_GPU`` that asks for this."""
    return (f"{self.accelerator_type}:{self.count}" if self.accelerator_type
            else str(self.count))


_TYPE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def parse_gpu_request(value: Optional[str], what: str = GPU_REQUEST_ENV) -> Optional[GpuRequest]:
  """``TYPE:COUNT``, ``TYPE`` or ``COUNT`` -> a request; None for unset, empty or ``0``.

  Args:
    value: The text, e.g. ``NVIDIA_TESLA_T4:1`` or ``2``.
    what: Where it comes from, for the message (``--trainer-gpu``, the variable).

  Raises:
    GpuRequestError: not one of these forms, or a count below 1 with a type.
  """
  text = (value or "").strip()
  if text in ("", "0"):
    return None
  gpu_type, sep, count_text = text.rpartition(":") if ":" in text else ("", "", text)
  if not sep and not count_text.isdigit():  # a bare type: one GPU
    gpu_type, count_text = text, "1"
  if gpu_type and not _TYPE_RE.match(gpu_type):
    raise GpuRequestError(f"{what}={text!r}: {gpu_type!r} is not an accelerator type such "
                          "as NVIDIA_TESLA_T4; write TYPE:COUNT, TYPE or COUNT.")
  try:
    count = int(count_text)
  except ValueError:
    raise GpuRequestError(f"{what}={text!r} must be TYPE:COUNT (e.g. NVIDIA_TESLA_T4:1), "
                          "TYPE or a GPU count.") from None
  if count < 1:
    raise GpuRequestError(f"{what}={text!r}: the GPU count must be >= 1 (unset it, or "
                          "write 0 alone, to ask for no GPU).")
  return GpuRequest(count=count, accelerator_type=gpu_type or None)


def requested_gpus(environ: Optional[Mapping[str, str]] = None) -> Optional[GpuRequest]:
  """The GPUs this process was asked to train on (``GNN_TRAINER_GPU``); None: none."""
  environ = os.environ if environ is None else environ
  return parse_gpu_request(environ.get(GPU_REQUEST_ENV))


def installed_cuda_packages() -> list[str]:
  """``name==version`` of the nvidia-* CUDA wheels installed in this Python environment."""
  found = set()
  for dist in importlib.metadata.distributions():
    name = (dist.metadata["Name"] or "").lower()
    if name.startswith("nvidia-") and name.endswith(("-cu11", "-cu12", "-cu13")):
      found.add(f"{name}=={dist.version}")
  return sorted(found)


def _nvidia_dirs() -> list[str]:
  spec = importlib.util.find_spec("nvidia")
  return list(spec.submodule_search_locations or []) if spec else []


def cuda_library_files() -> dict[str, Optional[str]]:
  """``lib<name>.so.<major>`` TensorFlow loads -> its file in the nvidia-* wheels, or None."""
  files: dict[str, Optional[str]] = {}
  for folder, names in CUDA_LIBRARIES.items():
    for name in names:
      hits = sorted(path for base in _nvidia_dirs()
                    for path in glob.glob(os.path.join(base, folder, "lib", f"lib{name}.so.*"))
                    if re.fullmatch(rf"lib{re.escape(name)}\.so\.\d+", os.path.basename(path)))
      files[name] = hits[0] if hits else None
  return files


def load_cuda_libraries(files: Mapping[str, Optional[str]]) -> dict[str, str]:
  """Loads each library (as TensorFlow would, in dependency order); name -> error, if any."""
  left = {name: path for name, path in files.items() if path}
  failed: dict[str, str] = {}
  while left:
    failed = {}
    for name, path in left.items():
      try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
      except OSError as e:
        failed[name] = str(e)
    if len(failed) == len(left):
      break
    left = {name: left[name] for name in failed}
  return failed


def _major(version: Any) -> Optional[str]:
  match = re.match(r"\d+", str(version or ""))
  return match.group(0) if match else None


def check_cuda_libraries() -> list[str]:
  """What keeps TensorFlow's CUDA build from its libraries here; empty: all there and loading.

  The libraries of ``tensorflow[and-cuda]`` must be installed, load (with the C library
  of this system) and have the CUDA and cuDNN major versions TensorFlow was built with.
  """
  import tensorflow as tf
  build = tf.sysconfig.get_build_info()
  if not build.get("is_cuda_build"):
    return [f"TensorFlow {tf.__version__} is not a CUDA build"]
  files = cuda_library_files()
  problems = [f"lib{name}.so.* is not installed (no nvidia-* wheel ships it)"
              for name, path in files.items() if not path]
  problems += [f"lib{name} does not load: {error}"
               for name, error in load_cuda_libraries(files).items()]
  for name, key in (("cudart", "cuda_version"), ("cudnn", "cudnn_version")):
    want, path = _major(build.get(key)), files.get(name)
    have = path.rsplit(".so.", 1)[-1] if path else None
    if path and want and have != want:
      problems.append(f"TensorFlow {tf.__version__} was built with {key} {build.get(key)} "
                      f"but {os.path.basename(path)} is installed")
  return problems


def _causes(request: GpuRequest, gpus: Sequence[Any],
            environ: Mapping[str, str]) -> list[str]:
  """The likely reasons TensorFlow sees fewer GPUs than ``request``, most likely first."""
  import tensorflow as tf
  causes = []
  visible = environ.get("CUDA_VISIBLE_DEVICES")
  if visible is not None and (visible.strip() in ("", "-1")
                              or len(visible.split(",")) < request.count):
    causes.append(f"CUDA_VISIBLE_DEVICES={visible!r} hides GPUs from TensorFlow.")
  if not tf.sysconfig.get_build_info().get("is_cuda_build"):
    causes.append(f"TensorFlow {tf.__version__} in this environment is a CPU-only build: "
                  "install tensorflow[and-cuda] (the GPU image).")
  elif not installed_cuda_packages():
    causes.append(
        "No CUDA libraries in this Python environment (the nvidia-* wheels of "
        "tensorflow[and-cuda]): a CPU-only TensorFlow installation, such as the CPU image "
        f"(kubeflow/Dockerfile). Run the step in the GPU image ({GPU_DOCKERFILE}, tagged "
        "IMAGE-gpu, which gnn-kfp-compile --trainer-gpu uses; --gpu-image names another), "
        "or pip install tensorflow[and-cuda] at this TensorFlow's version.")
  if not os.path.exists(NVIDIA_DRIVER_FILE):
    causes.append(
        f"No NVIDIA driver in this container ({NVIDIA_DRIVER_FILE} is missing): the machine "
        "has no GPU attached, or the container runtime did not pass it in (on Kubernetes "
        "the pod must request nvidia.com/gpu on a node with the driver; with Docker, "
        "--gpus all).")
  if not causes:
    causes.append(
        f"The driver and the CUDA libraries are there, but TensorFlow found {len(gpus)} "
        "GPU(s): the machine has fewer than requested, or TensorFlow could not use them "
        "(a driver older than its CUDA needs; see TensorFlow's log lines above).")
  return causes


def check_gpus(environ: Optional[Mapping[str, str]] = None) -> None:
  """Logs the devices TensorFlow sees; refuses to go on without the GPUs that were asked for.

  Call it at the start of an execution, before the distribution strategy exists
  (``tf.config.list_physical_devices`` does not initialize TensorFlow's runtime).

  Args:
    environ: The environment to read ``GNN_TRAINER_GPU`` from (default: this process's).

  Raises:
    GpuRequestError: ``GNN_TRAINER_GPU`` is malformed.
    GpuUnavailableError: it asks for more GPUs than TensorFlow sees.
  """
  environ = os.environ if environ is None else environ
  request = requested_gpus(environ)
  import tensorflow as tf
  gpus = tf.config.list_physical_devices("GPU")
  cpus = tf.config.list_physical_devices("CPU")
  logging.info("GnnTrainer devices: TensorFlow %s sees %d GPU(s) %s and %d CPU(s); %s=%s",
               tf.__version__, len(gpus), [d.name for d in gpus], len(cpus),
               GPU_REQUEST_ENV, request.env_value() if request else "(unset: no GPU asked for)")
  if request is None or len(gpus) >= request.count:
    return
  seen = [d.name.replace("/physical_device:", "") for d in tf.config.list_physical_devices()]
  causes = _causes(request, gpus, environ)
  raise GpuUnavailableError(
      f"GnnTrainer was asked to train on {request} ({GPU_REQUEST_ENV}="
      f"{request.env_value()}), but TensorFlow {tf.__version__} sees {len(gpus)} GPU(s): "
      f"tf.config.list_physical_devices() = {seen}. It stops here rather than train on the "
      "CPU. Likely cause" + ("s: " if len(causes) > 1 else ": ")
      + " ".join(f"({i}) {c}" for i, c in enumerate(causes, 1))
      + f" To train on the CPU on purpose, unset {GPU_REQUEST_ENV} (compile without "
      "--trainer-gpu).")


def log_strategy(strategy) -> None:
  """Logs the distribution strategy and the devices its replicas run on."""
  from gnn_trainer_component.distributed import strategy as strategy_lib
  try:
    replica_devices = list(strategy.extended.worker_devices)
  except Exception:  # The default strategy has none; a log line must never stop training.
    import tensorflow as tf
    logical = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    replica_devices = [logical[0].name] if logical else []
  name = strategy_lib.strategy_name(strategy)
  if name.startswith("_Default"):
    name = "the default strategy"
  logging.info("GnnTrainer: %s, %d replica(s) in sync on %s", name,
               strategy.num_replicas_in_sync,
               replica_devices)


def report() -> dict[str, Any]:
  """What this environment offers a GPU run: TensorFlow's build, its devices, the CUDA wheels."""
  import tensorflow as tf
  build = tf.sysconfig.get_build_info()
  files = cuda_library_files()
  return {
      "tensorflow": tf.__version__,
      "build": {k: build.get(k) for k in ("is_cuda_build", "cuda_version", "cudnn_version")},
      "physical_devices": [d.name for d in tf.config.list_physical_devices()],
      "gpu_request": os.environ.get(GPU_REQUEST_ENV) or None,
      "nvidia_driver": os.path.exists(NVIDIA_DRIVER_FILE),
      "cuda_packages": installed_cuda_packages(),
      "cuda_libraries": {name: os.path.basename(path) if path else None
                         for name, path in files.items()},
  }


def check_gpu_image() -> int:
  """Prints :func:`report` as JSON and checks the CUDA libraries; 0 when they are all there.

  What the GPU image's build runs (kubeflow/Dockerfile.gpu) and ``requirements/gpu-lock.sh
  check``: ``python -c "import sys; from gnn_trainer_component.distributed import devices;
  sys.exit(devices.check_gpu_image())"``. On a GPU machine, the report also shows what
  GnnTrainer would see.
  """
  print(json.dumps(report(), indent=1))
  problems = check_cuda_libraries()
  for problem in problems:
    print(f"error: {problem}", file=sys.stderr)
  if not problems:
    print("CUDA libraries: every library TensorFlow's CUDA build loads is installed and loads.",
          file=sys.stderr)
  return 1 if problems else 0
