"""What each round of message passing costs in a training step of ``benchmarks.in_memory``'s model.

  PYTHONPATH=. .venv/bin/python -m benchmarks.round_costs --graph-dir /tmp/im1m/graph

On the graph ``benchmarks.in_memory`` generated (``<work dir>/graph``), the
trainer's merged batches (128 seeds, its sampling config) are sampled once and
cached; then the benchmark model's training step (forward, the loss on the
seeds, Adam) runs in a ``tf.function`` over them with: both rounds whole
(``whole``), the second in ``layers.ReadoutRound`` (``readout``), one round
(``one``), no round (``zero``: the input layer, readout, loss and optimizer).
Variants interleaved, ``--repeats`` times; ms per step after 5 warm-up steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Optional, Sequence

from benchmarks import in_memory
from benchmarks import report

VARIANTS = ("whole", "readout", "one", "zero")


def _model(spec, kind: str):
  """The benchmark's model (``in_memory.model_fn``'s layers) with ``kind``'s rounds."""
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  from gnn_trainer_component import layers
  # pylint: enable=g-import-not-at-top
  units = in_memory.HPARAMS["units"]
  inputs = tf.keras.layers.Input(type_spec=spec)
  graph = tfgnn.keras.layers.MapFeatures(node_sets_fn=lambda node_set, node_set_name: (
      tf.keras.layers.Dense(units, activation="relu")(tf.expand_dims(node_set["score"], -1))
      if node_set_name == "user" else None))(inputs)
  rounds = 1 if kind == "one" else 0 if kind == "zero" else 2
  for i in range(rounds):
    update = tfgnn.keras.layers.GraphUpdate(node_sets={"user": tfgnn.keras.layers.NodeSetUpdate(
        {"follows": tfgnn.keras.layers.SimpleConv(
            tf.keras.layers.Dense(units, activation="relu"), "mean", receiver_tag=tfgnn.SOURCE)},
        tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(units, activation="relu")))})
    if kind == "readout" and i == rounds - 1:
      update = layers.ReadoutRound(update, node_set_name="user", receiver_tag=tfgnn.SOURCE)
    graph = update(graph)
  seeds = tfgnn.keras.layers.StructuredReadout("seed", feature_name=tfgnn.HIDDEN_STATE)(graph)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(10)(seeds))


def _ms_per_step(batches, spec, kind: str, warmup: int = 5) -> float:
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  import tensorflow_gnn as tfgnn
  # pylint: enable=g-import-not-at-top
  tf.keras.utils.set_random_seed(0)
  model, optimizer = _model(spec, kind), tf.keras.optimizers.Adam(1e-2)

  @tf.function(input_signature=[spec])
  def step(graph):
    labels = tfgnn.structured_readout(graph, "seed", feature_name="label")
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
          labels, model(graph, training=True), from_logits=True))
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  for graph in batches[:warmup]:
    step(graph).numpy()
  start = time.perf_counter()
  for graph in batches[warmup:]:
    loss = step(graph)
  loss.numpy()
  return 1000 * (time.perf_counter() - start) / (len(batches) - warmup)


def main(argv: Optional[Sequence[str]] = None) -> int:
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--graph-dir", required=True, help="benchmarks.in_memory's <work dir>/graph.")
  p.add_argument("--batches", type=int, default=120)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--output", default="benchmarks/results/round-costs.json")
  args = p.parse_args(argv)
  from gnn_trainer_component.in_memory import adapters  # pylint: disable=g-import-not-at-top
  splits = adapters.load(args.graph_dir, seeds={"train": "seeds-train.csv"},
                         sampling_config=in_memory.SAMPLING_CONFIG, splits=["train"])
  seeds = splits.seeds["train"][:in_memory.BATCH_SIZE * args.batches]
  dataset = in_memory._trainer_pipeline(splits.sampler.dataset(  # pylint: disable=protected-access
      seeds, batch_size=in_memory.BATCH_SIZE, shuffle=True, fresh=True, seed=0, merged=True), 1)
  batches = list(dataset.take(args.batches))
  spec = batches[0].spec.relax(num_components=True, num_nodes=True, num_edges=True)
  runs = {kind: [] for kind in VARIANTS}
  for _ in range(args.repeats):
    for kind in VARIANTS:
      runs[kind].append(round(_ms_per_step(batches, spec, kind), 2))
  result = {
      "command": " ".join(["python -m benchmarks.round_costs"] + list(argv or sys.argv[1:])),
      "date": time.strftime("%Y-%m-%d"), "source": in_memory.source_version(),
      "batch": {"nodes": int(batches[0].node_sets["user"].total_size),
                "edges": int(batches[0].edge_sets["follows"].total_size)},
      "ms_per_step": runs,
      "median_ms_per_step": {k: sorted(v)[len(v) // 2] for k, v in runs.items()},
  }
  report.print_result(result, args.output)
  return 0


if __name__ == "__main__":
  sys.exit(main())
