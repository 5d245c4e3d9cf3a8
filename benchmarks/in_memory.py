"""In-memory graph (issue 37): load the tables once, sample on the fly, train against a floor.

  PYTHONPATH=. .venv/bin/python -m benchmarks.in_memory \\
      --num-nodes 1000000 --num-edges 10000000 --train-seeds 100000

A power-law graph (``benchmarks.power_law_graph``, seed 0; generated in a
child process into ``--work-dir/graph``, reused when already there with the
same sizes) is loaded by ``gnn_trainer_component.in_memory.adapters.load`` with
GraphSampler's ``sampling_config`` ``{"seed_node_set": "user", "hops":
[{"follows": 10}, {"follows": 5}]}``. The seed fraction is chosen so that the
graph has at least ``--train-seeds`` training and ``--eval-seeds`` evaluation
seeds (the seed choice is drawn after the graph, so the graph is the same one
``power_law_graph`` writes with any fraction). Measured in this process:

* ``load_s``: wall time of ``adapters.load`` (read and validate the tables,
  build the CSR, read the seeds); ``graph_mib``: the arrays it holds.
* ``sampling_seeds_per_s``: subgraphs per second through the trainer's input
  pipeline in one process: ``SubgraphSampler.dataset(seeds, batch_size=128,
  shuffle=True, fresh=True, seed=0, merged=True)`` (each batch's subgraphs
  merged into one component), prefetched, then ``.batch(1)`` and
  ``merge_batch_to_components`` as ``runner.run`` does with merged batches;
  ``sampling_seeds_per_s_per_subgraph``: the pipeline of multi-worker training
  (one subgraph per element, ``merged=False``, then ``.batch(128)`` and the
  merge); each iterated in eager over ``--sampling-seeds`` training seeds after
  ``--warmup-batches`` batches (``build_s``: creating the dataset;
  ``first_batch_s``: its first batch, both of the first, cold measurement;
  rates are medians of ``--sampling-repeats`` measurements, each listed in
  ``sampling_trials``).
  ``sampling_seeds_per_s_in_graph`` (``..._per_subgraph_in_graph``): the same
  pipeline consumed in-graph
  (``Dataset.reduce``), as a Keras train step pulls its batch inside its
  tf.function (eager iteration also builds every batch's GraphTensor in
  Python). ``numpy_sampler_seeds_per_s``: ``sampler.sample`` alone on batches
  of 128. ``profile``: each stage of the per-subgraph pipeline alone, one thread,
  in ms per batch of 128 (numpy sampling, feature gather, ``tf.numpy_function``,
  the rank-1 GraphTensor, ``unbatch`` + ``batch``, merge, and the eager
  iteration's own cost); see :func:`profile_sampling`.
* ``peak_rss_gb``: ``ru_maxrss`` after loading and sampling (the graph's
  generation runs in a child process and does not count);
  ``peak_rss_with_training_gb``: the same after the training runs below.
* ``train_examples_per_s``: one epoch of a small TF-GNN model (the user module
  is this file, ``module_path="benchmarks.in_memory"``: score -> Dense(32), two
  GraphUpdates of SimpleConv mean pooling over ``follows`` toward the source
  (``receiver_tag=SOURCE``, the direction the sampler walks), root-node
  10-class classification of ``label``, :func:`task`) trained by GnnTrainer's own training
  path, ``trainer.training.train_and_export`` on a ``TrainingInputs`` whose
  ``graph`` is the loaded ``GraphSplits`` (so the input pipeline is
  ``GraphSplits.provider(["train"], training=True, batch_size=128, seed=0)``),
  ``--train-seeds`` training seeds, validation on ``--eval-seeds`` evaluation
  seeds, no export. Examples/s = the examples after the first step / the time
  from the end of the first step (tracing) to the end of the last training step
  (validation excluded), from a Keras callback added to GnnTrainer's own.
* ``floor_examples_per_s``: the same model, configuration and steps on
  pre-sampled subgraphs: the elements GnnTrainer's providers yield (same seeds,
  order and samples as the in-memory run's first epoch), ``.cache()``d in
  memory and read to the end once before training (``floor_cache_fill_s``),
  then trained the same way through ``train_and_export`` (validation on cached
  subgraphs too). The numpy sampler is checked not to run while the floor
  trains (``floor_sampler_calls``).

With ``--repeats`` > 1 the two trainings alternate (floor, in memory, floor,
...) and medians are reported.

``--variants`` (default ``gnntrainer,dgl``): ``gnntrainer`` is all of the
above; ``dgl`` (issue 54) trains the same task in DGL on the same tables,
before the ``gnntrainer`` part (one after the other, never together):
``benchmarks/dgl_sage.py`` in its own venv, ``--dgl-venv`` (default
``<work dir>/dgl-venv``), created on first use with ``--dgl-python`` (default
``python3.11``) and :data:`DGL_REQUIREMENTS` (DGL 2.1.0, torch 2.2.1; ~5 GB,
~1.5 min: ``dgl["venv_created_s"]``). The child reads the CSV tables, builds a
DGLGraph (``dgl_load_s``: reading the tables and mapping ids; then
``dgl_graph_build_s``), and trains one epoch on the same first ``--train-seeds``
training seeds (validation accuracy on the same evaluation seeds), 2 hops
10 then 5 along out-edges (the graph built reversed and sampled along its
in-edges: DGL 2.1's ``edge_dir="out"`` gives blocks that feed the seeds nothing;
see ``benchmarks/dgl_sage.py``), batch 128, Adam at the same learning rate, timed as
``train_examples_per_s`` is (``dgl_examples_per_s``, ``dgl_ms_per_step``; the
step includes sampling its batch). Two models (``--dgl-models``): ``sage``
(``dgl_*``): Linear(32) + ReLU on ``score``, two ``SAGEConv(32, 32, "mean",
activation=relu)``, Linear(10); ``same`` (``dgl_same_model_*``): the layers of
:func:`model_fn` rebuilt in DGL (per edge Dense(32, relu) on concat(receiver,
sender), mean, Dense(32, relu) on concat(state, mean)). ``SAGEConv`` has no
per-edge transform: it averages the neighbours' states and adds
``W_self h + W_neigh mean`` (the same as NextStateFromConcat's Dense on the
concatenation). What also differs from GnnTrainer: DGL deduplicates a
batch's nodes (a node reached from two seeds is one node whose neighbours are
drawn once; GnnTrainer's subgraphs keep one copy per seed), and computes the
second round for the seeds only (TF-GNN updates every node of the subgraph
twice). ``dgl_sampling_seeds_per_s``: the DataLoader iterated without training
(median of 3, after 5 batches; ``dgl_nodes_per_batch``, ``dgl_edges_per_batch``),
``dgl_peak_rss_gb``: the child's ``VmHWM``. ``gnntrainer_over_dgl``:
``train_examples_per_s`` / ``dgl_examples_per_s`` (the target: >= 1), and
``gnntrainer_over_dgl_same_model``. The child's whole object is under ``dgl``.

Prints one JSON object (the last line) and writes it to ``--output``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Optional, Sequence

from benchmarks import report

FAN_OUTS = (10, 5)
SAMPLING_CONFIG = {"seed_node_set": "user", "hops": [{"follows": f} for f in FAN_OUTS]}
BATCH_SIZE = 128
#: Targets of issue 37 (and issue 54's ``gnntrainer_over_dgl``).
TARGETS = {"load_s": 60.0, "peak_rss_gb": 4.0, "sampling_seeds_per_s": 50_000.0,
           "train_over_floor": 0.8, "gnntrainer_over_dgl": 1.0}
#: ``--variants``: GnnTrainer's loading, sampling and training; the same in DGL.
VARIANTS = ("gnntrainer", "dgl")
#: The suffix of the runs whose model updates every node in its second round too.
WHOLE_ROUND = "_whole_round"
#: The runs with one copy of each subgraph (``--deduplicate both``).
PER_SEED = "_per_seed"
#: The ``dgl`` variant's venv (``--dgl-python``, 3.11). DGL 2.1.0 is the newest DGL on PyPI
#: with Linux wheels; its C++ parts are built for torch 2.0-2.2 only (torch 2.2.1 from PyPI
#: is the CUDA build: ~5 GB with its nvidia-* wheels, ~1.5 min to install). Its imports need
#: numpy 1 (torch 2.2's ABI), torchdata with datapipes (<= 0.9), setuptools with
#: ``setuptools.extern`` (< 71), pandas, PyYAML and pydantic (graphbolt, imported by dgl).
DGL_REQUIREMENTS = ("dgl==2.1.0", "torch==2.2.1", "torchdata==0.7.1", "numpy==1.26.4",
                    "scipy==1.17.1", "setuptools==69.5.1", "pandas==3.0.6", "PyYAML==6.0.4",
                    "pydantic==2.14.4", "psutil==7.2.2")

# The user module (module_path="benchmarks.in_memory"): model_fn, task, optimizer_fn.
#: ``readout_round``: the second round wrapped in ``layers.ReadoutRound`` (the seeds only
#: while training); ``--readout-round`` runs either or both.
HPARAMS = {"units": 32, "learning_rate": 1e-2, "readout_round": True}


def model_fn(graph_tensor_spec, hparams):
  """score -> Dense(units), then two rounds of mean-pooled SimpleConv over ``follows``.

  With ``readout_round``, the second round updates the seeds only while training.
  """
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component import layers
  # pylint: enable=g-import-not-at-top
  units = hparams["units"]

  def init_state(node_set, node_set_name):
    del node_set_name
    return tf.keras.layers.Dense(units, activation="relu")(
        tf.expand_dims(node_set["score"], -1))

  inputs = tf.keras.layers.Input(type_spec=graph_tensor_spec)
  graph = tfgnn.keras.layers.MapFeatures(node_sets_fn=init_state)(inputs)
  for last in (False, True):
    update = tfgnn.keras.layers.GraphUpdate(node_sets={"user": tfgnn.keras.layers.NodeSetUpdate(
        {"follows": tfgnn.keras.layers.SimpleConv(
            tf.keras.layers.Dense(units, activation="relu"), "mean",
            receiver_tag=tfgnn.SOURCE)},
        tfgnn.keras.layers.NextStateFromConcat(
            tf.keras.layers.Dense(units, activation="relu")))})
    if last and hparams["readout_round"]:
      update = layers.ReadoutRound(update, node_set_name="user", receiver_tag=tfgnn.SOURCE)
    graph = update(graph)
  return tf.keras.Model(inputs, graph)


def task():
  """Root-node 10-class classification of ``label`` (removed from the model's input).

  The seed-reading variants of ``runner.RootNodeMulticlassClassification`` and
  ``RootNodeLabelFn``: the same task on subgraphs, which also reads the seeds of
  the merged batches GnnTrainer trains on in one process.
  """
  from gnn_trainer_component import tasks  # pylint: disable=g-import-not-at-top
  return tasks.SeedMulticlassClassification(
      "user", num_classes=10, label_fn=tasks.SeedLabelFn("user", feature_name="label"))


def optimizer_fn(hparams):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.keras.optimizers.Adam(learning_rate=hparams["learning_rate"])


# The benchmark.

def _gb(kib: float) -> float:
  return round(kib * 1024 / 1e9, 3)


def _peak_rss_gb() -> float:
  """``ru_maxrss`` of this process (KiB on Linux) in GB (1e9 bytes)."""
  return _gb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def seed_fraction(num_nodes: int, train: int, evaluation: int) -> float:
  """The smallest seed fraction giving ``power_law_graph`` >= ``train`` / ``evaluation``
  seeds (90 % / 10 % of ``int(num_nodes * fraction)``), capped at 0.99."""
  needed = max(math.ceil(train / 0.9), math.ceil(evaluation / 0.1), 2) + 2
  fraction = min(0.99, max(0.01, needed / num_nodes))
  # Six significant digits (the graph cache's key), rounded up: never fewer seeds.
  scale = 10 ** (5 - math.floor(math.log10(fraction)))
  return math.ceil(fraction * scale) / scale


def generate_graph(work_dir: str, num_nodes: int, num_edges: int, seed_fraction: float,
                   **options: Any) -> dict:
  """The generated graph's summary; generates it in a child process unless already there.

  ``options``: more ``benchmarks.power_law_graph`` flags (``format="parquet"``,
  ``shards=4``), part of what a cached graph must match. The summary has ``dir``,
  ``reused`` and, when generated, ``generate_s``.
  """
  graph_dir = os.path.join(work_dir, "graph")
  summary_path = os.path.join(graph_dir, "generate.json")
  wanted = {"num_nodes": num_nodes, "num_edges": num_edges, "seed_fraction": seed_fraction,
            "seed": 0, **options}
  if os.path.exists(summary_path):
    with open(summary_path) as f:
      summary = json.load(f)
    if {k: summary.get(k) for k in wanted} == wanted:
      return {**summary, "dir": graph_dir, "reused": True}
  shutil.rmtree(graph_dir, ignore_errors=True)  # other sizes or options: no stale table
  cmd = [sys.executable, "-m", "benchmarks.power_law_graph", "--out", graph_dir,
         "--num-nodes", str(num_nodes), "--num-edges", str(num_edges),
         "--seed-fraction", str(seed_fraction), "--seed", "0",
         *(arg for key, value in options.items() for arg in (f"--{key}", str(value)))]
  start = time.perf_counter()
  done = subprocess.run(cmd, check=True, capture_output=True, text=True,
                        cwd=report.REPO_ROOT)
  summary = {**json.loads(done.stdout.strip().splitlines()[-1]), **wanted, "dir": graph_dir,
             "generate_s": round(time.perf_counter() - start, 1)}
  with open(summary_path, "w") as f:
    json.dump(summary, f)
  return {**summary, "reused": False}


def source_version() -> dict[str, Any]:
  """The commit measured, and whether gnn_trainer_component/ had uncommitted changes."""
  def git(*args):
    try:
      done = subprocess.run(["git", *args], capture_output=True, text=True,
                            cwd=report.REPO_ROOT, check=False)
    except OSError:  # no git here (e.g. the CI chroot): the version is unknown
      return None
    return done.stdout.strip() if done.returncode == 0 else None
  status = git("status", "--porcelain", "--", "gnn_trainer_component")
  return {"commit": git("rev-parse", "--short", "HEAD"),
          "package_modified": bool(status) if status is not None else None}


def _rate(seeds: int, seconds: float) -> float:
  return round(seeds / seconds, 1) if seconds > 0 else float("nan")


def _python_seconds(fn, batches, warmup: int) -> float:
  """Seconds to call ``fn(rows, i)`` on ``batches[warmup:]`` after ``warmup`` untimed calls."""
  for i, rows in enumerate(batches[:warmup]):
    fn(rows, i)
  start = time.perf_counter()
  for i, rows in enumerate(batches[warmup:]):
    fn(rows, i)
  return time.perf_counter() - start


def _reduce_seconds(ds, warmup: int = 0) -> float:
  """Seconds to consume ``ds`` in-graph (``Dataset.reduce``: no Python per element, as a
  Keras train step pulls its batch inside its tf.function), after ``warmup`` elements."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  count = lambda n, _: n + 1
  if warmup:
    ds.take(warmup).reduce(tf.constant(0, tf.int64), count)
  start = time.perf_counter()
  ds.reduce(tf.constant(0, tf.int64), count)
  return time.perf_counter() - start


def _eager_seconds(ds) -> float:
  """Seconds to iterate ``ds`` in eager (each element handed to Python)."""
  start = time.perf_counter()
  for _ in ds:
    pass
  return time.perf_counter() - start


def _trainer_pipeline(ds, batch_size: int):
  """What ``runner.run`` does to a provider's dataset before the model: batch, merge
  (mapped as its ``_map_over_dataset`` maps: AUTOTUNE, not deterministic)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return ds.batch(batch_size).map(lambda g: g.merge_batch_to_components(),
                                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)


#: The two input pipelines :func:`measure_sampling` times: merged batches (one element
#: per step; runner.run batches 1), and one subgraph per element (runner.run batches 128).
PIPELINES = (("", True), ("_per_subgraph", False))


def measure_sampling(splits, num_seeds: int, warmup: int) -> dict[str, Any]:
  """The trainer's input pipelines' throughput, iterated in eager and consumed in-graph."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  sampler = splits.sampler
  seeds = splits.seeds["train"][:num_seeds]
  num_seeds = len(seeds)
  out = {}
  for suffix, merged in PIPELINES:

    def dataset(merged=merged):  # as GraphSplits.provider(...) and runner.run
      return _trainer_pipeline(sampler.dataset(
          seeds, batch_size=BATCH_SIZE, shuffle=True, fresh=True, seed=0,
          merged=merged).prefetch(tf.data.AUTOTUNE),
                               1 if merged else BATCH_SIZE).prefetch(tf.data.AUTOTUNE)

    start = time.perf_counter()
    ds = dataset()
    build_s = time.perf_counter() - start
    it = iter(ds)
    start = time.perf_counter()
    next(it)
    first_batch_s = time.perf_counter() - start
    for _ in range(warmup - 1):
      next(it)
    start = time.perf_counter()
    for _ in it:
      pass
    eager_s = time.perf_counter() - start
    timed = num_seeds - warmup * BATCH_SIZE  # the last batch may be partial
    in_graph_s = _reduce_seconds(dataset(), warmup)
    out.update({
        f"sampling_seeds_per_s{suffix}": _rate(timed, eager_s),
        f"sampling_seeds_per_s{suffix}_in_graph": _rate(num_seeds, in_graph_s)})
    if merged:
      out.update(build_s=round(build_s, 3), first_batch_s=round(first_batch_s, 3),
                 sampling_timed_seeds=timed)
  return out


def profile_sampling(splits, num_seeds: int, warmup: int) -> dict[str, Any]:
  """Each stage of the input pipeline on its own, one thread, in ms per batch of 128.

  numpy stages are Python loops; tf.data stages run without parallel maps or
  prefetch, and every stage after the numpy_function reads its input from a
  memory cache filled before the clock, so its time is its own.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.in_memory import batch as batch_lib  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.in_memory import kernel  # pylint: disable=g-import-not-at-top
  sampler = splits.sampler
  seeds = splits.seeds["train"][:num_seeds]
  rows = [seeds[i:i + BATCH_SIZE] for i in range(0, len(seeds), BATCH_SIZE)]
  batches, timed = len(rows), len(rows) - warmup  # tf.data stages time them all
  sample_ms = 1000 * _python_seconds(lambda r, i: kernel.sample(
      sampler.graph, sampler.plan, r, np.random.default_rng(i)), rows, warmup) / timed
  deduplicated_ms = 1000 * _python_seconds(lambda r, i: kernel.sample_deduplicated(
      sampler.graph, sampler.plan, r, np.random.default_rng(i)), rows, warmup) / timed
  sizes = {f"{what}_{piece}_per_batch": round(float(np.mean([sum(
      int(np.sum(p[0])) for p in getattr(sub, piece).values()) for sub in subs])), 1)
           for what, subs in (
               ("per_seed", [kernel.sample(sampler.graph, sampler.plan, r,
                                           np.random.default_rng(i)) for i, r in
                             enumerate(rows[:20])]),
               ("deduplicated", [kernel.sample_deduplicated(
                   sampler.graph, sampler.plan, r, np.random.default_rng(i))[0]
                                 for i, r in enumerate(rows[:20])]))
           for piece in ("nodes", "edges")}
  arrays_ms = 1000 * _python_seconds(sampler.sample, rows, warmup) / timed
  per_batch = lambda seconds: 1000 * seconds / batches

  batched = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices(seeds).batch(BATCH_SIZE),
                                 tf.data.Dataset.random(seed=0)))
  dtypes = batch_lib.flatten(sampler.batch_dtypes())
  numpy_function_ms = per_batch(_reduce_seconds(batched.map(
      lambda r, rnd: tuple(tf.numpy_function(
          lambda *a: batch_lib.flatten(sampler.sample(*a)), [r, rnd], dtypes,
          stateful=False))), warmup))
  rank1_ms = per_batch(_reduce_seconds(batched.map(sampler.graph_tensor), warmup))

  def cached(ds):
    ds = ds.cache()
    _reduce_seconds(ds)  # fills it
    return ds, per_batch(_reduce_seconds(ds))  # and the time to read it back

  merge = lambda g: g.merge_batch_to_components()
  rank1, rank1_read_ms = cached(batched.map(sampler.graph_tensor))
  rebatched, rebatched_read_ms = cached(rank1.unbatch().batch(BATCH_SIZE))
  merged, merged_read_ms = cached(rebatched.map(merge))
  stages = {
      "numpy_sample": sample_ms,
      "feature_gather": arrays_ms - sample_ms,
      "numpy_function": numpy_function_ms - arrays_ms,
      "rank1_graph_tensor": rank1_ms - numpy_function_ms,
      "unbatch_batch": per_batch(_reduce_seconds(rank1.unbatch().batch(BATCH_SIZE)))
                       - rank1_read_ms,
      "merge": per_batch(_reduce_seconds(rebatched.map(merge))) - rebatched_read_ms,
  }
  in_graph = sum(stages.values())
  stages["eager_iteration"] = per_batch(_eager_seconds(merged)) - merged_read_ms
  # Not a stage: the rank-1 batch merged as it is (no unbatch, no batch), the cost of
  # the last three stages if the sampler's batch were the trainer's batch.
  stages["alt_merge_rank1_directly"] = (
      per_batch(_reduce_seconds(rank1.map(merge))) - rank1_read_ms)
  stages = {k: round(v, 3) for k, v in stages.items()}
  return {
      "ms_per_batch_of_128": stages,
      # Not a stage: kernel.sample_deduplicated on the same batches, and both batches' sizes.
      "numpy_sample_deduplicated_ms_per_batch": round(deduplicated_ms, 3),
      **sizes,
      "serial_in_graph_ms_per_batch": round(in_graph, 3),
      "serial_in_graph_seeds_per_s": _rate(BATCH_SIZE, in_graph / 1000),
      "numpy_sampler_seeds_per_s": _rate(BATCH_SIZE, sample_ms / 1000),
      "note": (
          "Each stage alone, one thread, ms per batch of 128 seeds: numpy_sample = "
          "kernel.sample; feature_gather = the rest of SubgraphSampler.sample; "
          "numpy_function = running it in tf.numpy_function in a tf.data map (vs. a "
          "Python call); rank1_graph_tensor = the rest of SubgraphSampler.graph_tensor "
          "(ragged tensors, GraphTensor.from_pieces); unbatch_batch = "
          "SubgraphSampler.dataset's unbatch plus runner.run's batch(128), on cached rank-1 "
          "batches; merge = merge_batch_to_components on cached batches; eager_iteration = "
          "iterating cached merged batches in eager minus reading them in-graph (building "
          "each batch's GraphTensor in Python: paid by sampling_seeds_per_s, not by a "
          "Keras train step); alt_merge_rank1_directly (not in the sum) = "
          "merge_batch_to_components straight on the cached rank-1 batches, what "
          "unbatch_batch + merge would cost if each numpy batch were a training batch. "
          "tf.data stages consumed by Dataset.reduce. The pipeline itself overlaps "
          "stages on the 2 cores (parallel maps, prefetch)."),
  }


class _EpochTimer:
  """Keras callback (built lazily: tf.keras is imported only after setup_process)."""

  @staticmethod
  def make(probe: Callable[[], int]):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    class EpochTimer(tf.keras.callbacks.Callback):
      """When training began, the first and last training steps ended, validation ran."""

      def __init__(self):
        super().__init__()
        self.begin = self.first_end = self.last_end = None
        self.steps = 0
        self.test_s = 0.0
        self._test_begin = None

      def on_train_begin(self, logs=None):
        self.begin = time.perf_counter()
        self.probe_begin = probe()

      def on_train_end(self, logs=None):
        self.probe_end = probe()

      def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        self.steps += 1
        if self.first_end is None:
          self.first_end = now
        self.last_end = now

      def on_test_begin(self, logs=None):
        self._test_begin = time.perf_counter()

      def on_test_end(self, logs=None):
        self.test_s += time.perf_counter() - self._test_begin

    return EpochTimer()


class _CachedProvider:
  """A ``runner.DatasetProvider`` of one fixed (cached) dataset.

  ``steps``: the real provider's (elements per pass when each is a merged batch).
  """

  def __init__(self, dataset, steps):
    self._dataset = dataset
    self.steps = steps

  def get_dataset(self, context):
    del context
    return self._dataset


class _CachedGraph:
  """Stands in for ``GraphSplits`` in ``adapters.SampledData``: pre-sampled subgraphs.

  ``provider(...)`` takes whatever arguments GnnTrainer passes, gets the real
  provider's dataset with them (so the floor gets exactly the elements the
  in-memory run gets: same seeds, order and samples as its first epoch),
  ``.cache()``s it and reads it to the end once, on the first call per
  arguments (before ``runner.run`` trains, outside the timed steps).
  """

  def __init__(self, graph):
    self._graph = graph
    self._datasets = {}
    self.fill_s = 0.0

  def __getattr__(self, name):  # the rest (specs, parsers, what batches merge) as the graph's
    if name == "_graph":
      raise AttributeError(name)
    return getattr(self._graph, name)

  def provider(self, splits, **kwargs):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    key = (tuple(splits), json.dumps(kwargs, sort_keys=True, default=str))
    if key not in self._datasets:
      start = time.perf_counter()
      provider = self._graph.provider(splits, **kwargs)
      ds = provider.get_dataset(tf.distribute.InputContext()).cache()
      ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)  # fills the cache
      self._datasets[key] = ds, provider.steps
      self.fill_s += time.perf_counter() - start
    return _CachedProvider(*self._datasets[key])


def _patched_make_trainer(timer):
  """``keras_trainer.make_trainer`` with ``timer`` appended to GnnTrainer's callbacks."""
  from gnn_trainer_component.trainer import keras_trainer  # pylint: disable=g-import-not-at-top
  original = keras_trainer.make_trainer

  def make_trainer(*args, **kwargs):
    training = original(*args, **kwargs)
    training.trainer._callbacks = list(training.trainer._callbacks or []) + [timer]  # pylint: disable=protected-access
    return training

  return keras_trainer, original, make_trainer


def train_once(graph_input, num_train: int, run_dir: str,
               sampler_calls: Callable[[], int], readout_round: bool = True, *,
               module: tuple[Optional[str], Optional[str], dict] = (
                   None, "benchmarks.in_memory", {}),
               batch_size: int = BATCH_SIZE, epochs: int = 1,
               config: Optional[dict[str, Any]] = None) -> dict[str, Any]:
  """Epochs through GnnTrainer's ``train_and_export`` (no export); the timings.

  Args:
    graph_input: What ``adapters.SampledData`` samples: the GraphSplits, or the cached
      stand-in.
    num_train: Seeds of the training split.
    run_dir: An empty folder for GnnTrainer's model run, staging and backup.
    sampler_calls: Counts the numpy sampler's calls (read as training begins and ends).
    readout_round: The model's ``readout_round`` hyperparameter.
    module: ``(module_file, module_path, hparams)`` of the user module (default:
      this file's model, its ``readout_round`` set as above).
    batch_size, epochs: ``global_batch_size`` and ``epochs``.
    config: More ``custom_config`` keys.
  """
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from gnn_trainer_component.in_memory import adapters
  from gnn_trainer_component.trainer import config as config_lib
  from gnn_trainer_component.trainer import inputs as inputs_lib
  from gnn_trainer_component.trainer import module_contract
  from gnn_trainer_component.trainer import training
  # pylint: enable=g-import-not-at-top
  cfg = config_lib.make_trainer_config(
      {"splits": ["train"]}, {"splits": ["eval"]},
      {"global_batch_size": batch_size, "epochs": epochs, "seed": 0, **(config or {})})
  module_file, module_path, hparams = module
  hparams = hparams if module_file else {"readout_round": readout_round, **hparams}
  inputs = inputs_lib.TrainingInputs(
      cfg=cfg, user_module=module_contract.load_user_module(module_file, module_path, hparams),
      data=adapters.SampledData(train_splits=("train",), eval_splits=("eval",),
                                source=graph_input),
      model_run_dir=os.path.join(run_dir, "model_run"),
      staging_dir=os.path.join(run_dir, "staging"), resume_dir=os.path.join(run_dir, "backup"))
  timer = _EpochTimer.make(sampler_calls)
  keras_trainer, original, patched = _patched_make_trainer(timer)
  keras_trainer.make_trainer = patched
  start = time.perf_counter()
  try:
    trained = training.train_and_export(inputs, tf.distribute.get_strategy(),
                                        export_model=False)
  finally:
    keras_trainer.make_trainer = original
  total_s = time.perf_counter() - start
  steps = math.ceil(num_train / batch_size) * epochs
  if timer.steps != steps:
    raise RuntimeError(f"Trained {timer.steps} steps, expected {steps}.")
  steady_s = timer.last_end - timer.first_end
  return {
      "examples_per_s": _rate(num_train * epochs - batch_size, steady_s),
      "steady_s": round(steady_s, 3),
      "ms_per_step": round(1000 * steady_s / (timer.steps - 1), 3),
      "first_step_s": round(timer.first_end - timer.begin, 3),
      "train_epoch_s": round(timer.last_end - timer.begin, 3),
      "examples_per_s_incl_first_step": _rate(num_train * epochs, timer.last_end - timer.begin),
      "validation_s": round(timer.test_s, 3),
      "train_and_export_s": round(total_s, 3),
      "steps": timer.steps,
      "sampler_calls": timer.probe_end - timer.probe_begin,
      "loss": trained.train_metrics.get("loss"),
      "val_loss": trained.eval_metrics.get("loss"),
      "val_accuracy": next((v for k, v in trained.eval_metrics.items()
                            if k.endswith("accuracy")), None),
  }


def dgl_venv(venv: str, python: str) -> tuple[str, Optional[float]]:
  """The ``dgl`` variant's interpreter in ``venv``, and the seconds creating it took.

  Created on first use with ``python`` and :data:`DGL_REQUIREMENTS` (None: it was there).
  """
  interpreter = os.path.join(venv, "bin", "python")
  marker = os.path.join(venv, "DONE")
  if os.path.exists(marker):
    return interpreter, None
  start = time.perf_counter()
  shutil.rmtree(venv, ignore_errors=True)
  subprocess.run([python, "-m", "venv", venv], check=True)
  subprocess.run([interpreter, "-m", "pip", "install", "-q", *DGL_REQUIREMENTS], check=True)
  with open(marker, "w") as f:
    f.write("\n".join(DGL_REQUIREMENTS) + "\n")
  return interpreter, round(time.perf_counter() - start, 1)


def table_globs(schema_path: str, node_set: str = "user",
                edge_set: str = "follows") -> tuple[str, str]:
  """The node and edge tables' file names (globs, relative to the schema's folder)."""
  import tensorflow_gnn as tfgnn  # pylint: disable=g-import-not-at-top
  schema = tfgnn.read_schema(schema_path)
  return (schema.node_sets[node_set].metadata.filename,
          schema.edge_sets[edge_set].metadata.filename)


def run_dgl(interpreter: str, graph: dict, num_train: int, num_eval: int,
            models: str) -> dict[str, Any]:
  """``benchmarks/dgl_sage.py`` on the generated graph's tables; its JSON object."""
  nodes, edges = table_globs(graph["graph_schema"])
  cmd = [interpreter, "-W", "ignore", os.path.join(report.REPO_ROOT, "benchmarks", "dgl_sage.py"),
         "--graph-dir", graph["dir"], "--nodes", nodes, "--edges", edges,
         "--train-seeds", graph["seed_tables"]["train"],
         "--eval-seeds", graph["seed_tables"]["eval"],
         "--num-train", str(num_train), "--num-eval", str(num_eval),
         "--fan-outs", ",".join(str(f) for f in FAN_OUTS), "--batch-size", str(BATCH_SIZE),
         "--units", str(HPARAMS["units"]), "--classes", "10",
         "--learning-rate", repr(HPARAMS["learning_rate"]), "--seed", "0", "--models", models]
  start = time.perf_counter()
  done = subprocess.run(cmd, capture_output=True, text=True, check=False)
  process_s = time.perf_counter() - start
  if done.returncode != 0:
    raise RuntimeError(f"dgl_sage.py exited {done.returncode}:\n{done.stderr[-4000:]}")
  result = json.loads(done.stdout.strip().splitlines()[-1])
  result["process_s_from_parent"] = round(process_s, 3)
  return result


def dgl_fields(run: dict[str, Any]) -> dict[str, Any]:
  """The top-level ``dgl_*`` fields of the result (``run``: :func:`run_dgl`'s object)."""
  models = run["models"]
  out = {}
  for name, prefix in (("sage", "dgl_"), ("same", "dgl_same_model_")):
    if name in models:
      out.update({f"{prefix}{k}": models[name][k] for k in (
          "examples_per_s", "ms_per_step", "first_step_s", "loss", "val_accuracy")})
  trial = run["sampling_trials"][-1]
  out.update({
      "dgl_sampling_seeds_per_s": run["sampling_seeds_per_s"],
      "dgl_nodes_per_batch": trial["nodes_per_batch"],
      "dgl_edges_per_batch": trial["edges_per_batch"],
      "dgl_load_s": run["load_s"], "dgl_graph_build_s": run["graph_build_s"],
      "dgl_import_s": run["import_s"], "dgl_peak_rss_gb": run["peak_rss_gb"],
      "dgl_process_s": run["process_s_from_parent"],
  })
  return out


def _counting(sampler) -> Callable[[], int]:
  """Counts ``sampler.sample`` calls (datasets built after this call count)."""
  calls = [0]
  original = sampler.sample

  def sample(*args, **kwargs):
    calls[0] += 1
    return original(*args, **kwargs)

  sampler.sample = sample
  return lambda: calls[0]


def main(argv: Optional[Sequence[str]] = None) -> int:
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()  # first: Keras 2, before TensorFlow
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--work-dir", help="The graph (and training runs) go here; default a temp dir.")
  p.add_argument("--num-nodes", type=int, default=1_000_000)
  p.add_argument("--num-edges", type=int, default=10_000_000)
  p.add_argument("--train-seeds", type=int, default=100_000,
                 help="Training seeds (one epoch over them).")
  p.add_argument("--eval-seeds", type=int, default=10_000, help="Validation seeds.")
  p.add_argument("--sampling-seeds", type=int, default=50_000,
                 help="Training seeds through the sampling measurement.")
  p.add_argument("--warmup-batches", type=int, default=5)
  p.add_argument("--sampling-repeats", type=int, default=3,
                 help="Sampling measurements (medians reported).")
  p.add_argument("--seed-fraction", type=float,
                 help="Seeds per node in the generated graph; default: enough for the above.")
  p.add_argument("--repeats", type=int, default=1,
                 help="Training runs per variant (floor and in memory alternate).")
  p.add_argument("--readout-round", choices=("on", "off", "both"), default="on",
                 help="The model's second round on the seeds only while training (on), on "
                      "every node (off), or both, interleaved (the latter's runs named "
                      "*_whole_round).")
  p.add_argument("--deduplicate", choices=("auto", "always", "never", "both"), default="auto",
                 help="GnnTrainer's deduplicate_batches, or both 'always' and 'never', "
                      "interleaved (the latter's runs named *_per_seed).")
  p.add_argument("--skip-training", action="store_true",
                 help="No GnnTrainer training (floor, in memory).")
  p.add_argument("--variants", default=",".join(VARIANTS),
                 help=f"Comma-separated, of {', '.join(VARIANTS)}.")
  p.add_argument("--dgl-python", default="python3.11",
                 help="Python (3.11: DGL 2.1.0's and torch 2.2.1's wheels) for the dgl venv.")
  p.add_argument("--dgl-venv", help="The dgl variant's venv; default <work dir>/dgl-venv.")
  p.add_argument("--dgl-models", default="sage,same",
                 help="benchmarks/dgl_sage.py's models: sage (dgl_*), same (dgl_same_model_*).")
  p.add_argument("--output", default=os.path.join(report.REPO_ROOT, "benchmarks", "results",
                                                  "in_memory.json"))
  args = p.parse_args(argv)
  variants = [v for v in args.variants.split(",") if v]
  if not variants or set(variants) - set(VARIANTS):
    p.error(f"--variants: comma-separated, of {', '.join(VARIANTS)}.")

  # pylint: disable=g-import-not-at-top
  from absl import logging as absl_logging
  import psutil
  import tensorflow as tf
  # pylint: enable=g-import-not-at-top
  absl_logging.set_verbosity(absl_logging.WARNING)

  work_dir = args.work_dir or tempfile.mkdtemp(prefix="in-memory-")
  os.makedirs(work_dir, exist_ok=True)
  fraction = args.seed_fraction or seed_fraction(args.num_nodes, args.train_seeds,
                                                  args.eval_seeds)
  graph = generate_graph(work_dir, args.num_nodes, args.num_edges, fraction)
  print(f"graph: {json.dumps(graph)}", file=sys.stderr, flush=True)
  num_train = min(args.train_seeds, graph["seeds"]["train"])
  num_eval = min(args.eval_seeds, graph["seeds"]["eval"])

  result = {
      "command": " ".join(["python -m benchmarks.in_memory"] + list(argv or sys.argv[1:])),
      "date": time.strftime("%Y-%m-%d"), "device": "cpu", "cpus": os.cpu_count(),
      "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
      "tensorflow": tf.__version__, "source": source_version(), "variants": variants,
      "graph": {k: graph.get(k) for k in ("num_nodes", "num_edges", "max_degree",
                                          "median_degree", "seeds", "bytes", "seed_fraction",
                                          "seconds", "reused")},
      "sampling_config": SAMPLING_CONFIG, "batch_size": BATCH_SIZE,
  }
  targets = {}

  dgl = None
  if "dgl" in variants:  # first: its own process, before this one holds the graph
    interpreter, venv_s = dgl_venv(args.dgl_venv or os.path.join(work_dir, "dgl-venv"),
                                   args.dgl_python)
    dgl = run_dgl(interpreter, graph, num_train, num_eval, args.dgl_models)
    dgl["venv_created_s"] = venv_s
    print(f"dgl: {json.dumps(dgl)}", file=sys.stderr, flush=True)

  if "gnntrainer" in variants:
    gnntrainer, gnn_targets = run_gnntrainer(args, work_dir, graph, num_train, num_eval)
    result.update(gnntrainer)
    targets.update(gnn_targets)
  if dgl is not None:
    train_rate = result.get("train_examples_per_s")
    fields = dgl_fields(dgl)
    ordered = {}
    for key, value in result.items():  # dgl_examples_per_s beside train_examples_per_s
      ordered[key] = value
      if key == "train_examples_per_s":
        ordered["dgl_examples_per_s"] = fields.get("dgl_examples_per_s")
    result = ordered

    def ratio(rate):
      return round(train_rate / rate, 3) if train_rate and rate else None

    result.update({
        **fields,
        "gnntrainer_over_dgl": ratio(fields.get("dgl_examples_per_s")),
        "gnntrainer_over_dgl_same_model": ratio(fields.get("dgl_same_model_examples_per_s")),
        "dgl": dgl,
    })
    if train_rate:
      targets["gnntrainer_over_dgl"] = {
          "target": f">= {TARGETS['gnntrainer_over_dgl']:g}",
          "met": result["gnntrainer_over_dgl"] >= TARGETS["gnntrainer_over_dgl"],
          "met_same_model": (result["gnntrainer_over_dgl_same_model"] is not None and
                             result["gnntrainer_over_dgl_same_model"]
                             >= TARGETS["gnntrainer_over_dgl"])}
  result["targets"] = targets
  report.print_result(result, args.output)
  return 0


def run_gnntrainer(args, work_dir: str, graph: dict, num_train: int,
                   num_eval: int) -> tuple[dict[str, Any], dict[str, Any]]:
  """The ``gnntrainer`` variant: load, sampling measurements, the trainings; fields, targets."""
  # pylint: disable=g-import-not-at-top
  import psutil
  from gnn_trainer_component.in_memory import adapters
  # pylint: enable=g-import-not-at-top
  rss_before_load_gb = _peak_rss_gb()
  start = time.perf_counter()
  splits = adapters.load(graph["dir"], seeds=graph["seed_tables"],
                                 sampling_config=SAMPLING_CONFIG, splits=["train", "eval"])
  load_s = time.perf_counter() - start
  rss_after_load_gb = round(psutil.Process().memory_info().rss / 1e9, 3)
  peak_after_load_gb = _peak_rss_gb()
  print(f"loaded in {load_s:.1f} s: {splits.sampler.graph.summary}",
        file=sys.stderr, flush=True)

  trials = [measure_sampling(splits, args.sampling_seeds, args.warmup_batches)
            for _ in range(args.sampling_repeats)]
  sampling = {k: statistics.median(t[k] for t in trials) for k in trials[0]}
  # The first build and batch are the cold ones (tracing); later ones reuse the traces.
  sampling.update(build_s=trials[0]["build_s"], first_batch_s=trials[0]["first_batch_s"])
  sampling["sampling_trials"] = [{k: v for k, v in t.items() if k.startswith("sampling_seeds")}
                                 for t in trials]
  peak_rss_gb = _peak_rss_gb()
  profile = profile_sampling(splits, args.sampling_seeds, args.warmup_batches)
  sampling = {**sampling, "numpy_sampler_seeds_per_s": profile.pop("numpy_sampler_seeds_per_s"),
              "profile": profile}
  print(f"sampling: {json.dumps(sampling)}", file=sys.stderr, flush=True)

  available = {s: len(v) for s, v in splits.seeds.items()}
  if (min(num_train, available["train"]), min(num_eval, available["eval"])) != (
      num_train, num_eval):
    raise RuntimeError(f"Seeds loaded {available}, the graph's summary {graph['seeds']}.")
  train_splits = dataclasses.replace(splits, seeds={"train": splits.seeds["train"][:num_train],
                                                    "eval": splits.seeds["eval"][:num_eval]})
  rounds = {"on": (True,), "off": (False,), "both": (True, False)}[args.readout_round]
  dedups = (("always", "never") if args.deduplicate == "both" else (args.deduplicate,))
  # Only beside the wrapped round (deduplicated batches) do the whole round's (per-seed
  # batches') runs get names of their own.
  names = [(variant + (WHOLE_ROUND if len(rounds) > 1 and not readout_round else "")
            + (PER_SEED if len(dedups) > 1 and dedup == "never" else ""),
            variant, readout_round, dedup)
           for readout_round in rounds for dedup in dedups for variant in ("floor", "in_memory")]
  runs = {name: [] for name, *_ in names}
  cache_s = floor_calls = None
  if not args.skip_training:
    calls = _counting(splits.sampler)
    sources = {dedup: dataclasses.replace(train_splits, deduplicate=dedup) for dedup in dedups}
    cached = {dedup: _CachedGraph(source) for dedup, source in sources.items()}
    for rep in range(args.repeats):
      for name, variant, readout_round, dedup in names:
        # A fresh folder: GnnTrainer resumes from a backup it finds in its resume dir.
        run_dir = tempfile.mkdtemp(prefix=f"run-{name}-{rep}-", dir=work_dir)
        try:
          run = train_once(cached[dedup] if variant == "floor" else sources[dedup], num_train,
                           run_dir, calls, readout_round)
        finally:
          shutil.rmtree(run_dir, ignore_errors=True)
        runs[name].append(run)
        print(f"{name} {rep}: {json.dumps(run)}", file=sys.stderr, flush=True)
    floor_calls = [r["sampler_calls"] for name, runs_ in runs.items() if name.startswith("floor")
                   for r in runs_]
    cache_s = sum(c.fill_s for c in cached.values())

  def median(variant, key, digits=1):
    values = [r[key] for r in runs.get(variant, ())]
    return round(statistics.median(values), digits) if values else None

  whole_round = {}
  if args.readout_round == "both":
    whole_round = {
        "whole_round_train_examples_per_s": median("in_memory" + WHOLE_ROUND, "examples_per_s"),
        "whole_round_floor_examples_per_s": median("floor" + WHOLE_ROUND, "examples_per_s")}

  if args.deduplicate == "both":
    whole_round.update({
        "per_seed_train_examples_per_s": median("in_memory" + PER_SEED, "examples_per_s"),
        "per_seed_floor_examples_per_s": median("floor" + PER_SEED, "examples_per_s")})
  train_rate, floor_rate = median("in_memory", "examples_per_s"), median("floor", "examples_per_s")
  result = {
      "load_s": round(load_s, 2),
      "graph_mib": round(splits.sampler.graph.nbytes / 2**20, 1),
      "peak_rss_gb": peak_rss_gb,
      "peak_rss_before_load_gb": rss_before_load_gb,
      "peak_rss_after_load_gb": peak_after_load_gb,
      "rss_after_load_gb": rss_after_load_gb,
      **sampling,
      "num_train_seeds": num_train, "num_eval_seeds": num_eval,
      "train_seeds_available": available["train"],
      "steps": math.ceil(num_train / BATCH_SIZE),
      "train_examples_per_s": train_rate,
      "train_ms_per_step": median("in_memory", "ms_per_step", 3),
      "floor_examples_per_s": floor_rate,
      "train_over_floor": (round(train_rate / floor_rate, 3)
                           if train_rate and floor_rate else None),
      "readout_round": args.readout_round,
      "deduplicate": args.deduplicate,
      **whole_round,
      "floor_cache_fill_s": round(cache_s, 2) if cache_s is not None else None,
      "floor_sampler_calls": floor_calls,
      "repeats": args.repeats,
      "runs": runs,
      "peak_rss_with_training_gb": _peak_rss_gb(),
  }
  targets = {
      "load_s": {"target": f"<= {TARGETS['load_s']:g}", "met": load_s <= TARGETS["load_s"]},
      "peak_rss_gb": {"target": f"<= {TARGETS['peak_rss_gb']:g}",
                      "met": peak_rss_gb <= TARGETS["peak_rss_gb"]},
      "sampling_seeds_per_s": {
          "target": f">= {TARGETS['sampling_seeds_per_s']:g}",
          "met": sampling["sampling_seeds_per_s"] >= TARGETS["sampling_seeds_per_s"],
          "met_in_graph": (sampling["sampling_seeds_per_s_in_graph"]
                           >= TARGETS["sampling_seeds_per_s"])},
      "train_over_floor": {
          "target": f">= {TARGETS['train_over_floor']:g}",
          "met": (result["train_over_floor"] >= TARGETS["train_over_floor"]
                  if result["train_over_floor"] is not None else None)},
  }
  return result, targets


if __name__ == "__main__":
  sys.exit(main())
