"""Generated graph-level data: small molecule-like graphs labelled by their number of cycles.

Nothing is downloaded. Each example is one whole graph (one graph tensor
component): ``n`` atoms (``n`` uniform in ``[min_nodes, max_nodes]``), each
with a ``kind`` drawn uniformly from ``NUM_KINDS`` kinds, bonded by a random
spanning tree plus ``k`` extra bonds between non-bonded atoms, ``k`` uniform in
``0 .. NUM_CLASSES - 1`` and independent of ``n`` and of the kinds. The graph
is connected with ``n - 1 + k`` bonds, so it has exactly ``k`` independent
cycles (its cyclomatic number): ``context/cycles = k``.

The label depends on the structure only: the atoms' kinds and their number say
nothing about it, so a features-only model (pooled kinds, no message passing)
is at chance (1 / NUM_CLASSES), while message passing with sum aggregation can
count bonds (``sum of degrees / 2``) and atoms, hence ``k``. The same count is
the target of graph classification (``NUM_CLASSES`` classes) and of graph
regression (``module_files/graph_cycles.py``, ``hparams["task"]``).

Bonds are stored in both directions in edge set ``bond``.
"""

from __future__ import annotations

import os
from typing import Mapping

import numpy as np

NODE_SET = "atom"
EDGE_SET = "bond"
LABEL = "cycles"
NUM_KINDS = 4
NUM_CLASSES = 4
SPLITS = ("train", "eval", "test")

GRAPH_SCHEMA_PBTXT = f"""
context {{
  features {{
    key: "{LABEL}"
    value {{
      description: "Number of independent cycles (bonds - atoms + 1): the label."
      dtype: DT_INT64
    }}
  }}
}}
node_sets {{
  key: "{NODE_SET}"
  value {{
    description: "Atoms of one graph."
    features {{
      key: "kind"
      value {{ description: "Atom kind in [0, {NUM_KINDS})." dtype: DT_INT64 }}
    }}
  }}
}}
edge_sets {{
  key: "{EDGE_SET}"
  value {{
    description: "Bonds, stored in both directions."
    source: "{NODE_SET}"
    target: "{NODE_SET}"
  }}
}}
"""


def make_graph(rng: np.random.Generator, *, min_nodes: int = 10, max_nodes: int = 24,
               cycles: int = 0) -> tuple[np.ndarray, list[tuple[int, int]]]:
  """One connected graph with ``cycles`` independent cycles.

  Returns:
    ``(kinds, bonds)``: the atoms' kinds and the undirected bonds ``(u, v)``,
    ``u < v``.
  """
  n = int(rng.integers(min_nodes, max_nodes + 1))
  bonds = {(int(rng.integers(i)), i) for i in range(1, n)}  # random recursive tree
  while len(bonds) < n - 1 + cycles:
    u, v = sorted(int(x) for x in rng.choice(n, size=2, replace=False))
    bonds.add((u, v))
  return rng.integers(NUM_KINDS, size=n), sorted(bonds)


def cyclomatic_number(num_nodes: int, bonds: list[tuple[int, int]]) -> int:
  """Independent cycles of a graph: ``bonds - nodes + connected components``."""
  parent = list(range(num_nodes))

  def find(x):
    while parent[x] != x:
      parent[x] = parent[parent[x]]
      x = parent[x]
    return x

  components = num_nodes
  for u, v in bonds:
    ru, rv = find(u), find(v)
    if ru != rv:
      parent[ru] = rv
      components -= 1
  return len(bonds) - num_nodes + components


def graph_example(kinds: np.ndarray, bonds: list[tuple[int, int]], cycles: int):
  """A tf.train.Example in TF-GNN's encoding (one graph, ``context/cycles``)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  sources = [u for u, v in bonds] + [v for u, v in bonds]
  targets = [v for u, v in bonds] + [u for u, v in bonds]
  ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x) for x in v]))
  return tf.train.Example(features=tf.train.Features(feature={
      f"context/{LABEL}": ints([cycles]),
      f"nodes/{NODE_SET}.#size": ints([len(kinds)]),
      f"nodes/{NODE_SET}.kind": ints(kinds),
      f"edges/{EDGE_SET}.#size": ints([len(sources)]),
      f"edges/{EDGE_SET}.#source": ints(sources),
      f"edges/{EDGE_SET}.#target": ints(targets),
  }))


def write_data(out_dir: str, *, sizes: Mapping[str, int], seed: int = 0,
               min_nodes: int = 10, max_nodes: int = 24) -> dict[str, str]:
  """Writes ``<out_dir>/examples/<split>/data.tfrecord`` and the graph schema.

  Args:
    out_dir: Output folder.
    sizes: Graphs per split, e.g. ``{"train": 2000, "eval": 500, "test": 500}``.
    seed: Seed of the whole dataset.
    min_nodes: Fewest atoms of a graph.
    max_nodes: Most atoms of a graph.

  Returns:
    ``{"examples": folder with one subfolder per split, "graph_schema": folder
    with graph_schema.pbtxt}``.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  examples_dir = os.path.join(out_dir, "examples")
  for split, size in sizes.items():
    os.makedirs(os.path.join(examples_dir, split), exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(examples_dir, split, "data.tfrecord")) as w:
      # Balanced classes in a random order.
      for cycles in rng.permutation(np.arange(size) % NUM_CLASSES):
        kinds, bonds = make_graph(rng, min_nodes=min_nodes, max_nodes=max_nodes,
                                  cycles=cycles)
        w.write(graph_example(kinds, bonds, int(cycles)).SerializeToString())
  schema_dir = os.path.join(out_dir, "graph_schema")
  os.makedirs(schema_dir, exist_ok=True)
  with open(os.path.join(schema_dir, "graph_schema.pbtxt"), "w") as fh:
    fh.write(GRAPH_SCHEMA_PBTXT.lstrip())
  return {"examples": examples_dir, "graph_schema": schema_dir}
