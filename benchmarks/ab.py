"""Two checkouts side by side: the same child program in fresh processes, interleaved, medians.

What ``in_memory_load_ab`` and ``inference_ab`` share: each run is a fresh child process
running a short program with the checkout first on ``sys.path`` (argv[1]), which prints one
JSON line; the checkouts alternate (before, after, before, after, ...) ``repeats`` times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Sequence

#: The checkout these scripts are in: the default ``--after``.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: The start of a child on ``benchmarks.in_memory``'s graph (``sys.argv``: the checkout, the
#: graph folder, the training seeds): ``splits`` loaded, its training seeds cut to the number.
IN_MEMORY_CHILD = r'''
import dataclasses, json, os, shutil, sys, tempfile, time
os.environ["TF_USE_LEGACY_KERAS"] = "1"
sys.path.insert(0, sys.argv[1])
import gnn_trainer_component
gnn_trainer_component.setup_process()
from benchmarks import in_memory
from gnn_trainer_component.in_memory import adapters
graph_dir, num_train = sys.argv[2], int(sys.argv[3])
splits = adapters.load(graph_dir, seeds={"train": "seeds-train.csv", "eval": "seeds-eval.csv"},
                       sampling_config=in_memory.SAMPLING_CONFIG, splits=["train", "eval"])
splits = dataclasses.replace(splits, seeds={"train": splits.seeds["train"][:num_train],
                                            "eval": splits.seeds["eval"][:10000]})
'''


def run_child(program: str, tree: str, args: Sequence[str], cwd: str) -> dict:
  """``program`` in a fresh Python with ``tree`` as argv[1]; the JSON line it printed last."""
  out = subprocess.run([sys.executable, "-c", program, tree, *args], capture_output=True,
                       text=True, cwd=cwd, check=False)
  lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
  if out.returncode or not lines:
    raise RuntimeError(f"the run with {tree} failed:\n{out.stderr[-3000:]}")
  return json.loads(lines[-1])


def add_checkouts(parser: argparse.ArgumentParser) -> None:
  """``--before`` (required) and ``--after`` (default: this checkout)."""
  parser.add_argument("--before", required=True, help="A checkout of the earlier commit.")
  parser.add_argument("--after", default=HERE,
                      help="The checkout to compare (default: this one).")


def compare(args: argparse.Namespace, run, keys: Sequence[str], ratio_key: str) -> dict:
  """Runs ``run(name, tree)`` for ``args.before`` and ``args.after``, ``args.repeats`` rounds.

  Summarized into ``args.output`` (:func:`interleave`, :func:`summarize`).
  """
  runs = interleave({"before": args.before, "after": args.after}, args.repeats, run)
  return summarize(runs, keys, ratio_key, args.output)


def compare_on_in_memory_graph(description: str, child: str, keys: Sequence[str],
                               ratio_key: str, output: str) -> dict:
  """The command line of an A/B of :data:`IN_MEMORY_CHILD` children: parses it, runs them."""
  p = argparse.ArgumentParser(description=description)
  add_checkouts(p)
  p.add_argument("--graph-dir", required=True, help="benchmarks.in_memory's graph folder.")
  p.add_argument("--train-seeds", type=int, default=50_000)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--output", default=output)
  args = p.parse_args()
  cwd = os.path.dirname(os.path.abspath(args.graph_dir))
  return compare(args, lambda name, tree: run_child(
      child, tree, [args.graph_dir, str(args.train_seeds)], cwd), keys, ratio_key)


def interleave(trees: dict[str, str], repeats: int, run) -> dict[str, list[dict]]:
  """``run(name, tree)`` for each checkout in turn, ``repeats`` rounds."""
  runs: dict[str, list[dict]] = {name: [] for name in trees}
  for _ in range(repeats):
    for name, tree in trees.items():
      runs[name].append(run(name, tree))
      print(name, runs[name][-1], file=sys.stderr, flush=True)
  return runs


def summarize(runs: dict[str, list[dict]], keys: Sequence[str], ratio_key: str,
              output: str) -> dict:
  """Medians of ``keys`` per checkout and after / before of ``ratio_key``, written to ``output``."""
  summary = {name: {**{f"{k}_median": statistics.median(r[k] for r in rs) for k in keys},
                    "runs": rs} for name, rs in runs.items()}
  summary[f"after_over_before_{ratio_key}"] = round(
      summary["after"][f"{ratio_key}_median"] / summary["before"][f"{ratio_key}_median"], 3)
  print(json.dumps(summary, indent=1))
  with open(output, "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1)
  return summary
