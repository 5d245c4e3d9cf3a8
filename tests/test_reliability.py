"""Bad input and failures: one clear error each, and no published model.

Runs the real Executor.Do on hand-made artifacts. Cases that fail before
training take a second or two; the few that train are marked slow.
"""

import os
import shutil

import pytest
import tensorflow as tf

from tests.conftest import (DEMO_MODULE, assert_nothing_published, read_records,
                            run_executor, write_examples_artifact_dir)

pytestmark = pytest.mark.reliability


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


def _expect_error(tmp_path, demo_data, by_split, match, exc=Exception, **kwargs):
  uri = write_examples_artifact_dir(str(tmp_path / "examples"), by_split)
  with pytest.raises(exc, match=match):
    run_executor(str(tmp_path), examples_uri=uri,
                 graph_schema_dir=kwargs.pop("graph_schema_dir", demo_data["graph_schema"]),
                 **kwargs)
  assert_nothing_published(str(tmp_path))


def test_corrupt_tfrecord(tmp_path, demo_data, records):
  uri = write_examples_artifact_dir(str(tmp_path / "examples"), records)
  with open(os.path.join(uri, "Split-train", "data_tfrecord-00001-of-00002.gz"), "wb") as f:
    f.write(b"\x1f\x8b\x08\x00garbage-not-a-tfrecord" * 10)
  with pytest.raises(Exception, match=r"train_args split 'train': .*00001-of-00002.gz is corrupt or truncated"):
    run_executor(str(tmp_path), examples_uri=uri, graph_schema_dir=demo_data["graph_schema"])
  assert_nothing_published(str(tmp_path))


def test_truncated_tfrecord(tmp_path, demo_data, records):
  uri = write_examples_artifact_dir(str(tmp_path / "examples"), records)
  path = os.path.join(uri, "Split-eval", "data_tfrecord-00000-of-00001.gz")
  data = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(data[: len(data) // 2])
  with pytest.raises(Exception, match=r"eval_args split 'eval': .* is corrupt or truncated after \d+ records"):
    run_executor(str(tmp_path), examples_uri=uri, graph_schema_dir=demo_data["graph_schema"])
  assert_nothing_published(str(tmp_path))


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
def test_examples_not_matching_schema(tmp_path, demo_data, records, mutate, match):
  _expect_error(tmp_path, demo_data, _mutated(records, "train", mutate), match)


def test_empty_split(tmp_path, demo_data, records):
  _expect_error(tmp_path, demo_data, {"train": records["train"], "eval": []},
                r"eval_args split 'eval' holds no examples")


def test_missing_split(tmp_path, demo_data, records):
  _expect_error(tmp_path, demo_data, records,
                r"eval_args.splits asks for split 'test', but the Examples artifact .* has splits \['train', 'eval'\]",
                eval_splits=("test",))


@pytest.mark.parametrize("body,match", [
    (None, r"module_file .*missing_module.py does not exist"),
    ("def model_fn(spec):\n  return (\n", r"syntax error at line 2"),
    ("x = 1\n", r"does not define model_fn"),
    ("def model_fn(spec): pass\ntask = 'classification'\n", r"task must be a tensorflow_gnn.runner.Task"),
])
def test_bad_module_file(tmp_path, demo_data, records, body, match):
  path = str(tmp_path / "missing_module.py")
  if body is not None:
    with open(path, "w") as f:
      f.write(body)
  _expect_error(tmp_path, demo_data, records, match, module_file=path)


@pytest.mark.parametrize("custom_config,match", [
    ({"epoch": 2}, r"unknown key 'epoch'. Did you mean 'epochs'"),
    ({"global_batch_size": "16"}, r"custom_config\['global_batch_size'\] must be a positive int, got '16'"),
])
def test_bad_custom_config(tmp_path, demo_data, records, custom_config, match):
  _expect_error(tmp_path, demo_data, records, match, custom_config=custom_config)


def test_bad_custom_config_fails_at_pipeline_definition(demo_data):
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer, GraphSchema
  eg = tfx.components.ImportExampleGen(input_base=demo_data["examples"])
  gs = tfx.dsl.Importer(source_uri=demo_data["graph_schema"], artifact_type=GraphSchema)
  with pytest.raises(ValueError, match="unknown key 'batch_size'"):
    GnnTrainer(examples=eg.outputs["examples"], graph_schema=gs.outputs["result"],
               module_file=DEMO_MODULE, custom_config={"batch_size": 3})


def test_invalid_graph_schema(tmp_path, demo_data, records):
  bad = tmp_path / "bad_schema"
  bad.mkdir()
  (bad / "graph_schema.pbtxt").write_text('node_sets { key: "paper" value { features { key: "f" value { dtype: DT_FLOAT } } }\n')
  _expect_error(tmp_path, demo_data, records,
                r"Graph schema file .*graph_schema.pbtxt is not a valid tensorflow_gnn.GraphSchema",
                graph_schema_dir=str(bad))
  shutil.rmtree(bad)
  bad.mkdir()
  _expect_error(tmp_path, demo_data, records,
                r"Graph schema file .*graph_schema.pbtxt does not exist", graph_schema_dir=str(bad))


NAN_MODULE = '''
import importlib.util
import tensorflow as tf
import tensorflow_gnn as tfgnn
spec = importlib.util.spec_from_file_location("demo", {demo!r})
demo = importlib.util.module_from_spec(spec); spec.loader.exec_module(demo)
model_fn, task = demo.model_fn, demo.task

def _poison(node_set, node_set_name):
  feats = dict(node_set.features)
  feats["feat"] = feats["feat"] * float("nan")
  return feats

feature_processors = [tfgnn.keras.layers.MapFeatures(node_sets_fn=_poison)]
'''


@pytest.mark.slow
def test_nan_loss_stops_with_step_and_task(tmp_path, demo_data, records):
  path = tmp_path / "nan_module.py"
  path.write_text(NAN_MODULE.format(demo=DEMO_MODULE))
  _expect_error(tmp_path, demo_data, records,
                r"Non-finite loss at training step 1 \(task classification_logits\)",
                module_file=str(path))


@pytest.mark.slow
def test_label_outside_num_classes(tmp_path, demo_data, records):
  def bad_label(f):
    f["nodes/paper.label"].int64_list.value[0] = 7  # the root's label; num_classes=3
  by_split = {k: list(v) for k, v in records.items()}
  for i in range(len(by_split["train"])):
    by_split["train"] = _mutated(by_split, "train", bad_label, index=i)["train"]
  _expect_error(tmp_path, demo_data, by_split,
                r"Training failed on the input data: .*label.*\nTypical causes: a label outside \[0, num_classes\)")


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
                schema_uri=str(schema_dir))
