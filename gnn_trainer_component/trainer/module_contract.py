"""The module-file contract: what a GnnTrainer user module must and may export.

This is the one place that defines and validates it. A module file (or module
path) given to ``GnnTrainer`` exports:

Required:
  ``model_fn(graph_tensor_spec)`` or ``model_fn(graph_tensor_spec, hparams)``:
    returns the base GNN as a ``tf.keras.Model`` mapping a scalar GraphTensor to
    a GraphTensor (with ``tfgnn.HIDDEN_STATE`` where the task reads out).
  Exactly one of
    ``task``: a ``tensorflow_gnn.runner.Task`` instance, or a function
      ``task()`` / ``task(hparams)`` returning one;
    ``tasks``: a ``{name: runner.Task}`` dict, or a function returning one.

Optional:
  ``loss_weights``: ``{task_name: float}`` with the keys of ``tasks`` (only
    with ``tasks``), or a function returning it.
  ``optimizer_fn()`` / ``optimizer_fn(hparams)``: returns a fresh
    ``tf.keras.optimizers.Optimizer``; default ``Adam(learning_rate=1e-3)``.
  ``feature_processors``: a list of GraphTensor -> GraphTensor callables
    (Keras layers such as ``tfgnn.keras.layers.MapFeatures``), or a function
    ``feature_processors(graph_tensor_spec)`` / ``(graph_tensor_spec, hparams)``
    returning one. They run in tf.data and are part of the exported model.

Optional, and recommended for any module with options:
  ``HPARAMS``: a dict declaring every option the module reads from ``hparams``
    with its default (``None``: no default, the pipeline must set it). Then
    ``hparams`` always holds every declared key, an undeclared key given to the
    module is an error (a typo never passes silently) and a missing required
    one is an error naming what to write.

For GnnTuner (optional for GnnTrainer):
  ``hyperparameter_space(hp)``: declares the search space on ``hp``, a
    ``keras_tuner.HyperParameters`` (``hp.Choice``, ``hp.Float``, ``hp.Int``,
    ``hp.Boolean``; the module need not import keras_tuner). Each name is an
    ``hparams`` key the module reads (declared in ``HPARAMS`` when it has one);
    a trial's values override ``hparams`` key by key, and GnnTuner's
    ``best_hyperparameters`` carries the best values to GnnTrainer.

Every function above may also take a keyword parameter ``fn_args``: TFX's
``FnArgs`` of the execution, as the stock Trainer's ``run_fn`` gets it
(``train_files``, ``eval_files``, ``schema_path``, ``transform_graph_path``,
``serving_model_dir``, ``model_run_dir``, ``base_model``, ``hyperparameters``,
``custom_config``), e.g. ``def model_fn(graph_tensor_spec, hparams, fn_args=None)``.

``hparams`` is a plain ``dict``: the module's ``HPARAMS`` defaults, overridden
by ``custom_config["hparams"]`` (recorded with the execution in ML Metadata),
overridden by the ``values`` of a ``HyperParameters`` artifact. Module files
must not read environment variables: the pipeline passes options this way.
Keys starting with ``tuner/`` (keras-tuner bookkeeping) are dropped.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import types
from typing import Any, Callable, Mapping, Optional, Sequence

from absl import logging

from gnn_trainer_component import errors

# TensorFlow, TF-GNN, TFX and keras-tuner are imported by the functions that use them: importing
# this module loads none of them.

_EXAMPLE = '''
    # my_module.py
    import tensorflow as tf
    import tensorflow_gnn as tfgnn
    from tensorflow_gnn import runner

    def model_fn(graph_tensor_spec, hparams=None):
      inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
      graph = tfgnn.keras.layers.MapFeatures(
          node_sets_fn=lambda node_set, node_set_name:
              tf.keras.layers.Dense(32)(node_set["feat"]))(inputs)
      ...  # GraphUpdate layers
      return tf.keras.Model(inputs, graph)

    def task():
      return runner.RootNodeMulticlassClassification(
          "paper", num_classes=7,
          label_fn=runner.RootNodeLabelFn("paper", feature_name="label"))
'''


class ModuleContractError(errors.GnnError, ValueError):
  """The user module does not follow the GnnTrainer module-file contract."""


@dataclasses.dataclass(frozen=True)
class UserModule:
  """What a validated user module supplies to ``runner.run``.

  Attributes:
    source: Where it came from (file path or module path), for messages.
    model_fn: ``GraphTensorSpec -> tf.keras.Model`` (hparams already bound).
    tasks: Task name -> ``runner.Task``.
    single_task: True if the module exported ``task`` (not ``tasks``): then
      ``runner.run`` gets the bare Task, and the serving output is named by
      ``custom_config['serving_output_name']``.
    optimizer_fn: Zero-argument optimizer factory.
    feature_processors_fn: ``GraphTensorSpec -> list`` of processors.
    loss_weights: Optional task name -> weight.
    hparams: The option values the module's functions got.
    module: The imported module itself (GnnTuner re-binds it per trial and
      reads its ``hyperparameter_space``).
    fn_args: TFX's ``FnArgs`` the module's functions got (None outside an execution).
  """
  source: str
  model_fn: Callable[[Any], Any]
  tasks: Mapping[str, Any]
  single_task: bool
  optimizer_fn: Callable[[], Any]
  feature_processors_fn: Callable[[Any], list]
  loss_weights: Optional[Mapping[str, float]] = None
  hparams: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  module: Optional[types.ModuleType] = None
  fn_args: Any = None

  @property
  def runner_task(self):
    """The ``task`` argument for ``runner.run``."""
    return next(iter(self.tasks.values())) if self.single_task else dict(self.tasks)


def _fail(source: str, what: str) -> ModuleContractError:
  return ModuleContractError(
      f"GnnTrainer user module {source}: {what}\n"
      f"A module must export model_fn and one of task / tasks, e.g.:\n{_EXAMPLE}")


def _accepts(fn: Callable, n: int, keywords: Mapping[str, Any]) -> bool:
  """Whether ``fn`` can be called with ``n`` positional arguments and ``keywords``."""
  try:
    sig = inspect.signature(fn)
  except (TypeError, ValueError):
    return n == 0 and not keywords
  try:
    sig.bind(*([None] * n), **keywords)
    return True
  except TypeError:
    return False


def _takes_fn_args(fn: Callable) -> bool:
  try:
    return "fn_args" in inspect.signature(fn).parameters
  except (TypeError, ValueError):
    return False


def _bind(source: str, name: str, fn: Any, lead: Sequence[Any], hparams: dict,
          fn_args: Any = None) -> Callable:
  """Returns ``fn`` as a callable of the ``lead`` args.

  Passes ``hparams`` as the next positional argument if ``fn`` takes one, and
  ``fn_args`` (TFX's ``FnArgs`` of the execution) if ``fn`` has a parameter of
  that name.
  """
  if not callable(fn):
    raise _fail(source, f"{name} must be a function, got {type(fn).__name__}.")
  keywords = {"fn_args": fn_args} if _takes_fn_args(fn) else {}
  n = len(lead)
  if _accepts(fn, n + 1, keywords):
    return lambda *args: fn(*args, hparams, **keywords)
  if _accepts(fn, n, keywords):
    return (lambda *args: fn(*args, **keywords)) if keywords else fn
  params = "graph_tensor_spec" if n else ""
  raise _fail(source, (
      f"{name} has signature {name}{inspect.signature(fn)}; expected "
      f"{name}({params}) or {name}({params + ', ' if params else ''}hparams), "
      "optionally with a keyword parameter fn_args."))


def _value(source: str, name: str, obj: Any, hparams: dict, fn_args: Any = None) -> Any:
  """A value that may be given directly or as a factory function."""
  if callable(obj) and not _is_task(obj) and not isinstance(obj, type):
    fn = _bind(source, name, obj, (), hparams, fn_args)
    try:
      return fn()
    except ModuleContractError:
      raise
    except Exception as e:  # Whatever the user's function raises: reported with its name.
      raise _fail(source, f"calling {name}() raised {type(e).__name__}: {e}") from e
  return obj


def _is_task(obj: Any) -> bool:
  from tensorflow_gnn import runner
  return isinstance(obj, runner.Task)


def _task_type_error(source: str, name: str, obj: Any) -> ModuleContractError:
  return _fail(source, (
      f"{name} must be a tensorflow_gnn.runner.Task (e.g. "
      f"runner.RootNodeMulticlassClassification(...)), got {type(obj).__module__}."
      f"{type(obj).__qualname__}."))


def module_hparams(module: types.ModuleType, source: str,
                   hparams: Optional[Mapping[str, Any]]) -> dict[str, Any]:
  """The ``hparams`` a module's functions get: its ``HPARAMS`` defaults with ``hparams`` on top.

  Raises:
    ModuleContractError: on an undeclared key or a required one left unset.
  """
  given = {k: v for k, v in (hparams or {}).items() if not str(k).startswith("tuner/")}
  declared = getattr(module, "HPARAMS", None)
  if declared is None:
    return given
  if not isinstance(declared, Mapping) or not all(isinstance(k, str) for k in declared):
    raise _fail(source, f"HPARAMS must be a dict {{name: default}}, got {declared!r}.")
  unknown = sorted(set(given) - set(declared))
  if unknown:
    raise _fail(source, (
        f"hparams {unknown} are not declared in its HPARAMS {sorted(declared)}. Fix the "
        "name in custom_config['hparams'] (or the HyperParameters artifact), or declare it "
        "in HPARAMS."))
  merged = {**declared, **given}
  missing = sorted(k for k, v in merged.items() if v is None)
  if missing:
    example = ", ".join(f"{k!r}: ..." for k in missing)
    raise _fail(source, (
        f"hparams {missing} have no default (None in HPARAMS) and were not set. Pass "
        f"them with GnnTrainer(custom_config={{'hparams': {{{example}}}}})."))
  return merged


def _tasks(source: str, module: types.ModuleType, hparams: dict,
           fn_args: Any) -> tuple[dict[str, Any], bool]:
  """The module's tasks by name, and whether it exported one ``task`` (not ``tasks``)."""
  names = set(dir(module))
  has_task, has_tasks = "task" in names, "tasks" in names
  if has_task and has_tasks and isinstance(module.tasks, types.ModuleType):
    raise _fail(source, f"`tasks` is the module {module.tasks.__name__} (an import?), but "
                "`tasks` names the module's dict of runner.Tasks. Import it under another "
                f"name, e.g. `from {module.tasks.__name__.rpartition('.')[0] or 'package'} "
                "import tasks as task_lib`.")
  if has_task == has_tasks:
    raise _fail(source, "it must define exactly one of `task` (one runner.Task) or "
                f"`tasks` (a dict of them); it defines {'both' if has_task else 'neither'}.")
  if has_task:
    task = _value(source, "task", module.task, hparams, fn_args)
    if not _is_task(task):
      raise _task_type_error(source, "task", task)
    return {getattr(task, "_name", None) or type(task).__name__: task}, True
  tasks = _value(source, "tasks", module.tasks, hparams, fn_args)
  if not isinstance(tasks, Mapping) or not tasks:
    raise _fail(source, "tasks must be a non-empty dict {name: runner.Task}, "
                f"got {tasks!r}.")
  for key, task in tasks.items():
    if not isinstance(key, str) or not key:
      raise _fail(source, f"tasks keys must be non-empty strings, got {key!r}.")
    if not _is_task(task):
      raise _task_type_error(source, f"tasks[{key!r}]", task)
  return dict(tasks), False


def _loss_weights(source: str, module: types.ModuleType, tasks: Mapping[str, Any],
                  single_task: bool, hparams: dict,
                  fn_args: Any) -> Optional[dict[str, float]]:
  if not hasattr(module, "loss_weights"):
    return None
  loss_weights = _value(source, "loss_weights", module.loss_weights, hparams, fn_args)
  if single_task:
    raise _fail(source, "loss_weights only applies with `tasks` (several tasks).")
  if (not isinstance(loss_weights, Mapping) or set(loss_weights) != set(tasks) or
      not all(isinstance(w, (int, float)) and not isinstance(w, bool)
              for w in loss_weights.values())):
    raise _fail(source, f"loss_weights must map every task name {sorted(tasks)} "
                f"to a number, got {loss_weights!r}.")
  return {k: float(v) for k, v in loss_weights.items()}


def _feature_processors_fn(source: str, module: types.ModuleType, hparams: dict,
                           fn_args: Any) -> Callable[[Any], list]:
  processors = getattr(module, "feature_processors", None)
  if processors is None:
    return lambda spec: []
  if isinstance(processors, (list, tuple)):
    return lambda spec: list(processors)
  bound = _bind(source, "feature_processors", processors, (None,), hparams, fn_args)

  def feature_processors_fn(spec):
    out = bound(spec)
    if not isinstance(out, (list, tuple)) or not all(callable(p) for p in out):
      raise _fail(source, "feature_processors(graph_tensor_spec) must return a list "
                  f"of callables (e.g. tfgnn.keras.layers.MapFeatures), got {out!r}.")
    return list(out)
  return feature_processors_fn


def validate_module(module: types.ModuleType, source: str,
                    hparams: Optional[Mapping[str, Any]] = None,
                    fn_args: Any = None) -> UserModule:
  """Checks a loaded user module against the contract and binds hparams (and fn_args).

  Args:
    module: The imported module.
    source: Its path, for messages.
    hparams: Option values (``custom_config["hparams"]`` with a
      HyperParameters artifact's values on top); the module's ``HPARAMS``
      fill in the rest.
    fn_args: TFX's ``FnArgs`` of the execution (files, schema and transform
      paths, hyperparameters, custom_config), passed to every module function
      that has a parameter named ``fn_args``, as TFX Trainer modules get it.

  Returns:
    The validated :class:`UserModule`.

  Raises:
    ModuleContractError: naming the offending symbol and what to write.
  """
  import tensorflow as tf
  hparams = module_hparams(module, source, hparams)
  names = set(dir(module))
  if "model_fn" not in names:
    public = sorted(n for n in names if not n.startswith("_"))
    raise _fail(source, f"it does not define model_fn (it defines: "
                        f"{', '.join(public) or 'nothing'}).")
  model_fn = _bind(source, "model_fn", module.model_fn, (None,), hparams, fn_args)
  tasks, single_task = _tasks(source, module, hparams, fn_args)
  loss_weights = _loss_weights(source, module, tasks, single_task, hparams, fn_args)
  if "optimizer_fn" in names:
    optimizer_fn = _bind(source, "optimizer_fn", module.optimizer_fn, (), hparams, fn_args)
  else:
    def optimizer_fn():
      return tf.keras.optimizers.Adam(learning_rate=1e-3)
  return UserModule(source=source, model_fn=model_fn, tasks=tasks,
                    single_task=single_task, optimizer_fn=optimizer_fn,
                    feature_processors_fn=_feature_processors_fn(source, module, hparams,
                                                                 fn_args),
                    loss_weights=loss_weights, hparams=hparams, module=module,
                    fn_args=fn_args)


def load_module_file(path: str) -> types.ModuleType:
  """Imports a Python file as a fresh module, with clear errors.

  Remote paths (``gs://...``) are copied locally first, as TFX does. The
  file's folder goes on ``sys.path`` so that it can import the ``.py`` files
  beside it, as it can in the wheel TFX builds from that folder.

  Raises:
    ModuleContractError: if the file is missing, has a syntax error or fails
      to import.
  """
  from tfx.utils import io_utils
  import importlib.util
  import sys
  import tensorflow as tf

  if not tf.io.gfile.exists(path):
    raise ModuleContractError(
        f"GnnTrainer module_file {path} does not exist. Pass the path of a Python "
        "file that defines model_fn and task (see docs/module_contract.md).")
  local = io_utils.ensure_local(path)
  name = "gnn_user_module_" + os.path.splitext(os.path.basename(local))[0].replace("-", "_")
  spec = importlib.util.spec_from_file_location(name, local)
  if spec is None or spec.loader is None:
    raise ModuleContractError(f"GnnTrainer module_file {path} is not a Python file.")
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  # Its sibling .py files are importable, as in the wheel TFX packages a
  # module_file into (every .py of its folder, as top-level modules).
  folder = os.path.dirname(os.path.abspath(local))
  if folder not in sys.path:
    sys.path.append(folder)
  try:
    spec.loader.exec_module(module)
  except SyntaxError as e:
    del sys.modules[name]
    raise ModuleContractError(
        f"GnnTrainer module_file {path} has a syntax error at line {e.lineno}: "
        f"{e.msg}\n    {(e.text or '').rstrip()}") from e
  except Exception as e:  # Whatever the module raises on import: reported with its path.
    del sys.modules[name]
    raise ModuleContractError(
        f"GnnTrainer module_file {path} failed to import: {type(e).__name__}: {e}") from e
  return module


def _import_from_wheel(name: str, wheel: str) -> types.ModuleType:
  """Module ``name`` of the user-code wheel TFX builds (``<module>@<pipeline_root>/_wheels/...``).

  TFX's own loader pip-installs the wheel into a temp dir first (2-4 s of every execution); the
  wheel holds only the module folder's ``.py`` files, so it is imported from the wheel itself
  (a zip archive) instead. As with TFX's loader, the wheel is on ``sys.path`` while the module
  imports (its sibling files import too), and a module of that name imported before is
  replaced.
  """
  import importlib
  import sys
  from tfx.utils import io_utils
  local = io_utils.ensure_local(wheel)
  sys.modules.pop(name, None)
  sys.path.insert(0, local)
  try:
    importlib.invalidate_caches()
    module = importlib.import_module(name)
  finally:
    sys.path.remove(local)
  logging.info("GnnTrainer: user module %s imported from the wheel %s", name, wheel)
  return module


def load_module_path(module_path: str) -> types.ModuleType:
  """Imports ``module_path``: a dotted module name, or TFX's ``name@wheel``.

  Raises:
    ModuleContractError: if it cannot be imported.
  """
  import importlib
  try:
    if "@" in module_path:
      return _import_from_wheel(*module_path.split("@", 1))
    return importlib.import_module(module_path)
  except SyntaxError as e:
    raise ModuleContractError(
        f"GnnTrainer module_path {module_path}: syntax error in {e.filename} at line "
        f"{e.lineno}: {e.msg}") from e
  except Exception as e:  # Whatever the module raises on import: reported with its name.
    raise ModuleContractError(
        f"GnnTrainer module_path {module_path} failed to import: {type(e).__name__}: {e}") from e


def load_module(module_file: Optional[str],
                module_path: Optional[str]) -> tuple[types.ModuleType, str]:
  """Imports the user module named by the component parameters.

  Returns:
    (module, source): source is the file path or module path, for messages.

  Raises:
    ModuleContractError: unless exactly one is given and it imports.
  """
  if bool(module_file) == bool(module_path):
    raise ModuleContractError(
        "GnnTrainer needs exactly one of module_file (a .py path) or module_path "
        f"(an importable module); got module_file={module_file!r}, module_path={module_path!r}.")
  if module_path:
    return load_module_path(module_path), module_path
  return load_module_file(module_file), module_file


def load_user_module(module_file: Optional[str], module_path: Optional[str],
                     hparams: Optional[Mapping[str, Any]] = None,
                     fn_args: Any = None) -> UserModule:
  """Loads and validates the user module named by the component parameters."""
  return validate_module(*load_module(module_file, module_path), hparams, fn_args)


_SPACE_EXAMPLE = '''
    def hyperparameter_space(hp):
      hp.Choice("learning_rate", [1e-2, 5e-3, 1e-3])
      hp.Float("dropout", 0.0, 0.6, step=0.1)
'''


def search_space(module: types.ModuleType, source: str):
  """The module's ``hyperparameter_space(hp)`` as a ``keras_tuner.HyperParameters``.

  Raises:
    ModuleContractError: if the function is missing, fails, declares nothing,
      or declares a name that is not an ``hparams`` key of the module.
  """
  import keras_tuner

  def fail(what: str) -> ModuleContractError:
    return ModuleContractError(
        f"GnnTuner user module {source}: {what}\nThe search space is declared in the "
        f"module file, e.g.:\n{_SPACE_EXAMPLE}")

  fn = getattr(module, "hyperparameter_space", None)
  if fn is None:
    raise fail("it does not define hyperparameter_space(hp).")
  if not callable(fn) or not _accepts(fn, 1, {}):
    raise fail("hyperparameter_space must be a function of one argument `hp` "
               "(a keras_tuner.HyperParameters).")
  hp = keras_tuner.HyperParameters()
  try:
    fn(hp)
  except Exception as e:  # Whatever the user's function raises: reported as a contract error.
    raise fail(f"hyperparameter_space(hp) raised {type(e).__name__}: {e}") from e
  names = [p.name for p in hp.space]
  if not names:
    raise fail("hyperparameter_space(hp) declared no hyperparameter.")
  reserved = sorted(n for n in names if n.startswith("tuner/"))
  if reserved:
    raise fail(f"names starting with 'tuner/' are keras-tuner's own: {reserved}.")
  declared = getattr(module, "HPARAMS", None)
  if isinstance(declared, Mapping):
    unknown = sorted(set(names) - set(declared))
    if unknown:
      raise fail(f"hyperparameter_space declares {unknown}, which are not in its HPARAMS "
                 f"{sorted(declared)}: a trial's value would reach no option. Fix the name, "
                 "or declare it in HPARAMS.")
  return hp
