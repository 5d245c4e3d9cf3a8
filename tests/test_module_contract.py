"""Unit tests for the module-file contract: loading and validation errors."""

import pathlib
import textwrap

import pytest

from gnn_trainer_component.trainer import module_contract
from tests.helpers import DEMO_MODULE

HEADER = "from tensorflow_gnn import runner\nimport tensorflow as tf\n"
TASK = ('runner.RootNodeMulticlassClassification("paper", num_classes=3, '
        'label_fn=runner.RootNodeLabelFn("paper", feature_name="label"))')


def _module(tmp_path, body, name="user_module.py"):
  path = tmp_path / name
  path.write_text(HEADER + textwrap.dedent(body))
  return str(path)


def test_demo_module_is_valid_and_binds_hparams():
  user = module_contract.load_user_module(DEMO_MODULE, None, {"learning_rate": 0.5})
  assert user.single_task and list(user.tasks) == ["classification_logits"]
  assert abs(float(user.optimizer_fn().learning_rate.numpy()) - 0.5) < 1e-9
  assert user.feature_processors_fn(None) == []


def test_missing_file():
  with pytest.raises(module_contract.ModuleContractError, match="nope.py does not exist"):
    module_contract.load_user_module("/nonexistent/nope.py", None)


def test_syntax_error_names_line(tmp_path):
  path = _module(tmp_path, "def model_fn(spec):\n  return (\n")
  with pytest.raises(module_contract.ModuleContractError, match=r"syntax error at line \d+"):
    module_contract.load_user_module(path, None)


def test_import_error_is_wrapped(tmp_path):
  path = _module(tmp_path, "import does_not_exist_anywhere\n")
  with pytest.raises(module_contract.ModuleContractError,
                     match="failed to import: ModuleNotFoundError"):
    module_contract.load_user_module(path, None)


def test_missing_model_fn_shows_what_to_write(tmp_path):
  path = _module(tmp_path, f"def task():\n  return {TASK}\n")
  with pytest.raises(module_contract.ModuleContractError) as e:
    module_contract.load_user_module(path, None)
  assert "does not define model_fn" in str(e.value)
  assert "def model_fn(graph_tensor_spec" in str(e.value)


def test_task_and_tasks_are_exclusive(tmp_path):
  path = _module(tmp_path, f"def model_fn(s): pass\ntask = {TASK}\ntasks = {{'a': {TASK}}}\n")
  with pytest.raises(module_contract.ModuleContractError, match="defines both"):
    module_contract.load_user_module(path, None)
  path = _module(tmp_path, "def model_fn(s): pass\n", "neither.py")
  with pytest.raises(module_contract.ModuleContractError, match="defines neither"):
    module_contract.load_user_module(path, None)


def test_imported_module_named_tasks_is_explained(tmp_path):
  # `from gnn_trainer_component import tasks` shadows the contract's `tasks`.
  path = _module(tmp_path, f"""
      from gnn_trainer_component import tasks
      def model_fn(spec): pass
      task = {TASK}
      """)
  with pytest.raises(module_contract.ModuleContractError,
                     match=r"`tasks` is the module gnn_trainer_component.tasks .*"
                           r"from gnn_trainer_component import tasks as task_lib"):
    module_contract.load_user_module(path, None)


def test_task_of_wrong_type(tmp_path):
  path = _module(tmp_path, "def model_fn(s): pass\ndef task():\n  return tf.keras.losses.MeanSquaredError()\n")
  with pytest.raises(module_contract.ModuleContractError,
                     match=r"task must be a tensorflow_gnn.runner.Task.*got .*MeanSquaredError"):
    module_contract.load_user_module(path, None)


def test_bad_signature(tmp_path):
  path = _module(tmp_path, f"def model_fn(a, b, c): pass\ntask = {TASK}\n")
  with pytest.raises(module_contract.ModuleContractError,
                     match=r"expected model_fn\(graph_tensor_spec\) or model_fn\(graph_tensor_spec, hparams\)"):
    module_contract.load_user_module(path, None)


def test_tasks_and_loss_weights(tmp_path):
  path = _module(tmp_path, f"def model_fn(s): pass\ntasks = {{'a': {TASK}, 'b': {TASK}}}\n"
                 "loss_weights = {'a': 1.0, 'b': 0.5}\n")
  user = module_contract.load_user_module(path, None)
  assert not user.single_task and sorted(user.runner_task) == ["a", "b"]
  assert user.loss_weights == {"a": 1.0, "b": 0.5}
  path = _module(tmp_path, f"def model_fn(s): pass\ntasks = {{'a': {TASK}}}\n"
                 "loss_weights = {'x': 1.0}\n", "bad_weights.py")
  with pytest.raises(module_contract.ModuleContractError, match=r"loss_weights must map every task name \['a'\]"):
    module_contract.load_user_module(path, None)


def test_exactly_one_of_module_file_or_path():
  with pytest.raises(module_contract.ModuleContractError, match="exactly one of module_file"):
    module_contract.load_user_module(None, None)


def test_module_path(tmp_path, monkeypatch):
  _module(tmp_path, f"def model_fn(s, hparams): pass\ntask = {TASK}\n", "my_gnn_mod.py")
  monkeypatch.syspath_prepend(str(tmp_path))
  user = module_contract.load_user_module(None, "my_gnn_mod")
  assert user.source == "my_gnn_mod"


def test_a_wheel_module_path_imports_from_the_wheel_without_installing(tmp_path):
  """TFX's ``<module>@<wheel>``: the module and its siblings import from the wheel (a zip);
  sys.path is as before, and a later wheel's module of the same name replaces it."""
  import sys
  import zipfile

  def wheel(name, units):
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as z:
      z.writestr("wheel_mod_under_test.py",
                 f"{HEADER}import wheel_sibling_under_test\nUNITS = {units}\n"
                 f"def model_fn(s, hparams): pass\ntask = {TASK}\n")
      z.writestr("wheel_sibling_under_test.py", "X = 1\n")
      z.writestr("tfx_user_code_x-0.0.dist-info/METADATA", "Name: x\n")
    return str(path)

  before = list(sys.path)
  first = module_contract.load_user_module(
      None, "wheel_mod_under_test@" + wheel("a-py3-none-any.whl", 16))
  assert first.module.UNITS == 16 and sys.path == before
  second = module_contract.load_user_module(
      None, "wheel_mod_under_test@" + wheel("b-py3-none-any.whl", 32))
  assert second.module.UNITS == 32 and sys.path == before
  with pytest.raises(module_contract.ModuleContractError, match="nope.*failed to import"):
    module_contract.load_user_module(None, "nope@" + wheel("c-py3-none-any.whl", 1))


OPTIONS_MODULE = """
HPARAMS = {"units": 16, "num_classes": None}
def model_fn(spec, hparams):
  return hparams
def task(hparams):
  return runner.RootNodeMulticlassClassification(
      "paper", num_classes=hparams["num_classes"],
      label_fn=runner.RootNodeLabelFn("paper", feature_name="label"))
"""


def test_hparams_fill_declared_defaults(tmp_path):
  user = module_contract.load_user_module(
      _module(tmp_path, OPTIONS_MODULE), None, {"num_classes": 6, "tuner/trial_id": "3"})
  assert dict(user.hparams) == {"units": 16, "num_classes": 6}
  assert user.model_fn(None) == {"units": 16, "num_classes": 6}


def test_hparams_required_option_missing(tmp_path):
  with pytest.raises(module_contract.ModuleContractError,
                     match=r"hparams \['num_classes'\] have no default.*"
                           r"custom_config=\{'hparams': \{'num_classes': \.\.\.\}\}"):
    module_contract.load_user_module(_module(tmp_path, OPTIONS_MODULE), None, {})


def test_hparams_undeclared_option_is_an_error(tmp_path):
  with pytest.raises(module_contract.ModuleContractError,
                     match=r"hparams \['unit'\] are not declared in its HPARAMS \['num_classes', 'units'\]"):
    module_contract.load_user_module(
        _module(tmp_path, OPTIONS_MODULE), None, {"num_classes": 6, "unit": 8})


@pytest.mark.parametrize("module", ["planetoid_gcn.py", "planetoid_gat.py"])
def test_planetoid_modules_need_num_classes_and_read_no_environment(module, monkeypatch):
  path = str(pathlib.Path(DEMO_MODULE).parent / module)
  assert "environ" not in pathlib.Path(path).read_text()
  monkeypatch.setenv("PLANETOID_NUM_CLASSES", "6")  # the old side channel is ignored
  with pytest.raises(module_contract.ModuleContractError, match="num_classes"):
    module_contract.load_user_module(path, None, {})
  user = module_contract.load_user_module(path, None, {"num_classes": 6})
  assert user.hparams["num_classes"] == 6
  assert len(next(iter(user.tasks.values()))._class_names) == 6  # pylint: disable=protected-access
