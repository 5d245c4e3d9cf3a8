"""Unit tests for GnnTrainer's training as a Vertex AI CustomJob (pure: no job is submitted)."""

import copy
import json

import pytest

from gnn_trainer_component.distributed import job_spec as job_spec_lib

from gnn_trainer_component.trainer import config
from gnn_trainer_component.trainer import custom_config
from gnn_trainer_component.distributed import custom_job

IMAGE = "us-docker.pkg.dev/p/r/gnn-trainer:1"
POOL = {"machine_spec": {"machine_type": "n1-standard-8"}, "replica_count": 1,
        "container_spec": {"image_uri": IMAGE}}
VERTEX = {"ai_platform_vertex_region": "us-central1",
          "ai_platform_training_args": {
              "project": "my-project",
              "job_spec": {"worker_pool_specs": [POOL, dict(POOL, replica_count=3)]}}}


def _vertex(**changes):
  out = copy.deepcopy(VERTEX)
  args = out["ai_platform_training_args"]
  for path, value in changes.items():
    *parents, leaf = path.split(".")
    node = args
    for p in parents:
      node = node[int(p)] if p.isdigit() else node[p]
    if value is None:
      del node[leaf]
    else:
      node[leaf] = value
  return out


def test_key_names_are_tfx_vertex_trainers():
  # pylint: disable=g-import-not-at-top
  from tfx.extensions.google_cloud_ai_platform import constants
  from tfx.extensions.google_cloud_ai_platform.trainer import executor as cloud_executor
  assert cloud_executor.TRAINING_ARGS_KEY == "ai_platform_training_args"
  assert constants.VERTEX_REGION_KEY == "ai_platform_vertex_region"
  assert constants.ENABLE_VERTEX_KEY == "ai_platform_enable_vertex"
  assert set(custom_job.LAUNCH_KEYS) <= set(custom_config.CUSTOM_CONFIG_KEYS)


def test_a_good_vertex_job_is_accepted():
  cfg = config.make_trainer_config(None, None, dict(VERTEX, global_batch_size=32))
  assert cfg.ai_platform_training_args["project"] == "my-project"
  assert job_spec_lib.training_replicas(cfg.ai_platform_training_args["job_spec"]) == 4


@pytest.mark.parametrize("custom_config,match", [
    ({"ai_platform_training_args": VERTEX["ai_platform_training_args"]},
     "needs custom_config\\['ai_platform_vertex_region'\\]"),
    ({"ai_platform_vertex_region": "us-central1"}, "only applies with 'ai_platform_training_args'"),
    (dict(VERTEX, local_workers=2), "and 'local_workers' both choose"),
    (_vertex(project=None), "needs 'project'"),
    (_vertex(workerPoolSpecs=[]), "unknown keys \\['workerPoolSpecs'\\]"),
    (_vertex(**{"job_spec.worker_pool_specs": []}), "a list of 1 to 3 worker pools"),
    (_vertex(**{"job_spec.worker_pool_specs": [POOL] * 4}), "evaluator pool is not supported"),
    (_vertex(**{"job_spec.worker_pool_specs.0.replica_count": 2}),
     r"\[0\] \(chief\): replica_count must be 1"),
    (_vertex(**{"job_spec.worker_pool_specs.1.machine_spec": None}),
     r"\[1\] \(workers\) needs machine_spec.machine_type"),
    (_vertex(**{"job_spec.worker_pool_specs.1.container_spec": {}}),
     r"\[1\] \(workers\) needs container_spec.image_uri"),
    (_vertex(**{"job_spec.worker_pool_specs.1.python_package_spec": {}}),
     "'python_package_spec' is not supported"),
    (_vertex(**{"job_spec.worker_pool_specs": [POOL, {}, POOL]}),
     "a parameter-server pool needs workers"),
    (dict(VERTEX, global_batch_size=30), r"not divisible by the 4 replicas"),
    (dict(VERTEX, ai_platform_enable_vertex=False), "must be true"),
])
def test_bad_vertex_jobs_are_named(custom_config, match):
  with pytest.raises(config.ConfigError, match=match):
    config.make_trainer_config(None, None, custom_config)


def test_local_job_spec_has_vertex_pools():
  assert job_spec_lib.local_job_spec(3) == {
      "worker_pool_specs": [{"replica_count": 1}, {"replica_count": 2}]}
  assert job_spec_lib.local_job_spec(3, 1)["worker_pool_specs"][2] == {"replica_count": 1}


def test_the_job_runs_this_executor_in_every_pool_with_the_launch_keys_removed():
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = "gs://b/examples/1"
  model = standard_artifacts.Model()
  model.uri = "gs://b/root/GnnTrainer/model/7"
  custom_config = dict(VERTEX, global_batch_size=32, epochs=2)
  job_spec = VERTEX["ai_platform_training_args"]["job_spec"]
  job = custom_job.custom_job(
      job_spec=job_spec, display_name=custom_job.display_name(model.uri, "run-1"),
      executor_class_path="gnn_trainer_component.trainer.executor.Executor",
      input_dict={"examples": [examples]}, output_dict={"model": [model]},
      exec_properties={"custom_config": json.dumps(custom_config), "module_path": "m@w"},
      pipeline_run_id="run-1", labels={"team": "graphs"})
  assert job["display_name"] == "gnn-trainer-run-1-7"
  assert job["labels"] == {"team": "graphs"}
  pools = job["job_spec"]["worker_pool_specs"]
  assert [p["replica_count"] for p in pools] == [1, 3]
  assert "command" not in job_spec["worker_pool_specs"][0]["container_spec"]  # not changed
  for pool in pools:
    container = pool["container_spec"]
    assert container["image_uri"] == IMAGE
    assert pool["machine_spec"] == {"machine_type": "n1-standard-8"}
    command = container["command"]
    assert command[:5] == ["python", "-m", "tfx.scripts.run_executor", "--executor_class_path",
                           "gnn_trainer_component.trainer.executor.Executor"]
    args = dict(zip(command[3::2], command[4::2]))
    assert json.loads(args["--inputs"])["examples"][0]["artifact"]["uri"] == examples.uri
    assert json.loads(args["--outputs"])["model"][0]["artifact"]["uri"] == model.uri
    props = json.loads(args["--exec-properties"])
    assert props["module_path"] == "m@w"
    assert json.loads(props["custom_config"]) == {"global_batch_size": 32, "epochs": 2}
    assert container["env"] == [{"name": custom_job.PIPELINE_RUN_ID_ENV, "value": "run-1"}]


def test_without_credentials_the_submit_fails_clearly_after_the_input_checks(
    tmp_path, demo_data, monkeypatch):
  """The launcher checks the inputs, then submits; with no Google Cloud credentials
  here the error names the project, region and the fix, and nothing is published."""
  # pylint: disable=g-import-not-at-top
  from tests.helpers import assert_nothing_published, demo_examples_artifact, run_executor
  monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
  monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # no metadata server either
  monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
  examples = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  with pytest.raises(custom_job.VertexJobError,
                     match="project 'my-project', region 'us-central1'.*application-default"):
    run_executor(str(tmp_path), examples_uri=examples, graph_schema_dir=demo_data["graph_schema"],
                 custom_config=dict(VERTEX, global_batch_size=16, epochs=1))
  assert_nothing_published(str(tmp_path))
