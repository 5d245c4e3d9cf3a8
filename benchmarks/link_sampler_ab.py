r"""LinkSampler of two checkouts side by side on Cora: time, peak memory and the same examples.

Each run is a fresh child process running LinkSampler's executor
(``benchmarks.link_sampler_memory``'s run: Beam's in-process DirectRunner, as under
LocalDagRunner, the link benchmark's config) with the checkout first on ``sys.path``; the
checkouts alternate, ``--repeats`` of each per mode; medians and the after / before ratio go to
``--output``, and the examples of the two checkouts are compared record by record (a change of
the Beam engine's speed must not change one example)::

  git worktree add /tmp/before <earlier commit>
  PYTHONPATH=. python -m benchmarks.link_sampler_ab --before /tmp/before \
      --data-dir ../shared/data/planetoid --output benchmarks/results/link-sampler-ab.json
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from benchmarks import ab
from benchmarks import link_prediction
from benchmarks import link_sampler_memory
from pipelines.planetoid import run_local

_CHILD = r'''
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
sys.path.insert(0, sys.argv[1])
from benchmarks import link_sampler_memory
print(json.dumps(link_sampler_memory._sample_once(sys.argv[2], sys.argv[3], sys.argv[4],
                                                  float(sys.argv[5]))))
'''


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ab.add_checkouts(p)
  p.add_argument("--data-dir", required=True, help="The Planetoid folder (Cora).")
  p.add_argument("--modes", nargs="+", default=["broadcast"],
                 choices=link_sampler_memory.MODES, help="Node features broadcast or joined.")
  p.add_argument("--train-negatives", type=float,
                 default=link_prediction.DEFAULT_TRAIN_NEGATIVES)
  p.add_argument("--repeats", type=int, default=2)
  p.add_argument("--output", default="benchmarks/results/link-sampler-ab.json")
  args = p.parse_args(argv)
  work_dir = tempfile.mkdtemp(prefix="link-sampler-ab-")
  tables = run_local.prepare_tables("cora", os.path.abspath(args.data_dir), work_dir)["dir"]
  same = {}
  for mode in args.modes:
    count = {"before": 0, "after": 0}

    def run(name: str, tree: str, mode: str = mode, count: dict = count) -> dict:
      out = os.path.join(work_dir, f"{mode}-{name}-{count[name]}")
      count[name] += 1
      return ab.run_child(_CHILD, tree, [mode, tables, out, str(args.train_negatives)],
                          work_dir)

    runs = ab.interleave({"before": args.before, "after": args.after}, args.repeats, run)
    same[mode] = (link_sampler_memory._canonical_examples(runs["before"][0]["examples_uri"])
                  == link_sampler_memory._canonical_examples(runs["after"][0]["examples_uri"]))
    for rs in runs.values():
      for r in rs:
        del r["examples_uri"]  # a temporary folder
    output = args.output if len(args.modes) == 1 else args.output.replace(
        ".json", f"-{mode}.json")
    summary = ab.summarize(runs, ("seconds", "peak_rss_gib"), "seconds", output)
    print(f"{mode}: after / before {summary['after_over_before_seconds']}, the same examples: "
          f"{same[mode]}", file=sys.stderr)
  return 0 if all(same.values()) else 1


if __name__ == "__main__":
  sys.exit(main())
