"""Kubeflow Pipelines 2 / Vertex AI Pipelines deployment (issue 5).

* compile: the demo pipeline through ``KubeflowV2DagRunner`` (gnn_trainer_component.deploy.compile);
* container run: the GnnTrainer step's command and args taken from the compiled
  JSON, run in a fresh process with an ``ExecutorInput`` as the KFP launcher
  would fill it (TFX's ``kubeflow_v2_run_executor`` entrypoint, real executor,
  the module loaded from the wheel compiling wrote);
* submit: both dry-run submitters, good and bad arguments.

No mocks of TFX or KFP. Nothing reaches the network; no Docker, no cluster.
"""

import json
import os
import re
import subprocess
import sys
import time
import zipfile

import pytest

from gnn_trainer_component.deploy import compile as kfp_compile
from gnn_trainer_component.deploy import machines
from gnn_trainer_component.deploy import pipeline_job
from gnn_trainer_component.deploy import submit_kfp
from gnn_trainer_component.deploy import submit_vertex
from gnn_trainer_component.deploy.errors import CompileError
from tests.helpers import REPO_ROOT

DEMO_MODULE = os.path.join(REPO_ROOT, "module_files", "demo_node_classification.py")
IMAGE = "us-docker.pkg.dev/test-project/gnn/gnn-trainer:test"
TRAIN_STEPS = 10
CUSTOM_CONFIG = {"epochs": 1, "global_batch_size": 16, "shuffle_buffer_size": 64,
                 "summarize_every_n_steps": "never", "parity_check_examples": 4, "seed": 1}
GCS_ROOT = "gs://test-bucket/pipeline_root"


def _env() -> dict:
  """Environment of the subprocesses: as in the image (ENV TF_USE_LEGACY_KERAS=1).

  PYTHONPATH holds only the repo root, standing in for the image's
  ``pip install .`` of gnn_trainer_component (the venv's editable install is
  not importable from other working directories). ``module_files/`` is not on
  it: the user module must come from the wheel.
  """
  env = dict(os.environ)
  env.update({"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
              "PYTHONWARNINGS": "ignore", "PYTHONPATH": REPO_ROOT})
  return env


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
  """The demo pipeline without Transform/Evaluator, compiled with a local
  pipeline root (no GCS needed)."""
  base = tmp_path_factory.mktemp("kfp")
  root = str(base / "pipeline_root")
  output = str(base / "gnn-demo.json")
  start = time.time()
  job = kfp_compile.compile_pipeline(
      "demo", IMAGE, root, DEMO_MODULE, output,
      examples_dir=str(base / "data" / "examples"),
      graph_schema_dir=str(base / "data" / "graph_schema"),
      train_steps=TRAIN_STEPS, custom_config=CUSTOM_CONFIG, with_transform=False,
      with_evaluator=False,
      trainer_resources=machines.TrainerResources(cpu_limit=4, memory_limit=16))
  print(f"compiled in {time.time() - start:.1f} s")
  return {"job": job, "root": root, "output": output, "base": str(base)}


def _gcs_copy(compiled, name="gnn-demo-gcs.json") -> str:
  """The compiled JSON as a gs:// pipeline root would give it.

  Compiling against gs:// writes the module wheel to GCS, which needs
  credentials; the compiled file differs only in that path prefix.
  """
  with open(compiled["output"]) as fh:
    text = fh.read()
  path = os.path.join(compiled["base"], name)
  with open(path, "w") as fh:
    fh.write(text.replace(compiled["root"], GCS_ROOT))
  return path


# ---------------------------------------------------------------------------- compile


def test_compile_names_executor_image_inputs_and_parameters(compiled):
  with open(compiled["output"]) as fh:
    job = json.load(fh)
  assert job == compiled["job"]
  assert job["runtimeConfig"]["gcsOutputDirectory"] == compiled["root"]
  spec = job["pipelineSpec"]
  assert spec["schemaVersion"] == "2.1.0"
  assert spec["pipelineInfo"]["name"] == "gnn-demo"
  assert set(spec["root"]["dag"]["tasks"]) == {
      "ImportExampleGen", "StatisticsGen", "SchemaGen", "graph_schema_importer", "GnnTrainer"}
  assert pipeline_job.find_tasks(spec) == ["GnnTrainer"]

  container = pipeline_job.task_container(spec, "GnnTrainer")
  assert container["image"] == IMAGE
  assert container["command"] == [
      "python", "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"]
  args = container["args"]
  assert args[args.index("--executor_class_path") + 1] == "gnn_trainer_component.trainer.executor.Executor"
  assert args[args.index("--json_serialized_invocation_args") + 1] == "{{$}}"
  assert container["resources"] == {"cpuLimit": 4.0, "memoryLimit": 16.0}
  # Every TFX step runs in our image (it has TFX too).
  for task in ("ImportExampleGen", "StatisticsGen", "SchemaGen"):
    assert pipeline_job.task_container(spec, task)["image"] == IMAGE

  comp = pipeline_job.task_component(spec, "GnnTrainer")
  titles = {k: v["artifactType"]["instanceSchema"].splitlines()[0]
            for k, v in comp["inputDefinitions"]["artifacts"].items()}
  assert titles == {"examples": "title: tfx.Examples",
                    "graph_schema": "title: gnn_trainer_component.GraphSchema",
                    "schema": "title: tfx.Schema"}
  outs = {k: v["artifactType"]["instanceSchema"].splitlines()[0]
          for k, v in comp["outputDefinitions"]["artifacts"].items()}
  assert outs == {"model": "title: tfx.Model", "model_run": "title: tfx.ModelRun"}
  task_inputs = spec["root"]["dag"]["tasks"]["GnnTrainer"]["inputs"]["artifacts"]
  assert {k: v["taskOutputArtifact"]["producerTask"] for k, v in task_inputs.items()} == {
      "examples": "ImportExampleGen", "graph_schema": "graph_schema_importer",
      "schema": "SchemaGen"}

  params = pipeline_job.task_parameters(spec, "GnnTrainer")
  assert set(params) == {"train_args", "eval_args", "module_path", "custom_config"}
  assert set(comp["inputDefinitions"]["parameters"]) == set(params)
  assert json.loads(params["train_args"]) == {"num_steps": TRAIN_STEPS}
  assert json.loads(params["custom_config"]) == CUSTOM_CONFIG
  # The TFX way: module_file was packaged as a wheel under <root>/_wheels.
  module, wheel = params["module_path"].split("@")
  assert module == "demo_node_classification"
  assert wheel.startswith(os.path.join(compiled["root"], "_wheels") + os.sep)
  assert wheel.endswith(".whl") and os.path.isfile(wheel)
  assert "demo_node_classification.py" in zipfile.ZipFile(wheel).namelist()
  importer = spec["deploymentSpec"]["executors"]["graph_schema_importer_executor"]["importer"]
  assert importer["artifactUri"]["constant"].endswith("graph_schema")


def test_compile_full_demo_with_transform_evaluator_pusher(tmp_path):
  job = kfp_compile.compile_pipeline("demo", IMAGE, str(tmp_path / "root"), DEMO_MODULE, None)
  spec = job["pipelineSpec"]
  tasks = spec["root"]["dag"]["tasks"]
  assert {"Transform", "GnnTrainer", "Evaluator", "Pusher"} <= set(tasks)
  producers = {k: v["taskOutputArtifact"]["producerTask"]
               for k, v in tasks["GnnTrainer"]["inputs"]["artifacts"].items()}
  assert producers == {"examples": "Transform", "transform_graph": "Transform",
                       "graph_schema": "graph_schema_importer", "schema": "SchemaGen"}
  # Both user modules travel as wheels under <root>/_wheels.
  for task in ("Transform", "GnnTrainer"):
    module_path = pipeline_job.task_parameters(spec, task)["module_path"]
    assert "@" + str(tmp_path / "root" / "_wheels") in module_path


def test_compile_rejects_bad_arguments(tmp_path, capsys):
  ok = dict(image=IMAGE, pipeline_root=str(tmp_path), module_file=DEMO_MODULE,
            output_path=str(tmp_path / "p.json"))
  cases = [
      (dict(ok, pipeline_name="nope"), "Unknown pipeline 'nope'; choose one of ['demo']"),
      (dict(ok, pipeline_name="demo", module_file=str(tmp_path / "missing.py")),
       "does not exist"),
      (dict(ok, pipeline_name="demo", output_path=str(tmp_path / "p.txt")), "must end in .json"),
      (dict(ok, pipeline_name="demo", image="bad image"), "not a container image"),
  ]
  for kwargs, message in cases:
    with pytest.raises(CompileError, match=message.replace("[", r"\[").replace("]", r"\]")):
      kfp_compile.compile_pipeline(**kwargs)
  with pytest.raises(CompileError, match="needs an accelerator type"):
    machines.TrainerResources(accelerator_count=2).to_proto()
  with pytest.raises(CompileError, match="not valid on Vertex"):
    kfp_compile.compile_pipeline("demo", name="Bad_Name", **ok)
  cli = ["--image", IMAGE, "--pipeline-root", "x", "--module-file", DEMO_MODULE,
         "--output", "x.json"]
  assert kfp_compile.main(["--pipeline", "nope"] + cli) == 2
  assert "Unknown pipeline 'nope'" in capsys.readouterr().err
  assert kfp_compile.main(["--pipeline", "demo", "--custom-config", "{"] + cli) == 2
  assert "--custom-config is not valid JSON" in capsys.readouterr().err
  assert kfp_compile.main(["--pipeline", "demo", "--trainer-gpu", "T4:x"] + cli) == 2
  assert "must be TYPE:COUNT" in capsys.readouterr().err


def test_pipeline_job_keys_match_spec_and_submitters_stay_tfx_free():
  """pipeline_job reads GnnTrainer's parameter names from the TFX-free ``keys`` (which
  ``spec`` re-exports), so that it, the submitters and ``gnn-kfp-compile --help`` do not
  import TFX (~13 s)."""
  from gnn_trainer_component import keys, spec  # pylint: disable=g-import-not-at-top
  for key in ("MODULE_FILE_KEY", "MODULE_PATH_KEY", "TRAIN_ARGS_KEY", "EVAL_ARGS_KEY",
              "CUSTOM_CONFIG_KEY", "TUNING_CONFIG_KEY"):
    assert getattr(spec, key) is getattr(keys, key), key
  code = ("import sys\n"
          "from gnn_trainer_component.deploy import compile, submit_kfp, submit_vertex\n"
          "print(sorted(m for m in ('tfx', 'tensorflow') if m in sys.modules))")
  proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=_env(),
                        capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.strip() == "[]"


def test_compile_cli_writes_yaml_with_gpu(compiled, tmp_path, capsys):
  """The CLI, .yaml output (PipelineSpec only, what the KFP 2 client uploads)."""
  out = tmp_path / "gnn-demo.yaml"
  rc = kfp_compile.main([
      "--pipeline", "demo", "--image", IMAGE, "--pipeline-root", str(tmp_path / "root"),
      "--module-file", DEMO_MODULE, "--output", str(out), "--no-statistics",
      "--train-steps", "5", "--custom-config", '{"epochs": 1}',
      "--trainer-gpu", "NVIDIA_TESLA_T4:2", "--trainer-memory-gb", "30"])
  assert rc == 0, capsys.readouterr().err
  import yaml  # pylint: disable=g-import-not-at-top
  spec = yaml.safe_load(out.read_text())
  assert "pipelineSpec" not in spec and spec["pipelineInfo"]["name"] == "gnn-demo"
  assert "SchemaGen" not in spec["root"]["dag"]["tasks"]
  assert set(pipeline_job.task_component(spec, "GnnTrainer")["inputDefinitions"]["artifacts"]) == {
      "examples", "graph_schema"}
  trainer = pipeline_job.task_container(spec, "GnnTrainer")
  assert trainer["resources"] == {
      "memoryLimit": 30.0, "accelerator": {"type": "NVIDIA_TESLA_T4", "count": "2"}}
  # In the GPU image, told to refuse the CPU, in the file too (tests/test_gpu_image.py).
  assert trainer["image"] == IMAGE + "-gpu"
  assert trainer["env"] == [{"name": "GNN_TRAINER_GPU", "value": "NVIDIA_TESLA_T4:2"}]
  assert pipeline_job.validate_pipeline_spec(spec) == ["GnnTrainer"]


@pytest.mark.distributed
def test_compile_multi_worker_trainer_as_a_vertex_custom_job(tmp_path, capsys):
  """--trainer-workers: GnnTrainer's custom_config holds the CustomJob it submits
  (TFX's Vertex Trainer keys): a chief pool and a worker pool in the pipeline's
  GPU image, machine type and GPUs per replica; the step itself gets no GPU."""
  cli = ["--pipeline", "demo", "--image", IMAGE, "--pipeline-root", str(tmp_path / "root"),
         "--module-file", DEMO_MODULE, "--output", str(tmp_path / "mw.json"),
         "--no-statistics", "--no-evaluator", "--train-steps", "6",
         "--trainer-workers", "3", "--trainer-machine-type", "n1-standard-16",
         "--trainer-gpu", "NVIDIA_L4:1", "--vertex-project", "my-project",
         "--vertex-region", "us-central1"]
  assert kfp_compile.main(cli + ["--custom-config", '{"epochs": 1}']) == 2
  assert "not divisible by the 3 replicas" in capsys.readouterr().err  # default batch 32
  assert kfp_compile.main(cli + ["--custom-config",
                                 '{"epochs": 1, "global_batch_size": 48}']) == 0, \
      capsys.readouterr().err
  with open(tmp_path / "mw.json") as f:
    spec = json.load(f)["pipelineSpec"]
  config = json.loads(pipeline_job.task_parameters(spec, "GnnTrainer")["custom_config"])
  assert config["global_batch_size"] == 48 and config["ai_platform_vertex_region"] == "us-central1"
  args = config["ai_platform_training_args"]
  assert args["project"] == "my-project"
  machine = {"machine_type": "n1-standard-16", "accelerator_type": "NVIDIA_L4",
             "accelerator_count": 1}
  # GPU replicas run the GPU image, told to refuse the CPU (tests/test_gpu_image.py).
  gpu = {"image_uri": IMAGE + "-gpu", "env": [{"name": "GNN_TRAINER_GPU", "value": "NVIDIA_L4:1"}]}
  assert args["job_spec"]["worker_pool_specs"] == [
      {"machine_spec": machine, "replica_count": 1, "container_spec": gpu},
      {"machine_spec": machine, "replica_count": 2, "container_spec": gpu}]
  container = pipeline_job.task_container(spec, "GnnTrainer")
  assert "accelerator" not in container.get("resources", {})
  # A job: the step runs the launcher, whose replicas run the trainer's executor.
  assert pipeline_job.executor_class_of(container) == (
      "gnn_trainer_component.trainer.launcher.Executor")
  bad = [(["--vertex-project", "x"], "only applies with --trainer-workers"),
         (cli[:-4], "needs --vertex-project and --vertex-region"),
         (cli[:-1] + ["moon"], "is not a region like us-central1"),
         (cli + ["--trainer-parameter-servers", "1", "--trainer-workers", "1"],
          "needs --trainer-workers >= 2"),
         (cli + ["--trainer-cpu", "4"], "--trainer-cpu, --trainer-memory-gb would only size")]
  for argv, message in bad:
    if argv[0] != "--pipeline":
      argv = cli[:12] + argv
    assert kfp_compile.main(argv) == 2, argv
    assert message in capsys.readouterr().err, argv


def test_compile_puts_checked_beam_args_on_every_beam_step(tmp_path, capsys):
  """--beam-pipeline-args: checked for the runner they name before compiling (bad ones
  exit 2 naming the flag), then on the command line of every Beam step."""
  cli = ["--pipeline", "demo", "--image", IMAGE, "--pipeline-root", str(tmp_path / "root"),
         "--module-file", DEMO_MODULE, "--output", str(tmp_path / "beam.json"),
         "--no-evaluator"]
  assert kfp_compile.main(cli + ["--beam-pipeline-args=--runner=DataflowRunner"]) == 2
  assert "DataflowRunner needs --project" in capsys.readouterr().err
  flags = ["--runner=DataflowRunner", "--project=my-project", "--region=us-central1",
           "--temp_location=gs://my-bucket/tmp", "--sdk_container_image=us-docker.pkg.dev/p/r/b:1"]
  assert kfp_compile.main(cli + ["--beam-pipeline-args=" + " ".join(flags)]) == 0, \
      capsys.readouterr().err
  with open(tmp_path / "beam.json") as f:
    spec = json.load(f)["pipelineSpec"]
  for task in ("StatisticsGen", "SchemaGen", "Transform"):
    args = pipeline_job.task_container(spec, task)["args"]
    for flag in flags:
      assert flag in args, (task, args)


def test_compile_demo_with_tuner_step(tmp_path, capsys):
  """--tuning-config adds GnnTuner, whose best_hyperparameters feed GnnTrainer."""
  out = tmp_path / "tuned.json"
  tuning = {"algorithm": "bayesian", "max_trials": 6, "objective": "max:val_accuracy"}
  cli = ["--pipeline", "demo", "--image", IMAGE, "--pipeline-root", str(tmp_path / "root"),
         "--module-file", DEMO_MODULE, "--output", str(out), "--no-evaluator"]
  assert kfp_compile.main(cli + ["--tuning-config", json.dumps(tuning)]) == 0, (
      capsys.readouterr().err)
  assert "GnnTuner: image=" in capsys.readouterr().out
  spec = json.loads(out.read_text())["pipelineSpec"]
  tasks = spec["root"]["dag"]["tasks"]
  container = pipeline_job.task_container(spec, "GnnTuner")
  assert pipeline_job.executor_class_of(container) == pipeline_job.GNN_TUNER_EXECUTOR_CLASS
  assert container["image"] == IMAGE
  hp_input = tasks["GnnTrainer"]["inputs"]["artifacts"]["hyperparameters"]["taskOutputArtifact"]
  assert hp_input == {"producerTask": "GnnTuner", "outputArtifactKey": "best_hyperparameters"}
  producers = {k: v["taskOutputArtifact"]["producerTask"]
               for k, v in tasks["GnnTuner"]["inputs"]["artifacts"].items()}
  assert producers == {"examples": "Transform", "transform_graph": "Transform",
                       "graph_schema": "graph_schema_importer", "schema": "SchemaGen"}
  params = pipeline_job.task_parameters(spec, "GnnTuner")
  assert json.loads(params["tuning_config"]) == tuning
  assert "@" + str(tmp_path / "root" / "_wheels") in params["module_path"]
  for key in ("train_args", "eval_args", "custom_config"):  # the trainer's, so it reproduces
    assert params[key] == pipeline_job.task_parameters(spec, "GnnTrainer")[key]
  assert pipeline_job.validate_pipeline_spec(spec) == ["GnnTrainer"]
  spec["root"]["dag"]["tasks"]["GnnTuner"]["inputs"]["parameters"]["tuning_config"][
      "runtimeValue"]["constant"] = json.dumps({"max_trial": 3})
  with pytest.raises(pipeline_job.PipelineValidationError,
                     match=r"Task 'GnnTuner': GnnTuner tuning_config has unknown keys"):
    pipeline_job.validate_pipeline_spec(spec)
  assert kfp_compile.main(cli + ["--tuning-config", '{"algorithm": "grid"}']) == 2
  assert "tuning_config['algorithm'] must be one of" in capsys.readouterr().err


def test_validation_rejects_stock_tfx_image_and_bad_config(compiled):
  spec = json.loads(json.dumps(compiled["job"]["pipelineSpec"]))
  label = pipeline_job.task_component(spec, "GnnTrainer")["executorLabel"]
  spec["deploymentSpec"]["executors"][label]["container"]["image"] = "gcr.io/tfx-oss-public/tfx:1.16.0"
  with pytest.raises(pipeline_job.PipelineValidationError, match="does not contain"):
    pipeline_job.validate_pipeline_spec(spec)
  spec = json.loads(json.dumps(compiled["job"]["pipelineSpec"]))
  params = spec["root"]["dag"]["tasks"]["GnnTrainer"]["inputs"]["parameters"]
  params["custom_config"]["runtimeValue"]["constant"] = json.dumps({"epoch": 2})
  with pytest.raises(pipeline_job.PipelineValidationError, match="Did you mean 'epochs'"):
    pipeline_job.validate_pipeline_spec(spec)


# ---------------------------------------------------------------------- container run


def _write_gzip_split(src_file: str, split_dir: str) -> None:
  """Rewrites a TFRecord file as ExampleGen lays splits out (GZIP, .gz)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  os.makedirs(split_dir, exist_ok=True)
  out = os.path.join(split_dir, "data_tfrecord-00000-of-00001.gz")
  with tf.io.TFRecordWriter(out, options="GZIP") as writer:
    for record in tf.data.TFRecordDataset(src_file):
      writer.write(record.numpy())


def _artifact(spec_type: dict, uri: str, artifact_id: int, metadata=None) -> dict:
  """A RuntimeArtifact as the KFP launcher passes it (type copied from the spec)."""
  out = {"name": f"projects/123456789/locations/us-central1/metadataStores/default/"
                 f"artifacts/{artifact_id}",
         "uri": uri, "type": spec_type["artifactType"]}
  if metadata:
    out["metadata"] = metadata
  return out


@pytest.mark.slow
@pytest.mark.compat  # the KFP v2 entrypoint is TFX's own, 1.16 vs 1.21
def test_trainer_step_runs_like_the_kfp_launcher(compiled, tmp_path):
  from pipelines.demo import data as demo_data  # pylint: disable=g-import-not-at-top
  spec = compiled["job"]["pipelineSpec"]
  root = compiled["root"]
  task = "GnnTrainer"
  comp = pipeline_job.task_component(spec, task)
  container = pipeline_job.task_container(spec, task)

  # Upstream outputs as ImportExampleGen / SchemaGen / the Importer leave them.
  paths = demo_data.write_demo_data(str(tmp_path / "raw"), num_nodes=300)
  examples_uri = os.path.join(root, "123456789", "gnn-demo-run", "ImportExampleGen_-1", "examples")
  for split in ("train", "eval"):
    _write_gzip_split(os.path.join(paths["examples"], split, "data.tfrecord"),
                      os.path.join(examples_uri, f"Split-{split}"))
  schema_uri = os.path.join(root, "123456789", "gnn-demo-run", "SchemaGen_-3", "schema")
  os.makedirs(schema_uri)
  with open(os.path.join(schema_uri, "schema.pbtxt"), "w") as fh:
    fh.write("".join(f'feature {{ name: "{k}" type: {t} }}\n' for k, t in (
        ("context/label", "INT"), ("nodes/paper.feat", "FLOAT"),
        ("nodes/paper.venue", "BYTES"), ("nodes/paper.label", "INT"))))
  task_root = os.path.join(root, "123456789", "gnn-demo-run", f"{task}_-4")
  in_defs = comp["inputDefinitions"]["artifacts"]
  out_defs = comp["outputDefinitions"]["artifacts"]
  executor_input = {
      "inputs": {
          "artifacts": {
              "examples": {"artifacts": [_artifact(in_defs["examples"], examples_uri, 1, {
                  "split_names": '["train", "eval"]', "span": 0.0, "version": 0.0,
                  "file_format": "tfrecords_gzip", "payload_format": "FORMAT_TF_EXAMPLE",
                  "tfx_version": "1.16.0"})]},
              "graph_schema": {"artifacts": [_artifact(
                  in_defs["graph_schema"], paths["graph_schema"], 2)]},
              "schema": {"artifacts": [_artifact(in_defs["schema"], schema_uri, 3)]},
          },
          # Schema 2.1: the launcher fills parameterValues with the task constants.
          "parameterValues": pipeline_job.task_parameters(spec, task),
      },
      "outputs": {
          "artifacts": {
              key: {"artifacts": [_artifact(out_defs[key], os.path.join(task_root, key), n)]}
              for n, key in ((4, "model"), (5, "model_run"))},
          "outputFile": os.path.join(task_root, "executor_output.json"),
      },
  }
  args = [json.dumps(executor_input) if a == "{{$}}" else a for a in container["args"]]
  assert container["command"][0] == "python"
  cmd = [sys.executable] + container["command"][1:] + args
  workdir = tmp_path / "container_cwd"  # not the repo: the module must come from the wheel
  workdir.mkdir()
  start = time.time()
  proc = subprocess.run(cmd, cwd=str(workdir), env=_env(), capture_output=True, text=True,
                        timeout=900)
  elapsed = time.time() - start
  with open(tmp_path / "entrypoint.log", "w") as fh:  # kept for debugging
    fh.write(proc.stderr)
  assert proc.returncode == 0, (
      f"entrypoint failed ({proc.returncode}) after {elapsed:.0f} s:\n{proc.stderr[-6000:]}")
  print(f"container-style run: {elapsed:.1f} s")
  # The module came from the wheel TFX built, imported from the wheel itself (no pip install).
  assert re.search(r"user module \w+ imported from the wheel \S*_wheels/\S+\.whl", proc.stderr)
  assert "Successfully installed" not in proc.stderr + proc.stdout

  model_uri = os.path.join(task_root, "model")
  serving = os.path.join(model_uri, "Format-Serving")
  assert os.path.isfile(os.path.join(serving, "saved_model.pb")), os.listdir(model_uri)
  assert os.path.isfile(os.path.join(task_root, "model_run", "metrics.json"))

  with open(executor_input["outputs"]["outputFile"]) as fh:
    executor_output = json.load(fh)
  # The launcher reads this: same artifact names, uris, metadata = custom properties.
  model = executor_output["artifacts"]["model"]["artifacts"][0]
  assert model["uri"] == model_uri
  assert model["name"] == executor_input["outputs"]["artifacts"]["model"]["artifacts"][0]["name"]
  meta = model["metadata"]
  assert meta["train_steps"] == float(TRAIN_STEPS)  # ints become floats on KFP
  assert meta["epochs"] == 1.0
  from tfx import version  # pylint: disable=g-import-not-at-top
  assert meta["tfx_version"] == version.__version__
  assert any(k.startswith("eval_") and isinstance(v, float) for k, v in meta.items()), meta
  assert any(k.startswith("train_") and k != "train_steps" for k in meta), meta
  assert meta["serving_outputs"] == "logits"
  model_run = executor_output["artifacts"]["model_run"]["artifacts"][0]
  assert model_run["uri"] == os.path.join(task_root, "model_run")


# ----------------------------------------------------------------------------- submit


def test_vertex_dry_run(compiled, capsys):
  path = _gcs_copy(compiled)
  rc = submit_vertex.main([
      "--pipeline-file", path, "--project", "my-project", "--region", "us-central1",
      "--service-account", "gnn-pipelines@my-project.iam.gserviceaccount.com",
      "--label", "team=gnn", "--disable-caching", "--dry-run"])
  out = capsys.readouterr()
  assert rc == 0, out.err
  assert "DRY RUN" in out.out
  summary = json.loads(out.out[out.out.index("{"):])
  assert summary["parent"] == "projects/my-project/locations/us-central1"
  assert summary["pipeline_root"] == GCS_ROOT
  assert summary["images"] == [IMAGE]
  assert summary["labels"] == {"team": "gnn"}
  assert summary["gnn_trainer"]["GnnTrainer"]["module_path"].startswith(
      f"demo_node_classification@{GCS_ROOT}/_wheels/")
  assert summary["pipeline_job_id"].startswith("gnn-demo-")


def test_kfp_dry_run(compiled, capsys):
  path = _gcs_copy(compiled, "gnn-demo-kfp.json")
  rc = submit_kfp.main(["--pipeline-file", path, "--host", "http://localhost:8080",
                        "--experiment", "gnn", "--dry-run"])
  out = capsys.readouterr()
  assert rc == 0, out.err
  assert "DRY RUN" in out.out and "create_run_from_pipeline_package" in out.out
  yaml_path = path[:-len(".json")] + ".yaml"
  assert os.path.isfile(yaml_path)
  import yaml  # pylint: disable=g-import-not-at-top
  with open(yaml_path) as fh:
    spec = yaml.safe_load(fh)
  with open(path) as fh:
    assert spec == json.load(fh)["pipelineSpec"]
  assert pipeline_job.find_tasks(spec) == ["GnnTrainer"]
  # The YAML carries no runtimeConfig: the root must be passed to the client.
  prepared = submit_kfp.prepare_run(pipeline_file=yaml_path, pipeline_root=GCS_ROOT,
                                    host="http://localhost:8080")
  assert prepared["create_run_from_pipeline_package"]["pipeline_root"] == GCS_ROOT
  body = submit_kfp.request_body(prepared)
  assert body.runtime_config.pipeline_root == GCS_ROOT


@pytest.mark.parametrize("extra,message", [
    (["--pipeline-root", "/local/dir"], "is not a gs:// path"),
    (["--project", "X"], "is not a GCP project id"),
    (["--region", "mars"], "is not a Vertex AI region"),
    (["--parameter", "nope=1"], "has no such runtime parameter"),
])
def test_vertex_dry_run_rejects_bad_arguments(compiled, capsys, extra, message):
  args = {"--pipeline-file": _gcs_copy(compiled), "--project": "my-project",
          "--region": "us-central1"}
  for k, v in zip(extra[::2], extra[1::2]):
    args[k] = v
  rc = submit_vertex.main([x for kv in args.items() for x in kv] + ["--dry-run"])
  assert rc == 2
  assert message in capsys.readouterr().err


def test_vertex_dry_run_rejects_local_wheel_and_missing_file(compiled, capsys):
  base = ["--project", "my-project", "--region", "us-central1", "--dry-run"]
  assert submit_vertex.main(["--pipeline-file", compiled["output"]] + base) == 2
  assert "is not on GCS, so Vertex workers cannot read it" in capsys.readouterr().err
  assert submit_vertex.main(["--pipeline-file", "/nonexistent/p.json"] + base) == 2
  assert "does not exist" in capsys.readouterr().err


def test_kfp_dry_run_rejects_bad_arguments_cli(compiled, tmp_path):
  """Through the real CLI in a fresh process: exit code 2 and a clear message."""
  gcs = _gcs_copy(compiled, "gnn-demo-kfp-bad.json")
  cases = [
      (["--pipeline-file", str(tmp_path / "missing.json"), "--dry-run"], "does not exist"),
      (["--pipeline-file", gcs, "--pipeline-root", "minio://mlpipeline/x", "--dry-run"],
       "is not gs://"),
      (["--pipeline-file", gcs], "--host is required"),
      (["--pipeline-file", gcs, "--host", "localhost:8080", "--dry-run"], "must be an http(s)://"),
  ]
  for argv, message in cases:
    proc = subprocess.run([sys.executable, "-m", "gnn_trainer_component.deploy.submit_kfp"] + argv,
                          cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
    assert message in proc.stderr, (argv, proc.stderr)
