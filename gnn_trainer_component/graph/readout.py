"""The readout structure sampled subgraphs carry: TF-GNN's ``_readout`` names, one place.

TF-GNN reads a prediction target through "structured readout": an auxiliary
node set ``_readout`` (one node per target) and an edge set
``_readout/<key>`` from each node to read into it
(``tfgnn.keras.layers.StructuredReadout(key)``):

* link prediction: ``_readout/source`` and ``_readout/target`` from a pair's
  two ends, and the pair's ``label`` on the ``_readout`` node (LinkSampler's
  examples, GnnTrainer's link pairs in memory);
* seeds of merged batches and of the whole graph: ``_readout/seed`` from
  each seed (the names of TF-GNN's ``add_readout_from_first_node``).
"""

from __future__ import annotations

import copy
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.graph import encoding
from gnn_trainer_component.graph.errors import GraphInputError

READOUT = "_readout"
READOUT_SOURCE = "_readout/source"
READOUT_TARGET = "_readout/target"
READOUT_SEED = "_readout/seed"
#: The ``_readout`` node feature of a pair: 1.0 an edge, 0.0 a sampled negative.
LABEL = "label"


def with_link_readout(schema: tfgnn.GraphSchema, edge_set, edge_set_name: str, *,
                      who: str) -> tfgnn.GraphSchema:
  """A copy of ``schema`` with the readout sets of link prediction on ``edge_set``.

  Raises:
    GraphInputError: the schema already has a set of one of the readout names.
  """
  out = copy.deepcopy(schema)
  for name in (READOUT, READOUT_SOURCE, READOUT_TARGET):
    if name in out.node_sets or name in out.edge_sets:
      raise GraphInputError(f"{who}: the graph schema already has a set named {name!r}, "
                            "which the link-prediction examples add.")
  out.node_sets[READOUT].features[LABEL].dtype = tf.float32.as_datatype_enum
  out.node_sets[READOUT].description = (
      f"One node per example: the supervised pair of edge set {edge_set_name!r}; "
      f"{LABEL} 1.0 for an edge, 0.0 for a sampled negative.")
  out.edge_sets[READOUT_SOURCE].source = edge_set.source
  out.edge_sets[READOUT_SOURCE].target = READOUT
  out.edge_sets[READOUT_TARGET].source = edge_set.target
  out.edge_sets[READOUT_TARGET].target = READOUT
  return out


def add_pair_readout(example: tf.train.Example, source: int, target: int,
                     label: Optional[float] = None) -> None:
  """Adds the readout of one pair to a subgraph's example, with its label if given.

  ``source`` / ``target``: the ends' indices in their node sets. With
  ``(0, 0)`` on GraphSampler's example of one node, the pair (seed, seed):
  what a link-prediction model reads as that node's embedding.
  """
  one = np.ones([1], np.int64)
  encoding.write_nodes([example], READOUT, one,
                       {} if label is None else {LABEL: np.array([label], np.float32)})
  for name, index in ((READOUT_SOURCE, source), (READOUT_TARGET, target)):
    encoding.write_edges([example], name, one, np.array([index]), np.zeros([1], np.int64), {})
