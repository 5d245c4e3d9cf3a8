"""Unit tests for config mapping (no TFX, no TF)."""

import json
import pathlib

import pytest

from gnn_trainer_component.graph import params as graph_params
from gnn_trainer_component.trainer import config
from gnn_trainer_component.trainer import custom_config


def test_defaults_match_trainer_conventions():
  cfg = config.make_trainer_config(None, None, None)
  assert cfg.train_splits == ("train",) and cfg.eval_splits == ("eval",)
  assert cfg.train_steps is None and cfg.steps_per_epoch is None
  assert cfg.global_batch_size == 32 and cfg.epochs == 1
  assert cfg.restore_best_weights is False
  assert cfg.cache == "auto" and cfg.checkpoint_every_n_steps == "never"
  assert cfg.histogram_freq == 0 and cfg.backup_every_seconds == 60


def test_tfx_json_strings_are_parsed():
  # As TFX stores them in MLMD: proto-JSON (int64 as string) and json_utils dumps.
  cfg = config.make_trainer_config(
      '{"splits": ["train", "extra"], "num_steps": "120"}',
      '{"num_steps": 7}',
      json.dumps({"epochs": 4, "global_batch_size": 8, "padding": "tight"}))
  assert cfg.train_splits == ("train", "extra")
  assert cfg.train_steps == 120 and cfg.eval_steps == 7
  assert cfg.epochs == 4 and cfg.steps_per_epoch == 30
  assert cfg.padding == "tight" and cfg.global_batch_size == 8


def test_zero_steps_means_unset():
  cfg = config.make_trainer_config({"num_steps": 0}, {}, {})
  assert cfg.train_steps is None


def test_unknown_key_is_rejected_with_suggestion():
  with pytest.raises(config.ConfigError, match=r"unknown key 'global_batchsize'.*Did you mean 'global_batch_size'"):
    config.make_trainer_config(None, None, {"global_batchsize": 8})


@pytest.mark.parametrize("key,value,expected", [
    ("global_batch_size", 0, "positive int"),
    ("global_batch_size", "32", "positive int"),
    ("epochs", True, "positive int"),
    ("padding", "full", "one of 'none'"),
    ("checkpoint_every_n_steps", "hourly", "'epoch' or 'never'"),
    ("min_nodes_per_component", {"paper": 0}, "node_set"),
    ("drop_remainder", 1, "a bool"),
    ("recovery_max_trials", -1, "an int >= 0"),
    ("loss_upper_bound", 0, "a positive number or null"),
    ("loss_upper_bound", "1e3", "a positive number or null"),
    ("cache", "disk", "'auto', 'memory', 'none' or a folder path"),
    ("cache", None, "'auto', 'memory', 'none' or a folder path"),
    ("backup_every_seconds", -1, "a number >= 0"),
    ("backup_every_n_steps", 0, "a positive int or null"),
    ("histogram_freq", 1.5, "an int >= 0"),
    ("local_workers", 0, "a positive int"),
    ("tf_data_service_address", "dispatcher", "'grpc://host:port', 'host:port' or null"),
    ("tf_data_service_address", "grpc://h:50 50", "'grpc://host:port'"),
    ("tf_data_service_mode", "dynamic", "'parallel_epochs' or 'distributed_epoch'"),
])
def test_ill_typed_values_are_rejected(key, value, expected):
  with pytest.raises(config.ConfigError, match=rf"custom_config\['{key}'\] must be .*{expected}"):
    config.make_trainer_config(None, None, {key: value})


def test_recovery_keys():
  cfg = config.make_trainer_config(None, None, {"recovery_max_trials": 2, "loss_upper_bound": 50})
  assert (cfg.recovery_max_trials, cfg.loss_upper_bound) == (2, 50)
  default = config.make_trainer_config(None, None, None)
  assert (default.recovery_max_trials, default.loss_upper_bound) == (0, None)


def test_inconsistent_settings():
  with pytest.raises(config.ConfigError, match="smaller than"):
    config.make_trainer_config({"num_steps": 2}, None, {"epochs": 3})
  with pytest.raises(config.ConfigError, match="validation_per_epoch.*needs train_args.num_steps"):
    config.make_trainer_config(None, None, {"validation_per_epoch": 2})
  with pytest.raises(config.ConfigError, match="backup_every_n_steps.*needs train_args.num_steps"):
    config.make_trainer_config(None, None, {"backup_every_n_steps": 5})
  # Best weights are kept in memory: no checkpoints needed.
  assert config.make_trainer_config(None, None, {"restore_best_weights": True}).restore_best_weights
  with pytest.raises(config.ConfigError, match="share"):
    config.make_trainer_config({"splits": ["train"]}, {"splits": ["train"]}, None)


def test_bad_json():
  with pytest.raises(config.ConfigError, match="custom_config is not valid JSON"):
    config.make_trainer_config(None, None, "{epochs: 3")
  with pytest.raises(config.ConfigError, match="must be a JSON object"):
    config.make_trainer_config(None, None, "[1, 2]")


def test_readme_table_is_generated_from_the_declarations():
  # Each custom_config key is declared once (a TrainerConfig field); the docs show them.
  page = (pathlib.Path(__file__).parent.parent / "docs" / "gnn_trainer.md").read_text()
  assert custom_config.markdown_table() in page, (
      "docs/gnn_trainer.md's custom_config table is stale: paste the output of "
      "`python -m gnn_trainer_component.trainer.custom_config`.")
  defaults = config.make_trainer_config(None, None, None)
  for name, key in custom_config.CUSTOM_CONFIG_KEYS.items():
    assert getattr(defaults, name) == key.default
    assert key.check(key.default), name


@pytest.mark.parametrize("hparams", [[1, 2], {"": 1}, {"f": object()}, "num_classes=7"])
def test_hparams_must_be_a_json_object(hparams):
  with pytest.raises(config.ConfigError, match=r"custom_config\['hparams'\] must be a JSON object"):
    config.make_trainer_config(None, None, {"hparams": hparams})


def test_hparams_are_kept():
  cfg = config.make_trainer_config(None, None, {"hparams": {"num_classes": 6, "units": 8}})
  assert cfg.hparams == {"num_classes": 6, "units": 8}


def test_cross_field_rules_apply_at_pipeline_definition():
  # The component runs the executor's checks when the pipeline is defined.
  # pylint: disable=g-import-not-at-top
  from tfx import types
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer, GraphSchema
  channels = dict(examples=types.Channel(type=tfx.types.standard_artifacts.Examples),
                  graph_schema=types.Channel(type=GraphSchema), module_file="m.py")
  with pytest.raises(config.ConfigError, match="num_steps=2 is smaller than"):
    GnnTrainer(train_args=tfx.proto.TrainArgs(num_steps=2), custom_config={"epochs": 3},
               **channels)
  with pytest.raises(config.ConfigError, match="share \\['train'\\]"):
    GnnTrainer(eval_args=tfx.proto.EvalArgs(splits=["train"]), **channels)
  GnnTrainer(train_args=tfx.proto.TrainArgs(num_steps=6), custom_config={"epochs": 3},
             **channels)


def test_gnn_tuner_checks_its_parameters_at_pipeline_definition():
  # pylint: disable=g-import-not-at-top
  from tfx import types
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTuner, GraphSchema
  from gnn_trainer_component.tuner import config as tuning
  channels = dict(examples=types.Channel(type=tfx.types.standard_artifacts.Examples),
                  graph_schema=types.Channel(type=GraphSchema))
  with pytest.raises(ValueError, match="GnnTuner needs exactly one of 'module_file'"):
    GnnTuner(**channels)
  with pytest.raises(config.ConfigError, match="unknown key 'epoch'"):
    GnnTuner(module_file="m.py", custom_config={"epoch": 3}, **channels)
  with pytest.raises(tuning.TuningConfigError, match="max_trials'] must be an int >= 1"):
    GnnTuner(module_file="m.py", tuning_config={"max_trials": 0}, **channels)
  tuner = GnnTuner(module_file="m.py", tuning_config={"max_trials": 2}, **channels)
  assert set(tuner.outputs) == {"best_hyperparameters", "tuner_results"}
  assert tuner.exec_properties["tuning_config"] == '{"max_trials": 2}'


def test_gnn_trainer_and_gnn_tuner_take_one_parameter_list():
  # pylint: disable=g-import-not-at-top
  import inspect
  from gnn_trainer_component import GnnTrainer, GnnTuner
  from gnn_trainer_component.trainer import component
  shared = [p for p in inspect.signature(component.training_run).parameters.values()
            if p.kind is p.KEYWORD_ONLY]
  for cls, own in ((GnnTrainer, {"base_model", "hyperparameters"}), (GnnTuner, {"tuning_config"})):
    params = inspect.signature(cls.__init__).parameters
    assert set(params) - {"self"} == {p.name for p in shared} | own, cls.__name__
    for p in shared:
      assert (params[p.name].default, params[p.name].annotation) == (p.default, p.annotation), (
          f"{cls.__name__}({p.name}) differs from trainer.component.training_run's")


def test_restore_best_weights_by():
  assert config.parse_monitor("val_loss") == ("val_loss", "min")
  assert config.parse_monitor("max:val_auc") == ("val_auc", "max")
  assert config.parse_monitor("min:val_topic_loss") == ("val_topic_loss", "min")
  assert config.parse_monitor("val_mean_absolute_error") == ("val_mean_absolute_error", "min")
  with pytest.raises(config.ConfigError, match=r"say whether higher or lower is better: "
                                               r"'max:val_auc' or 'min:val_auc'"):
    config.parse_monitor("val_auc")
  for bad in ("auc", "max:auc", "best:val_auc", "val_", 3):
    with pytest.raises(config.ConfigError, match="must be a validation metric"):
      config.parse_monitor(bad)
  cfg = config.make_trainer_config(None, None, {"restore_best_weights": True,
                                                "restore_best_weights_by": "max:val_auc"})
  assert cfg.restore_best_weights_by == "max:val_auc"
  with pytest.raises(config.ConfigError, match="restore_best_weights_by"):
    config.make_trainer_config(None, None, {"restore_best_weights_by": "val_auc"})
  with pytest.raises(config.ConfigError, match=r"only applies with 'restore_best_weights': true"):
    config.make_trainer_config(None, None, {"restore_best_weights_by": "max:val_auc"})


def test_deterministic_needs_a_seed():
  assert config.make_trainer_config(None, None, {"deterministic": True, "seed": 3}).deterministic
  with pytest.raises(config.ConfigError, match=r"'deterministic'\] needs a 'seed'"):
    config.make_trainer_config(None, None, {"deterministic": True})


def test_tf_data_service_options_need_the_address():
  with pytest.raises(config.ConfigError, match=r"'tf_data_service_mode'.*only applies with "
                     r"'tf_data_service_address'"):
    config.make_trainer_config(None, None, {"tf_data_service_mode": "distributed_epoch"})
  cfg = config.make_trainer_config(None, None, {
      "tf_data_service_address": "grpc://dispatcher.default.svc:5050",
      "tf_data_service_job_name": "cora"})
  assert cfg.tf_data_service_address == "grpc://dispatcher.default.svc:5050"
  assert cfg.tf_data_service_mode == "parallel_epochs"


def test_distributed_steps_are_derived_from_the_record_counts():
  cfg = config.make_trainer_config(None, None, {"global_batch_size": 16, "epochs": 3})
  derived = config.distributed_steps(cfg, train_records=420, eval_records=180, num_workers=2)
  assert (derived.train_steps, derived.steps_per_epoch, derived.eval_steps) == (78, 26, 12)
  tiny = config.distributed_steps(cfg, train_records=5, eval_records=5, num_workers=2)
  assert (tiny.train_steps, tiny.eval_steps) == (3, 1)  # at least one step per epoch
  given = config.make_trainer_config({"num_steps": 30}, {"num_steps": 4}, {"epochs": 3})
  assert config.distributed_steps(given, None, None, num_workers=3) == given
  with pytest.raises(config.ConfigError, match=r"on 3 workers needs eval_args.num_steps.*"
                     r"EvalArgs\(num_steps=...\)"):
    config.distributed_steps(cfg, train_records=420, eval_records=None, num_workers=3)


def test_the_global_batch_must_split_over_the_local_workers():
  with pytest.raises(config.ConfigError, match=r"global_batch_size'\]=16 is not divisible by the "
                     r"3 replicas \(custom_config\['local_workers'\]\).*e.g. 15 or 18"):
    config.make_trainer_config(None, None, {"global_batch_size": 16, "local_workers": 3})
  assert config.make_trainer_config(None, None, {"global_batch_size": 18,
                                                 "local_workers": 3}).local_workers == 3


def test_graph_parameters_are_decoded_once_into_the_config():
  hops = {"seed_node_set": "v", "hops": [{"e": 2}]}
  cfg = config.from_exec_properties({"seeds": json.dumps({"train": "s.csv"}),
                                     "sampling_config": json.dumps(hops)})
  assert cfg.graph == graph_params.GraphParams(seeds={"train": "s.csv"}, sampling_config=hops)
  assert config.from_exec_properties({"sampling_config": json.dumps(hops)}).graph is None
  with pytest.raises(config.ConfigError, match="GnnTrainer: link_config is not valid JSON"):
    config.from_exec_properties({"link_config": "{"})


def test_an_execution_in_place_refuses_a_job():
  props = {"custom_config": json.dumps({"local_workers": 2})}
  cfg = config.from_exec_properties(props)
  assert cfg.launches and config.launch_job_spec(cfg) is not None
  with pytest.raises(config.ConfigError, match="asks for a job"):
    config.from_exec_properties(props, in_place=True)
  assert not config.from_exec_properties({}, in_place=True).launches
