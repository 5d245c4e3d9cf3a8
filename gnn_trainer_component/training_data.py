"""What GnnTrainer trains on, behind one protocol: examples on disk or the graph in memory.

The trainer (``trainer/training.py``) asks a :class:`TrainingData` for a
:class:`Feed` (``runner.run``'s dataset providers, the spec of an element,
what the export serves) for a :class:`Request` (how this training reads), and
never asks which source it has. The sources:

* examples on disk (``trainer/examples.py``): GraphSampler's or LinkSampler's
  tf.Examples, optionally with Transform;
* the graph in memory (``in_memory/adapters.py``): subgraphs sampled around
  seeds, the whole graph every step, or link-prediction pairs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Protocol

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

#: :attr:`TrainingData.mode` values (the Model's ``graph_mode`` property); ``SAMPLED`` and
#: ``FULL_GRAPH`` are also values of ``custom_config["graph_mode"]``, as is ``AUTO``.
EXAMPLES, SAMPLED, FULL_GRAPH = "examples", "sampled", "full_graph"
AUTO = "auto"


@dataclasses.dataclass(frozen=True)
class Request:
  """How one training reads its data: from its config and its distribution strategy.

  Attributes:
    batch_size: The global batch size.
    seed: The shuffling and sampling seed (None: not reproducible).
    drop_remainder: Drop a last, smaller training batch.
    tasks: The module's ``runner.Task`` objects by name.
    local: One replica whose input pipeline runs in this process: batches may
      come merged, and may be kept from one epoch to the next.
    remote_input: Where the input pipeline runs when not in this process
      (``"a tf.data service"``, ``"a parameter-server cluster"``), else None.
    cache: ``custom_config["cache"]`` (examples on disk only), as are
      ``cache_budget_mb``, ``read_once`` (one pass over the training data),
      ``shuffle_buffer_size`` and ``check_finite``.
  """
  batch_size: int
  seed: Optional[int]
  drop_remainder: bool
  tasks: Mapping[str, Any]
  local: bool
  remote_input: Optional[str] = None
  cache: str = "auto"
  cache_budget_mb: Optional[int] = None
  read_once: bool = False
  shuffle_buffer_size: int = 0
  check_finite: bool = True


def _nothing() -> None:
  return None


@dataclasses.dataclass(frozen=True)
class Feed:
  """What ``runner.run`` reads, and what the export puts in front of the model.

  Attributes:
    train: The training dataset provider.
    valid: The validation dataset provider.
    spec: The spec of an element (``runner.run``'s ``gtspec``).
    whole_steps: An element is a whole step's batch (``runner.run`` then
      batches one per step); else an element is one example.
    train_records: Elements per pass over the training splits (None: unknown).
    keep_batches: The batches are the same every epoch and fit in memory: the
      Keras trainer may keep them after the first.
    serving_parser: Parses the served tf.Examples into :attr:`spec` when the
      graph schema's parser does not (None: it does).
    close: Removes what the feed wrote (a file cache); called after training.
    check_deduplication: Where the training batches are deduplicated on
      condition that the model computes the same seed states on them: called
      with ``seed_states`` (a merged batch -> the model's states at its seed
      readout) before training; turns them off where it does not (None: no check).
  """
  train: runner.DatasetProvider
  valid: runner.DatasetProvider
  spec: tfgnn.GraphTensorSpec
  whole_steps: bool
  train_records: Optional[int]
  keep_batches: bool = False
  serving_parser: Optional[tf.keras.layers.Layer] = None
  close: Callable[[], None] = _nothing
  check_deduplication: Optional[Callable[[Callable[[Any], Any]], bool]] = None


class TrainingData(Protocol):
  """One source of training data.

  Attributes:
    mode: :data:`EXAMPLES`, :data:`SAMPLED` or :data:`FULL_GRAPH`.
    schema: The GraphSchema of the examples trained on and served.
    raw_parser: Parses *raw* served examples into the schema's spec
      (Transform), or None.
    train_records: Examples (or seeds, or pairs) per pass over the training
      splits; None: unknown.
    eval_records: The same for the validation splits.
  """
  mode: str
  schema: tfgnn.GraphSchema
  raw_parser: Optional[tf.keras.layers.Layer]
  train_records: Optional[int]
  eval_records: Optional[int]

  def feed(self, request: Request) -> Feed:
    """The datasets of one training.

    Raises:
      GnnError (a subclass): the source cannot be read as ``request`` asks.
    """

  def parity_examples(self, n: int) -> list[bytes]:
    """Up to ``n`` serialized validation examples, as the model serves them."""

  def ranking_metrics(self, embed: Callable, *, single_task: bool,
                      seed: int) -> dict[str, Any]:
    """Held-out edges ranked against every node by the trained embeddings ({}: none)."""

  def validation_ranker(self, *, single_task: bool, seed: int, max_queries: int
                        ) -> Optional[Callable[[Callable], dict[str, float]]]:
    """Embed function -> ``retrieval_*`` metrics of the validation splits (None: cannot rank).

    The validation splits' held-out edges (at most ``max_queries``) ranked against every
    node, cheap enough for each epoch (``restore_best_weights_by: "max:val_retrieval_mrr"``).
    """

  def held_out_tables(self) -> dict[str, str]:
    """Split -> CSV text of the held-out pairs a user can score ({}: none).

    Written into the ModelRun's ``held_out/<split>.csv``.
    """

  def served_graph(self) -> Optional[Any]:
    """The graph and plan an export serves node ids from (``model.node_serving.ServedGraph``).

    None: this data cannot serve by node id (examples on disk, link pairs).
    """

  def describe(self) -> str:
    """What training reads, for the log."""
