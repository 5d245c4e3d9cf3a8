"""The in-memory graph load of two checkouts side by side: time and peak RSS, interleaved.

Each load runs in a fresh child process (``in_memory.adapters.load`` of the graph that
``benchmarks.in_memory`` writes, with its seeds and sampling config), the checkouts
alternating, ``--repeats`` of each; medians and the ratio go to ``--output``::

  git worktree add /tmp/before <earlier commit>
  PYTHONPATH=. python -m benchmarks.in_memory_load_ab --before /tmp/before \\
      --graph-dir <work dir of benchmarks.in_memory>/graph --repeats 3
"""

from __future__ import annotations

import argparse
import os

from benchmarks import ab

_CHILD = r'''
import json, os, resource, sys, time
os.environ["TF_USE_LEGACY_KERAS"] = "1"
sys.path.insert(0, sys.argv[1])
try:
  from gnn_trainer_component.in_memory import adapters as inputs
except ImportError:  # a checkout from before in_memory/inputs.py became adapters.py
  from gnn_trainer_component.in_memory import inputs
start = time.perf_counter()
inputs.load(sys.argv[2], seeds={"train": "seeds-train.csv", "eval": "seeds-eval.csv"},
            sampling_config={"seed_node_set": "user", "hops": [{"follows": 10}, {"follows": 5}]},
            splits=["train", "eval"])
print(json.dumps({"load_s": round(time.perf_counter() - start, 2),
                  "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3)}))
'''


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ab.add_checkouts(p)
  p.add_argument("--graph-dir", required=True)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--output", default="benchmarks/results/in_memory-load-ab.json")
  args = p.parse_args()
  cwd = os.path.dirname(os.path.abspath(args.graph_dir))
  ab.compare(args, lambda name, tree: ab.run_child(_CHILD, tree, [args.graph_dir], cwd),
             ("load_s", "peak_rss_gb"), "load_s")


if __name__ == "__main__":
  main()
