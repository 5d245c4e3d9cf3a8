"""Planetoid (Cora, CiteSeer, PubMed) loader writing GraphSampler input tables.

Reads the ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}`` files of
Yang et al. (2016) exactly as Kipf & Welling's GCN code (``gcn/utils.py``
``load_data``) does, including CiteSeer's isolated test nodes (test indices
are padded to a contiguous range with zero features and no label), and the
public split: train = the first ``len(y)`` nodes (20 per class), val = the
next 500, test = ``test.index``.

Written tables (a folder usable as a ``GraphSchema`` artifact):
  ``graph_schema.pbtxt``: node set ``paper`` (``feat`` float [F], row-normalized
    as in GCN; ``label`` int64, -1 if unlabeled), edge set ``cites``
    (paper -> paper, both directions of each undirected edge plus one self
    loop per node; ``weight`` float = the GCN normalization
    1/sqrt((d_u+1)(d_v+1)) of the full graph, 1/(d_u+1) on self loops).
  ``nodes-paper.tfrecord``, ``edges-cites.tfrecord``: TFRecord tables.
  ``seeds-{train,eval,test}.csv``: the public split (``id`` column).
"""

from __future__ import annotations

import os
import pickle
from typing import Dict

from absl import logging
import numpy as np
import tensorflow as tf

from gnn_trainer_component import graph_schema
from pipelines.planetoid import DATASETS

NODE_SET = "paper"
EDGE_SET = "cites"
NUM_CLASSES = {"cora": 7, "citeseer": 6, "pubmed": 3}
SPLIT_FILES = {"train": "seeds-train.csv", "eval": "seeds-eval.csv",
               "test": "seeds-test.csv"}


def _unpickle(path: str):
  with open(path, "rb") as f:
    return pickle.load(f, encoding="latin1")  # Python 2 pickles of numpy/scipy arrays


def _dense(m) -> np.ndarray:
  return np.asarray(m.todense() if hasattr(m, "todense") else m, dtype=np.float32)


def load_planetoid(data_dir: str, name: str) -> Dict[str, object]:
  """Loads a Planetoid dataset as arrays (GCN's ``load_data`` semantics).

  Args:
    data_dir: Folder with the ``ind.<name>.*`` files.
    name: cora, citeseer or pubmed.

  Returns:
    Dict with ``features`` [N, F] float32 (raw), ``labels`` [N] int64 (-1 when
    the one-hot row is all zero), ``graph`` (dict of adjacency lists),
    ``train``, ``eval``, ``test`` index arrays.
  """
  if name not in DATASETS:
    raise ValueError(f"Unknown Planetoid dataset {name!r}; expected one of {DATASETS}.")
  objs = {}
  for part in ("x", "y", "tx", "ty", "allx", "ally", "graph"):
    objs[part] = _unpickle(os.path.join(data_dir, f"ind.{name}.{part}"))
  with open(os.path.join(data_dir, f"ind.{name}.test.index")) as f:
    test_idx_reorder = np.array([int(line.strip()) for line in f if line.strip()])
  test_idx_range = np.sort(test_idx_reorder)
  tx, ty = _dense(objs["tx"]), np.asarray(objs["ty"])
  if name == "citeseer":
    # Isolated test nodes: pad to a contiguous range with zero rows (GCN code).
    full = np.arange(test_idx_range.min(), test_idx_range.max() + 1)
    tx_ext = np.zeros((len(full), tx.shape[1]), dtype=np.float32)
    tx_ext[test_idx_range - test_idx_range.min(), :] = tx
    ty_ext = np.zeros((len(full), ty.shape[1]))
    ty_ext[test_idx_range - test_idx_range.min(), :] = ty
    tx, ty = tx_ext, ty_ext
  features = np.vstack([_dense(objs["allx"]), tx])
  features[test_idx_reorder, :] = features[test_idx_range, :]
  onehot = np.vstack([np.asarray(objs["ally"]), ty])
  onehot[test_idx_reorder, :] = onehot[test_idx_range, :]
  labels = np.where(onehot.sum(1) > 0, onehot.argmax(1), -1).astype(np.int64)
  num_train = len(objs["y"])
  return {
      "features": features,
      "labels": labels,
      "graph": objs["graph"],
      "train": np.arange(num_train),
      "eval": np.arange(num_train, num_train + 500),
      "test": test_idx_range,
  }


def undirected_edges(graph: Dict[int, list], num_nodes: int) -> np.ndarray:
  """Unique undirected edges ``[E, 2]`` (u < v) of the adjacency dict, no self loops."""
  pairs = set()
  for u, nbrs in graph.items():
    for v in nbrs:
      if u != v and u < num_nodes and v < num_nodes:
        pairs.add((min(u, v), max(u, v)))
  return np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)


def row_normalize(features: np.ndarray) -> np.ndarray:
  """Row-normalizes features (GCN ``preprocess_features``)."""
  s = features.sum(1, keepdims=True)
  return (features / np.where(s == 0, 1, s)).astype(np.float32)


def graph_schema_text(num_features: int, with_citations: bool = False) -> str:
  """The unigraph GraphSchema of the written tables."""
  citations = ('\n    features { key: "citations" value { dtype: DT_FLOAT } }'
               if with_citations else "")
  return f"""
node_sets {{
  key: "{NODE_SET}"
  value {{
    features {{ key: "feat" value {{ dtype: DT_FLOAT shape {{ dim {{ size: {num_features} }} }} }} }}
    features {{ key: "label" value {{ dtype: DT_INT64 }} }}{citations}
    metadata {{ filename: "nodes-{NODE_SET}.tfrecord" }}
  }}
}}
edge_sets {{
  key: "{EDGE_SET}"
  value {{
    source: "{NODE_SET}"
    target: "{NODE_SET}"
    features {{ key: "weight" value {{ dtype: DT_FLOAT }} }}
    metadata {{ filename: "edges-{EDGE_SET}.tfrecord" }}
  }}
}}
"""


def _bytes(v: bytes) -> tf.train.Feature:
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))


def write_planetoid_tables(data_dir: str, name: str, output_dir: str,
                           with_citations: bool = False) -> Dict[str, object]:
  """Writes the tables, graph schema and public-split seeds of a dataset.

  Args:
    data_dir: Folder with the ``ind.<name>.*`` files.
    name: cora, citeseer or pubmed.
    output_dir: Folder to write (created).
    with_citations: Also write node feature ``citations`` = log(1 + the
      paper's number of citation links, citing or cited, in the whole graph):
      a numeric node property to regress (``module_files/planetoid_multitask.py``).
      Counted on the whole graph, it leaks held-out edges into link prediction.

  Returns:
    ``{"dir": output_dir, "seeds": {split: file}, "num_classes": int,
    "num_nodes": int, "num_edges": int (directed, without self loops),
    "max_degree": int}``.
  """
  data = load_planetoid(data_dir, name)
  features = row_normalize(data["features"])
  labels = data["labels"]
  n = features.shape[0]
  und = undirected_edges(data["graph"], n)
  deg = np.zeros(n, dtype=np.int64)
  np.add.at(deg, und[:, 0], 1)
  np.add.at(deg, und[:, 1], 1)
  norm = 1.0 / np.sqrt(deg + 1.0)
  tf.io.gfile.makedirs(output_dir)
  with tf.io.TFRecordWriter(os.path.join(output_dir, f"nodes-{NODE_SET}.tfrecord")) as w:
    for i in range(n):
      ex = tf.train.Example()
      ex.features.feature["#id"].CopyFrom(_bytes(str(i).encode()))
      ex.features.feature["feat"].float_list.value.extend(features[i].tolist())
      ex.features.feature["label"].int64_list.value.append(int(labels[i]))
      if with_citations:
        ex.features.feature["citations"].float_list.value.append(float(np.log1p(deg[i])))
      w.write(ex.SerializeToString())
  directed = np.concatenate([und, und[:, ::-1]], axis=0)
  with tf.io.TFRecordWriter(os.path.join(output_dir, f"edges-{EDGE_SET}.tfrecord")) as w:
    def put(u, v, weight):
      ex = tf.train.Example()
      ex.features.feature["#source"].CopyFrom(_bytes(str(u).encode()))
      ex.features.feature["#target"].CopyFrom(_bytes(str(v).encode()))
      ex.features.feature["weight"].float_list.value.append(float(weight))
      w.write(ex.SerializeToString())
    for u, v in directed:
      put(u, v, norm[u] * norm[v])
    for u in range(n):
      put(u, u, norm[u] * norm[u])
  with tf.io.gfile.GFile(os.path.join(output_dir, graph_schema.GRAPH_SCHEMA_FILE), "w") as f:
    f.write(graph_schema_text(features.shape[1], with_citations))
  for split, filename in SPLIT_FILES.items():
    with tf.io.gfile.GFile(os.path.join(output_dir, filename), "w") as f:
      f.write("id\n" + "".join(f"{i}\n" for i in data[split]))
  logging.info("Planetoid %s: %d nodes, %d undirected edges, max degree %d -> %s",
               name, n, len(und), int(deg.max()), output_dir)
  return {"dir": output_dir, "seeds": dict(SPLIT_FILES), "num_classes": NUM_CLASSES[name],
          "num_nodes": n, "num_edges": int(len(directed)), "max_degree": int(deg.max())}
