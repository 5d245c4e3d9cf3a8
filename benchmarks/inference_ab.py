"""GraphInferrer's in-memory engine of two checkouts side by side on the same graph and model.

Each run is a fresh child process (``inferrer.in_memory.infer`` with the in-memory
benchmark's sampling config, batches of 512, loading included), the checkouts alternating,
``--repeats`` of each; medians and the ratio go to ``--output``::

  git worktree add /tmp/before <earlier commit>
  PYTHONPATH=. python -m benchmarks.inference_ab --before /tmp/before \\
      --graph-dir /tmp/inf/graph --model /tmp/inf/train-*/model --nodes nodes-first-200000.csv

The graph folder and the model are those ``benchmarks.inference --work-dir /tmp/inf`` makes;
``--nodes`` (a node table in the graph folder) limits the nodes embedded.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from benchmarks import ab

_CHILD = r'''
import json, os, resource, sys, time
os.environ["TF_USE_LEGACY_KERAS"] = "1"
sys.path.insert(0, sys.argv[1])
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import in_memory
cfg = config_lib.InferenceConfig(batch_size=512, engine="in_memory")
t = time.perf_counter()
r = in_memory.infer(sys.argv[2], sys.argv[3], sys.argv[4], cfg=cfg,
                    sampling_config={"seed_node_set": "user",
                                     "hops": [{"follows": 10}, {"follows": 5}]},
                    nodes=sys.argv[5] or None)
print(json.dumps({"seconds": round(time.perf_counter() - t, 1), "rows": r.rows,
                  "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
                                       3)}))
'''


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ab.add_checkouts(p)
  p.add_argument("--graph-dir", required=True, help="benchmarks.inference's graph folder.")
  p.add_argument("--model", required=True, help="The SavedModel folder to run.")
  p.add_argument("--nodes", default="", help="A node table in the graph folder (default: all).")
  p.add_argument("--repeats", type=int, default=2)
  p.add_argument("--output", default="benchmarks/results/inference-ab.json")
  args = p.parse_args()
  out_dir = tempfile.mkdtemp(prefix="inference-ab-")

  def run(name: str, tree: str) -> dict:
    table = os.path.join(out_dir, f"{name}.parquet")
    return ab.run_child(_CHILD, tree, [args.graph_dir, args.model, table, args.nodes], out_dir)

  ab.compare(args, run, ("seconds", "peak_rss_gb"), "seconds")


if __name__ == "__main__":
  main()
