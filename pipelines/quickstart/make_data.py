"""Writes the quickstart's graph: users who buy items, as CSV tables and a graph schema.

  python -m pipelines.quickstart.make_data [--out pipelines/quickstart/data]

The files in ``pipelines/quickstart/data/`` were written by this script (seeded:
the same bytes every time); the quickstart reads those, not this script.

* ``users.csv`` (``id,age,visits,label``): 300 users. ``label`` is the user's
  segment (0, 1 or 2), what the model learns to predict; ``age`` is a hint of it
  (mean 25, 45 or 65 by segment, spread 8), ``visits`` is noise.
* ``items.csv`` (``id,price,rating,category``): 120 items in 6 categories;
  categories ``2k`` and ``2k+1`` belong to department ``k``; ``price`` depends on
  the department, ``rating`` is noise.
* ``bought.csv`` (``source,target``): user -> item, 3 to 6 purchases per user,
  half of them in the department of the user's segment, the others at random.
* ``also_viewed.csv`` (``source,target``): item -> item, 3 per item, 80 % in
  the same department.
* ``seeds-{train,eval,test}.csv`` (``id``): the users of each split (180/60/60).
* ``graph_schema.pbtxt``: the TF-GNN graph schema naming those tables.

Neither the purchases nor the age tell a user's segment alone: a model that
reads both, the items a user bought (structure + item features) and the user's
own features, predicts it better than either, and better than label propagation
over the purchases.
"""

from __future__ import annotations

import argparse
import os
from typing import Optional, Sequence

import numpy as np

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
NUM_USERS = 300
NUM_ITEMS = 120
NUM_SEGMENTS = 3  # = departments; two item categories each
SPLITS = {"train": 180, "eval": 60, "test": 60}

GRAPH_SCHEMA = """\
node_sets {
  key: "user"
  value {
    description: "Users to classify: label is their segment (0, 1 or 2)."
    features { key: "age" value { dtype: DT_FLOAT } }
    features { key: "visits" value { dtype: DT_FLOAT } }
    features { key: "label" value { dtype: DT_INT64 } }
    metadata { filename: "users.csv" }
  }
}
node_sets {
  key: "item"
  value {
    description: "Items for sale."
    features { key: "price" value { dtype: DT_FLOAT } }
    features { key: "rating" value { dtype: DT_FLOAT } }
    features { key: "category" value { dtype: DT_INT64 } }
    metadata { filename: "items.csv" }
  }
}
edge_sets {
  key: "bought"
  value {
    description: "A user bought an item."
    source: "user"
    target: "item"
    metadata { filename: "bought.csv" }
  }
}
edge_sets {
  key: "also_viewed"
  value {
    description: "People who viewed the source item also viewed the target item."
    source: "item"
    target: "item"
    metadata { filename: "also_viewed.csv" }
  }
}
"""


def _write_csv(path: str, header: str, rows: Sequence[Sequence[object]]) -> None:
  with open(path, "w", encoding="utf-8", newline="\n") as f:
    f.write(header + "\n")
    f.writelines(",".join(str(v) for v in row) + "\n" for row in rows)


def _pick(rng: np.random.Generator, same: np.ndarray, others: np.ndarray,
          p_same: float) -> int:
  """An item of ``same`` with probability ``p_same``, else one of ``others``."""
  return int(rng.choice(same if rng.random() < p_same else others))


def write_data(out_dir: str = DATA_DIR, seed: int = 0) -> dict[str, str]:
  """Writes the tables, seed tables and graph schema into ``out_dir`` (created).

  Returns:
    File name -> path of every file written.
  """
  rng = np.random.default_rng(seed)
  os.makedirs(out_dir, exist_ok=True)
  category = np.arange(NUM_ITEMS) % (2 * NUM_SEGMENTS)
  department = category // 2
  in_department = [np.flatnonzero(department == d) for d in range(NUM_SEGMENTS)]
  price = np.round(rng.lognormal(np.log([8.0, 30.0, 90.0])[department], 0.6), 2)
  rating = np.round(rng.uniform(1.0, 5.0, NUM_ITEMS), 1)
  segment = rng.permutation(np.arange(NUM_USERS) % NUM_SEGMENTS)
  age = np.clip(np.round(rng.normal(np.array([25.0, 45.0, 65.0])[segment], 8.0)), 18, 80)
  visits = rng.poisson(3.0, NUM_USERS)

  bought = []
  for user in range(NUM_USERS):
    items, count = set(), rng.integers(3, 7)
    while len(items) < count:
      items.add(_pick(rng, in_department[segment[user]], np.arange(NUM_ITEMS), 0.5))
    bought += [(f"u{user}", f"i{item}") for item in sorted(items)]
  also_viewed = []
  for item in range(NUM_ITEMS):
    others = np.delete(np.arange(NUM_ITEMS), item)
    same = np.setdiff1d(in_department[department[item]], [item])
    targets = set()
    while len(targets) < 3:
      targets.add(_pick(rng, same, others, 0.8))
    also_viewed += [(f"i{item}", f"i{t}") for t in sorted(targets)]

  files = {}

  def put(name: str, header: str, rows) -> None:
    files[name] = os.path.join(out_dir, name)
    _write_csv(files[name], header, rows)

  put("users.csv", "id,age,visits,label",
      [(f"u{u}", int(age[u]), visits[u], segment[u]) for u in range(NUM_USERS)])
  put("items.csv", "id,price,rating,category",
      [(f"i{i}", price[i], rating[i], category[i]) for i in range(NUM_ITEMS)])
  put("bought.csv", "source,target", bought)
  put("also_viewed.csv", "source,target", also_viewed)
  order = rng.permutation(NUM_USERS)
  start = 0
  for split, size in SPLITS.items():
    put(f"seeds-{split}.csv", "id", [(f"u{u}",) for u in sorted(order[start:start + size])])
    start += size
  files["graph_schema.pbtxt"] = os.path.join(out_dir, "graph_schema.pbtxt")
  with open(files["graph_schema.pbtxt"], "w", encoding="utf-8", newline="\n") as f:
    f.write(GRAPH_SCHEMA)
  return files


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--out", default=DATA_DIR, help="output folder (default: %(default)s)")
  args = parser.parse_args(argv)
  for path in write_data(args.out).values():
    print(path)
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
