"""GnnTrainer module: a rating's stars (edge regression), or whether the user liked the item.

Input: the user-item graph of ``pipelines.recommendation.data --stars`` (its ``rated`` edges
carry ``stars``, 1 to 5, ``liked``, 0 or 1, and ``completion``, 0 to 1), or one's own tables
with a link_config naming their edge sets, the edge feature to predict as ``edge_label`` and
the edge features a pair takes as input as ``edge_features`` (or none: ``[]``). Every pair
is a rating, labelled with its value, and no negative is drawn; held-out ratings are kept
out of message passing, and a pair never sees its own edge (its ``edge_features`` are
given to the head, never its label).

Model: ``recommendation_ranking.py``'s (hashed ``#id`` embeddings, LightGCN-style
propagation over each pair's sampled subgraph; the ``pair`` node set of the edge features
passes through unchanged); the head reads both ends' embeddings, their product and the
pair's edge features through a ReLU layer (``hidden_units``): ``head`` ``"regression"``
(:class:`tasks.EdgeRegression`: mean squared error, RMSE and MAE) for ``stars``, or
``"binary"`` (:class:`tasks.EdgeBinaryClassification`: ROC AUC, AP, accuracy) for a 0/1
label such as ``liked`` (set ``"edge_label": "liked"`` in link_config too).
"""

from recommendation_ranking import HPARAMS as RANKING_HPARAMS
from recommendation_ranking import model_fn, optimizer_fn  # pylint: disable=unused-import

from gnn_trainer_component import tasks as task_lib

#: GnnTrainer's link_config: ``edge_label`` names the edge feature each pair predicts.
LINK_CONFIG = {
    "edge_set": "rated",
    "reverse_edge_set": "rated_by",
    "edge_label": "stars",
    "edge_features": ["completion"],  # the pair's own edge's input (node set "pair")
    "splits": {"train": 0.8, "eval": 0.1, "test": 0.1},
    "source_hops": [{"rated": 10}, {"rated_by": 5}],  # from the user
    "target_hops": [{"rated_by": 10}, {"rated": 5}],  # from the item
    "seed": 0,
}

#: ``recommendation_ranking.py``'s, plus the head: ``"regression"`` or ``"binary"``, and
#: its hidden layer's units.
HPARAMS = {**RANKING_HPARAMS, "head": "regression", "hidden_units": 64}

HEADS = {"regression": task_lib.EdgeRegression, "binary": task_lib.EdgeBinaryClassification}


def task(hparams):
  """The edge head ``hparams["head"]`` names, on both ends' embeddings and the edge features."""
  if hparams["head"] not in HEADS:
    raise ValueError(f"hparams head must be one of {sorted(HEADS)}, got {hparams['head']!r}.")
  return HEADS[hparams["head"]](hidden_units=(hparams["hidden_units"],))
