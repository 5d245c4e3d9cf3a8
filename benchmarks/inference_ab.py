"""GraphInferrer's in-memory engine of two checkouts side by side on the same graph and model.

Each run is a fresh child process (``inferrer.in_memory.infer`` with the in-memory
benchmark's sampling config, batches of 512), the checkouts alternating; medians::

  git worktree add /tmp/before <earlier commit>
  python benchmarks/inference_ab.py <model dir> <nodes table in the graph folder> <repeats>

The graph folder and the model are those ``benchmarks.inference --work-dir /tmp/inf`` makes
(``/tmp/inf/graph``, ``/tmp/inf/train-*/model``); the checkouts are ``/tmp/before`` and this one.
"""
import json, os, subprocess, sys, statistics
CHILD = r'''
import json, os, resource, sys, time
os.environ["TF_USE_LEGACY_KERAS"] = "1"
sys.path.insert(0, sys.argv[1])
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import in_memory
cfg = config_lib.InferenceConfig(batch_size=512, engine="in_memory")
t = time.perf_counter()
r = in_memory.infer("/tmp/inf/graph", sys.argv[2], sys.argv[3], cfg=cfg,
                    sampling_config={"seed_node_set": "user", "hops": [{"follows": 10}, {"follows": 5}]},
                    nodes=sys.argv[4])
print(json.dumps({"seconds": round(time.perf_counter() - t, 1), "rows": r.rows,
                  "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3)}))
'''
model = sys.argv[1]; nodes = sys.argv[2]; reps = int(sys.argv[3])
res = {"before": [], "after": []}
for i in range(reps):
  for name, root in (("before", "/tmp/before"), ("after", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))):
    out = subprocess.run([sys.executable, "-c", CHILD, root, model, f"/tmp/ab-{name}.parquet", nodes], capture_output=True, text=True, cwd="/tmp")
    line = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if not line: print(out.stderr[-3000:]); sys.exit(1)
    res[name].append(json.loads(line[-1])); print(name, res[name][-1], flush=True)
summary = {k: {"seconds_median": statistics.median(r["seconds"] for r in v), "runs": v}
           for k, v in res.items()}
summary["after_over_before"] = round(summary["after"]["seconds_median"]
                                     / summary["before"]["seconds_median"], 3)
print(json.dumps(summary, indent=1))
with open("benchmarks/results/inference-ab.json", "w", encoding="utf-8") as f:
  json.dump(summary, f, indent=1)
