"""Benchmark: EmbeddingIndex's index at a million vectors, beside exact search.

  python -m benchmarks.embedding_index [--num-vectors 1000000] [--dim 64] [--clusters 2000]
      [--output benchmarks/results/embedding-index.json]

The vectors are embeddings-like: a seeded mixture of ``--clusters`` Gaussian clusters (unit
centres, spread 0.35 per dimension around them), ids ``n0 ..``. The index is built and gated
as the component does (``gate.release`` with the default ``index_config``: inverted lists
above 20,000 vectors, ``nprobe`` tuned to recall@10 >= 0.95 on 1,000 queries). Prints one JSON
object: ``build_s`` (the layout, the served module and the tuning), ``recall@10``, ``p50_ms``
/ ``p99_ms`` (one query through the served search), ``qps_batch`` (1,000 queries, searched
as the gate searches them, 256 at a time), ``index_mb`` (the SavedModel on disk),
``exact_p50_ms`` (brute force over every vector, one query), ``speedup_at_p50`` (exact over
the index), ``nlist``, ``nprobe`` and ``peak_rss_gb`` (this process).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Optional, Sequence

import numpy as np

from benchmarks import report


def vectors(num: int, dim: int, clusters: int, seed: int = 0):
  """``num`` ids and ``[num, dim]`` float32 vectors around ``clusters`` unit centres."""
  from gnn_trainer_component.index import build
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(clusters, dim))
  centres /= np.linalg.norm(centres, axis=1, keepdims=True)
  matrix = np.empty((num, dim), np.float32)
  for start in range(0, num, 100_000):  # in parts: one float64 copy of a part at a time
    stop = min(num, start + 100_000)
    matrix[start:stop] = (centres[rng.integers(0, clusters, stop - start)]
                          + 0.35 * rng.normal(size=(stop - start, dim)) / np.sqrt(dim))
  return build.Vectors(ids=np.array([f"n{i}" for i in range(num)], dtype=object),
                       matrix=matrix)


def main(argv: Optional[Sequence[str]] = None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--num-vectors", type=int, default=1_000_000)
  parser.add_argument("--dim", type=int, default=64)
  parser.add_argument("--clusters", type=int, default=2000)
  parser.add_argument("--output", default=None)
  args = parser.parse_args(argv)
  from gnn_trainer_component import process
  process.setup_process()
  from gnn_trainer_component.index import config as config_lib
  from gnn_trainer_component.index import gate
  from gnn_trainer_component.index import serving
  data = vectors(args.num_vectors, args.dim, args.clusters)
  cfg = config_lib.parse({"max_p99_ms": 10.0})
  done = gate.release(data, cfg)
  queries = data.matrix[gate.query_rows(args.num_vectors, cfg)]
  start = time.perf_counter()
  gate.served_rows(done.module, queries, cfg.k)
  qps = len(queries) / (time.perf_counter() - start)
  with tempfile.TemporaryDirectory(prefix="embedding-index-") as tmp:
    serving.save(done.module, tmp)
    size = sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(tmp) for name in names)
  m = done.metrics
  result = {"num_vectors": args.num_vectors, "dim": args.dim, "clusters": args.clusters,
            "kind": m["kind"], "nlist": m["nlist"], "nprobe": m["nprobe"],
            "build_s": round(m["build_s"], 1), "recall@10": round(m[f"recall@{cfg.k}"], 4),
            "p50_ms": round(m["p50_ms"], 3), "p99_ms": round(m["p99_ms"], 3),
            "qps_batch": round(qps, 1), "index_mb": round(size / 2**20, 1),
            "exact_p50_ms": round(m["exact_p50_ms"], 3),
            "speedup_at_p50": round(m["exact_p50_ms"] / m["p50_ms"], 1),
            "blessed": done.verdict.blessed,
            "peak_rss_gb": round(report.peak_rss_bytes() / 2**30, 2)}
  report.print_result(result, args.output)
  return result


if __name__ == "__main__":
  main()
