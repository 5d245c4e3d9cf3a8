"""GnnTrainer's executors: the trainer (a TFX GenericExecutor) and the launcher, and the
FnArgs the trainer resolves its inputs with, as the stock Trainer does."""

import os
import textwrap

import pytest
from tfx.components.trainer import executor as tfx_trainer_executor
from tfx.components.trainer import fn_args_utils

from gnn_trainer_component.trainer import component
from gnn_trainer_component.trainer import config
from gnn_trainer_component.trainer import executor
from gnn_trainer_component.trainer import inputs
from gnn_trainer_component.trainer import launcher
from gnn_trainer_component.trainer import module_contract
from tests.helpers import DEMO_MODULE, demo_examples_artifact, run_executor


def test_the_trainer_is_a_generic_executor_and_the_launcher_wraps_it():
  assert issubclass(executor.Executor, tfx_trainer_executor.GenericExecutor)
  assert launcher.Executor.REPLICA_EXECUTOR is executor.Executor
  assert component.executor_class(config.make_trainer_config(None, None, {})) is executor.Executor
  for launch in ({"local_workers": 2, "global_batch_size": 16},
                 {"ai_platform_vertex_region": "us-central1", "ai_platform_training_args": {
                     "project": "p", "job_spec": {"worker_pool_specs": [{
                         "replica_count": 1, "machine_spec": {"machine_type": "n1-standard-4"},
                         "container_spec": {"image_uri": "gcr.io/p/gnn:1"}}]}}}):
    assert component.executor_class(
        config.make_trainer_config(None, None, launch)) is launcher.Executor


def test_the_component_declares_the_launcher_for_a_job():
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component import GnnTrainer, GraphSchema  # pylint: disable=g-import-not-at-top
  from tfx.types import channel_utils, standard_artifacts  # pylint: disable=g-import-not-at-top
  examples = channel_utils.as_channel([standard_artifacts.Examples()])
  schema = channel_utils.as_channel([GraphSchema()])
  local = GnnTrainer(examples=examples, graph_schema=schema, module_file=DEMO_MODULE)
  job = GnnTrainer(examples=examples, graph_schema=schema, module_file=DEMO_MODULE,
                   train_args=tfx.proto.TrainArgs(num_steps=4),
                   custom_config={"local_workers": 2, "global_batch_size": 16})
  assert local.executor_spec.executor_class is executor.Executor
  assert job.executor_spec.executor_class is launcher.Executor


def test_the_trainer_refuses_a_job_config_and_the_launcher_a_local_one(tmp_path, demo_data):
  examples = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  for cls, custom_config, match in (
      (executor.Executor, {"local_workers": 2, "global_batch_size": 16}, "launcher"),
      (launcher.Executor, {"global_batch_size": 16}, "without a job")):
    args = run_executor(str(tmp_path / cls.__module__), examples_uri=examples,
                        graph_schema_dir=demo_data["graph_schema"],
                        custom_config=custom_config, run=False)
    with pytest.raises(config.ConfigError, match=match):
      cls().Do(*args)


def test_fn_args_are_the_stock_trainers_and_reach_module_functions(tmp_path, demo_data):
  examples = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  input_dict, output_dict, props = run_executor(
      str(tmp_path), examples_uri=examples, graph_schema_dir=demo_data["graph_schema"],
      custom_config={"global_batch_size": 16, "hparams": {"learning_rate": 0.01}},
      hyperparameters={"learning_rate": 0.02}, run=False)
  fn_args = inputs.fn_args(input_dict, output_dict, props)
  assert isinstance(fn_args, fn_args_utils.FnArgs)
  assert fn_args.train_files == [os.path.join(examples, "Split-train", "*")]
  assert fn_args.eval_files == [os.path.join(examples, "Split-eval", "*")]
  assert fn_args.train_steps == 20
  assert fn_args.custom_config["hparams"] == {"learning_rate": 0.01}
  assert fn_args.hyperparameters["values"] == {"learning_rate": 0.02}
  model, model_run = output_dict["model"][0], output_dict["model_run"][0]
  assert fn_args.serving_model_dir == os.path.join(model.uri, "Format-Serving")
  assert fn_args.model_run_dir == model_run.uri
  assert (executor.Executor()._GetFnArgs(input_dict, output_dict, props).train_files  # pylint: disable=protected-access
          == fn_args.train_files)

  module = tmp_path / "with_fn_args.py"
  module.write_text(textwrap.dedent(open(DEMO_MODULE).read()) + textwrap.dedent("""
      SEEN = []
      _demo_model_fn = model_fn

      def model_fn(graph_tensor_spec, hparams, fn_args=None):
        SEEN.append(fn_args)
        return _demo_model_fn(graph_tensor_spec, hparams)
      """))
  user = module_contract.load_user_module(str(module), None, {}, fn_args=fn_args)
  assert user.fn_args is fn_args
  import tensorflow_gnn as tfgnn  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component import graph_schema  # pylint: disable=g-import-not-at-top
  spec = tfgnn.create_graph_spec_from_schema_pb(
      graph_schema.read_artifact_schema(demo_data["graph_schema"]))
  assert user.model_fn(spec) is not None
  assert user.module.SEEN == [fn_args]


def test_an_executions_inputs_resolve_with_its_fn_args(tmp_path, demo_data):
  examples = demo_examples_artifact(demo_data, str(tmp_path / "examples"))
  input_dict, output_dict, props = run_executor(
      str(tmp_path), examples_uri=examples, graph_schema_dir=demo_data["graph_schema"],
      run=False)
  dirs = executor.OutputDirs.of(output_dict, None)
  resolved = inputs.resolve_execution(
      input_dict, output_dict, props, config.from_exec_properties(props),
      model_run_dir=dirs.model_run_dir, staging_dir=dirs.staging_dir, backup_dir=dirs.backup_dir)
  assert resolved.user_module.fn_args.serving_model_dir == dirs.serving_dir
  data = resolved.data
  assert data.mode == "examples" and data.train_records > 0 and data.eval_records > 0
  assert list(data.train_files) and all(
      f.startswith(os.path.join(examples, "Split-train")) for f in data.train_files)
