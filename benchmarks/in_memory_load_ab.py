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
import json
import os
import statistics
import subprocess
import sys

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


def _load(tree: str, graph_dir: str) -> dict:
  out = subprocess.run([sys.executable, "-c", _CHILD, tree, graph_dir], capture_output=True,
                       text=True, cwd=os.path.dirname(os.path.abspath(graph_dir)), check=False)
  lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
  if out.returncode or not lines:
    raise RuntimeError(f"loading with {tree} failed:\n{out.stderr[-3000:]}")
  return json.loads(lines[-1])


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--before", required=True, help="A checkout of the earlier commit.")
  p.add_argument("--after", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                 help="The checkout to compare (default: this one).")
  p.add_argument("--graph-dir", required=True)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--output", default="benchmarks/results/in_memory-load-ab.json")
  args = p.parse_args()
  runs = {"before": [], "after": []}
  for _ in range(args.repeats):
    for name in ("before", "after"):
      runs[name].append(_load(getattr(args, name), args.graph_dir))
      print(name, runs[name][-1], file=sys.stderr, flush=True)
  summary = {name: {"load_s_median": statistics.median(r["load_s"] for r in rs),
                    "peak_rss_gb_median": statistics.median(r["peak_rss_gb"] for r in rs),
                    "runs": rs} for name, rs in runs.items()}
  summary["after_over_before_load"] = round(
      summary["after"]["load_s_median"] / summary["before"]["load_s_median"], 3)
  print(json.dumps(summary, indent=1))
  with open(args.output, "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1)


if __name__ == "__main__":
  main()
