r"""The ``dgl`` variant of ``benchmarks.in_memory``: the same sampled training in DGL.

Runs in its own venv (``benchmarks.in_memory.DGL_REQUIREMENTS``, created by
``benchmarks.in_memory`` on first use); imports nothing from the project.

  <dgl venv>/bin/python benchmarks/dgl_sage.py --graph-dir /tmp/g/graph \\
      --nodes 'nodes-*-of-00004.csv' --edges 'edges-*-of-00004.csv' \\
      --train-seeds seeds-train.csv --eval-seeds seeds-eval.csv --num-train 100000

Reads the graph's CSV tables (``id,score,label`` nodes; ``source,target``
edges; ``id`` seed tables, the first ``--num-train`` / ``--num-eval`` rows:
the seeds GnnTrainer trains on), builds a ``DGLGraph`` and trains one epoch:

* Sampling: ``dgl.dataloading.NeighborSampler``, 2 hops, ``--fan-outs`` 10
  neighbours of each seed, then 5 of each of those, uniform without
  replacement, along OUT-edges (a node receives from its out-neighbours, as
  the TF-GNN model pools toward the source). DGL 2.1's ``edge_dir="out"``
  makes blocks whose edges run seed -> neighbour, which DGL's message passing
  reads as neighbour-less seeds, so the graph is built reversed (``target ->
  source``) and sampled along its in-edges: the same edges. DGL's fan-out
  list runs from the input layer to the seeds, so hops 10 then 5 are
  ``NeighborSampler([5, 10])``. A batch's nodes are deduplicated (one node
  reached from two seeds is one node; GnnTrainer's subgraphs keep one copy
  per seed, and each copy draws its own neighbours).
* Models (``--models``): ``sage``: ``Linear(1, 32)`` + ReLU on ``score``, two
  ``SAGEConv(32, 32, "mean", activation=relu)``, ``Linear(32, 10)``;
  ``same``: TF-GNN's layers of ``benchmarks.in_memory.model_fn`` rebuilt in
  DGL: per edge ``Dense(32, relu)`` on ``concat(receiver, sender)``, mean,
  then ``Dense(32, relu)`` on ``concat(state, mean)``. Cross entropy on the
  seeds' labels, Adam (``--learning-rate``), one epoch, batch ``--batch-size``,
  shuffled (``torch.manual_seed``/``dgl.seed``).
* Timing as GnnTrainer's ``train_examples_per_s``: the examples after the
  first step / the time from the end of the first step to the end of the last
  (sampling the batch, forward, backward, Adam; ``num_workers=0``: sampling in
  the training process). ``ms_per_step``: that time / (steps - 1).
* ``sampling_seeds_per_s``: the same DataLoader iterated without training over
  the training seeds after ``--warmup-batches`` batches, median of
  ``--sampling-repeats``.
* ``load_s``: reading the CSV tables and mapping string ids to rows;
  ``graph_build_s``: ``dgl.graph`` plus its CSC (what in-edge sampling reads);
  ``import_s``: from the process's start to ``main`` (Python, torch, DGL);
  ``peak_rss_gb``: this process's ``VmHWM``.

Prints one JSON object (the last stdout line).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time

import dgl
import dgl.function as dglfn
import dgl.nn as dglnn
import numpy as np
import pandas as pd
import psutil
import torch
from torch import nn

import report  # benchmarks/report.py: this script's folder is on sys.path (run by its path)
from torch.nn import functional as F


def _peak_rss_gb() -> float:
  """This process's own peak RSS (:func:`report.peak_rss_bytes`), GB."""
  return round(report.peak_rss_bytes() / 1e9, 3)


def _read(graph_dir: str, pattern: str, **kwargs) -> pd.DataFrame:
  paths = sorted(glob.glob(os.path.join(graph_dir, pattern)))
  if not paths:
    raise FileNotFoundError(os.path.join(graph_dir, pattern))
  return pd.concat([pd.read_csv(p, **kwargs) for p in paths], ignore_index=True)


def load(args):
  """Node features, labels, edge rows and seed rows of the tables."""
  nodes = _read(args.graph_dir, args.nodes, dtype={"id": str, "score": np.float32,
                                                   "label": np.int64})
  index = pd.Index(nodes["id"])
  if not index.is_unique:
    raise ValueError("Duplicate node ids.")
  edges = _read(args.graph_dir, args.edges, dtype=str)

  def rows(ids, what):
    found = index.get_indexer(ids)
    if (found < 0).any():
      raise ValueError(f"{what}: {int((found < 0).sum())} ids not in the node tables.")
    return found.astype(np.int64)

  source, target = rows(edges["source"], "source"), rows(edges["target"], "target")
  seeds = {}
  for split, table, count in (("train", args.train_seeds, args.num_train),
                              ("eval", args.eval_seeds, args.num_eval)):
    ids = pd.read_csv(os.path.join(args.graph_dir, table), dtype=str)["id"]
    seeds[split] = rows(ids[:count], split)
  return (nodes["score"].to_numpy(), nodes["label"].to_numpy(), source, target, seeds)


class Sage(nn.Module):
  """score -> Linear + ReLU -> 2x SAGEConv(mean) + ReLU -> 10 logits."""

  def __init__(self, units: int, classes: int):
    super().__init__()
    self.inp = nn.Linear(1, units)
    self.convs = nn.ModuleList(dglnn.SAGEConv(units, units, "mean", activation=F.relu)
                               for _ in range(2))
    self.head = nn.Linear(units, classes)

  def forward(self, blocks, x):
    h = F.relu(self.inp(x))
    for conv, block in zip(self.convs, blocks, strict=True):
      h = conv(block, h)
    return self.head(h)


class SameConv(nn.Module):
  """One TF-GNN ``GraphUpdate`` of ``benchmarks.in_memory.model_fn``, in DGL.

  SimpleConv(Dense(relu) on concat(receiver, sender), "mean"), then
  NextStateFromConcat(Dense(relu)).
  """

  def __init__(self, units: int):
    super().__init__()
    self.message = nn.Linear(2 * units, units)
    self.next_state = nn.Linear(2 * units, units)

  def forward(self, block, h):
    with block.local_scope():
      h_dst = h[:block.num_dst_nodes()]
      block.srcdata["h"] = h
      block.dstdata["h"] = h_dst
      block.apply_edges(lambda e: {"m": F.relu(self.message(
          torch.cat([e.dst["h"], e.src["h"]], -1)))})
      block.update_all(dglfn.copy_e("m", "m"), dglfn.mean("m", "pooled"))
      return F.relu(self.next_state(torch.cat([h_dst, block.dstdata["pooled"]], -1)))


class Same(Sage):
  """:class:`Sage` with :class:`SameConv` layers."""

  def __init__(self, units: int, classes: int):
    super().__init__(units, classes)
    self.convs = nn.ModuleList(SameConv(units) for _ in range(2))


MODELS = {"sage": Sage, "same": Same}


def loader(graph, seeds, sampler, batch_size: int, shuffle: bool):
  return dgl.dataloading.DataLoader(graph, torch.from_numpy(seeds), sampler,
                                    batch_size=batch_size, shuffle=shuffle, drop_last=False,
                                    num_workers=0)


def measure_sampling(graph, seeds, sampler, batch_size: int, warmup: int) -> dict:
  """Seeds per second through the DataLoader alone (the batches' sizes too)."""
  it = iter(loader(graph, seeds, sampler, batch_size, shuffle=True))
  for _ in range(warmup):
    next(it)
  nodes = edges = batches = 0
  start = time.perf_counter()
  for input_nodes, _, blocks in it:
    batches += 1
    nodes += len(input_nodes)
    edges += sum(b.num_edges() for b in blocks)
  seconds = time.perf_counter() - start
  timed = len(seeds) - warmup * batch_size
  return {"seeds_per_s": round(timed / seconds, 1), "nodes_per_batch": round(nodes / batches, 1),
          "edges_per_batch": round(edges / batches, 1)}


def train(name, graph, feats, labels, seeds, sampler, args) -> dict:
  """One epoch of ``MODELS[name]``: the timings, the loss, validation accuracy."""
  torch.manual_seed(args.seed)
  dgl.seed(args.seed)
  model = MODELS[name](args.units, args.classes)
  optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
  model.train()
  steps, losses = 0, []
  begin = time.perf_counter()
  first_end = last_end = None
  for input_nodes, output_nodes, blocks in loader(graph, seeds["train"], sampler,
                                                  args.batch_size, shuffle=True):
    logits = model(blocks, feats[input_nodes])
    loss = F.cross_entropy(logits, labels[output_nodes])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    steps += 1
    last_end = time.perf_counter()
    if first_end is None:
      first_end = last_end
  steady_s = last_end - first_end
  model.eval()
  correct = 0
  with torch.no_grad():
    for input_nodes, output_nodes, blocks in loader(graph, seeds["eval"], sampler,
                                                    args.batch_size, shuffle=False):
      correct += int((model(blocks, feats[input_nodes]).argmax(-1)
                      == labels[output_nodes]).sum())
  num_train = len(seeds["train"])
  return {
      "examples_per_s": round((num_train - args.batch_size) / steady_s, 1),
      "ms_per_step": round(1000 * steady_s / (steps - 1), 3),
      "steady_s": round(steady_s, 3),
      "first_step_s": round(first_end - begin, 3),
      "train_epoch_s": round(last_end - begin, 3),
      "steps": steps,
      "loss": round(float(np.mean(losses[-50:])), 4),
      "val_accuracy": round(correct / len(seeds["eval"]), 4),
      "parameters": sum(p.numel() for p in model.parameters()),
  }


def main() -> int:
  # Since the process started (the interpreter, torch and DGL imported).
  imported_s = time.time() - psutil.Process().create_time()
  began = time.perf_counter() - imported_s
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--graph-dir", required=True)
  p.add_argument("--nodes", required=True, help="Node table glob, relative to --graph-dir.")
  p.add_argument("--edges", required=True, help="Edge table glob, relative to --graph-dir.")
  p.add_argument("--train-seeds", required=True, help="Seed table, relative to --graph-dir.")
  p.add_argument("--eval-seeds", required=True)
  p.add_argument("--num-train", type=int, required=True)
  p.add_argument("--num-eval", type=int, default=10_000)
  p.add_argument("--fan-outs", default="10,5", help="Hop by hop from the seeds.")
  p.add_argument("--batch-size", type=int, default=128)
  p.add_argument("--units", type=int, default=32)
  p.add_argument("--classes", type=int, default=10)
  p.add_argument("--learning-rate", type=float, default=1e-2)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--threads", type=int, default=os.cpu_count())
  p.add_argument("--models", default="sage,same")
  p.add_argument("--warmup-batches", type=int, default=5)
  p.add_argument("--sampling-repeats", type=int, default=3)
  args = p.parse_args()
  torch.set_num_threads(args.threads)
  fan_outs = [int(f) for f in args.fan_outs.split(",")]

  start = time.perf_counter()
  score, label, source, target, seeds = load(args)
  load_s = time.perf_counter() - start
  start = time.perf_counter()
  # Reversed: in-edges of a node here are its out-edges in the tables (see the docstring).
  graph = dgl.graph((torch.from_numpy(target), torch.from_numpy(source)),
                    num_nodes=len(score), idtype=torch.int64)
  graph.create_formats_()
  graph_build_s = time.perf_counter() - start
  del source, target
  feats = torch.from_numpy(score).unsqueeze(-1)
  labels = torch.from_numpy(label)
  # The first list entry is the input layer's: hops from the seeds, reversed.
  sampler = dgl.dataloading.NeighborSampler(fan_outs[::-1], replace=False)

  trials = [measure_sampling(graph, seeds["train"], sampler, args.batch_size,
                             args.warmup_batches) for _ in range(args.sampling_repeats)]
  models = {name: train(name, graph, feats, labels, seeds, sampler, args)
            for name in args.models.split(",")}
  print(json.dumps({
      "dgl": dgl.__version__, "torch": torch.__version__, "threads": torch.get_num_threads(),
      "num_nodes": graph.num_nodes(), "num_edges": graph.num_edges(),
      "num_train_seeds": len(seeds["train"]), "num_eval_seeds": len(seeds["eval"]),
      "fan_outs_from_seeds": fan_outs, "neighbor_sampler_fanouts": fan_outs[::-1],
      "batch_size": args.batch_size, "import_s": round(imported_s, 3),
      "load_s": round(load_s, 3), "graph_build_s": round(graph_build_s, 3),
      "sampling_seeds_per_s": statistics.median(t["seeds_per_s"] for t in trials),
      "sampling_trials": trials, "models": models, "peak_rss_gb": _peak_rss_gb(),
      "process_s": round(time.perf_counter() - began, 3),
  }))
  return 0


if __name__ == "__main__":
  sys.exit(main())
