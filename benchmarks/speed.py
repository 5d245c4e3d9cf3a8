"""Speed benchmark: GnnTrainer against a bare ``runner.run`` script and a tf.function floor.

  python -m benchmarks.speed --workload W1 --repetitions 3
  python -m benchmarks.speed --workload all --repetitions 3
  python -m benchmarks.speed --workload W2 --variants floor,gnntrainer_fast,gnntrainer_in_memory
  python -m benchmarks.speed --smoke --work-dir /tmp/gnn_speed_smoke   # CI

Workloads (:data:`WORKLOADS`):

* ``W1``: Planetoid Cora, ``module_files/planetoid_gcn.py``, 200 epochs full
  batch (the 140 train roots in one step per epoch), validation on the 500
  validation subgraphs every epoch, the best-val-loss weights restored.
* ``W1-full``: the same GCN, data and epochs, with GnnTrainer holding Cora's
  tables in memory and training on the whole graph every step
  (``graph_mode: "full_graph"``: the 140 training seeds read out with
  structured readout, validation on the 500 validation seeds in one pass);
  accuracy is still measured by serving GraphSampler's test subgraphs.
  Compared with the same GCN in PyTorch Geometric (``pyg``, see below).
* ``W2``: a generated graph (:mod:`benchmarks.large_graph`: 200k nodes, 2M
  edges, 128-dim features) sampled with fan-outs 10,5 around 50k training
  roots; the same GCN module with 128 units; one epoch in batches of 128
  (391 steps), then validation on 5k subgraphs. Throughput and memory.
  ``--w2-scale`` shrinks the graph and its splits (e.g. 0.01: 2,000 nodes,
  500 training roots) for smoke runs; the data of each scale is cached apart.
  ``--w1-seeds`` keeps the first N of W1's validation and test seeds (smoke
  runs: :data:`SMOKE_W1_SEEDS`), also cached apart.

Adding a workload = a ``prepare`` function (work dir -> :class:`PreparedData`,
cached) and an entry in :data:`WORKLOADS`.

Variants (:data:`VARIANTS`), on the same data, module, seed and step count:

* ``bare``: what a TF-GNN user writes: ``runner.run`` with a GZIP
  ``SimpleDatasetProvider`` and a ``KerasTrainer`` at its defaults
  (checkpoints, TensorBoard every 500 steps, backup, best weights restored),
  exporting with ``KerasModelExporter``.
* ``gnntrainer_default``: the real ``GnnTrainer`` executor on hand-built
  artifacts with the workload's ``custom_config`` only.
* ``gnntrainer_fast``: the same plus :data:`FAST_CONFIG`.
* ``gnntrainer_xla``: the fast settings plus ``jit_compile`` (W1 only: its
  cached full batch has one shape).
* ``gnntrainer_stream``: the fast settings without a cache (``cache: none``):
  every epoch reads and parses the files (W2 only).
* ``gnntrainer_stream_small``: the same on a training split with 10x fewer
  roots (W2's ``train_5k``), for the memory check: streaming peak RSS must
  not grow with the number of roots.
* ``gnntrainer_full_graph`` (W1-full): the fast settings, the graph in memory,
  ``graph_mode: "full_graph"``.
* ``gnntrainer_full_graph_keras`` (W1-full): the same with ``fused_epochs:
  false``: Keras' epoch loop, validation in its own ``evaluate`` call.
* ``gnntrainer_full_graph_xla`` (W1-full): ``gnntrainer_full_graph`` with
  ``jit_compile`` (and the dense first layer: XLA has no sparse matmul).
* ``gnntrainer_in_memory`` (W2): the fast settings, GnnTrainer given the graph
  itself (:func:`benchmarks.large_graph.write_tables`: the tables folder as
  ``graph_schema``, ``seeds`` and the fan-outs' ``sampling_config``, no
  ``examples``) with ``graph_mode: "sampled"``: it holds the graph in memory and
  samples each epoch's subgraphs on the fly. Accuracy is measured by serving
  the test examples, as for the other variants.
* ``pyg`` (W1-full): ``benchmarks/pyg_gcn.py`` (PyG's ``examples/gcn.py``
  setting) in its own venv, created on first use in ``<work dir>/pyg-venv``
  with ``--pyg-python`` (default ``python3.11``) and :data:`PYG_REQUIREMENTS`;
  the script times itself from model build to the last epoch (``train_s``).
* ``floor``: the same Keras model and optimizer on batches parsed, merged and
  preprocessed before the clock starts, one ``tf.function`` train step per
  batch and the validation forward passes per epoch, the best-val-loss
  weights kept in memory (restored when the config asks for it).

Every run of every variant is a fresh subprocess (``--run-one VARIANT``, one
JSON line on stdout); the parent interleaves the workload's variants (or
``--variants``) (A B C D A B C D ...) for
``--repetitions`` rounds (round r uses seed ``--seed`` + r for every variant)
and reports medians. GnnTrainer's ``Executor.Do`` runs in a process of its own
that the child starts (``--run-executor JOB_JSON``: that process does nothing
else; the child then measures the published model's accuracy), as ``pyg``'s
script does. Timings per run:

* ``train_s``: training only. GnnTrainer: from its ``GnnTrainer phase: train``
  log line to ``GnnTrainer phase: export`` (runner.run with model build,
  tracing, all epochs, best-weights restore). bare: ``runner.run`` start to
  its exporter's start. floor: model build to best-weights restore.
* ``first_step_s``: training start to the end of the first training step
  (model build and tracing). GnnTrainer: its ``GnnTrainer first step done``
  log line.
* ``ms_per_step``: steady state, see :func:`timing_summary` (several epochs:
  median epoch interval after the first :data:`WARMUP_EPOCHS` epochs divided
  by the steps per epoch; one epoch: first step end to epoch end divided by
  the remaining steps; either way validation and checkpoints included).
* ``executor_s`` (GnnTrainer only): ``Executor.Do`` wall time.
* ``fixed_overhead_s`` (GnnTrainer only): ``executor_s`` minus ``train_s``
  (input checks, module loading, export, parity check, publish); ``phases_s``
  splits ``executor_s`` by GnnTrainer's phase log lines: ``before_validate``
  (the call to the first phase line), then each phase to the next: ``validate``
  (examples only), ``train``, ``export``, ``parity``, ``publish``, ``done``.
* ``process_s`` (GnnTrainer and pyg): the whole wall time of the process that
  trains, as a user sees it: interpreter start, imports, data loading,
  training, export (GnnTrainer) or test accuracy (pyg), exit; timed by the
  process that starts it. (pyg's own clock, from its first line to its
  output, is ``script_s``; GnnTrainer's splits into ``startup_s``: process start
  to ``Executor.Do``, ``executor_s``, and ``after_executor_s``: its output
  and exit.) The benchmark passes ``module_file``, so TFX's
  pip install of the user-module wheel, which a pipeline's ``Executor.Do``
  does (``module_path`` ``name@wheel``), is in neither.
* ``val_accuracy`` / ``test_accuracy``: the final (best-val-loss) model;
  GnnTrainer: its published SavedModel
  (:func:`pipelines.planetoid.pipeline.evaluate_saved_model`); bare and floor:
  the in-memory model.
* ``peak_rss_mb``: the peak RSS (``VmHWM``: not ``ru_maxrss``, which Linux
  carries over from the parent, see :func:`_rss_mb`) of the process that
  trains and of the one that evaluates, the larger: bare and floor, the child
  at its end (after evaluation); GnnTrainer, the larger of its
  ``Executor.Do`` process and the child serving its model; pyg, its script's
  process. ``peak_rss_after_train_mb``: bare and floor, the child before the
  accuracy evaluation; GnnTrainer, its ``Executor.Do`` process.

Output: ``benchmarks/results/speed-<date>.json`` (``--smoke``: in the work
dir; or ``--output``), a markdown table on stdout, then the JSON as the last
stdout line (``workloads.<W>.<variant>`` holds the medians).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import functools
import glob
import json
import logging
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Mapping, Optional, Sequence

# First: Keras 2 for TF-GNN, before TensorFlow is imported (the child processes
# inherit it). TensorFlow itself is imported only in the functions the child
# processes run, so that the parent stays small while it waits for them.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

from benchmarks import large_graph  # pylint: disable=g-bad-import-order
from benchmarks import report  # pylint: disable=g-bad-import-order
from benchmarks.report import REPO_ROOT  # pylint: disable=g-bad-import-order

RESULTS_DIR = os.path.join(REPO_ROOT, "benchmarks", "results")
DEFAULT_WORK_DIR = "/tmp/gnn_speed"

#: W1's GnnTrainer custom_config (the run's ``seed`` is added per run);
#: everything else stays at GnnTrainer's defaults. bare and floor take the
#: batch size, epochs and module hparams from it too.
W1_CONFIG: Mapping[str, Any] = {"global_batch_size": 140, "epochs": 200,
                                "restore_best_weights": True,
                                "hparams": {"num_classes": 7}}
#: W2's GnnTrainer custom_config: one epoch of the 50k training roots.
W2_CONFIG: Mapping[str, Any] = {"global_batch_size": 128, "epochs": 1,
                                "hparams": {"num_classes": 8, "units": 128,
                                            "sparse_features": False}}  # dense features
#: What ``gnntrainer_fast`` adds to the workload's custom_config.
FAST_CONFIG: Mapping[str, Any] = {"summarize_every_n_steps": "never"}
#: What ``gnntrainer_stream`` adds: the fast settings, parsing every epoch.
STREAM_CONFIG: Mapping[str, Any] = {**FAST_CONFIG, "cache": "none"}
#: What ``gnntrainer_xla`` adds: the fast settings, XLA-compiled steps (with the
#: dense first layer: XLA has no sparse matmul kernel).
XLA_CONFIG: Mapping[str, Any] = {**FAST_CONFIG, "jit_compile": True,
                                 "hparams": {"sparse_features": False}}
#: What ``gnntrainer_full_graph`` adds: the fast settings, the whole graph every step.
FULL_GRAPH_CONFIG: Mapping[str, Any] = {**FAST_CONFIG, "graph_mode": "full_graph"}
#: What ``gnntrainer_full_graph_keras`` adds: the full graph with Keras' epoch loop
#: (validation in its own ``evaluate`` call), the A/B of ``fused_epochs``.
FULL_GRAPH_KERAS_CONFIG: Mapping[str, Any] = {**FULL_GRAPH_CONFIG, "fused_epochs": False}
#: What ``gnntrainer_full_graph_xla`` adds: the full graph, each fused epoch compiled by XLA
#: (the dense first layer, as :data:`XLA_CONFIG`).
FULL_GRAPH_XLA_CONFIG: Mapping[str, Any] = {**FULL_GRAPH_CONFIG, "jit_compile": True,
                                            "hparams": {"sparse_features": False}}
#: What ``gnntrainer_in_memory`` adds: the fast settings, subgraphs sampled in memory.
IN_MEMORY_CONFIG: Mapping[str, Any] = {**FAST_CONFIG, "graph_mode": "sampled"}
#: The ``pyg`` variant's venv (torch 2.13.0 is the CPU build on this machine's disk).
PYG_REQUIREMENTS = ("torch==2.13.0", "torch_geometric==2.8.1", "scipy==1.17.1")


@dataclasses.dataclass(frozen=True)
class Variant:
  """How one variant trains.

  Attributes:
    runner: ``"bare"``, ``"gnntrainer"``, ``"gnntrainer_graph"`` (the graph in
      memory instead of examples), ``"pyg"`` or ``"floor"`` (see :data:`RUNNERS`).
    config: What it adds to the workload's custom_config (GnnTrainer only).
    small: Train on the workload's ``small_train_split`` instead (the memory
      scaling check).
  """
  runner: str
  config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  small: bool = False


VARIANTS: Mapping[str, Variant] = {
    "bare": Variant("bare"),
    "gnntrainer_default": Variant("gnntrainer"),
    "gnntrainer_fast": Variant("gnntrainer", FAST_CONFIG),
    "gnntrainer_xla": Variant("gnntrainer", XLA_CONFIG),
    "gnntrainer_stream": Variant("gnntrainer", STREAM_CONFIG),
    "gnntrainer_stream_small": Variant("gnntrainer", STREAM_CONFIG, small=True),
    "gnntrainer_full_graph": Variant("gnntrainer_graph", FULL_GRAPH_CONFIG),
    "gnntrainer_full_graph_keras": Variant("gnntrainer_graph", FULL_GRAPH_KERAS_CONFIG),
    "gnntrainer_full_graph_xla": Variant("gnntrainer_graph", FULL_GRAPH_XLA_CONFIG),
    "gnntrainer_in_memory": Variant("gnntrainer_graph", IN_MEMORY_CONFIG),
    "pyg": Variant("pyg"),
    "floor": Variant("floor"),
}

#: Epoch intervals before this many epochs are warm-up, not steady state.
WARMUP_EPOCHS = 5
#: ``--smoke``: epochs per run (enough for steady-state intervals after warm-up).
SMOKE_EPOCHS = 8
#: ``--smoke``: variant children run at once (a smoke run's figures are not measurements).
SMOKE_CHILDREN = 2
#: ``--smoke``: W1's validation and test seeds (the first of each; sampling Cora's 1,500 took
#: most of a smoke run's preparation, 67 of 89 CPU-s).
SMOKE_W1_SEEDS = 100
#: ``--smoke``: W1's variants but ``gnntrainer_default``, which runs the code of
#: ``gnntrainer_fast`` with TensorBoard summaries on (as every pipeline test trains), and
#: ``bare``, whose first step converts TF-GNN's layers with AutoGraph (33 of its 53 CPU-s in a
#: smoke run: what it measures, not what a smoke run checks).
SMOKE_VARIANTS = ("gnntrainer_fast", "gnntrainer_xla", "floor")
#: Medians reported per variant (the first six are the ones CI checks).
METRICS = ("train_s", "ms_per_step", "examples_per_s", "peak_rss_mb", "val_accuracy",
           "test_accuracy", "first_step_s", "fixed_overhead_s", "peak_rss_after_train_mb",
           "executor_s", "process_s", "startup_s", "after_executor_s")
REQUIRED_METRICS = METRICS[:6]
#: A child running longer than this is killed (and the benchmark fails).
CHILD_TIMEOUT_S = 4 * 3600
#: Batch size of the in-memory accuracy evaluation (bare, floor).
EVAL_BATCH_SIZE = 100


# --------------------------------------------------------------------------- workloads


@dataclasses.dataclass(frozen=True)
class PreparedData:
  """A workload's GraphSampler output, written once into the work dir.

  Attributes:
    examples_uri: Examples artifact folder with ``Split-<name>/`` GZIP TFRecords.
    graph_schema_dir: Folder with the sampler's output ``graph_schema.pbtxt``.
    split_names: All splits under ``examples_uri``.
    num_examples: Split name -> number of examples.
    tables_dir: The sampler's input (graph schema + tables), where the
      workload trains on the graph in memory.
    seeds: Split -> seed table in ``tables_dir``.
    sampling_config: The sampler's sampling_config.
  """
  examples_uri: str
  graph_schema_dir: str
  split_names: tuple[str, ...]
  num_examples: Mapping[str, int]
  tables_dir: Optional[str] = None
  seeds: Optional[Mapping[str, str]] = None
  sampling_config: Optional[Mapping[str, Any]] = None

  def files(self, split: str) -> list[str]:
    """The TFRecord files of one split."""
    files = sorted(glob.glob(os.path.join(self.examples_uri, f"Split-{split}", "*.gz")))
    if not files:
      raise FileNotFoundError(f"No examples for split {split!r} under {self.examples_uri}.")
    return files


@dataclasses.dataclass(frozen=True)
class Workload:
  """One benchmarked training job.

  Attributes:
    description: One line for the report.
    prepare: Work dir -> :class:`PreparedData`; writes the data on first use
      and reuses it afterwards (a ``DONE`` marker).
    module_file: The GnnTrainer user module.
    custom_config: GnnTrainer custom_config without ``seed``; must hold
      ``global_batch_size``, ``epochs`` and the module's ``hparams``.
    serving_accuracy: (SavedModel dir, examples uri, split) -> accuracy of an
      exported GnnTrainer model.
    variants: The variants run on it, in this order.
    train_split, eval_split, test_split: Split names.
    small_train_split: ``train_split`` with 10x fewer roots (for
      ``gnntrainer_stream_small``).
  """
  description: str
  prepare: Callable[[str], PreparedData]
  module_file: str
  custom_config: Mapping[str, Any]
  serving_accuracy: Callable[[str, str, str], float]
  variants: tuple[str, ...] = ("bare", "gnntrainer_default", "gnntrainer_fast",
                               "gnntrainer_xla", "floor")
  train_split: str = "train"
  eval_split: str = "eval"
  test_split: str = "test"
  small_train_split: Optional[str] = None


def _write_json(path: str, obj: Any) -> None:
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    json.dump(obj, f, indent=2)
    f.write("\n")


def _count_records(files: Sequence[str]) -> int:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return sum(1 for _ in tf.data.TFRecordDataset(list(files), compression_type="GZIP"))


def _prepared_once(out_dir: str, write: Callable[[str], PreparedData]) -> PreparedData:
  """``write(out_dir)`` unless ``<out_dir>/DONE`` exists; the split sizes are counted once.

  ``write`` returns the PreparedData, with ``num_examples`` when it knows
  them (else they are counted here); the result is kept in
  ``<out_dir>/prepared.json``.
  """
  marker = os.path.join(out_dir, "DONE")
  info_file = os.path.join(out_dir, "prepared.json")
  if not os.path.exists(marker):
    prepared = write(out_dir)
    counts = dict(prepared.num_examples) or {
        s: _count_records(prepared.files(s)) for s in prepared.split_names}
    _write_json(info_file, dataclasses.asdict(
        dataclasses.replace(prepared, num_examples=counts)))
    open(marker, "w").close()
  with open(info_file) as f:
    info = json.load(f)
  return PreparedData(**{**info, "split_names": tuple(info["split_names"])})


def _keep_first_seeds(tables: Mapping[str, Any], splits: Sequence[str], count: int) -> None:
  """Rewrites the seed tables of ``splits`` with their first ``count`` ids (header kept)."""
  for split in splits:
    path = os.path.join(tables["dir"], tables["seeds"][split])
    with open(path) as f:
      lines = f.read().splitlines()
    with open(path, "w") as f:
      f.write("\n".join(lines[:1 + count]) + "\n")


def prepare_planetoid(work_dir: str, dataset: str = "cora",
                      max_seeds: Optional[int] = None) -> PreparedData:
  """Samples a Planetoid dataset as ``pipelines/planetoid`` does, without the trainer.

  The tables come from :func:`pipelines.planetoid.run_local.prepare_tables`;
  the real GraphSampler executor (DirectRunner) samples them with the
  pipeline's sampling config (fan-outs ``DEFAULT_FAN_OUTS``, GraphSampler's
  default ``num_shards``) on hand-built artifacts. Reused when
  ``<work_dir>/<dataset>/DONE`` exists.

  Args:
    work_dir: Cache folder.
    dataset: Planetoid dataset name.
    max_seeds: Keep only the first this many validation and test seeds (cached in a
      folder of its own); None: all.

  Returns:
    The sampler output.
  """

  def write(out_dir: str) -> PreparedData:
    # pylint: disable=g-import-not-at-top
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts
    from gnn_trainer_component import GraphSchema
    from gnn_trainer_component import spec
    from gnn_trainer_component.sampler.graph import executor as sampler_executor
    from pipelines.planetoid import default_data_dir
    from pipelines.planetoid import pipeline as planetoid_pipeline
    from pipelines.planetoid import run_local
    # pylint: enable=g-import-not-at-top
    tables = run_local.prepare_tables(dataset, default_data_dir(), out_dir)
    if max_seeds is not None:
      _keep_first_seeds(tables, [s for s in tables["seeds"] if s != "train"], max_seeds)
    sampled_dir = os.path.join(out_dir, "sampled")
    shutil.rmtree(sampled_dir, ignore_errors=True)  # a half-written earlier attempt
    tables_artifact = GraphSchema()
    tables_artifact.uri = tables["dir"]
    examples = standard_artifacts.Examples()
    examples.uri = os.path.join(sampled_dir, "examples")
    output_schema = GraphSchema()
    output_schema.uri = os.path.join(sampled_dir, "graph_schema")
    os.makedirs(examples.uri)
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=[], tmp_dir=os.path.join(sampled_dir, "tmp"), unique_id="1")
    sampler_executor.Executor(context).Do(
        {spec.GRAPH_SCHEMA_KEY: [tables_artifact]},
        {spec.EXAMPLES_KEY: [examples], spec.OUTPUT_GRAPH_SCHEMA_KEY: [output_schema]},
        {spec.SEEDS_KEY: json.dumps(tables["seeds"]), spec.NUM_SHARDS_KEY: 1,
         spec.SAMPLING_CONFIG_KEY: json.dumps(
             planetoid_pipeline.sampling_config(planetoid_pipeline.DEFAULT_FAN_OUTS))})
    return PreparedData(examples_uri=examples.uri, graph_schema_dir=output_schema.uri,
                        split_names=tuple(sorted(tables["seeds"])), num_examples={})

  from pipelines.planetoid import default_data_dir  # pylint: disable=g-import-not-at-top
  from pipelines.planetoid import pipeline as planetoid_pipeline  # pylint: disable=g-import-not-at-top
  from pipelines.planetoid import run_local  # pylint: disable=g-import-not-at-top
  out_dir = os.path.join(os.path.abspath(work_dir),
                         dataset if max_seeds is None else f"{dataset}-seeds{max_seeds}")
  prepared = _prepared_once(out_dir, write)
  tables = run_local.prepare_tables(dataset, default_data_dir(), out_dir)  # written once
  return dataclasses.replace(
      prepared, tables_dir=tables["dir"], seeds=tables["seeds"],
      sampling_config=planetoid_pipeline.sampling_config(planetoid_pipeline.DEFAULT_FAN_OUTS))


def planetoid_serving_accuracy(saved_model_dir: str, examples_uri: str, split: str) -> float:
  """Root-node accuracy of a GnnTrainer export (``evaluate_saved_model``)."""
  from pipelines.planetoid import pipeline as planetoid_pipeline  # pylint: disable=g-import-not-at-top
  return planetoid_pipeline.evaluate_saved_model(saved_model_dir, examples_uri, split)["accuracy"]


#: ``--w1-seeds``: W1's validation and test seeds kept (None: all).
_W1_SEEDS: list[Optional[int]] = [None]


def w1_prepare(work_dir: str) -> PreparedData:
  """W1's data: Cora, 140 / 500 / 1000 train / eval / test subgraphs (``--w1-seeds``: fewer)."""
  keep = _W1_SEEDS[0]
  prepared = prepare_planetoid(work_dir, "cora", keep)
  expected = {split: size if keep is None else min(size, keep)
              for split, size in (("eval", 500), ("test", 1000))}
  expected = {"train": 140, **expected}
  if dict(prepared.num_examples) != expected:
    raise RuntimeError(f"W1: expected {expected} examples per split, the sampler wrote "
                       f"{dict(prepared.num_examples)} under {prepared.examples_uri}.")
  return prepared


#: W2's graph: 200k nodes, 2M edges, 128-dim features, fan-outs 10,5; 50k
#: training roots and a 10x smaller training split for the memory check.
W2_GRAPH = large_graph.GraphConfig(splits={"train": 50_000, "eval": 5_000, "test": 5_000,
                                           "train_5k": 5_000})
#: ``--w2-scale``: W2's graph size and split sizes, relative to :data:`W2_GRAPH`.
_W2_SCALE = [1.0]


def w2_graph(scale: float = 1.0) -> large_graph.GraphConfig:
  """:data:`W2_GRAPH` with ``scale`` times its nodes and roots (at least 100 nodes, 1 root)."""
  if scale == 1:
    return W2_GRAPH
  if not 0 < scale <= 1:
    raise ValueError(f"The W2 scale must be in (0, 1], got {scale}.")
  return dataclasses.replace(
      W2_GRAPH, num_nodes=max(100, round(W2_GRAPH.num_nodes * scale)),
      splits={s: max(1, round(n * scale)) for s, n in W2_GRAPH.splits.items()})


def w2_prepare(work_dir: str) -> PreparedData:
  """W2's data (:mod:`benchmarks.large_graph`), written once into ``<work_dir>/w2``.

  The examples, and the same graph as tables (``<work_dir>/w2/tables``,
  written once on its own: a work dir whose examples predate the tables gets
  them added) for ``gnntrainer_in_memory``. At a ``--w2-scale`` other than 1:
  ``<work_dir>/w2-x<scale>``.
  """
  scale = _W2_SCALE[0]
  graph = w2_graph(scale)

  def write(out_dir: str) -> PreparedData:
    written = large_graph.write(out_dir, graph)
    return PreparedData(examples_uri=os.path.join(out_dir, "examples"),
                        graph_schema_dir=os.path.join(out_dir, "graph_schema"),
                        split_names=tuple(graph.splits),
                        num_examples=written["num_examples"])

  out_dir = os.path.join(os.path.abspath(work_dir), "w2" if scale == 1 else f"w2-x{scale:g}")
  prepared = _prepared_once(out_dir, write)
  tables = large_graph.write_tables_once(out_dir, graph)
  return dataclasses.replace(prepared, tables_dir=tables["dir"], seeds=tables["seeds"],
                             sampling_config=tables["sampling_config"])


WORKLOADS: Mapping[str, Workload] = {
    "W1": Workload(
        description="Planetoid Cora GCN, full batch (140 roots, 1 step/epoch), "
                    "validation on 500 subgraphs every epoch, best val-loss weights",
        prepare=w1_prepare,
        module_file=os.path.join(REPO_ROOT, "module_files", "planetoid_gcn.py"),
        custom_config=W1_CONFIG,
        serving_accuracy=planetoid_serving_accuracy),
    "W1-full": Workload(
        description="Planetoid Cora GCN on the whole graph in memory (140 seeds read out "
                    "per step, 1 step/epoch), validation on the 500 seeds every epoch, best "
                    "val-loss weights; against the same GCN in PyTorch Geometric",
        prepare=w1_prepare,
        module_file=os.path.join(REPO_ROOT, "module_files", "planetoid_gcn.py"),
        custom_config=W1_CONFIG,
        serving_accuracy=planetoid_serving_accuracy,
        variants=("gnntrainer_fast", "gnntrainer_full_graph", "pyg")),
    "W2": Workload(
        description=(
            f"generated graph, {W2_GRAPH.num_nodes:,} nodes, {W2_GRAPH.num_edges:,} edges, "
            f"{W2_GRAPH.feature_dim}-dim features, fan-outs "
            f"{','.join(map(str, W2_GRAPH.fan_outs))}; GCN (128 units), one epoch of "
            f"{W2_GRAPH.splits['train']:,} roots in batches of 128, validation on "
            f"{W2_GRAPH.splits['eval']:,}"),
        prepare=w2_prepare,
        module_file=os.path.join(REPO_ROOT, "module_files", "planetoid_gcn.py"),
        custom_config=W2_CONFIG,
        serving_accuracy=planetoid_serving_accuracy,
        variants=("bare", "gnntrainer_default", "gnntrainer_fast", "gnntrainer_stream",
                  "gnntrainer_stream_small", "gnntrainer_in_memory", "floor"),
        small_train_split="train_5k"),
}


def trainer_config(workload: Workload, variant: str, *, seed: int, epochs: Optional[int],
                   overrides: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
  """The GnnTrainer custom_config of a run (also read by bare and floor).

  The workload's config, with ``seed``, ``epochs`` (if given), the variant's
  config and ``overrides`` (``--config-json``) on top.
  """
  config = dict(workload.custom_config)
  config["seed"] = seed
  if epochs is not None:
    config["epochs"] = epochs
  for extra in (VARIANTS[variant].config, overrides or {}):
    hparams = {**config.get("hparams", {}), **extra.get("hparams", {})}
    config.update(extra)
    if hparams:  # module hparams are merged, key by key
      config["hparams"] = hparams
  return config


# --------------------------------------------------------------------------- measurements


def _rss_mb() -> float:
  """This process's peak RSS, MB (:func:`report.peak_rss_bytes`)."""
  return round(report.peak_rss_bytes() / 2**20, 1)


def _process_age_s() -> Optional[float]:
  """Seconds since this process started (the kernel's start time, 10 ms steps), or None."""
  try:
    with open("/proc/self/stat") as f:
      start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
  except (OSError, ValueError, IndexError, AttributeError):
    return None


#: ``python -c`` program running the script ``argv[1]`` with ``argv[2:]``, then
#: printing the process's own peak RSS (as :func:`_rss_mb`) as its last stderr line.
_PEAK_RSS_WRAPPER = """
import json, os, runpy, sys
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))  # benchmarks/: report.py
import report
try:
  runpy.run_path(sys.argv[0], run_name="__main__")
finally:
  print("\\n" + json.dumps({"peak_rss_mb": round(report.peak_rss_bytes() / 2**20, 1)}),
        file=sys.stderr, flush=True)
"""


def timing_summary(train_start: float, train_end: float, first_step_end: float,
                   epoch_ends: Sequence[float], *, batch_size: int,
                   steps_per_epoch: int) -> dict[str, Optional[float]]:
  """train_s, first_step_s, ms_per_step and examples_per_s from wall-clock times.

  Args:
    train_start: When training started (s).
    train_end: When it ended (s).
    first_step_end: When the first training step ended (s).
    epoch_ends: When each epoch ended (s), in order.
    batch_size: Examples per step.
    steps_per_epoch: Training steps per epoch.

  Returns:
    The four timings. ``ms_per_step`` (steady state, validation and epoch-end
    work included): with several epochs, the median epoch interval after
    :data:`WARMUP_EPOCHS` epochs (fewer when the run is shorter, but never the
    first epoch) divided by the steps per epoch; with one epoch, the time from
    the end of the first step to the end of the epoch divided by the remaining
    steps. None when neither exists.
  """
  intervals = [b - a for a, b in zip(epoch_ends, epoch_ends[1:])]
  if intervals:
    steady = intervals[min(WARMUP_EPOCHS - 1, len(intervals) - 1):]
    ms_per_step = 1000 * statistics.median(steady) / steps_per_epoch
  elif epoch_ends and steps_per_epoch > 1:
    ms_per_step = 1000 * (epoch_ends[0] - first_step_end) / (steps_per_epoch - 1)
  else:
    ms_per_step = None
  return {
      "train_s": round(train_end - train_start, 3),
      "first_step_s": round(first_step_end - train_start, 3),
      "ms_per_step": round(ms_per_step, 3) if ms_per_step else None,
      "examples_per_s": round(batch_size / (ms_per_step / 1000), 1) if ms_per_step else None,
  }


def _steps_per_epoch(prepared: PreparedData, workload: Workload, batch_size: int) -> int:
  return math.ceil(prepared.num_examples[workload.train_split] / batch_size)


class _PhaseTimes(logging.Handler):
  """Timestamps GnnTrainer's phase and per-epoch log lines (absl -> python logging)."""

  _EPOCH = re.compile(r"^GnnTrainer epoch (\d+)/")

  def __init__(self, phase_format: str):
    super().__init__(level=logging.INFO)
    self._phase_format = phase_format
    self.phases: dict[str, float] = {}
    self.epoch_ends: list[float] = []
    self.first_step_end: Optional[float] = None

  def emit(self, record: logging.LogRecord) -> None:
    if record.msg == self._phase_format and record.args:
      self.phases.setdefault(str(record.args[0]), record.created)
      return
    if isinstance(record.msg, str) and record.msg.startswith("GnnTrainer first step done"):
      self.first_step_end = record.created
      return
    if isinstance(record.msg, str) and record.msg.startswith("GnnTrainer epoch"):
      match = self._EPOCH.match(record.getMessage())
      if match:
        # A recovered / resumed epoch replaces the earlier end time.
        del self.epoch_ends[int(match.group(1)) - 1:]
        self.epoch_ends.append(record.created)


def run_gnntrainer(workload: Workload, prepared: PreparedData, config: Mapping[str, Any],
                   run_dir: str, *, graph: bool = False) -> dict[str, Any]:
  """Runs the real GnnTrainer executor in a process of its own, then serves its model.

  The executor runs as ``tests/helpers.py:run_executor`` does, in a child
  (``--run-executor``, :func:`execute_gnntrainer`) that does nothing else, so
  that ``process_s`` is its whole wall time (interpreter start to exit), as
  the ``pyg`` variant's; this process then measures the published model's
  accuracy.

  Args:
    workload: The workload.
    prepared: Its data.
    config: The custom_config.
    run_dir: Empty folder for the Model and ModelRun artifacts.
    graph: Train on the graph in memory (the sampler's tables, seeds and
      sampling config) instead of the sampled examples.

  Returns:
    The run's measurements.
  """
  batch_size = int(config["global_batch_size"])
  job = {"module_file": workload.module_file, "train_split": workload.train_split,
         "eval_split": workload.eval_split, "prepared": dataclasses.asdict(prepared),
         "config": dict(config), "run_dir": run_dir, "graph": graph,
         "steps_per_epoch": _steps_per_epoch(prepared, workload, batch_size)}
  job_file = os.path.join(run_dir, "job.json")
  _write_json(job_file, job)
  began = time.time()
  proc = subprocess.run([sys.executable, "-m", "benchmarks.speed", "--run-executor", job_file],
                        cwd=REPO_ROOT, env=_child_env(), stdout=subprocess.PIPE, text=True,
                        timeout=CHILD_TIMEOUT_S, check=False)
  process_s = time.time() - began
  lines = proc.stdout.strip().splitlines()
  if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
    raise RuntimeError(f"--run-executor {job_file} exited {proc.returncode} (its log is "
                       f"this process's stderr); stdout:\n{proc.stdout[-4000:]}")
  result = json.loads(lines[-1])
  result["process_s"] = round(process_s, 3)
  if result.get("startup_s") is not None:  # the rest: its output and exit
    result["after_executor_s"] = round(process_s - result["startup_s"] - result["executor_s"], 3)

  # pylint: disable=g-import-not-at-top
  from tfx.utils import path_utils
  # pylint: enable=g-import-not-at-top
  serving_dir = path_utils.serving_model_dir(result.pop("model_uri"))  # <uri>/Format-Serving
  result["val_accuracy"] = workload.serving_accuracy(
      serving_dir, prepared.examples_uri, workload.eval_split)
  result["test_accuracy"] = workload.serving_accuracy(
      serving_dir, prepared.examples_uri, workload.test_split)
  return result


def execute_gnntrainer(job: Mapping[str, Any]) -> dict[str, Any]:
  """``Executor.Do`` on hand-built artifacts and its timings (the ``--run-executor`` child).

  Args:
    job: What :func:`run_gnntrainer` wrote: ``module_file``, ``train_split``,
      ``eval_split``, ``prepared`` (a :class:`PreparedData` as a dict),
      ``config`` (the custom_config), ``run_dir``, ``graph`` and
      ``steps_per_epoch``.

  Returns:
    The timings, ``phases_s``, ``losses`` / ``val_losses``, ``model_uri`` and
    ``peak_rss_after_train_mb`` (this process's peak at the end of ``Do``).
  """
  # pylint: disable=g-import-not-at-top
  from absl import logging as absl_logging
  from tfx.types import artifact_utils
  from tfx.types import standard_artifacts
  from gnn_trainer_component import GraphSchema
  from gnn_trainer_component import spec
  from gnn_trainer_component import outputs
  from gnn_trainer_component.trainer import publish
  from gnn_trainer_component.trainer.executor import Executor
  # pylint: enable=g-import-not-at-top

  info = job["prepared"]
  prepared = PreparedData(**{**info, "split_names": tuple(info["split_names"])})
  config, run_dir, graph = job["config"], job["run_dir"], job["graph"]
  examples = standard_artifacts.Examples()
  examples.uri = prepared.examples_uri
  examples.split_names = artifact_utils.encode_split_names(list(prepared.split_names))
  schema = GraphSchema()
  schema.uri = prepared.tables_dir if graph else prepared.graph_schema_dir
  model = standard_artifacts.Model()
  model.uri = os.path.join(run_dir, "model")
  model_run = standard_artifacts.ModelRun()
  model_run.uri = os.path.join(run_dir, "model_run")
  exec_properties = {
      spec.MODULE_FILE_KEY: job["module_file"],
      spec.TRAIN_ARGS_KEY: json.dumps({"splits": [job["train_split"]]}),
      spec.EVAL_ARGS_KEY: json.dumps({"splits": [job["eval_split"]]}),
      spec.CUSTOM_CONFIG_KEY: json.dumps(dict(config)),
  }
  inputs = {spec.EXAMPLES_KEY: [examples], spec.GRAPH_SCHEMA_KEY: [schema]}
  if graph:
    del inputs[spec.EXAMPLES_KEY]
    exec_properties[spec.SEEDS_KEY] = json.dumps(dict(prepared.seeds))
    exec_properties[spec.SAMPLING_CONFIG_KEY] = json.dumps(dict(prepared.sampling_config))

  absl_logging.set_verbosity(absl_logging.INFO)
  times = _PhaseTimes(outputs.PHASE_LOG)
  logging.getLogger().addHandler(times)
  startup_s = _process_age_s()  # interpreter start, imports, artifacts
  try:
    start = time.time()
    Executor().Do(inputs, {spec.MODEL_KEY: [model], spec.MODEL_RUN_KEY: [model_run]},
                  exec_properties)
    do_s = time.time() - start
  finally:
    logging.getLogger().removeHandler(times)
  missing = {"train", "export"} - set(times.phases)
  if missing or times.first_step_end is None:
    raise RuntimeError(f"GnnTrainer did not log the phases {sorted(missing)} "
                       f"(format {outputs.PHASE_LOG!r}) or its first step; "
                       f"got {sorted(times.phases)}.")
  with open(os.path.join(model_run.uri, publish.HISTORY_FILE)) as f:
    history = json.load(f)

  result = timing_summary(times.phases["train"], times.phases["export"],
                          times.first_step_end, times.epoch_ends,
                          batch_size=int(config["global_batch_size"]),
                          steps_per_epoch=job["steps_per_epoch"])
  result["executor_s"] = round(do_s, 3)
  result["startup_s"] = None if startup_s is None else round(startup_s, 3)
  result["fixed_overhead_s"] = round(do_s - result["train_s"], 3)
  # After the last epoch, before export: best-weights restore and the final backup.
  result["after_last_epoch_s"] = round(times.phases["export"] - times.epoch_ends[-1], 3)
  # Where the fixed overhead goes: each phase's duration (to the next phase or the end).
  marks = sorted(times.phases.items(), key=lambda kv: kv[1]) + [("end", start + do_s)]
  result["phases_s"] = {name: round(b - a, 3) for (name, a), (_, b) in zip(marks, marks[1:])}
  result["phases_s"]["before_validate"] = round(marks[0][1] - start, 3)
  result["peak_rss_after_train_mb"] = _rss_mb()
  result["model_uri"] = model.uri
  result["losses"] = [logs.get("loss") for logs in history]
  result["val_losses"] = [logs.get("val_loss") for logs in history]
  return result


def _user_module_and_spec(workload: Workload, prepared: PreparedData,
                          config: Mapping[str, Any]):
  """The validated user module (hparams from the config) and the GraphTensorSpec."""
  # pylint: disable=g-import-not-at-top
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component import graph_schema
  from gnn_trainer_component.trainer import module_contract
  # pylint: enable=g-import-not-at-top
  user_module = module_contract.load_user_module(workload.module_file, None,
                                                 config.get("hparams"))
  gtspec = tfgnn.create_graph_spec_from_schema_pb(
      graph_schema.read_artifact_schema(prepared.graph_schema_dir))
  return user_module, gtspec


def _read_records(files: Sequence[str]) -> list[bytes]:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return [r.numpy() for r in tf.data.TFRecordDataset(list(files), compression_type="GZIP")]


def _accuracy(predict: Callable[[Any], Any], batches) -> float:
  """Share of argmax(predict(x)) == y over ``(x, y)`` batches (a classification task's
  logits and integer labels)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  correct = total = 0
  for x, y in batches:
    logits = predict(x)
    correct += int((np.argmax(np.asarray(logits), axis=-1) == np.asarray(y)).sum())
    total += int(np.asarray(y).shape[0])
  return correct / total


def _epoch_recorder():
  """A Keras callback recording when the first step and each epoch ended, and the
  epochs' loss and val_loss."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  class EpochRecorder(tf.keras.callbacks.Callback):

    def __init__(self):
      super().__init__()
      self.first_step_end: Optional[float] = None
      self.epoch_ends: list[float] = []
      self.losses: list[float] = []
      self.val_losses: list[Optional[float]] = []

    def on_train_batch_end(self, batch, logs=None):
      if self.first_step_end is None:
        self.first_step_end = time.time()

    def on_epoch_end(self, epoch, logs=None):
      self.epoch_ends.append(time.time())
      logs = logs or {}
      self.losses.append(float(logs["loss"]))
      self.val_losses.append(float(logs["val_loss"]) if "val_loss" in logs else None)

  return EpochRecorder()


def run_bare(workload: Workload, prepared: PreparedData, config: Mapping[str, Any],
             run_dir: str) -> dict[str, Any]:
  """Runs ``runner.run`` as a TF-GNN user script does, KerasTrainer at its defaults.

  Args:
    workload: The workload.
    prepared: Its data.
    config: The custom_config (batch size, epochs, seed, hparams are used).
    run_dir: Empty folder: KerasTrainer's model_dir.

  Returns:
    The run's measurements.
  """
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from tensorflow_gnn import runner
  # pylint: enable=g-import-not-at-top
  tf.keras.utils.set_random_seed(int(config["seed"]))
  user_module, gtspec = _user_module_and_spec(workload, prepared, config)
  batch_size, epochs = int(config["global_batch_size"]), int(config["epochs"])

  def interleave_fn(filename):
    return tf.data.TFRecordDataset(filename, compression_type="GZIP")

  train = runner.SimpleDatasetProvider(prepared.files(workload.train_split),
                                       interleave_fn=interleave_fn)
  valid = runner.SimpleDatasetProvider(prepared.files(workload.eval_split),
                                       interleave_fn=interleave_fn)
  epoch_times = _epoch_recorder()
  trainer = runner.KerasTrainer(strategy=tf.distribute.get_strategy(), model_dir=run_dir,
                                callbacks=[epoch_times])

  class TimedExporter(runner.ModelExporter):
    """runner.run's default exporter, noting when training ended (export began)."""

    def __init__(self):
      self.start: Optional[float] = None

    def save(self, run_result, export_dir):
      self.start = time.time()
      runner.KerasModelExporter().save(run_result, export_dir)

  exporter = TimedExporter()
  start = time.time()
  run_result = runner.run(
      train_ds_provider=train, valid_ds_provider=valid, model_fn=user_module.model_fn,
      optimizer_fn=user_module.optimizer_fn, trainer=trainer,
      task=user_module.runner_task, gtspec=gtspec, global_batch_size=batch_size,
      epochs=epochs, feature_processors=user_module.feature_processors_fn(gtspec),
      model_exporters=[exporter])
  result = timing_summary(start, exporter.start, epoch_times.first_step_end,
                          epoch_times.epoch_ends, batch_size=batch_size,
                          steps_per_epoch=_steps_per_epoch(prepared, workload, batch_size))
  result["peak_rss_after_train_mb"] = _rss_mb()

  def batches(split):
    records = _read_records(prepared.files(split))
    for i in range(0, len(records), EVAL_BATCH_SIZE):
      xs, labels = run_result.preprocess_model(tf.constant(records[i:i + EVAL_BATCH_SIZE]))
      yield list(xs), labels

  predict = lambda xs: run_result.trained_model(xs, training=False)
  result["val_accuracy"] = _accuracy(predict, batches(workload.eval_split))
  result["test_accuracy"] = _accuracy(predict, batches(workload.test_split))
  result["losses"] = epoch_times.losses
  result["val_losses"] = epoch_times.val_losses
  return result


def preprocessed_batch(serialized: Sequence[bytes], gtspec, feature_processors: Sequence[Any],
                       task) -> tuple[Any, Any]:
  """Serialized examples -> (model input GraphTensor, labels), as runner.run prepares a batch.

  Parse, merge the batch into one graph's components, apply the feature
  processors and ``task.preprocess``, and drop the features of auxiliary
  graph pieces (as runner.run's preprocessing model does).
  """
  # pylint: disable=g-import-not-at-top
  import functools
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  # pylint: enable=g-import-not-at-top
  graph = tfgnn.parse_example(gtspec, tf.constant(list(serialized)))
  graph = graph.merge_batch_to_components()
  graph = functools.reduce(lambda g, fn: fn(g), feature_processors, graph)
  graph, labels = task.preprocess(graph)

  def without_aux_features(inputs, *, node_set_name=None, edge_set_name=None):
    name = node_set_name if node_set_name is not None else edge_set_name
    return {} if tfgnn.get_aux_type_prefix(name) else inputs.features

  graph = graph.replace_features(
      node_sets={n: without_aux_features(s, node_set_name=n) for n, s in graph.node_sets.items()},
      edge_sets={n: without_aux_features(s, edge_set_name=n) for n, s in graph.edge_sets.items()})
  return graph, labels


def run_floor(workload: Workload, prepared: PreparedData, config: Mapping[str, Any],
              run_dir: str) -> dict[str, Any]:
  """The same model and optimizer in a bare tf.function loop on pre-built batches.

  The training and validation splits are parsed, batched (``global_batch_size``,
  file order, the last batch partial), merged and preprocessed before the clock
  starts; each epoch runs one ``tf.function`` train step per training batch (the
  same batches in the same order every epoch), then the validation forward
  pass; the best-val-loss weights are kept in memory and restored if the
  config asks for it.

  Args:
    workload: The workload (a single-task module).
    prepared: Its data.
    config: The custom_config (batch size, epochs, seed, hparams are used).
    run_dir: Unused (nothing is written).

  Returns:
    The run's measurements.
  """
  del run_dir
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  # pylint: enable=g-import-not-at-top
  tf.keras.utils.set_random_seed(int(config["seed"]))
  user_module, gtspec = _user_module_and_spec(workload, prepared, config)
  if not user_module.single_task:
    raise NotImplementedError("The floor variant supports single-task modules only.")
  task = user_module.runner_task
  processors = user_module.feature_processors_fn(gtspec)
  batch_size, epochs = int(config["global_batch_size"]), int(config["epochs"])

  def batches(split):
    records = _read_records(prepared.files(split))
    return [preprocessed_batch(records[i:i + batch_size], gtspec, processors, task)
            for i in range(0, len(records), batch_size)]

  train_batches = batches(workload.train_split)
  val_batches = batches(workload.eval_split)

  start = time.time()
  # As runner.run's adapted_model_fn: the module's GNN, then task.predict.
  input_spec = train_batches[0][0].spec.relax(num_components=True, num_nodes=True,
                                              num_edges=True)
  label_spec = tf.TensorSpec([None], train_batches[0][1].dtype)
  inputs = tf.keras.Input(type_spec=input_spec)
  gnn = tf.keras.Sequential((user_module.model_fn(input_spec),), name="base_model")
  model = tf.keras.Model(inputs, task.predict(gnn(inputs)))
  losses = tf.nest.flatten(task.losses())
  if len(losses) != 1:
    raise NotImplementedError(f"The floor variant needs one loss, the task has {losses}.")
  loss_fn = losses[0]
  optimizer = user_module.optimizer_fn()
  optimizer.build(model.trainable_variables)

  def total_loss(y, logits):
    # As Keras' compiled loss: the task loss plus the layers' regularization losses.
    loss = loss_fn(y, logits)
    return loss + tf.add_n(model.losses) if model.losses else loss

  # One trace for all batch shapes, as Keras' train_function.
  @tf.function(input_signature=(input_spec, label_spec))
  def train_step(x, y):
    with tf.GradientTape() as tape:
      loss = total_loss(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  @tf.function(input_signature=(input_spec, label_spec))
  def validate(x, y):
    logits = model(x, training=False)
    hits = tf.cast(tf.argmax(logits, axis=-1) == tf.cast(y, tf.int64), tf.float32)
    return loss_fn(y, logits) * tf.cast(tf.size(y), tf.float32), tf.reduce_sum(hits)

  num_val = sum(int(y.shape[0]) for _, y in val_batches)

  def validation() -> tuple[float, float]:
    """Mean val loss (with the regularization losses, as Keras reports it) and accuracy."""
    loss_sum = hits = 0.0
    for x, y in val_batches:
      batch_loss, batch_hits = validate(x, y)
      loss_sum, hits = loss_sum + float(batch_loss), hits + float(batch_hits)
    regularization = float(tf.add_n(model.losses)) if model.losses else 0.0
    return loss_sum / num_val + regularization, hits / num_val

  first_step_end = None
  epoch_ends, train_losses, val_losses = [], [], []
  best_loss, best_weights = math.inf, None
  for _ in range(epochs):
    loss_sum = 0.0
    for x, y in train_batches:
      loss = train_step(x, y)
      if first_step_end is None:
        loss_sum += float(loss)
        first_step_end = time.time()
      else:
        loss_sum += loss  # no host sync per step (as Keras does between log updates)
    train_losses.append(float(loss_sum) / len(train_batches))
    val_loss = validation()[0]
    val_losses.append(val_loss)
    if val_loss < best_loss:  # ModelCheckpoint(save_best_only, monitor="val_loss")
      best_loss, best_weights = val_loss, model.get_weights()
    epoch_ends.append(time.time())
  if config.get("restore_best_weights"):
    model.set_weights(best_weights)
  result = timing_summary(start, time.time(), first_step_end, epoch_ends,
                          batch_size=batch_size, steps_per_epoch=len(train_batches))
  result["peak_rss_after_train_mb"] = _rss_mb()
  result["val_accuracy"] = validation()[1]

  def test_batches():
    records = _read_records(prepared.files(workload.test_split))
    for i in range(0, len(records), EVAL_BATCH_SIZE):
      yield preprocessed_batch(records[i:i + EVAL_BATCH_SIZE], gtspec, processors, task)

  result["test_accuracy"] = _accuracy(lambda x: model(x, training=False), test_batches())
  result["losses"] = train_losses
  result["val_losses"] = val_losses
  return result


#: Variant.runner -> the function running it.
def pyg_venv(work_dir: str, python: str) -> str:
  """The ``pyg`` variant's interpreter: ``<work_dir>/pyg-venv``, created on first use."""
  venv = os.path.join(os.path.abspath(work_dir), "pyg-venv")
  interpreter = os.path.join(venv, "bin", "python")
  marker = os.path.join(venv, "DONE")
  if not os.path.exists(marker):
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", venv], check=True)
    subprocess.run([interpreter, "-m", "pip", "install", "-q", *PYG_REQUIREMENTS], check=True)
    open(marker, "w").close()
  return interpreter


#: ``--pyg-python``: the interpreter the ``pyg`` venv is made with.
_PYG_PYTHON = ["python3.11"]


def run_pyg(workload: Workload, prepared: PreparedData, config: Mapping[str, Any],
            run_dir: str) -> dict[str, Any]:
  """The same GCN in PyTorch Geometric (``benchmarks/pyg_gcn.py``), in its own venv."""
  del prepared  # PyG reads the Planetoid files itself
  from pipelines.planetoid import default_data_dir  # pylint: disable=g-import-not-at-top
  if workload.module_file != os.path.join(REPO_ROOT, "module_files", "planetoid_gcn.py"):
    raise ValueError("The pyg variant is the Planetoid GCN only.")
  interpreter = pyg_venv(os.path.dirname(os.path.dirname(run_dir)), _PYG_PYTHON[0])
  began = time.time()
  proc = subprocess.run(
      [interpreter, "-c", _PEAK_RSS_WRAPPER, os.path.join(REPO_ROOT, "benchmarks", "pyg_gcn.py"),
       "--data-dir", default_data_dir(), "--work-dir", run_dir,
       "--seed", str(config["seed"]), "--epochs", str(config["epochs"])],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
  process_s = time.time() - began
  if proc.returncode != 0:
    raise RuntimeError(f"pyg_gcn.py exited {proc.returncode}:\n{proc.stderr[-4000:]}")
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  # The script's own clock (its first line to its print) beside the whole process.
  result["script_s"] = result.pop("process_s")
  result["process_s"] = round(process_s, 3)
  # The script's ru_maxrss starts at this process's peak (see _rss_mb): its own instead.
  result["script_peak_rss_mb"] = result.pop("peak_rss_mb")
  result["peak_rss_mb"] = json.loads(proc.stderr.strip().splitlines()[-1])["peak_rss_mb"]
  result["peak_rss_pyg_mb"] = result["peak_rss_mb"]
  result["losses"] = [None] * result["epochs"]
  result["examples_per_s"] = round(140 / (result["ms_per_step"] / 1000), 1)
  return result


RUNNERS: Mapping[str, Callable[..., dict[str, Any]]] = {
    "bare": run_bare, "gnntrainer": run_gnntrainer, "floor": run_floor, "pyg": run_pyg,
    "gnntrainer_graph": functools.partial(run_gnntrainer, graph=True)}


def run_one(workload_name: str, variant: str, *, seed: int, epochs: Optional[int],
            work_dir: str, overrides: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
  """One run of one variant in this process (the ``--run-one`` child).

  Returns:
    The measurements, the config and ``peak_rss_mb``.
  """
  workload = WORKLOADS[workload_name]
  if VARIANTS[variant].small:
    if not workload.small_train_split:
      raise ValueError(f"{variant} needs a workload with a small_train_split; "
                       f"{workload_name} has none.")
    workload = dataclasses.replace(workload, train_split=workload.small_train_split)
  prepared = workload.prepare(work_dir)
  config = trainer_config(workload, variant, seed=seed, epochs=epochs, overrides=overrides)
  runs_dir = os.path.join(os.path.abspath(work_dir), "runs")
  os.makedirs(runs_dir, exist_ok=True)
  run_dir = tempfile.mkdtemp(prefix=f"{workload_name}-{variant}-", dir=runs_dir)
  try:
    result = RUNNERS[VARIANTS[variant].runner](workload, prepared, config, run_dir)
  finally:
    shutil.rmtree(run_dir, ignore_errors=True)
  result.update(workload=workload_name, variant=variant, seed=seed, config=config,
                train_split=workload.train_split,
                epochs=len(result["losses"]),
                # pyg: its process's; GnnTrainer: the executor's or the evaluation's.
                peak_rss_mb=result.get("peak_rss_mb") or max(
                    _rss_mb(), result.get("peak_rss_after_train_mb") or 0))
  return result


# --------------------------------------------------------------------------- parent


def _child_command(args: argparse.Namespace, *extra: str) -> list[str]:
  cmd = [sys.executable, "-m", "benchmarks.speed", "--work-dir", args.work_dir,
         "--pyg-python", args.pyg_python, "--w2-scale", repr(args.w2_scale), *extra]
  if args.w1_seeds is not None:
    cmd += ["--w1-seeds", str(args.w1_seeds)]
  if args.epochs is not None:
    cmd += ["--epochs", str(args.epochs)]
  return cmd


def _child_env() -> dict[str, str]:
  """The environment of the child processes (run from :data:`REPO_ROOT`)."""
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1",
              PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT,
                                                       os.environ.get("PYTHONPATH")])))


def _run_child(cmd: Sequence[str], log_path: str) -> dict[str, Any]:
  """Runs a child, keeps its stderr in ``log_path`` and returns its last stdout line as JSON."""
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  with open(log_path, "w") as log:
    proc = subprocess.run(list(cmd), cwd=REPO_ROOT, env=_child_env(), stdout=subprocess.PIPE,
                          stderr=log, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    log.write("\n==== stdout ====\n" + proc.stdout)
  lines = proc.stdout.strip().splitlines()
  if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
    with open(log_path) as log:
      tail = log.read()[-4000:]
    raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}; log {log_path}:\n{tail}")
  return json.loads(lines[-1])


def _median(values: Sequence[Any]) -> Optional[float]:
  values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
  return round(statistics.median(values), 4) if values else None


def _machine(load_start: Sequence[float]) -> dict[str, Any]:
  from importlib import metadata  # pylint: disable=g-import-not-at-top

  def version(package):
    try:
      return metadata.version(package)
    except metadata.PackageNotFoundError:
      return None

  return {"cpu_count": os.cpu_count(), "platform": platform.platform(),
          "python": platform.python_version(),
          "load_average_start": [round(x, 2) for x in load_start],
          "load_average_end": [round(x, 2) for x in os.getloadavg()],
          "tensorflow": version("tensorflow"), "tensorflow_gnn": version("tensorflow-gnn"),
          "tfx": version("tfx"), "tf_keras": version("tf-keras")}


#: Table columns: (header, metric, decimals).
_COLUMNS = (("train s", "train_s", 1), ("executor s", "executor_s", 1),
            ("fixed overhead s", "fixed_overhead_s", 1), ("process s", "process_s", 1),
            ("ms/step", "ms_per_step", 1), ("examples/s", "examples_per_s", 0),
            ("first step s", "first_step_s", 2), ("val acc", "val_accuracy", 3),
            ("test acc", "test_accuracy", 3), ("peak RSS MB", "peak_rss_mb", 0))
#: Ratio rows: (name, variant, baseline); accuracy and overhead columns stay empty.
_RATIOS = (("default vs bare", "gnntrainer_default", "bare"),
           ("fast vs bare", "gnntrainer_fast", "bare"),
           ("fast vs floor", "gnntrainer_fast", "floor"),
           ("xla vs bare", "gnntrainer_xla", "bare"),
           ("xla vs floor", "gnntrainer_xla", "floor"),
           ("stream vs floor", "gnntrainer_stream", "floor"),
           ("stream, 10x roots", "gnntrainer_stream", "gnntrainer_stream_small"),
           ("full graph vs pyg", "gnntrainer_full_graph", "pyg"),
           ("full graph vs examples", "gnntrainer_full_graph", "gnntrainer_fast"),
           ("in memory vs floor", "gnntrainer_in_memory", "floor"),
           ("in memory vs examples", "gnntrainer_in_memory", "gnntrainer_fast"))
_RATIO_METRICS = ("train_s", "ms_per_step", "examples_per_s", "first_step_s", "peak_rss_mb")


def ratios(medians: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Optional[float]]]:
  """``variant / baseline`` of the timing and memory medians, per ratio row."""
  out = {}
  for name, variant, baseline in _RATIOS:
    if variant in medians and baseline in medians:
      out[name] = {}
      for metric in _RATIO_METRICS:
        a, b = medians[variant].get(metric), medians[baseline].get(metric)
        out[name][metric] = round(a / b, 3) if a is not None and b else None
  return out


def markdown_table(workload: str, medians: Mapping[str, Mapping[str, Any]],
                   ratio_rows: Mapping[str, Mapping[str, Any]]) -> str:
  """The report table of one workload (medians, then ratio rows)."""
  def cell(value, decimals):
    return "–" if value is None else f"{value:.{decimals}f}"

  lines = [f"### {workload}", "",
           "| variant | " + " | ".join(h for h, _, _ in _COLUMNS) + " |",
           "|---" * (len(_COLUMNS) + 1) + "|"]
  for variant, m in medians.items():
    lines.append(f"| {variant} | " + " | ".join(cell(m.get(k), d) for _, k, d in _COLUMNS) + " |")
  for name, r in ratio_rows.items():
    lines.append(f"| *{name}* | " + " | ".join(
        (f"×{r[k]:.2f}" if r.get(k) is not None else "–") if k in _RATIO_METRICS else ""
        for _, k, _ in _COLUMNS) + " |")
  return "\n".join(lines)


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
  """Prepares the data, runs the interleaved children and assembles the report."""
  load_start = os.getloadavg()
  started = datetime.datetime.now()
  names = sorted(WORKLOADS) if args.workload == "all" else [args.workload]
  logs_dir = os.path.join(args.work_dir, "logs", started.strftime("%Y%m%d-%H%M%S"))
  report: dict[str, Any] = {
      "date": started.date().isoformat(), "started": started.isoformat(timespec="seconds"),
      "smoke": args.smoke, "repetitions": args.repetitions, "w2_scale": args.w2_scale,
      "w1_seeds": args.w1_seeds,
      "variants": {n: dataclasses.asdict(v) for n, v in VARIANTS.items()},
      "work_dir": args.work_dir, "logs_dir": logs_dir,
      "workloads": {}, "runs": {}, "ratios": {}, "descriptions": {}}
  for name in names:
    print(f"[{name}] preparing data in {args.work_dir} ...", file=sys.stderr, flush=True)
    _run_child(_child_command(args, "--prepare", "--workload", name),
               os.path.join(logs_dir, f"{name}-prepare.log"))
    variants = workload_variants(name, args.variants, only_own=args.workload == "all")
    runs = {v: [] for v in variants}
    for rep in range(args.repetitions):
      # --smoke: SMOKE_CHILDREN children at once (its figures are checked, not compared).
      with concurrent.futures.ThreadPoolExecutor(SMOKE_CHILDREN if args.smoke else 1) as pool:
        done = pool.map(functools.partial(_run_variant, args, name, logs_dir, rep), variants)
        for variant, run in zip(variants, done, strict=True):  # in order, as each ends
          runs[variant].append(run)
          wholes = "".join(f"{label} {run[key]:.1f} s, " for label, key in (
              ("executor", "executor_s"), ("process", "process_s")) if key in run)
          print(f"[{name}] round {rep + 1}/{args.repetitions} {variant}: "
                f"train {run['train_s']:.1f} s, {wholes}"
                f"{run['ms_per_step'] or float('nan'):.1f} ms/step, "
                f"test acc {run['test_accuracy']:.3f} ({run['child_wall_s']:.0f} s wall)",
                file=sys.stderr, flush=True)
    medians = {v: {m: _median([r.get(m) for r in rs]) for m in METRICS}
               for v, rs in runs.items()}
    for v, rs in runs.items():  # GnnTrainer: the median of each phase of Executor.Do
      phases = [r["phases_s"] for r in rs if r.get("phases_s")]
      if phases:
        medians[v]["phases_s"] = {p: _median([ph.get(p) for ph in phases]) for p in phases[0]}
    report["workloads"][name] = medians
    report["runs"][name] = runs
    report["ratios"][name] = ratios(medians)
    report["descriptions"][name] = WORKLOADS[name].description
  report["machine"] = _machine(load_start)
  report["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
  return report


def _run_variant(args: argparse.Namespace, workload: str, logs_dir: str, rep: int,
                 variant: str) -> dict[str, Any]:
  """One ``--run-one`` child of round ``rep`` (seed ``args.seed + rep``); its JSON line."""
  began = time.time()
  run = _run_child(
      _child_command(args, "--run-one", variant, "--workload", workload,
                     "--seed", str(args.seed + rep)),
      os.path.join(logs_dir, f"{workload}-{variant}-{rep}.log"))
  run["child_wall_s"] = round(time.time() - began, 1)
  return run


def workload_variants(workload: str, chosen: Optional[Sequence[str]],
                      only_own: bool = False) -> tuple[str, ...]:
  """The variants run on ``workload``: ``chosen`` (``--variants``, in its order) or the
  workload's own; ``only_own`` (``--workload all``): those of ``chosen`` that are its own."""
  own = WORKLOADS[workload].variants
  if not chosen:
    return own
  return tuple(v for v in chosen if v in own) if only_own else tuple(chosen)


def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workload", default="W1", choices=sorted(WORKLOADS) + ["all"])
  parser.add_argument("--repetitions", type=int, default=3, help="Interleaved rounds.")
  parser.add_argument("--epochs", type=int, default=None,
                      help="Override the workload's epochs (default: its own).")
  parser.add_argument("--seed", type=int, default=0, help="Seed of round 1 (round r: +r).")
  parser.add_argument("--work-dir", default=DEFAULT_WORK_DIR,
                      help="Data cache, child logs and temporary run folders.")
  parser.add_argument("--output", default=None,
                      help="Report JSON (default: benchmarks/results/speed-<date>.json; "
                           "with --smoke: <work dir>/speed-smoke.json).")
  parser.add_argument("--pyg-python", default=_PYG_PYTHON[0],
                      help="Python (3.11: torch 2.13.0's CPU wheel) for the pyg variant's venv.")
  parser.add_argument("--variants", default=None,
                      type=lambda text: tuple(v for v in text.split(",") if v),
                      help="Comma-separated variants to interleave, in this order (default: "
                           "the workload's own; with --workload all: each workload runs those "
                           "of them that are its own).")
  parser.add_argument("--w2-scale", type=float, default=1.0,
                      help="W2's graph and split sizes times this, in (0, 1] (smoke runs: "
                           "0.01); cached apart from the full size.")
  parser.add_argument("--w1-seeds", type=int, default=None,
                      help="W1's validation and test seeds: the first this many of each "
                           f"(smoke runs: {SMOKE_W1_SEEDS}); cached apart from all of them.")
  parser.add_argument("--smoke", action="store_true",
                      help=f"CI: W1, {SMOKE_EPOCHS} epochs, 1 repetition, the variants "
                           f"{','.join(SMOKE_VARIANTS)} (or --variants), {SMOKE_CHILDREN} "
                           f"at a time, {SMOKE_W1_SEEDS} validation and test seeds (or "
                           "--w1-seeds).")
  child = parser.add_argument_group("child processes (internal)")
  child.add_argument("--prepare", action="store_true", help="Only prepare the data.")
  child.add_argument("--run-one", choices=sorted(VARIANTS), default=None,
                     help="Run one variant once here and print its JSON line.")
  child.add_argument("--run-executor", default=None, metavar="JOB_JSON",
                     help="Run GnnTrainer's Executor.Do alone on the job file that "
                          "--run-one wrote and print its timings' JSON line.")
  child.add_argument("--config-json", type=json.loads, default=None,
                     help="With --run-one: JSON object merged into the custom_config.")
  args = parser.parse_args(argv)
  args.work_dir = os.path.abspath(args.work_dir)
  if args.smoke:
    args.workload, args.repetitions = "W1", 1
    args.epochs = args.epochs or SMOKE_EPOCHS
    args.variants = args.variants or SMOKE_VARIANTS
    args.w1_seeds = args.w1_seeds or SMOKE_W1_SEEDS
  if (args.prepare or args.run_one) and args.workload == "all":
    parser.error("--prepare / --run-one need one --workload.")
  if args.config_json is not None and (not args.run_one or not isinstance(args.config_json, dict)):
    parser.error("--config-json takes a JSON object and needs --run-one.")
  unknown = [v for v in args.variants or () if v not in VARIANTS]
  if unknown:
    parser.error(f"--variants: unknown {unknown}; known: {', '.join(sorted(VARIANTS))}.")
  if args.w1_seeds is not None and args.w1_seeds < 1:
    parser.error(f"--w1-seeds must be at least 1, got {args.w1_seeds}.")
  if not 0 < args.w2_scale <= 1:
    parser.error(f"--w2-scale must be in (0, 1], got {args.w2_scale}.")
  return args


def main(argv: Optional[Sequence[str]] = None) -> int:
  args = _parse_args(argv)
  _PYG_PYTHON[0] = args.pyg_python
  _W2_SCALE[0] = args.w2_scale
  _W1_SEEDS[0] = args.w1_seeds
  if args.prepare:
    print(json.dumps(dataclasses.asdict(WORKLOADS[args.workload].prepare(args.work_dir))))
    return 0
  if args.run_executor:
    with open(args.run_executor) as f:
      result = execute_gnntrainer(json.load(f))
    sys.stdout.flush()
    print("\n" + json.dumps(result), flush=True)
    return 0
  if args.run_one:
    result = run_one(args.workload, args.run_one, seed=args.seed, epochs=args.epochs,
                     work_dir=args.work_dir, overrides=args.config_json)
    sys.stdout.flush()
    print("\n" + json.dumps(result), flush=True)
    return 0
  report = run_benchmark(args)
  output = args.output or (
      os.path.join(args.work_dir, "speed-smoke.json") if args.smoke else
      os.path.join(RESULTS_DIR, f"speed-{report['date']}.json"))
  _write_json(output, report)
  for name, medians in report["workloads"].items():
    print(f"{markdown_table(name, medians, report['ratios'][name])}\n")
  print(f"Report: {output}\n")
  print(json.dumps(report), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
