"""GPU runs that are real: the GPU image in the compiled pipeline, and the trainer's refusal
to train on the CPU when GPUs were asked for.

* compile: ``--trainer-gpu`` runs the GnnTrainer step (or the CustomJob's GPU pools) in the
  GPU image (``IMAGE:TAG-gpu``, kubeflow/Dockerfile.gpu) with ``GNN_TRAINER_GPU`` in its
  environment; every other step keeps the CPU image and gets no such variable;
* the contract (``gnn_trainer_component.distributed.devices``): ``GNN_TRAINER_GPU`` set and
  no GPU visible (this machine has none) -> ``GpuUnavailableError`` before anything is
  read or written, naming the request, what TensorFlow sees and the likely cause; unset,
  GnnTrainer trains;
* the GPU lock: the CPU lock plus the CUDA wheels, every shared pin the same.

No GPU, network or image needed.
"""

import json
import os
import re

import pytest

from gnn_trainer_component.deploy import compile as kfp_compile
from gnn_trainer_component.deploy import machines
from gnn_trainer_component.deploy import pipeline_job
from gnn_trainer_component.deploy.errors import CompileError
from gnn_trainer_component.distributed import devices
from tests.helpers import (DEMO_MODULE, REPO_ROOT, assert_nothing_published,
                           demo_examples_artifact, run_executor)

IMAGE = "us-docker.pkg.dev/test-project/gnn/gnn-trainer:0.1.0"
GPU_IMAGE = IMAGE + "-gpu"
GPU_ENV = {"name": "GNN_TRAINER_GPU", "value": "NVIDIA_TESLA_T4:1"}


def _containers(spec):
  """Task name -> its container (tasks that run one)."""
  executors = spec["deploymentSpec"]["executors"]
  out = {}
  for task, body in spec["root"]["dag"]["tasks"].items():
    label = spec["components"][body["componentRef"]["name"]]["executorLabel"]
    if "container" in executors[label]:
      out[task] = executors[label]["container"]
  return out


# ------------------------------------------------------------------------ the compiled pipeline


def test_gpu_image_tag_naming():
  assert machines.gpu_image_for(IMAGE) == GPU_IMAGE
  assert machines.gpu_image_for(GPU_IMAGE) == GPU_IMAGE  # already the GPU tag
  assert machines.gpu_image_for("gnn-trainer") == "gnn-trainer:latest-gpu"
  assert machines.gpu_image_for("localhost:5000/gnn") == "localhost:5000/gnn:latest-gpu"
  assert machines.gpu_image_for("localhost:5000/gnn:1") == "localhost:5000/gnn:1-gpu"
  with pytest.raises(CompileError, match="pass the GPU image with --gpu-image"):
    machines.gpu_image_for("gcr.io/p/gnn@sha256:" + "0" * 64)


def test_trainer_gpu_runs_the_trainer_step_in_the_gpu_image_and_nothing_else(tmp_path, capsys):
  """--trainer-gpu: GnnTrainer's container is the GPU image with GNN_TRAINER_GPU; the
  other steps (ExampleGen, StatisticsGen, SchemaGen) keep the CPU image, without it."""
  out = tmp_path / "gpu.json"
  rc = kfp_compile.main([
      "--pipeline", "demo", "--image", IMAGE, "--pipeline-root", str(tmp_path / "root"),
      "--module-file", DEMO_MODULE, "--output", str(out), "--no-transform", "--no-evaluator",
      "--train-steps", "5", "--custom-config", '{"epochs": 1}',
      "--trainer-gpu", "NVIDIA_TESLA_T4:1", "--trainer-memory-gb", "30"])
  assert rc == 0, capsys.readouterr().err
  assert f"GnnTrainer: image={GPU_IMAGE} " in capsys.readouterr().out
  spec = json.loads(out.read_text())["pipelineSpec"]  # the file, as it is submitted
  containers = _containers(spec)
  assert {"GnnTrainer", "StatisticsGen", "SchemaGen"} <= set(containers), sorted(containers)
  trainer = containers.pop("GnnTrainer")
  assert trainer["image"] == GPU_IMAGE
  assert trainer["env"] == [GPU_ENV]
  assert trainer["resources"]["accelerator"] == {"type": "NVIDIA_TESLA_T4", "count": "1"}
  for task, container in containers.items():
    assert container["image"] == IMAGE, task
    assert "env" not in container and "accelerator" not in container.get("resources", {}), task
  assert pipeline_job.validate_pipeline_spec(spec) == ["GnnTrainer"]
  assert machines.gpu_containers(spec).keys() == {
      spec["components"][spec["root"]["dag"]["tasks"]["GnnTrainer"]["componentRef"]["name"]][
          "executorLabel"]}


def test_a_bad_gpu_image_is_refused_before_compiling(tmp_path):
  with pytest.raises(CompileError, match="--gpu-image 'bad image' is not a"):
    kfp_compile.compile_pipeline("demo", IMAGE, str(tmp_path / "root"), DEMO_MODULE, None,
                                 gpu_image="bad image")


def test_custom_job_gpu_pools_run_the_gpu_image_and_parameter_servers_the_cpu_image():
  job = machines.TrainerJob(project="my-project", region="us-central1", workers=3,
                            parameter_servers=2, accelerator_type="NVIDIA_L4",
                            accelerator_count=4)
  pools = job.custom_config(IMAGE)["ai_platform_training_args"]["job_spec"]["worker_pool_specs"]
  gpu = {"image_uri": GPU_IMAGE, "env": [{"name": "GNN_TRAINER_GPU", "value": "NVIDIA_L4:4"}]}
  assert [p["container_spec"] for p in pools] == [gpu, gpu, {"image_uri": IMAGE}]
  pools = job.custom_config(IMAGE, "gcr.io/p/cuda:1")["ai_platform_training_args"][
      "job_spec"]["worker_pool_specs"]
  assert pools[0]["container_spec"]["image_uri"] == "gcr.io/p/cuda:1"
  cpu_job = machines.TrainerJob(project="my-project", region="us-central1", workers=2)
  assert [p["container_spec"] for p in cpu_job.custom_config(IMAGE)[
      "ai_platform_training_args"]["job_spec"]["worker_pool_specs"]] == [{"image_uri": IMAGE}] * 2


# ------------------------------------------------------------------------------ the contract


@pytest.mark.parametrize("value, count, gpu_type", [
    ("NVIDIA_TESLA_T4:1", 1, "NVIDIA_TESLA_T4"), ("NVIDIA_L4", 1, "NVIDIA_L4"), ("2", 2, None)])
def test_gpu_request_forms(value, count, gpu_type):
  request = devices.parse_gpu_request(value)
  assert (request.count, request.accelerator_type) == (count, gpu_type)
  assert devices.parse_gpu_request(request.env_value()) == request


def test_no_request_and_bad_requests():
  for value in (None, "", "0", " 0 "):
    assert devices.parse_gpu_request(value) is None
  assert devices.requested_gpus({}) is None
  for value, message in (("T4:x", "must be TYPE:COUNT"), ("T4:0", "count must be >= 1"),
                         ("bad type:1", "is not an accelerator type")):
    with pytest.raises(devices.GpuRequestError, match=message):
      devices.parse_gpu_request(value)


def test_a_gpu_request_without_gpus_is_refused_with_its_cause():
  """This machine has no GPU and its TensorFlow no CUDA wheels: asked for one, the check
  names the request, what TensorFlow sees and why; not asked, it passes."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  assert not tf.config.list_physical_devices("GPU"), "this test expects a machine without GPUs"
  devices.check_gpus({})  # no request: train on what there is
  devices.check_gpus({"GNN_TRAINER_GPU": "0"})
  with pytest.raises(devices.GpuUnavailableError) as raised:
    devices.check_gpus({"GNN_TRAINER_GPU": "NVIDIA_TESLA_T4:1"})
  message = str(raised.value)
  assert isinstance(raised.value, devices.errors.GnnError)
  assert "asked to train on 1 NVIDIA_TESLA_T4 GPU (GNN_TRAINER_GPU=NVIDIA_TESLA_T4:1)" in message
  assert f"TensorFlow {tf.__version__} sees 0 GPU(s)" in message
  assert "tf.config.list_physical_devices() = ['CPU:0']" in message
  if not devices.installed_cuda_packages():
    assert "No CUDA libraries in this Python environment" in message
    assert "kubeflow/Dockerfile.gpu" in message
  assert "No NVIDIA driver in this container" in message
  assert "unset GNN_TRAINER_GPU" in message
  with pytest.raises(devices.GpuUnavailableError, match=r"CUDA_VISIBLE_DEVICES='-1' hides"):
    devices.check_gpus({"GNN_TRAINER_GPU": "1", "CUDA_VISIBLE_DEVICES": "-1"})


def test_the_gpu_image_check_fails_without_cuda_libraries(capsys):
  """check_gpu_image (the GPU image's build check) on the CPU stack: no CUDA wheels."""
  if devices.installed_cuda_packages():
    pytest.skip("this environment has CUDA wheels (the GPU image's check passes or fails "
                "on their merits; requirements/gpu-lock.sh check runs it)")
  assert devices.check_gpu_image() == 1
  captured = capsys.readouterr()
  assert "/physical_device:CPU:0" in json.loads(captured.out)["physical_devices"]
  assert "libcudart.so.* is not installed" in captured.err


def _trainer_run(tmp_path, demo_data):
  examples = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  return dict(examples_uri=examples, graph_schema_dir=demo_data["graph_schema"], train_steps=2)


def test_the_trainer_refuses_at_start_without_the_gpus_it_was_asked_for(
    tmp_path, demo_data, monkeypatch):
  """GnnTrainer's executor, as a pipeline step runs it: GNN_TRAINER_GPU set and no GPU here:
  it stops at start, before reading its inputs, and publishes nothing."""
  monkeypatch.setenv("GNN_TRAINER_GPU", "NVIDIA_TESLA_T4:1")
  with pytest.raises(devices.GpuUnavailableError, match="sees 0 GPU"):
    run_executor(str(tmp_path / "refused"), **_trainer_run(tmp_path, demo_data))
  assert_nothing_published(str(tmp_path / "refused"))
  assert not os.path.exists(tmp_path / "refused" / "model_run")


@pytest.mark.slow
def test_without_a_gpu_request_the_trainer_trains_on_the_cpu(tmp_path, demo_data, monkeypatch):
  monkeypatch.setenv("GNN_TRAINER_GPU", "0")  # no request, as unset
  model, _ = run_executor(str(tmp_path / "trained"), **_trainer_run(tmp_path, demo_data))
  assert os.path.isdir(os.path.join(model.uri, "Format-Serving"))


# ------------------------------------------------------------------------------ the GPU lock


def _pins(path):
  with open(os.path.join(REPO_ROOT, path)) as fh:
    return dict(re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", fh.read(), re.M))


def test_the_gpu_lock_is_the_cpu_lock_plus_tensorflows_cuda_wheels():
  cpu = _pins("requirements/lock-tfx121-py313.txt")
  gpu = _pins("requirements/lock-tfx121-py313-gpu.txt")
  extra = sorted(set(gpu) - set(cpu))
  assert not set(cpu) - set(gpu)
  assert {name: gpu[name] for name in cpu if gpu[name] != cpu[name]} == {}
  assert extra and all(re.fullmatch(r"nvidia-[a-z0-9-]+-cu12", name) for name in extra), extra
  assert {"nvidia-cudnn-cu12", "nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12"} <= set(extra)
