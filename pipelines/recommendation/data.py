"""A user-item rating graph with planted tastes and skewed popularity, as CSV tables.

  python -m pipelines.recommendation.data --out DIR [--users N] [--items N]
                                          [--ratings-per-user N] [--seed N] [--stars]

* ``items.csv`` (``id,genre,price,views``): items of :data:`NUM_GENRES`
  genres; each has a popularity weight from a Zipf law (exponent 1), so a few
  items gather most ratings, as in shops and catalogues. ``views`` counts
  visits of the item's page (outside the ratings): popularity seen through
  noise; ``price`` is noise.
* ``users.csv`` (``id,age,activity``): each user has a favourite genre (a
  taste), which no user feature tells; ``age`` and ``activity`` are noise.
* ``rated.csv`` (``source,target``): user -> item, about ``ratings_per_user``
  distinct items per user (at least one): with probability
  :data:`IN_TASTE` from the user's favourite genre, else from any genre, each
  draw proportional to the items' popularity.
  With ``--stars`` each rating also has a value: ``stars`` (1 to 5, :func:`stars`: the
  user's leniency, the item's quality, and :data:`TASTE_STARS` more in the user's
  favourite genre), ``liked`` (1 where ``stars`` >= 4, else 0), for edge regression and
  classification (``link_config``'s ``edge_label``), and ``completion`` (how much of the item
  the user went through, 0 to 1, which follows the rating: an input of the pair, named in
  ``link_config``'s ``edge_features``).
* ``rated_by.csv``: the same edges reversed (item -> user), for messages from
  users to items.
* ``graph_schema.pbtxt``: the TF-GNN graph schema naming those tables; it declares each node
  set's ``#id``, which the engines fill with the node's id (for id embeddings).

Ranking the most popular unrated items ignores tastes; a model that reads the
genres of what a user rated, and the items' views, can rank the popular items
of the right genre first. The generator is seeded: the same arguments give the same bytes.
"""

from __future__ import annotations

import argparse
import os
from typing import NamedTuple, Optional, Sequence

import numpy as np

NUM_GENRES = 8
#: Share of a user's ratings drawn from their favourite genre.
IN_TASTE = 0.8
#: ``--stars``: how many stars more a rating of the user's favourite genre gets; the spread
#: of the users' leniency and the items' quality, and of each rating's noise.
TASTE_STARS, BIAS_SPREAD, STARS_NOISE = 1.5, 0.5, 0.5
#: ``--stars``: the spread of each rating's ``completion`` around what its stars say.
COMPLETION_NOISE = 0.08
#: ``--stars``: the features the ``rated`` edges get.
STAR_FEATURES = """\
    features { key: "stars" value { dtype: DT_INT64 } }
    features { key: "liked" value { dtype: DT_INT64 } }
    features { key: "completion" value { dtype: DT_FLOAT } }
"""

GRAPH_SCHEMA = """\
node_sets {
  key: "user"
  value {
    description: "People who rate items."
    features { key: "#id" value { dtype: DT_STRING } }
    features { key: "age" value { dtype: DT_FLOAT } }
    features { key: "activity" value { dtype: DT_FLOAT } }
    metadata { filename: "users.csv" }
  }
}
node_sets {
  key: "item"
  value {
    description: "Items to recommend."
    features { key: "#id" value { dtype: DT_STRING } }
    features { key: "genre" value { dtype: DT_INT64 } }
    features { key: "price" value { dtype: DT_FLOAT } }
    features { key: "views" value { dtype: DT_FLOAT } }
    metadata { filename: "items.csv" }
  }
}
edge_sets {
  key: "rated"
  value {
    description: "The user rated the item: the edges to predict."
    source: "user"
    target: "item"
    metadata { filename: "rated.csv" }
  }
}
edge_sets {
  key: "rated_by"
  value {
    description: "The same edges reversed: the item was rated by the user."
    source: "item"
    target: "user"
    metadata { filename: "rated_by.csv" }
  }
}
"""


def _rate(rng: np.random.Generator, users: range, genre: np.ndarray, popularity: np.ndarray,
          ratings_per_user: float) -> tuple[list[tuple[int, int]], np.ndarray]:
  """``(user, item)`` ratings of ``users``, and each one's favourite genre (drawn here)."""
  num_items = len(genre)
  taste = rng.integers(NUM_GENRES, size=len(users))
  counts = np.minimum(1 + rng.poisson(ratings_per_user - 1, size=len(users)), num_items // 2)
  by_genre = [np.flatnonzero(genre == g) for g in range(NUM_GENRES)]
  pairs = []
  for k, user in enumerate(users):
    chosen: set[int] = set()
    while len(chosen) < counts[k]:
      pool = by_genre[taste[k]] if rng.random() < IN_TASTE else np.arange(num_items)
      if len(pool) == 0:
        pool = np.arange(num_items)
      weights = popularity[pool] / popularity[pool].sum()
      chosen.add(int(rng.choice(pool, p=weights)))
    pairs += [(user, item) for item in sorted(chosen)]
  return pairs, taste


class Ratings(NamedTuple):
  """A generated rating graph.

  Per item its ``genre`` and ``popularity``, per user its favourite genre (``taste``), and
  the ``[R, 2]`` (user, item) ``pairs``.
  """
  genre: np.ndarray
  popularity: np.ndarray
  taste: np.ndarray
  pairs: np.ndarray


def ratings(num_users: int, num_items: int, ratings_per_user: float, seed: int,
            new_users: int = 0) -> Ratings:
  """The ratings of ``num_users`` users (and ``new_users`` more) on ``num_items`` items.

  ``new_users`` users more (ids from ``num_users`` on) rate by the same law, drawn after the
  others from their own generator: the first ``num_users`` users' ratings do not change.
  """
  rng = np.random.default_rng(seed)
  genre = rng.integers(NUM_GENRES, size=num_items)
  popularity = 1.0 / rng.permutation(np.arange(1, num_items + 1))  # Zipf, exponent 1
  pairs, taste = _rate(rng, range(num_users), genre, popularity, ratings_per_user)
  later, later_taste = _rate(np.random.default_rng(seed + 2),
                             range(num_users, num_users + new_users), genre, popularity,
                             ratings_per_user)
  return Ratings(genre, popularity, np.r_[taste, later_taste],
                 np.array(pairs + later, np.int64).reshape(-1, 2))


def law(genre: np.ndarray, popularity: np.ndarray) -> np.ndarray:
  """``[NUM_GENRES, items]``: the chance that a user of each taste rates each item first.

  What :func:`_rate` draws from: :data:`IN_TASTE` of the time an item of the favourite genre
  in proportion to its popularity, else any item in proportion to its popularity (later
  ratings of a user are drawn again until distinct).
  """
  in_genre = np.array([popularity[genre == g].sum() for g in range(NUM_GENRES)])
  favourite = genre[None, :] == np.arange(NUM_GENRES)[:, None]
  return popularity[None, :] * (IN_TASTE * favourite / in_genre[:, None]
                                + (1 - IN_TASTE) / popularity.sum())


def stars(graph: Ratings, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """``(stars, completion)`` of each rating.

  Stars, 1 to 5: 2.5 + the user's leniency + the item's quality (each normal, spread
  :data:`BIAS_SPREAD`) + :data:`TASTE_STARS` in the user's favourite genre + noise
  (:data:`STARS_NOISE`), rounded and clipped. Completion, 0 to 1: how much of the item the
  user went through, which follows the rating's score, its noise included (a fifth per
  star, spread :data:`COMPLETION_NOISE`): what an edge's own feature tells beyond both ends.
  From their own generators (``seed + 4``, ``seed + 5``): the rest of the tables does not
  change.
  """
  rng = np.random.default_rng(seed + 4)
  users, items = graph.pairs[:, 0], graph.pairs[:, 1]
  leniency = rng.normal(0, BIAS_SPREAD, len(graph.taste))
  quality = rng.normal(0, BIAS_SPREAD, len(graph.genre))
  score = (2.5 + leniency[users] + quality[items]
           + TASTE_STARS * (graph.genre[items] == graph.taste[users])
           + rng.normal(0, STARS_NOISE, len(users)))
  completion = np.clip(score / 5 + np.random.default_rng(seed + 5).normal(
      0, COMPLETION_NOISE, len(users)), 0, 1)
  return np.clip(np.rint(score), 1, 5).astype(np.int64), completion


def write_tables(out: str, *, num_users: int = 600, num_items: int = 200,
                 ratings_per_user: float = 8, seed: int = 0, new_users: int = 0,
                 with_stars: bool = False) -> int:
  """Writes the tables and schema into ``out``; returns the number of ratings.

  With ``new_users``: the same tables a while later, those users (``u<num_users>`` on) and
  their ratings added, everything else unchanged. ``with_stars``: ``rated`` gets each
  rating's ``stars``, ``liked`` and ``completion`` (:func:`stars`), the other tables
  unchanged.
  """
  graph = ratings(num_users, num_items, ratings_per_user, seed, new_users)
  genre, popularity, pairs = graph.genre, graph.popularity, graph.pairs
  rng = np.random.default_rng(seed + 1)
  os.makedirs(out, exist_ok=True)
  schema = GRAPH_SCHEMA
  if with_stars:
    schema = schema.replace('    metadata { filename: "rated.csv" }',
                            STAR_FEATURES + '    metadata { filename: "rated.csv" }')
  with open(os.path.join(out, "graph_schema.pbtxt"), "w") as f:
    f.write(schema)
  with open(os.path.join(out, "users.csv"), "w") as f:
    f.write("id,age,activity\n")
    f.writelines(f"u{u},{rng.integers(18, 80)},{rng.random():.3f}\n" for u in range(num_users))
    later = np.random.default_rng(seed + 3)
    f.writelines(f"u{u},{later.integers(18, 80)},{later.random():.3f}\n"
                 for u in range(num_users, num_users + new_users))
  views = rng.poisson(2000 * popularity * rng.lognormal(0, 0.5, size=num_items))
  with open(os.path.join(out, "items.csv"), "w") as f:
    f.write("id,genre,price,views\n")
    f.writelines(f"i{i},{genre[i]},{rng.uniform(2, 60):.2f},{views[i]}\n"
                 for i in range(num_items))
  values, completion = stars(graph, seed) if with_stars else (None, None)
  for name, columns in (("rated", (0, 1)), ("rated_by", (1, 0))):
    prefixes = ("u", "i") if name == "rated" else ("i", "u")
    extra = name == "rated" and values is not None
    with open(os.path.join(out, f"{name}.csv"), "w") as f:
      f.write("source,target,stars,liked,completion\n" if extra else "source,target\n")
      f.writelines(f"{prefixes[0]}{row[columns[0]]},{prefixes[1]}{row[columns[1]]}"
                   + (f",{values[k]},{int(values[k] >= 4)},{completion[k]:.3f}" if extra
                      else "") + "\n"
                   for k, row in enumerate(pairs))
  return len(pairs)


def main(argv: Optional[Sequence[str]] = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--out", required=True, help="the tables folder to write")
  parser.add_argument("--users", type=int, default=600)
  parser.add_argument("--items", type=int, default=200)
  parser.add_argument("--ratings-per-user", type=float, default=8)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--stars", action="store_true",
                      help="give each rating its stars (1-5), liked (0/1) and completion (0-1)")
  args = parser.parse_args(argv)
  count = write_tables(args.out, num_users=args.users, num_items=args.items,
                       ratings_per_user=args.ratings_per_user, seed=args.seed,
                       with_stars=args.stars)
  print(f"{count} ratings of {args.items} items by {args.users} users in {args.out}")


if __name__ == "__main__":
  main()
