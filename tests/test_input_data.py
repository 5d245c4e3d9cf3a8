"""Parse once: the cache of parsed examples and of finished batches (trainer/input_data.py)."""

import glob
import json
import logging
import os

import pytest

from gnn_trainer_component import process
from gnn_trainer_component.trainer import input_data
from gnn_trainer_component.trainer import validation
from tests.helpers import demo_examples_artifact, run_executor

MiB = 2**20


@pytest.mark.parametrize("setting,budget_mb,expected", [
    ("memory", 1, "memory"),
    ("none", 10_000, "none"),
    ("gs://bucket/cache", 1, "gs://bucket/cache"),
    ("auto", 201, "memory"),   # 100 MiB serialized ~ 200 MiB parsed
    ("auto", 199, "none"),
])
def test_resolve_cache(setting, budget_mb, expected):
  data = validation.DataSize(records=1000, bytes=100 * MiB)
  assert input_data.resolve_cache(setting, data=data, budget_mb=budget_mb) == expected


def test_auto_streams_when_the_size_is_unknown():
  assert input_data.resolve_cache("auto", data=None, budget_mb=10_000) == "none"
  assert input_data.resolve_cache("memory", data=None, budget_mb=None) == "memory"


def test_auto_streams_data_read_once():
  small = validation.DataSize(records=10, bytes=MiB)
  assert input_data.resolve_cache("auto", data=small, budget_mb=100, read_once=True) == "none"
  assert input_data.resolve_cache("memory", data=small, budget_mb=100, read_once=True) == "memory"


def test_auto_budget_defaults_to_a_quarter_of_the_memory():
  quarter = process.memory_bytes() // 4
  fits = validation.DataSize(1, int(quarter / input_data.PARSED_SIZE_FACTOR) - 1)
  too_big = validation.DataSize(1, int(quarter / input_data.PARSED_SIZE_FACTOR) + 2**20)
  assert input_data.resolve_cache("auto", data=fits, budget_mb=None) == "memory"
  assert input_data.resolve_cache("auto", data=too_big, budget_mb=None) == "none"


@pytest.fixture(scope="module")
def train_files(demo_data):
  import tensorflow_gnn as tfgnn  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component import graph_schema  # pylint: disable=g-import-not-at-top
  files = sorted(glob.glob(os.path.join(demo_data["examples"], "train", "*")))
  gtspec = tfgnn.create_graph_spec_from_schema_pb(
      graph_schema.read_artifact_schema(demo_data["graph_schema"]))
  return files, gtspec


def _epochs(provider, n=2):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  ds = provider.get_dataset(tf.distribute.InputContext())
  return [list(ds) for _ in range(n)]


@pytest.mark.parametrize("cache", ["memory", "file"])
def test_cached_examples_equal_the_parsed_ones(tmp_path, train_files, cache):
  files, gtspec = train_files
  cache = str(tmp_path / "cache" / "train") if cache == "file" else cache
  reference = _epochs(input_data.dataset_provider(files, None, gtspec, shuffle=False), 1)[0]
  cached = _epochs(input_data.dataset_provider(files, None, gtspec, shuffle=False,
                                               cache=cache))
  for epoch in cached:
    assert len(epoch) == len(reference) > 100
    assert all(input_data.same_batches(a, b) for a, b in zip(epoch, reference))
  if cache != "memory":
    assert glob.glob(cache + "/shard-0*")  # tf.data's cache files


def _fingerprint(element) -> bytes:
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return b"|".join(np.asarray(t).tobytes() for t in tf.nest.flatten(element, expand_composites=True))


@pytest.mark.parametrize("num_files,pipelines,by_record", [(4, 2, False), (3, 3, False),
                                                           (1, 2, True), (2, 3, True)])
def test_input_pipelines_read_distinct_shards_that_cover_the_data(
    tmp_path, train_files, num_files, pipelines, by_record, caplog):
  """Each worker's InputContext gets its own records, and together all of them."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tests.helpers import read_records  # pylint: disable=g-import-not-at-top
  files, gtspec = train_files
  records = [r for f in files for r in read_records(f)]
  paths = []
  for i in range(num_files):
    paths.append(str(tmp_path / f"part-{i}.tfrecord"))
    with tf.io.TFRecordWriter(paths[-1]) as w:
      for r in records[i::num_files]:
        w.write(r)
  caplog.set_level(logging.INFO, logger="absl")
  shards = []
  for i in range(pipelines):
    provider = input_data.dataset_provider(paths, None, gtspec, shuffle=True,
                                           shuffle_buffer_size=100)
    ds = provider.get_dataset(tf.distribute.InputContext(
        num_input_pipelines=pipelines, input_pipeline_id=i))
    shards.append([e for e in ds])
  prints = [{_fingerprint(e) for e in shard} for shard in shards]
  assert sum(len(s) for s in shards) == len(records) == len(set().union(*prints))  # all, once
  assert all(len(p) == len(s) > 0 for p, s in zip(prints, shards))
  assert ("keeps every" in caplog.text) == by_record


def test_shuffling_happens_after_the_cache(train_files):
  files, gtspec = train_files
  first, second = _epochs(input_data.dataset_provider(
      files, None, gtspec, shuffle=True, shuffle_buffer_size=1000, cache="memory"))

  def key(graph):
    return float(graph.node_sets["paper"]["feat"].numpy().sum())

  assert [key(g) for g in first] != [key(g) for g in second]  # a new order each epoch
  assert sorted(map(key, first)) == sorted(map(key, second))  # of the same examples


@pytest.mark.parametrize("cache", ["memory", "none"])
def test_iterators_run_no_autotuning_thread(train_files, cache):
  # TF 2.16 can stall an iterator's teardown for up to 60 s on that thread
  # (validation.without_autotune); the option must reach what Keras iterates:
  # the runner's batching, parsing and prefetching on top of the provider.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  files, gtspec = train_files
  ds = input_data.dataset_provider(files, None, gtspec, shuffle=True, shuffle_buffer_size=10,
                                   cache=cache).get_dataset(tf.distribute.InputContext())
  keras_input = ds.batch(8).map(lambda g: g.merge_batch_to_components(),
                                num_parallel_calls=tf.data.AUTOTUNE).prefetch(
                                    tf.data.AUTOTUNE).repeat()
  assert keras_input.options().autotune.enabled is False
  assert next(iter(keras_input)).num_components == 8


def test_same_batches_compares_values_and_structure(train_files):
  files, gtspec = train_files
  a, b = _epochs(input_data.dataset_provider(files[:1], None, gtspec, shuffle=False), 1)[0][:2]
  assert input_data.same_batches(a, a)
  assert not input_data.same_batches(a, b)
  assert not input_data.same_batches((a,), (a, a))


# A feature processor that draws random numbers: its batches must not be frozen.
RANDOM_PROCESSOR = """
import importlib.util
import tensorflow as tf
import tensorflow_gnn as tfgnn
_spec = importlib.util.spec_from_file_location("demo", {demo!r})
demo = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(demo)
model_fn, task, optimizer_fn, HPARAMS = demo.model_fn, demo.task, demo.optimizer_fn, demo.HPARAMS

def _jitter(node_set, node_set_name):
  features = dict(node_set.features)
  features["feat"] = features["feat"] + tf.random.uniform(tf.shape(features["feat"]), 0, 1e-3)
  return features

def feature_processors(graph_tensor_spec):
  return [tfgnn.keras.layers.MapFeatures(node_sets_fn=_jitter)]
"""

ONE_BATCH = {"global_batch_size": 512, "epochs": 3, "summarize_every_n_steps": "never",
             "seed": 3, "shuffle_buffer_size": 0, "parity_check_examples": 4}


def _history(tmp_path, demo_data, caplog, name, **config):
  from tests.helpers import DEMO_MODULE  # pylint: disable=g-import-not-at-top
  module_file = DEMO_MODULE
  if config.pop("random_processor", False):
    module_file = str(tmp_path / "random_processor.py")
    with open(module_file, "w") as f:
      f.write(RANDOM_PROCESSOR.format(demo=DEMO_MODULE))
  out = str(tmp_path / name)
  uri = demo_examples_artifact(demo_data, os.path.join(out, "examples"))
  caplog.clear()
  with caplog.at_level(logging.INFO, logger="absl"):
    _, model_run = run_executor(out, examples_uri=uri, graph_schema_dir=demo_data["graph_schema"],
                                module_file=module_file, train_steps=0,
                                custom_config=dict(ONE_BATCH, **config))
  with open(os.path.join(model_run.uri, "history.json")) as f:
    return [epoch["loss"] for epoch in json.load(f)], caplog.text


@pytest.mark.slow
@pytest.mark.parametrize("batch_size,finished", [(512, "['validation', 'training']"),
                                                 (64, "['validation']")])
def test_cached_and_uncached_training_give_the_same_losses(tmp_path, demo_data, caplog,
                                                           batch_size, finished):
  """Parsed examples cached in memory train exactly as re-reading and re-parsing every epoch
  does: in full batch (420 training roots, batch 512) the finished training batch is cached
  too; in batches of 64 (7 steps an epoch, file order) only the parsed examples are, and
  ``deterministic`` keeps the order in which TF-GNN's parallel maps finish the batches."""
  config = {"global_batch_size": batch_size, "deterministic": batch_size < 420}
  cached, log = _history(tmp_path, demo_data, caplog, "memory", cache="memory", **config)
  assert f"finished batches cached for {finished}" in log
  streamed, log = _history(tmp_path, demo_data, caplog, "none", cache="none", **config)
  assert "finished batches cached" not in log
  assert len(cached) == len(streamed) == 3
  assert cached == pytest.approx(streamed, rel=1e-5)


@pytest.mark.slow
def test_jit_compile_refuses_string_model_inputs(tmp_path, demo_data, caplog):
  """The demo model gets the string feature 'venue': XLA cannot compile that, and the
  error says which feature and what to do. (W1 in the speed smoke trains with XLA.)"""
  from gnn_trainer_component.trainer.config import ConfigError  # pylint: disable=g-import-not-at-top
  with pytest.raises(ConfigError, match=r"jit_compile=true: XLA cannot take string inputs, "
                                        r"and the model gets 'nodes/paper\.venue'"):
    _history(tmp_path, demo_data, caplog, "jit", cache="memory", jit_compile=True)


@pytest.mark.slow
def test_random_feature_processors_are_not_frozen(tmp_path, demo_data, caplog):
  # (parity off: the random processor is part of the exported model too)
  _, log = _history(tmp_path, demo_data, caplog, "random", cache="memory", random_processor=True,
                    parity_check_examples=0)
  assert "gave two different results on the same batch" in log
  assert "finished batches cached for nothing" in log
