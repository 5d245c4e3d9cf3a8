"""EmbeddingIndex: a nearest-neighbour index over GraphInferrer's embeddings, gated, servable.

Example::

  inferrer = GraphInferrer(model=trainer.outputs["model"], graph_schema=..., sampling_config=...,
                           inference_config={"signatures": ["embeddings"]})
  index = EmbeddingIndex(embeddings=inferrer.outputs["embeddings"],
                         index_config={"metric": "dot_product", "k": 10})
  pusher = tfx.components.Pusher(model=index.outputs["index"],
                                 model_blessing=index.outputs["blessing"], push_destination=...)
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from tfx import types
from tfx import v1 as tfx
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec

from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.index import config as config_lib
from gnn_trainer_component.index import executor


class EmbeddingIndex(base_component.BaseComponent):
  """Builds a nearest-neighbour index over one node set's embeddings; gates and blesses it.

  The index scores by the model's measure (dot product, or cosine), exactly for small sets
  and with inverted lists (FAISS's k-means) above ``exact_up_to`` vectors. It is served as a
  SavedModel that TensorFlow alone loads: ``serving_default`` (an embedding in, the top-K
  ids and scores out) and ``neighbours`` (indexed ids in, their top K). The gate measures
  recall@K against exact search on a seeded sample of the vectors and one query's p50 / p99
  latency; the blessing requires both within ``index_config``'s bounds.

  Outputs:
    index: ``Model``: ``Format-Serving`` (the SavedModel); custom properties: the size,
      kind, ``nlist`` / ``nprobe`` and the gate's measurements.
    evaluation: ``ModelEvaluation``: ``evaluation.json`` (measurements, each check, the
      verdict, the config).
    blessing: ``ModelBlessing`` for the stock Pusher.
  """

  SPEC_CLASS = spec_lib.EmbeddingIndexSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self, embeddings: types.BaseChannel,
               index_config: Optional[Union[Mapping[str, Any], str]] = None):
    """Constructs an EmbeddingIndex.

    Args:
      embeddings: GraphInferrer's ``Embeddings`` of one node set (its ``embeddings``
        signature).
      index_config: The index and its gate (a dict or its JSON; see
        ``gnn_trainer_component.index.config``); default: every key's default.

    Raises:
      ValueError: on an invalid config, at pipeline-definition time.
    """
    spec = spec_lib.EmbeddingIndexSpec(
        embeddings=embeddings, index_config=config_lib.dumps(config_lib.parse(index_config)),
        index=types.Channel(type=tfx.types.standard_artifacts.Model),
        evaluation=types.Channel(type=tfx.types.standard_artifacts.ModelEvaluation),
        blessing=types.Channel(type=tfx.types.standard_artifacts.ModelBlessing))
    super().__init__(spec=spec)


__all__ = ["EmbeddingIndex"]
