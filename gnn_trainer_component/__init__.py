"""gnn_trainer_component: TFX components that train TensorFlow-GNN models.

Public API::

  from gnn_trainer_component import (EmbeddingIndex, GnnTrainer, GnnTuner, GraphEvaluator,
                                     GraphInferrer, GraphSampler, GraphSchema,
                                     GraphStatisticsGen, GraphValidator, LinkSampler,
                                     Embeddings, GraphStatistics, VectorSearchBatch)

Layout (one folder per component, as in tfx-addons):

* ``trainer/``: ``GnnTrainer`` (component, executor and the pure modules it maps
  artifacts with: config, module contract, splits, validation, training, export).
* ``tuner/``: ``GnnTuner`` (hyperparameter search whose trials are GnnTrainer's
  training path; keras-tuner's random, Bayesian and Hyperband algorithms).
* ``sampler/``: ``GraphSampler`` (node/edge tables -> subgraph tf.Examples, Beam) and
  ``LinkSampler`` (-> link-prediction examples: edge splits, negatives, subgraphs
  around both ends of each pair).
* ``inferrer/``: ``GraphInferrer`` (a Model over every node of a graph held in
  memory -> an ``Embeddings`` Parquet table keyed by node id).
* ``evaluator/``: ``GraphEvaluator`` (a Model on held-out nodes beside zero-parameter
  baselines, sliced by degree -> the stock ``ModelEvaluation`` and ``ModelBlessing``).
* ``index/``: ``EmbeddingIndex`` (GraphInferrer's embeddings -> a nearest-neighbour index
  served as a SavedModel, gated on recall, latency and churn against the last blessed
  index -> ``Model``, ``ModelEvaluation``, ``ModelBlessing``, ``VectorSearchBatch``).
* ``statistics_gen/``: ``GraphStatisticsGen`` (a graph's tables -> TFDV's statistics per
  table in the stock ``ExampleStatistics``, and the graph's own: degrees, dangling edges,
  duplicate ids, seeds and labels per split, homophily -> ``GraphStatistics``).
* ``validator/``: ``GraphValidator`` (the statistics held to bounds and to the last
  snapshot's -> the stock ``ExampleAnomalies``; ``graph_is_valid`` gates training with
  ``tfx.dsl.Cond``).
* ``spec.py``: the components' keys and ``ComponentSpec`` classes.
* ``artifacts.py``: the ``GraphSchema``, ``Embeddings``, ``VectorSearchBatch`` and
  ``GraphStatistics`` artifact types;
  ``graph_schema.py``: reading ``graph_schema.pbtxt`` and mapping its dtypes to tf.Example
  kinds.

The names above are loaded on first use (PEP 562), so ``import
gnn_trainer_component`` is cheap and does not import TFX or TensorFlow.

TF-GNN needs Keras 2 (tf-keras): call ``gnn_trainer_component.setup_process()``
at the top of a pipeline script, before importing ``tfx`` or ``tensorflow``
(or set ``TF_USE_LEGACY_KERAS=1`` in the environment, as the container images
do). Importing the package changes nothing in the process.
"""

import importlib as _importlib
import os as _os
import re as _re

from gnn_trainer_component.process import setup_process as setup_process

#: The distribution whose ``project.version`` is ``__version__``.
_DISTRIBUTION = "gnn-trainer-component"

#: Public name -> module that defines it.
_EXPORTS = {
    "GnnTrainer": "gnn_trainer_component.trainer.component",
    "GnnTuner": "gnn_trainer_component.tuner.component",
    "GraphSampler": "gnn_trainer_component.sampler.graph.component",
    "LinkSampler": "gnn_trainer_component.sampler.link.component",
    "GraphInferrer": "gnn_trainer_component.inferrer.component",
    "GraphEvaluator": "gnn_trainer_component.evaluator.component",
    "EmbeddingIndex": "gnn_trainer_component.index.component",
    "GraphStatisticsGen": "gnn_trainer_component.statistics_gen.component",
    "GraphStatistics": "gnn_trainer_component.artifacts",
    "GraphValidator": "gnn_trainer_component.validator.component",
    "GraphSchema": "gnn_trainer_component.artifacts",
    "Embeddings": "gnn_trainer_component.artifacts",
    "VectorSearchBatch": "gnn_trainer_component.artifacts",
    "GRAPH_SCHEMA_FILE": "gnn_trainer_component.graph_schema",
}

__all__ = sorted([*_EXPORTS, "setup_process"])


def _version() -> str:
  """``project.version`` of the installed distribution (releases are tagged ``v<version>``).

  A source checkout that is not installed reads it from the pyproject.toml next to the
  package; "0+unknown" when neither is there.
  """
  from importlib import metadata  # Imported here: importlib.metadata is not free.
  try:
    return metadata.version(_DISTRIBUTION)
  except metadata.PackageNotFoundError:
    pass
  pyproject = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))),
                            "pyproject.toml")
  try:
    with open(pyproject, encoding="utf-8") as f:
      found = _re.search(r'^version\s*=\s*"([^"]+)"', f.read(), _re.MULTILINE)
  except OSError:
    found = None
  return found.group(1) if found else "0+unknown"


def __getattr__(name: str):
  if name in _EXPORTS:
    return getattr(_importlib.import_module(_EXPORTS[name]), name)
  if name == "__version__":  # read once, on first use (importlib.metadata is not free)
    globals()["__version__"] = _version()
    return globals()["__version__"]
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(__all__) | {"__version__"})
