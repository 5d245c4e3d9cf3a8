r"""The in-memory sampler, two checkouts side by side: kernel, in-graph pipeline, training.

Each run is a fresh child process that loads the graph ``benchmarks.in_memory``
writes and measures, as ``benchmarks.in_memory`` does: the numpy kernel alone
(``kernel.sample``, ms per batch of 128 seeds, one thread), the trainer's input
pipeline consumed in-graph (seeds/s), and one epoch of GnnTrainer's training
sampling on the fly (ms per step after the first). The checkouts alternate,
``--repeats`` of each::

  git worktree add /tmp/before <earlier commit>
  PYTHONPATH=. python -m benchmarks.sampling_ab --before /tmp/before \\
      --graph-dir <work dir of benchmarks.in_memory>/graph --repeats 3
"""

from __future__ import annotations

from benchmarks import ab

_CHILD = ab.IN_MEMORY_CHILD + r'''
import numpy as np
from gnn_trainer_component.in_memory import kernel
sampler, seeds = splits.sampler, splits.seeds["train"]
rows = [seeds[i:i + in_memory.BATCH_SIZE] for i in range(0, len(seeds), in_memory.BATCH_SIZE)]
kernel_s = in_memory._python_seconds(lambda r, i: kernel.sample(
    sampler.graph, sampler.plan, r, np.random.default_rng(i)), rows, 5)
pipeline = in_memory.measure_sampling(splits, num_train, 5)
run_dir = tempfile.mkdtemp(dir=os.path.dirname(graph_dir))
run = in_memory.train_once(splits, num_train, run_dir, in_memory._counting(sampler))
shutil.rmtree(run_dir)
print(json.dumps({
    "kernel_ms_per_batch": round(1000 * kernel_s / (len(rows) - 5), 3),
    "in_graph_seeds_per_s": pipeline["sampling_seeds_per_s_in_graph"],
    "in_memory_ms_per_step": run["ms_per_step"], "loss": run["loss"],
    "val_accuracy": run["val_accuracy"]}))
'''


def main() -> None:
  ab.compare_on_in_memory_graph(
      __doc__.splitlines()[0], _CHILD,
      ("kernel_ms_per_batch", "in_graph_seeds_per_s", "in_memory_ms_per_step"),
      "kernel_ms_per_batch", "benchmarks/results/sampling-ab.json")


if __name__ == "__main__":
  main()
