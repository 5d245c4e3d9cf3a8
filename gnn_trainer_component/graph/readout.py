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

from typing import Optional

import numpy as np
import tensorflow as tf

from gnn_trainer_component.graph import encoding

READOUT = "_readout"
READOUT_SOURCE = "_readout/source"
READOUT_TARGET = "_readout/target"
READOUT_SEED = "_readout/seed"
#: The ``_readout`` node feature of a pair: 1.0 an edge, 0.0 a sampled negative.
LABEL = "label"


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
