r"""GnnTrainer's step on the in-memory graph, two checkouts side by side: ms per step, hooks.

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

from benchmarks import ab

_CHILD = ab.IN_MEMORY_CHILD + r'''
import collections
from gnn_trainer_component.trainer import keras_trainer
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
  ab.compare_on_in_memory_graph(
      __doc__.splitlines()[0], _CHILD, ("floor_ms_per_step", "in_memory_ms_per_step"),
      "floor_ms_per_step", "benchmarks/results/step-overhead-ab.json")


if __name__ == "__main__":
  main()
