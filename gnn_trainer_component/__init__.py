"""gnn_trainer_component: a TFX component that trains TensorFlow-GNN models.

Public API::

  from gnn_trainer_component import GnnTrainer, GraphSchema

TF-GNN needs Keras 2 (tf-keras). Importing this package sets
``TF_USE_LEGACY_KERAS=1`` unless already set, which works as long as nothing in
the process has touched ``tf.keras`` yet; set it in the environment of every
process (the Makefile, the container image and the tests do).
"""

import os as _os

_os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=g-import-not-at-top,wrong-import-position
from gnn_trainer_component.artifacts import GraphSchema
from gnn_trainer_component.artifacts import GRAPH_SCHEMA_FILE
from gnn_trainer_component.component import GnnTrainer

__all__ = ["GnnTrainer", "GraphSchema", "GRAPH_SCHEMA_FILE"]
__version__ = "0.1.0"
