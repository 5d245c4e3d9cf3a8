"""Bad input and failures: one clear error each, and no published model.

Runs the real Executor.Do on hand-made artifacts. Cases that fail before
training take a second or two; the few that train are marked slow.
"""

import math
import os
import shutil

import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import graph_schema
from gnn_trainer_component.trainer import config
from gnn_trainer_component.trainer import module_contract
from gnn_trainer_component.trainer import splits
from gnn_trainer_component.trainer import input_data
from gnn_trainer_component.trainer import training
from gnn_trainer_component.trainer import transform
from gnn_trainer_component.trainer import validation
from tests.helpers import (DEMO_MODULE, assert_nothing_published, read_records,
                           run_executor, write_examples_artifact_dir)

pytestmark = pytest.mark.reliability
# The fast cases: TensorFlow's readers' and parsers' errors differ between the stacks' releases.
compat = pytest.mark.compat


@pytest.fixture(scope="module")
def records(demo_data):
  ex = demo_data["examples"]
  return {"train": read_records(os.path.join(ex, "train", "data.tfrecord")),
          "eval": read_records(os.path.join(ex, "eval", "data.tfrecord"))}


def _mutated(records, split, fn, index=3):
  out = {k: list(v) for k, v in records.items()}
  example = tf.train.Example.FromString(out[split][index])
  fn(example.features.feature)
  out[split][index] = example.SerializeToString()
  return out


def _expect_error(tmp_path, demo_data, by_split, match, exc, **kwargs):
  """Runs the executor on ``by_split`` records and expects ``exc`` matching ``match``."""
  uri = write_examples_artifact_dir(str(tmp_path / "examples"), by_split)
  with pytest.raises(exc, match=match):
    run_executor(str(tmp_path), examples_uri=uri,
                 graph_schema_dir=kwargs.pop("graph_schema_dir", demo_data["graph_schema"]),
                 **kwargs)
  assert_nothing_published(str(tmp_path))


@compat
def test_corrupt_tfrecord(tmp_path, demo_data, records):
  uri = write_examples_artifact_dir(str(tmp_path / "examples"), records)
  with open(os.path.join(uri, "Split-train", "data_tfrecord-00001-of-00002.gz"), "wb") as f:
    f.write(b"\x1f\x8b\x08\x00garbage-not-a-tfrecord" * 10)
  with pytest.raises(validation.InputDataError, match=r"train_args split 'train': .*00001-of-00002.gz is corrupt or truncated"):
    run_executor(str(tmp_path), examples_uri=uri, graph_schema_dir=demo_data["graph_schema"])
  assert_nothing_published(str(tmp_path))


@compat
def test_truncated_tfrecord(tmp_path, demo_data, records):
  uri = write_examples_artifact_dir(str(tmp_path / "examples"), records)
  path = os.path.join(uri, "Split-eval", "data_tfrecord-00000-of-00001.gz")
  data = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(data[: len(data) // 2])
  with pytest.raises(validation.InputDataError, match=r"eval_args split 'eval': .* is corrupt or truncated after \d+ records"):
    run_executor(str(tmp_path), examples_uri=uri, graph_schema_dir=demo_data["graph_schema"])
  assert_nothing_published(str(tmp_path))


@compat
@pytest.mark.parametrize("fraction", [0.1, 0.3, 0.5, 0.7, 0.9, 0.99])
def test_a_cut_off_gzip_file_never_passes_silently(tmp_path, demo_data, records, fraction):
  """TF's GZIP reader ends cleanly when a cut-off file ends on a record boundary
  (serialized protos differ per process, so where a cut lands varies): the
  pre-flight check must catch every cut."""
  gtspec_schema = graph_schema.read_artifact_schema(demo_data["graph_schema"])
  uri = write_examples_artifact_dir(str(tmp_path / "examples"), records)
  path = os.path.join(uri, "Split-eval", "data_tfrecord-00000-of-00001.gz")
  data = open(path, "rb").read()
  size = validation.check_files([path], "GZIP", gtspec_schema, split="eval", role="eval_args")
  assert size.records == len(records["eval"])
  with open(path, "wb") as f:
    f.write(data[: int(len(data) * fraction)])
  with pytest.raises(validation.InputDataError, match=r"corrupt or truncated after \d+ records"):
    validation.check_files([path], "GZIP", gtspec_schema, split="eval", role="eval_args")


@compat
def test_concatenated_gzip_members_are_complete(tmp_path):
  import gzip  # pylint: disable=g-import-not-at-top
  path = tmp_path / "two_members.gz"
  path.write_bytes(gzip.compress(b"a" * 1000) + gzip.compress(b"b" * 10))
  assert validation.gzip_complete(str(path), 1010)  # ISIZE says 10: decompressed to check
  path.write_bytes(path.read_bytes()[:-3])
  assert not validation.gzip_complete(str(path), 1010)


@pytest.mark.parametrize("mutate,match", [
    (lambda f: f.pop("nodes/paper.feat"),
     r"record #3 of .* does not match the graph schema:\n  - feature 'nodes/paper.feat' \(float32\) is missing from node set 'paper'"),
    (lambda f: f["nodes/paper.venue"].int64_list.value.extend(
        [1] * len(f["nodes/paper.label"].int64_list.value)),
     r"feature 'nodes/paper.venue' has int64_list values but the graph schema says string"),
    (lambda f: f["nodes/paper.feat"].float_list.value.pop(),
     r"feature 'nodes/paper.feat' has \d+ values, expected 8 per item"),
    (lambda f: f.pop("nodes/paper.#size"),
     r"'nodes/paper.#size' is missing"),
    (lambda f: f["edges/cites.#target"].int64_list.value.__setitem__(0, 10_000),
     r"'edges/cites.#target' has index 10000 out of range for node set 'paper'"),
], ids=["missing_feature", "wrong_dtype", "wrong_shape", "missing_size", "edge_out_of_range"])
@compat
def test_examples_not_matching_schema(tmp_path, demo_data, records, mutate, match):
  _expect_error(tmp_path, demo_data, _mutated(records, "train", mutate), match,
                validation.InputDataError)


@compat
def test_empty_split(tmp_path, demo_data, records):
  _expect_error(tmp_path, demo_data, {"train": records["train"], "eval": []},
                r"eval_args split 'eval' holds no examples", validation.InputDataError)


@compat
def test_missing_split(tmp_path, demo_data, records):
  _expect_error(tmp_path, demo_data, records,
                r"eval_args.splits asks for split 'test', but the Examples artifact .* has splits \['train', 'eval'\]",
                splits.SplitError, eval_splits=("test",))


@pytest.mark.parametrize("body,match", [
    (None, r"module_file .*missing_module.py does not exist"),
    ("def model_fn(spec):\n  return (\n", r"syntax error at line 2"),
    ("x = 1\n", r"does not define model_fn"),
    ("def model_fn(spec): pass\ntask = 'classification'\n", r"task must be a tensorflow_gnn.runner.Task"),
])
@compat
def test_bad_module_file(tmp_path, demo_data, records, body, match):
  path = str(tmp_path / "missing_module.py")
  if body is not None:
    with open(path, "w") as f:
      f.write(body)
  _expect_error(tmp_path, demo_data, records, match, module_contract.ModuleContractError,
                module_file=path)


@pytest.mark.parametrize("custom_config,match", [
    ({"epoch": 2}, r"unknown key 'epoch'. Did you mean 'epochs'"),
    ({"global_batch_size": "16"}, r"custom_config\['global_batch_size'\] must be a positive int, got '16'"),
])
@compat
def test_bad_custom_config(tmp_path, demo_data, records, custom_config, match):
  _expect_error(tmp_path, demo_data, records, match, config.ConfigError,
                custom_config=custom_config)


@compat
def test_bad_custom_config_fails_at_pipeline_definition(demo_data):
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer, GraphSchema
  eg = tfx.components.ImportExampleGen(input_base=demo_data["examples"])
  gs = tfx.dsl.Importer(source_uri=demo_data["graph_schema"], artifact_type=GraphSchema)
  with pytest.raises(config.ConfigError, match="unknown key 'batch_size'"):
    GnnTrainer(examples=eg.outputs["examples"], graph_schema=gs.outputs["result"],
               module_file=DEMO_MODULE, custom_config={"batch_size": 3})


@compat
def test_invalid_graph_schema(tmp_path, demo_data, records):
  bad = tmp_path / "bad_schema"
  bad.mkdir()
  (bad / "graph_schema.pbtxt").write_text('node_sets { key: "paper" value { features { key: "f" value { dtype: DT_FLOAT } } }\n')
  _expect_error(tmp_path, demo_data, records,
                r"Graph schema file .*graph_schema.pbtxt is not a valid tensorflow_gnn.GraphSchema",
                graph_schema.GraphSchemaError, graph_schema_dir=str(bad))
  shutil.rmtree(bad)
  bad.mkdir()
  _expect_error(tmp_path, demo_data, records,
                r"Graph schema file .*graph_schema.pbtxt does not exist",
                graph_schema.GraphSchemaError, graph_schema_dir=str(bad))


# A root label of MARK poisons the loss of its batch with NaN (MARK None: every
# batch), by IEEE arithmetic on the loss itself, which no fused kernel absorbs.
POISONED_LOSS_MODULE = """
import importlib.util
import tensorflow as tf
from tensorflow_gnn import runner
_spec = importlib.util.spec_from_file_location("demo", {demo!r})
demo = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(demo)
model_fn, optimizer_fn, HPARAMS = demo.model_fn, demo.optimizer_fn, demo.HPARAMS
MARK = {mark!r}

def _loss(y_true, y_pred):
  y_true = tf.reshape(tf.cast(y_true, tf.int64), [-1])
  poisoned = tf.ones_like(y_true, tf.bool) if MARK is None else tf.equal(y_true, MARK)
  clean = tf.where(poisoned, tf.zeros_like(y_true), y_true)
  loss = tf.keras.losses.sparse_categorical_crossentropy(clean, y_pred, from_logits=True)
  return loss * tf.where(tf.reduce_any(poisoned), float("nan"), 1.0)

class PoisonedLossTask(runner.RootNodeMulticlassClassification):
  def losses(self):
    return _loss
  def metrics(self):
    return (tf.keras.metrics.SparseCategoricalAccuracy(),)

task = PoisonedLossTask("paper", num_classes=3,
                        label_fn=runner.RootNodeLabelFn("paper", feature_name="label"))
"""

def _state_layer_module(layer_class: str) -> str:
  """A module template: the demo module with ``layer_class`` (its source) applied to the
  final node states."""
  return """
import importlib.util
import tensorflow as tf
import tensorflow_gnn as tfgnn
_spec = importlib.util.spec_from_file_location("demo", {demo!r})
demo = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(demo)
task, optimizer_fn, HPARAMS = demo.task, demo.optimizer_fn, demo.HPARAMS
""" + layer_class.replace("{", "{{").replace("}", "}}") + """
def model_fn(spec, hparams):
  inputs = tf.keras.layers.Input(type_spec=spec)
  graph = demo.model_fn(spec, hparams)(inputs)
  layer = StateLayer()
  graph = tfgnn.keras.layers.MapFeatures(
      node_sets_fn=lambda node_set, node_set_name: layer(node_set["hidden_state"]))(graph)
  return tf.keras.Model(inputs, graph)
"""


# A non-trainable statistic (like BatchNormalization's moving variance) that
# goes NaN at step 1 while the training loss, which does not read it, stays finite.
NAN_STATISTIC_MODULE = _state_layer_module("""
class StateLayer(tf.keras.layers.Layer):
  def build(self, input_shape):
    self.moving_log_scale = self.add_weight(
        name="moving_log_scale", shape=(), initializer="zeros", trainable=False)
  def call(self, x):
    self.moving_log_scale.assign(0.9 * self.moving_log_scale + 0.1 * tf.math.log(-1.0))
    return x
""")

# A layer that branches on a tensor value: it needs AutoGraph.
TENSOR_BRANCH_MODULE = _state_layer_module("""
class StateLayer(tf.keras.layers.Layer):
  def call(self, x):
    if tf.reduce_max(tf.abs(x)) > 1e6:
      x = tf.clip_by_value(x, -1e6, 1e6)
    return x
""")


def _module(tmp_path, template, **kwargs):
  path = tmp_path / "test_module.py"
  path.write_text(template.format(demo=DEMO_MODULE, **kwargs))
  return str(path)


def _with_marked_roots(records, indices, label=7):
  """``records`` with the root label of the given train records set to ``label``."""
  by_split = {k: list(v) for k, v in records.items()}
  def mark(f):
    f["nodes/paper.label"].int64_list.value[0] = label  # the root's label
  for i in indices:
    by_split = _mutated(by_split, "train", mark, index=i)
  return by_split


@pytest.mark.slow
@pytest.mark.parametrize("module,match", [
    # A NaN loss stops training at once, naming the step and the task.
    (POISONED_LOSS_MODULE,
     r"Non-finite loss at training step 1 \(task classification_logits\): "
     r"\{'loss': nan.*Nothing was published.*recovery_max_trials"),
    # NaN weights behind a finite loss are found at the epoch's end, by variable name.
    (NAN_STATISTIC_MODULE,
     r"Non-finite weights after training step 20: variable '.*moving_log_scale.*' hold NaN/inf"),
], ids=["nan_loss", "nan_weights_finite_loss"])
def test_nonfinite_training_is_not_published(tmp_path, demo_data, records, module, match):
  _expect_error(tmp_path, demo_data, records, match, exc=training.TrainingError,
                module_file=_module(tmp_path, module, mark=None))


@compat
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nonfinite_feature_found_by_preflight_check(tmp_path, demo_data, records, value):
  def poison(f):
    f["nodes/paper.feat"].float_list.value[8 + 5] = value  # item 1, value 5
  _expect_error(tmp_path, demo_data, _mutated(records, "train", poison),
                rf"train_args split 'train': record #3 of .* does not match the graph schema:\n"
                rf"  - feature 'nodes/paper.feat' has a non-finite value \({value}\) at item 1, "
                rf"value index 13 \(1 non-finite in all\) in node set 'paper'",
                exc=validation.InputDataError)


@pytest.mark.slow
def test_nonfinite_feature_found_by_input_pipeline(tmp_path, demo_data, records):
  assert len(records["train"]) > 200  # beyond the pre-flight sample of 100 per file
  def poison(f):
    f["nodes/paper.feat"].float_list.value[2] = float("nan")
  _expect_error(tmp_path, demo_data, _mutated(records, "train", poison, index=200),
                r"train_args splits train: feature 'nodes/paper.feat' of node set 'paper' has "
                r"a non-finite value \(NaN or inf\) in record #200 of "
                r".*Split-train/data_tfrecord-00000-of-00001.gz",
                exc=validation.InputDataError)


@compat
@pytest.mark.parametrize("check", [True, False], ids=["checked", "opted_out"])
def test_input_pipeline_check_and_opt_out(tmp_path, demo_data, records, check):
  def poison(f):
    f["nodes/paper.feat"].float_list.value[0] = float("inf")
  uri = write_examples_artifact_dir(str(tmp_path / "examples"),
                                    _mutated(records, "train", poison, index=150))
  path = os.path.join(uri, "Split-train", "data_tfrecord-00000-of-00001.gz")
  gtspec = tfgnn.create_graph_spec_from_schema_pb(graph_schema.read_artifact_schema(demo_data["graph_schema"]))
  provider = input_data.dataset_provider([path], "GZIP", gtspec, shuffle=False,
                                       what="train_args splits train", check_finite=check)
  dataset = provider.get_dataset(tf.distribute.InputContext())
  if not check:  # serialized records, parsed later by the runner: the old path
    assert dataset.element_spec == tf.TensorSpec((), tf.string)
    assert sum(1 for _ in dataset) == len(records["train"])
    return
  with pytest.raises(tf.errors.InvalidArgumentError) as e:
    for _ in dataset:
      pass
  error = input_data.nonfinite_input_error(e.value.message)
  assert isinstance(error, validation.InputDataError)
  assert str(error).startswith(
      "train_args splits train: feature 'nodes/paper.feat' of node set 'paper' has a "
      f"non-finite value (NaN or inf) in record #150 of {path}.")


RECOVERY_CONFIG = {"global_batch_size": 16, "epochs": 1, "summarize_every_n_steps": "never",
                   "seed": 1, "shuffle_buffer_size": 0, "backup_every_n_steps": 5,
                   "recovery_max_trials": 1}


@pytest.mark.slow
def test_recovery_survives_a_transient_bad_batch(tmp_path, demo_data, records, caplog):
  # Record 83 lands in (about) the 6th batch of 16: its NaN loss is rolled back.
  uri = write_examples_artifact_dir(str(tmp_path / "examples"),
                                    _with_marked_roots(records, [83]))
  model, _ = run_executor(str(tmp_path), examples_uri=uri,
                          graph_schema_dir=demo_data["graph_schema"],
                          module_file=_module(tmp_path, POISONED_LOSS_MODULE, mark=7),
                          custom_config=RECOVERY_CONFIG)
  assert model.get_int_custom_property("recoveries") == 1
  # The rolled-back steps are not counted: fewer than the 20 batches trained.
  assert 10 <= model.get_int_custom_property("train_steps") < 20
  assert math.isfinite(model.get_float_custom_property("train_loss"))
  assert "Rolled back to the state after step" in caplog.text
  assert os.path.isdir(os.path.join(model.uri, "Format-Serving"))


@pytest.mark.slow
def test_recovery_gives_up_after_max_trials(tmp_path, demo_data, records):
  _expect_error(tmp_path, demo_data, _with_marked_roots(records, [40, 200]),
                r"Non-finite loss at training step \d+ .*All 1 recoveries "
                r"\(custom_config\['recovery_max_trials'\]\) are used up",
                exc=training.TrainingError,
                module_file=_module(tmp_path, POISONED_LOSS_MODULE, mark=7),
                custom_config=RECOVERY_CONFIG)


@pytest.mark.slow
def test_label_outside_num_classes(tmp_path, demo_data, records):
  # Every root labelled 7; num_classes=3.
  by_split = _with_marked_roots(records, range(len(records["train"])), label=7)
  _expect_error(tmp_path, demo_data, by_split,
                r"Training failed on the input data: .*label.*\nTypical causes: a label outside \[0, num_classes\)",
                training.TrainingError)


@compat
def test_schema_disagreeing_with_graph_schema(tmp_path, demo_data, records):
  schema_dir = tmp_path / "tfmd"
  schema_dir.mkdir()
  (schema_dir / "schema.pbtxt").write_text(
      'feature { name: "nodes/paper.feat" type: FLOAT }\n'
      'feature { name: "nodes/paper.venue" type: INT }\n'
      'feature { name: "nodes/paper.label" type: INT }\n')
  _expect_error(tmp_path, demo_data, records,
                r"The Schema \(.*schema.pbtxt\) disagrees with the graph schema:\n"
                r"  - 'nodes/paper.venue' is INT in the Schema but string in the graph schema",
                transform.TransformSchemaError, schema_uri=str(schema_dir))


@pytest.mark.slow
def test_python_control_flow_on_tensors_needs_autograph(tmp_path, demo_data, records):
  """AutoGraph is off by default (custom_config "autograph"): a layer branching on a
  tensor value fails with an error naming the key, and trains with it on. A refresh of that
  model (``refresh_only``: evaluated, not trained) traces its layers without AutoGraph too."""
  module_file = _module(tmp_path, TENSOR_BRANCH_MODULE)
  base = {"global_batch_size": 16, "epochs": 1, "summarize_every_n_steps": "never", "seed": 1}
  _expect_error(tmp_path / "off", demo_data, records,
                r'Python control flow on a tensor value needs AutoGraph: set custom_config '
                r'"autograph": true.*Nothing was published', exc=config.ConfigError,
                module_file=module_file, train_steps=2, custom_config=base)
  uri = write_examples_artifact_dir(str(tmp_path / "examples"), records)
  model, _ = run_executor(str(tmp_path / "on"), examples_uri=uri,
                          graph_schema_dir=demo_data["graph_schema"], module_file=module_file,
                          train_steps=2, custom_config={**base, "autograph": True})
  assert os.path.isdir(os.path.join(model.uri, "Format-Serving"))
  _expect_error(tmp_path / "refresh", demo_data, records,
                r'Python control flow on a tensor value needs AutoGraph: set custom_config '
                r'"autograph": true.*Nothing was published', exc=config.ConfigError,
                module_file=module_file, train_steps=2, base_model_uri=model.uri,
                custom_config={**base, "refresh_only": True})
