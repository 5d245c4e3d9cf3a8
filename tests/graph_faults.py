"""A small labelled, timed graph as CSV tables, and the faults injected into it.

Papers citing papers (with a time), authors writing papers, train and test seeds with
times: GraphStatisticsGen's and GraphValidator's tests write it, clean or with one fault.
"""

import os

import numpy as np

SCHEMA = """
node_sets { key: "paper" value {
  features { key: "label" value { dtype: DT_INT64 } }
  features { key: "year" value { dtype: DT_FLOAT } }
  metadata { filename: "papers.csv" } } }
node_sets { key: "author" value {
  features { key: "venue" value { dtype: DT_STRING } }
  metadata { filename: "authors.csv" } } }
edge_sets { key: "cites" value { source: "paper" target: "paper"
  features { key: "ts" value { dtype: DT_INT64 } }
  metadata { filename: "cites.csv" } } }
edge_sets { key: "writes" value { source: "author" target: "paper"
  metadata { filename: "writes.csv" } } }
"""
CONFIG = {"seed_node_set": "paper", "label": "label", "times": {"cites": "ts"}}
SEEDS = {"train": "train.csv", "test": "test.csv"}
NUM_PAPERS, NUM_AUTHORS = 40, 12


def graph(seed: int = 0) -> dict:
  """The clean graph's rows, table -> list of rows (the first: the header)."""
  rng = np.random.default_rng(seed)
  papers = [["id", "label", "year"]] + [
      [f"p{i}", int(rng.integers(0, 3)), float(rng.integers(1990, 2020))]
      for i in range(NUM_PAPERS)]
  cites = [["source", "target", "ts"]]
  for _ in range(120):
    a, b = rng.integers(0, NUM_PAPERS - 5, 2)  # the last five: no citation either way
    cites.append([f"p{a}", f"p{b}", int(rng.integers(0, 100))])
  authors = [["id", "venue"]] + [[f"a{i}", str(rng.choice(["kdd", "icml", "nips"]))]
                                 for i in range(NUM_AUTHORS)]
  writes = [["source", "target"]] + [[f"a{rng.integers(0, NUM_AUTHORS)}", f"p{i}"]
                                     for i in range(NUM_PAPERS)]
  train = [["id", "time"]] + [[f"p{i}", 200] for i in range(0, 20)]  # after every citation
  test = [["id", "time"]] + [[f"p{i}", 200] for i in range(20, 30)]
  return {"papers.csv": papers, "cites.csv": cites, "authors.csv": authors,
          "writes.csv": writes, "train.csv": train, "test.csv": test}


def write(rows_by_table: dict, folder, schema: str = SCHEMA) -> str:
  folder = str(folder)
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "graph_schema.pbtxt"), "w", encoding="utf-8") as f:
    f.write(schema)
  for name, rows in rows_by_table.items():
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
      for row in rows:
        f.write(",".join(str(v) for v in row) + "\n")
  return folder


def dangling(rows):
  rows["writes.csv"].append(["a0", "p999"])


def duplicate(rows):
  rows["authors.csv"].append(["a3", "kdd"])


def future(rows):
  rows["cites.csv"].append(["p1", "p2", 200])  # p1's seed time is 200: at it


def overlap(rows):
  rows["test.csv"].append(["p5", 200])


def unknown_seed(rows):
  rows["train.csv"].append(["p404", 200])


#: The faults each count shows, by the count's name (test_statistics_gen's ``_faults``).
FAULTS = {"dangling": dangling, "duplicate_ids": duplicate, "future_edges": future,
          "overlap": overlap, "unknown_seeds": unknown_seed}


