"""Every node through a model: its subgraph sampled, encoded as a tf.Example, a batch at a time.

:func:`embed_nodes` is the one "embed every node" loop of the in-memory
engine: GraphInferrer's in-memory engine writes its batches to a table,
GnnTrainer's retrieval evaluation ranks with them. Sampling and encoding run
in tf.data threads ahead of the model calls; batch ``b`` samples with
``batch_seed(seed, b)``, so a batch's subgraphs do not depend on the others.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Optional

import numpy as np
import tensorflow as tf

from gnn_trainer_component.graph import readout
from gnn_trainer_component.in_memory import dataset as dataset_lib


def embed_nodes(sampler: dataset_lib.SubgraphSampler, rows: np.ndarray,
                run: Callable[[tf.Tensor], Mapping[str, Any]], *, batch_size: int, seed: int,
                as_end: Optional[readout.NodeAsEnd]
                ) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
  """Yields ``(rows of the batch, {output: [batch, ...] array})``, batch by batch, in order.

  Args:
    sampler: Samples and encodes each node's subgraph (GraphSampler's format),
      or each pair's (a ``LinkSubgraphSampler``: LinkSampler's format).
    rows: Node indices of the sampler's seed node set (or the pair sampler's rows).
    run: Serialized tf.Examples -> named outputs (a signature, a model).
    batch_size: Nodes per call.
    seed: Sampling seed.
    as_end: For a link-prediction model: the end of a pair each node is read
      as (:func:`readout.add_node_readout`); None: no pair readout.
  """
  rows = np.asarray(rows, dtype=np.int64)
  num_batches = -(-len(rows) // batch_size)

  def serialized(batch):
    batch = int(batch)
    examples = sampler.examples(rows[batch * batch_size:(batch + 1) * batch_size],
                                dataset_lib.batch_seed(seed, batch))
    if as_end is not None:
      for example in examples:
        readout.add_node_readout(example, as_end)
    return np.array([e.SerializeToString() for e in examples], dtype=object)

  requests = tf.data.Dataset.range(num_batches).map(
      lambda b: tf.numpy_function(serialized, [b], tf.string, stateful=False),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(2)
  for batch, examples in enumerate(requests):
    outputs = {name: np.asarray(value) for name, value in run(examples).items()}
    yield rows[batch * batch_size:(batch + 1) * batch_size], outputs
