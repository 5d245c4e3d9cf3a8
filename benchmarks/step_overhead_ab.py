"""GnnTrainer's step on the in-memory graph, two checkouts side by side: ms per step, hooks.

Each run is a fresh child process that loads the graph ``benchmarks.in_memory``
writes, then trains its model one epoch through GnnTrainer's ``train_and_export``
with GnnTrainer's default callbacks (TensorBoard scalars every 500 steps,
backups every 60 s, the numerics guard): on pre-sampled batches (``floor``) and
sampling on the fly (``in_memory``), as ``benchmarks.in_memory`` does. It
reports ms per step after the first and, per callback, the ms per step its
step hooks took. The checkouts alternate, ``--repeats`` of each::

  git worktree add /tmp/before <earlier commit>
  PYTHONPATH=. python -m benchmarks.step_overhead_ab --before /tmp/before \\
      --graph-dir <work dir of benchmarks.in_memory>/graph --repeats 3
"""

from __future__ import annotations

import argparse
import os

from benchmarks import ab

_CHILD = r'''
import collections, dataclasses, json, os, shutil, sys, tempfile, time
os.environ["TF_USE_LEGACY_KERAS"] = "1"
sys.path.insert(0, sys.argv[1])
import gnn_trainer_component
gnn_trainer_component.setup_process()
from benchmarks import in_memory
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.trainer import keras_trainer
graph_dir, num_train = sys.argv[2], int(sys.argv[3])
splits = adapters.load(graph_dir, seeds={"train": "seeds-train.csv", "eval": "seeds-eval.csv"},
                       sampling_config=in_memory.SAMPLING_CONFIG, splits=["train", "eval"])
splits = dataclasses.replace(splits, seeds={"train": splits.seeds["train"][:num_train],
                                            "eval": splits.seeds["eval"][:10000]})
hooks = collections.Counter()
callbacks = keras_trainer._callbacks

def timed_callbacks(*args, **kwargs):
  made = callbacks(*args, **kwargs)
  for callback in made[0]:
    for hook in ("on_train_batch_begin", "on_train_batch_end"):
      def timed(*a, _f=getattr(callback, hook), _name=type(callback).__name__, **k):
        start = time.perf_counter()
        try:
          return _f(*a, **k)
        finally:
          hooks[_name] += time.perf_counter() - start
      setattr(callback, hook, timed)
  return made

keras_trainer._callbacks = timed_callbacks
result = {}
for variant, source in (("floor", in_memory._CachedGraph(splits)), ("in_memory", splits)):
  hooks.clear()
  run_dir = tempfile.mkdtemp(dir=os.path.dirname(graph_dir))
  run = in_memory.train_once(source, num_train, run_dir, in_memory._counting(splits.sampler))
  shutil.rmtree(run_dir)
  result[f"{variant}_ms_per_step"] = run["ms_per_step"]
  result[f"{variant}_hooks_ms_per_step"] = {
      k: round(1000 * v / run["steps"], 3) for k, v in sorted(hooks.items())}
print(json.dumps(result))
'''


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ab.add_checkouts(p)
  p.add_argument("--graph-dir", required=True)
  p.add_argument("--train-seeds", type=int, default=50_000)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--output", default="benchmarks/results/step-overhead-ab.json")
  args = p.parse_args()
  cwd = os.path.dirname(os.path.abspath(args.graph_dir))
  ab.compare(args, lambda name, tree: ab.run_child(
      _CHILD, tree, [args.graph_dir, str(args.train_seeds)], cwd),
             ("floor_ms_per_step", "in_memory_ms_per_step"), "floor_ms_per_step")


if __name__ == "__main__":
  main()
