"""A large synthetic graph as GraphSampler's input tables (node/edge CSV + graph schema).

  PYTHONPATH=. .venv/bin/python -m benchmarks.power_law_graph --out /tmp/g \\
      --num-nodes 1000000 --num-edges 10000000

Node set ``user`` (``id``, a float ``score``, an int ``label`` in [0, 10)) and
edge set ``follows`` (``source``, ``target``). Degrees follow a power law: a
Chung-Lu graph, where each edge's endpoints are drawn independently with
probability proportional to a node weight ``(rank + 1) ** (-1 / (gamma - 1))``,
so the expected degree of a node is proportional to its weight and the degree
distribution has exponent ``gamma`` (2.5 by default: a few hubs with tens of
thousands of edges, most nodes with a handful). Node ids are shuffled so hubs
are spread over the table. The label depends on the neighbourhood (the sign of
the mean ``score`` of the node's out-neighbours, plus the node's own score
bucket), so a model needs the edges to predict it.

Everything is streamed in chunks of ``--chunk`` edges: memory is O(nodes), not
O(edges). Tables are written as ``--shards`` CSV files each (a glob such as
``nodes-*-of-00004.csv`` in the schema), seeds (``--seed-fraction`` of the nodes, 90 % train,
10 % eval) as ``seeds-train.csv`` / ``seeds-eval.csv``. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Optional, Sequence

import numpy as np

SCHEMA = """\
node_sets {{ key: "user" value {{
  features {{ key: "score" value {{ dtype: DT_FLOAT }} }}
  features {{ key: "label" value {{ dtype: DT_INT64 }} }}
  metadata {{ filename: "{nodes}" }} }} }}
edge_sets {{ key: "follows" value {{ source: "user" target: "user"
  metadata {{ filename: "{edges}" }} }} }}
"""


def _table_name(name: str, shards: int) -> str:
  # A glob, not TF-GNN's "name@N": its CSV reader globs the unexpanded name.
  return f"{name}.csv" if shards == 1 else f"{name}-*-of-{shards:05d}.csv"


def _shard_paths(out_dir: str, name: str, shards: int) -> list[str]:
  if shards == 1:
    return [os.path.join(out_dir, f"{name}.csv")]
  return [os.path.join(out_dir, f"{name}-{i:05d}-of-{shards:05d}.csv") for i in range(shards)]


def _write_ids(path: str, header: str, rows: Sequence[str]) -> None:
  with open(path, "w") as f:
    f.write(header + "\n")
    f.writelines(rows)


def generate(out_dir: str, *, num_nodes: int, num_edges: int, gamma: float = 2.5,
             shards: int = 4, seed_fraction: float = 0.01, chunk: int = 1_000_000,
             seed: int = 0) -> dict:
  """Writes the tables into ``out_dir`` (created); returns what was written.

  Returns:
    ``{"num_nodes", "num_edges", "max_degree", "median_degree", "seeds": {split:
    table}, "graph_schema", "bytes", "seconds"}``.
  """
  if num_nodes < 10 or num_edges < 1 or not 0 < seed_fraction < 1 or gamma <= 2:
    raise ValueError("Need num_nodes >= 10, num_edges >= 1, 0 < seed_fraction < 1, gamma > 2.")
  start = time.time()
  os.makedirs(out_dir, exist_ok=True)
  rng = np.random.default_rng(seed)
  weights = (np.arange(num_nodes) + 1.0) ** (-1.0 / (gamma - 1.0))
  cdf = np.cumsum(weights)
  cdf /= cdf[-1]
  node_of_rank = rng.permutation(num_nodes)  # hubs at random ids
  score = rng.standard_normal(num_nodes).astype(np.float32)
  neighbour_sum = np.zeros(num_nodes)
  degree = np.zeros(num_nodes, dtype=np.int64)

  edge_files = [open(p, "w") for p in _shard_paths(out_dir, "edges", shards)]  # pylint: disable=consider-using-with
  try:
    for f in edge_files:
      f.write("source,target\n")
    written = 0
    while written < num_edges:
      n = min(chunk, num_edges - written)
      src = node_of_rank[np.searchsorted(cdf, rng.random(n))]
      tgt = node_of_rank[np.searchsorted(cdf, rng.random(n))]
      np.add.at(neighbour_sum, src, score[tgt])
      np.add.at(degree, src, 1)
      np.add.at(degree, tgt, 1)
      lines = np.char.add(np.char.add(np.char.add("u", src.astype(str)), ",u"),
                          np.char.add(tgt.astype(str), "\n"))
      for f, part in zip(edge_files, np.array_split(lines, shards)):
        f.write("".join(part.tolist()))
      written += n
  finally:
    for f in edge_files:
      f.close()

  out_degree_mean = np.divide(neighbour_sum, np.maximum(1, degree))
  label = ((out_degree_mean > 0).astype(np.int64) * 5
           + np.clip(((score + 2.5) * 1.0).astype(np.int64), 0, 4))
  for i, path in enumerate(_shard_paths(out_dir, "nodes", shards)):
    ids = np.arange(i, num_nodes, shards)
    rows = [f"u{n},{s:.5f},{lab}\n" for n, s, lab in zip(ids, score[ids], label[ids])]
    _write_ids(path, "id,score,label", rows)

  seeds_n = max(2, int(num_nodes * seed_fraction))
  seed_ids = rng.choice(num_nodes, size=seeds_n, replace=False)
  n_train = max(1, int(seeds_n * 0.9))
  seeds = {}
  for split, ids in (("train", seed_ids[:n_train]), ("eval", seed_ids[n_train:])):
    seeds[split] = f"seeds-{split}.csv"
    _write_ids(os.path.join(out_dir, seeds[split]), "id", [f"u{n}\n" for n in ids])

  with open(os.path.join(out_dir, "graph_schema.pbtxt"), "w") as f:
    f.write(SCHEMA.format(nodes=_table_name("nodes", shards), edges=_table_name("edges", shards)))
  size = sum(os.path.getsize(os.path.join(out_dir, p)) for p in os.listdir(out_dir))
  return {"num_nodes": num_nodes, "num_edges": num_edges, "gamma": gamma,
          "max_degree": int(degree.max()), "median_degree": float(np.median(degree)),
          "seeds": {s: int(len(ids)) for s, ids in (("train", seed_ids[:n_train]),
                                                    ("eval", seed_ids[n_train:]))},
          "seed_tables": seeds, "graph_schema": os.path.join(out_dir, "graph_schema.pbtxt"),
          "bytes": size, "seconds": round(time.time() - start, 1)}


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--out", required=True, help="Output folder (created).")
  p.add_argument("--num-nodes", type=int, default=1_000_000)
  p.add_argument("--num-edges", type=int, default=10_000_000)
  p.add_argument("--gamma", type=float, default=2.5, help="Degree exponent (> 2).")
  p.add_argument("--shards", type=int, default=4, help="CSV files per table.")
  p.add_argument("--seed-fraction", type=float, default=0.01,
                 help="Fraction of the nodes that are seeds (90 %% train, 10 %% eval).")
  p.add_argument("--seed", type=int, default=0)
  args = p.parse_args(argv)
  print(json.dumps(generate(args.out, num_nodes=args.num_nodes, num_edges=args.num_edges,
                            gamma=args.gamma, shards=args.shards,
                            seed_fraction=args.seed_fraction, seed=args.seed)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
