"""The optimizer's share of a step on an id embedding table: Keras' Adam against LazyAdam.

  PYTHONPATH=. .venv/bin/python -m benchmarks.optimizer_step --rows 1024,65536,262144

One table of ``--rows`` x ``--units`` (``recommendation_ranking.py``'s id embedding is
65,536 x 32), a batch of ``--lookups`` rows drawn uniformly (the ranking module's batch of
512 pairs looks up about 15,000 ids over its sampled subgraphs), the step a ``tf.function``
as Keras' ``fit`` runs it: the lookup, a squared loss, the gradient (``tf.IndexedSlices``)
and the optimizer's update. Each optimizer (``adam``, ``lazy_adam``) gets its own table and
warm-up steps; then ``--repeats`` rounds of ``--steps`` steps, the optimizers interleaved in
every round. Prints one JSON line (milliseconds per step, the median over rounds, and each
round's) and writes it to ``--output``.
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks import report
from gnn_trainer_component import setup_process


def _step(optimizer, rows: int, units: int, lookups: int, seed: int):
  """A compiled step over a fresh table, warmed up."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  table = tf.Variable(tf.random.normal([rows, units], stddev=0.1, seed=seed))
  ids = tf.constant(np.random.default_rng(seed).integers(0, rows, lookups))

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.square(tf.gather(table, ids)))
    optimizer.apply_gradients([(tape.gradient(loss, table), table)])

  for _ in range(5):
    step()
  return step


def measure(rows: int, units: int, lookups: int, steps: int, repeats: int) -> dict:
  """``{optimizer: {"ms_per_step": median, "rounds": [...]}}`` for one table size."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from gnn_trainer_component.optimizers import LazyAdam  # pylint: disable=g-import-not-at-top
  runs = {"adam": _step(tf.keras.optimizers.Adam(1e-3), rows, units, lookups, 0),
          "lazy_adam": _step(LazyAdam(1e-3), rows, units, lookups, 0)}
  seconds, _, _ = report.alternate(
      {name: lambda step=step: [step() for _ in range(steps)] for name, step in runs.items()},
      repeats)
  out = {}
  for name, rounds in seconds.items():
    ms = [round(s / steps * 1000, 3) for s in rounds]
    out[name] = {"ms_per_step": statistics.median(ms), "rounds": ms}
  return out


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
  parser.add_argument("--rows", default="1024,65536,262144",
                      help="comma-separated table sizes")
  parser.add_argument("--units", type=int, default=32)
  parser.add_argument("--lookups", type=int, default=15000)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--output", default=None)
  args = parser.parse_args(argv)
  setup_process()
  result = {"units": args.units, "lookups": args.lookups, "steps": args.steps,
            "repeats": args.repeats, "tables": {}}
  for rows in (int(r) for r in args.rows.split(",")):
    got = measure(rows, args.units, args.lookups, args.steps, args.repeats)
    got["adam_over_lazy_adam"] = round(got["adam"]["ms_per_step"]
                                       / got["lazy_adam"]["ms_per_step"], 2)
    result["tables"][str(rows)] = got
  report.print_result(result, args.output)
  return result


if __name__ == "__main__":
  main()
