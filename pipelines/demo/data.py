"""Synthetic demo data: a citation-like graph, as rooted-subgraph tf.Examples.

Nothing is downloaded. A stochastic block model with ``num_classes`` topics:
papers cite papers of their own topic far more often (homophily). Each paper has

* ``feat``: a float vector = its topic's centroid + strong Gaussian noise, so a
  paper's own features are a weak signal;
* ``venue``: a string; the venue's topic matches the paper's only sometimes;
* ``label``: the topic (int64).

Each example is the 2-hop neighbourhood of one root paper (node 0 of node set
``paper``), with fan-outs (10, 5), both edge directions. Averaging the
neighbours' noisy features recovers the topic, so the graph structure helps:
a GNN beats a features-only model by a wide margin (see docs/demo.md).

The labels of non-root nodes stay in the examples as ``nodes/paper.label`` (so
Transform/analysis can see them) but the module file's label_fn removes the
whole label feature before the GNN runs: no label reaches the model as input.
``context/label`` repeats the root's label for TFMA (Evaluator); it is not in
the graph schema, so the model never parses it and serving does not need it.
"""

from __future__ import annotations

import contextlib
import filecmp
import os
from typing import Iterator, Optional

import numpy as np

NODE_SET = "paper"
EDGE_SET = "cites"
FEATURE_DIM = 8
VENUES_PER_CLASS = 3

GRAPH_SCHEMA_PBTXT = f"""
node_sets {{
  key: "{NODE_SET}"
  value {{
    description: "Papers; node 0 of each example is the root to classify."
    features {{ key: "feat" value {{ dtype: DT_FLOAT shape {{ dim {{ size: {FEATURE_DIM} }} }} }} }}
    features {{ key: "venue" value {{ dtype: DT_STRING }} }}
    features {{ key: "label" value {{ dtype: DT_INT64 }} }}
  }}
}}
edge_sets {{
  key: "{EDGE_SET}"
  value {{
    description: "Citations, stored in both directions."
    source: "{NODE_SET}"
    target: "{NODE_SET}"
  }}
}}
"""


def make_graph(num_nodes: int = 1500, num_classes: int = 3, avg_degree: float = 8.0,
               homophily: float = 0.75, noise: float = 3.5, seed: int = 0):
  """Returns (labels, feats, venues, adjacency list)."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, num_classes, size=num_nodes)
  centroids = rng.normal(size=(num_classes, FEATURE_DIM)) * 1.0
  feats = (centroids[labels] + noise * rng.normal(size=(num_nodes, FEATURE_DIM))).astype(np.float32)
  venue_class = np.where(rng.random(num_nodes) < 0.4, labels, rng.integers(0, num_classes, num_nodes))
  venues = np.array([f"venue_{c}_{rng.integers(VENUES_PER_CLASS)}" for c in venue_class])
  by_class = [np.flatnonzero(labels == c) for c in range(num_classes)]
  num_edges = int(num_nodes * avg_degree / 2)
  adj = [set() for _ in range(num_nodes)]
  src = rng.integers(0, num_nodes, size=num_edges)
  same = rng.random(num_edges) < homophily
  for s, sm in zip(src, same):
    pool = by_class[labels[s]] if sm else np.arange(num_nodes)
    t = int(rng.choice(pool))
    if t != s:
      adj[s].add(t)
      adj[t].add(int(s))
  return labels, feats, venues, [sorted(a) for a in adj]


def sample_subgraph(root: int, adj, fanouts=(10, 5), rng=None) -> list[int]:
  """Root-first list of nodes in a sampled k-hop neighbourhood."""
  rng = rng or np.random.default_rng(root)
  nodes, seen, frontier = [root], {root}, [root]
  for fanout in fanouts:
    nxt = []
    for n in frontier:
      nbrs = adj[n]
      if len(nbrs) > fanout:
        nbrs = rng.choice(nbrs, size=fanout, replace=False).tolist()
      for m in nbrs:
        if m not in seen:
          seen.add(m)
          nodes.append(m)
          nxt.append(m)
    frontier = nxt
  return nodes


def subgraph_example(root: int, labels, feats, venues, adj, rng=None):
  """A tf.train.Example in TF-GNN's encoding for the subgraph around ``root``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  nodes = sample_subgraph(root, adj, rng=rng)
  index = {n: i for i, n in enumerate(nodes)}
  sources, targets = [], []
  for n in nodes:
    for m in adj[n]:
      if m in index:
        sources.append(index[m])
        targets.append(index[n])
  f = tf.train.Feature
  ints = lambda v: f(int64_list=tf.train.Int64List(value=list(map(int, v))))
  floats = lambda v: f(float_list=tf.train.FloatList(value=list(map(float, v))))
  strs = lambda v: f(bytes_list=tf.train.BytesList(value=[s.encode() for s in v]))
  feature = {
      "context/label": ints([labels[root]]),
      f"nodes/{NODE_SET}.#size": ints([len(nodes)]),
      f"nodes/{NODE_SET}.feat": floats(feats[nodes].reshape(-1)),
      f"nodes/{NODE_SET}.venue": strs(venues[nodes]),
      f"nodes/{NODE_SET}.label": ints(labels[nodes]),
      f"edges/{EDGE_SET}.#size": ints([len(sources)]),
      f"edges/{EDGE_SET}.#source": ints(sources),
      f"edges/{EDGE_SET}.#target": ints(targets),
  }
  return tf.train.Example(features=tf.train.Features(feature=feature))


@contextlib.contextmanager
def _replace_if_changed(path: str) -> Iterator[str]:
  """Yields a temporary path to write; then it replaces ``path`` only if the bytes differ."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tmp = f"{path}.tmp-{os.getpid()}"
  try:
    yield tmp
    if os.path.exists(path) and filecmp.cmp(tmp, path, shallow=False):
      os.remove(tmp)
    else:
      os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def write_demo_data(out_dir: str, *, num_nodes: int = 1500, eval_fraction: float = 0.3,
                    seed: int = 0, max_roots: Optional[int] = None) -> dict[str, str]:
  """Writes ``<out_dir>/examples/{train,eval}/data.tfrecord`` and the graph schema.

  A file whose content would not change is left untouched (same bytes, same
  mtime), so a rerun of the demo pipeline on the same folder hits TFX's cache:
  ImportExampleGen fingerprints its input files by size and mtime.

  Returns:
    ``{"examples": dir with train/ and eval/, "graph_schema": dir with
    graph_schema.pbtxt}``.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  labels, feats, venues, adj = make_graph(num_nodes=num_nodes, seed=seed)
  rng = np.random.default_rng(seed + 1)
  roots = rng.permutation(num_nodes)[:max_roots]
  n_eval = int(len(roots) * eval_fraction)
  splits = {"eval": roots[:n_eval], "train": roots[n_eval:]}
  examples_dir = os.path.join(out_dir, "examples")
  for split, split_roots in splits.items():
    path = os.path.join(examples_dir, split, "data.tfrecord")
    with _replace_if_changed(path) as tmp, tf.io.TFRecordWriter(tmp) as w:
      for root in split_roots:
        w.write(subgraph_example(int(root), labels, feats, venues, adj, rng).SerializeToString(
            deterministic=True))  # sorted feature keys: the same bytes in every process
  schema_dir = os.path.join(out_dir, "graph_schema")
  with _replace_if_changed(os.path.join(schema_dir, "graph_schema.pbtxt")) as tmp, \
      open(tmp, "w") as fh:
    fh.write(GRAPH_SCHEMA_PBTXT.lstrip())
  return {"examples": examples_dir, "graph_schema": schema_dir}
