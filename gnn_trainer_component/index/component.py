"""EmbeddingIndex: a nearest-neighbour index over GraphInferrer's embeddings, gated, servable.

Example::

  inferrer = GraphInferrer(model=trainer.outputs["model"], graph_schema=..., sampling_config=...,
                           inference_config={"signatures": ["embeddings"]})
  last = last_blessed_index()  # the last index this pipeline's EmbeddingIndex blessed
  index = EmbeddingIndex(embeddings=inferrer.outputs["embeddings"],
                         baseline_index=last.outputs["model"],
                         index_config={"metric": "dot_product", "k": 10})
  pusher = tfx.components.Pusher(model=index.outputs["index"],
                                 model_blessing=index.outputs["blessing"], push_destination=...)
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Union

from tfx import types
from tfx import v1 as tfx
from tfx.components.evaluator import constants
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.dsl.components.common import resolver

from gnn_trainer_component import artifacts
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.index import config as config_lib
from gnn_trainer_component.index import executor


#: The resolver's channels (LatestBlessedModelStrategy's names) and the blessing's properties.
_MODEL_KEY, _BLESSING_KEY = "model", "model_blessing"
_CURRENT_MODEL = constants.ARTIFACT_PROPERTY_CURRENT_MODEL_URI_KEY
_BLESSED = constants.ARTIFACT_PROPERTY_BLESSED_KEY


class EmbeddingIndex(base_component.BaseComponent):
  """Builds a nearest-neighbour index over one node set's embeddings; gates and blesses it.

  The index scores by the model's measure (dot product, or cosine), exactly for small sets
  and with inverted lists (FAISS's k-means) above ``exact_up_to`` vectors. It is served as a
  SavedModel that TensorFlow alone loads: ``serving_default`` (an embedding in, the top-K
  ids and scores out) and ``neighbours`` (indexed ids in, their top K). The gate measures
  recall@K against exact search on a seeded sample of the vectors, one query's p50 / p99
  latency and, given the last blessed index, the churn of the sampled nodes' top-K
  neighbourhoods (mean Jaccard, share changed entirely); the blessing requires each within
  ``index_config``'s bounds.

  Outputs:
    index: ``Model``: ``Format-Serving`` (the SavedModel); custom properties: the size,
      kind, ``nlist`` / ``nprobe`` and the gate's measurements.
    evaluation: ``ModelEvaluation``: ``evaluation.json`` (measurements, each check, the
      verdict, the config) and ``report.png`` (recall against latency; the churn).
    blessing: ``ModelBlessing`` for the stock Pusher.
    vertex_ai: ``VectorSearchBatch``: the vectors in Vertex AI Vector Search's batch format,
      with ``delete/`` for the ids the last blessed index held and this one does not
      (``index_config`` ``vertex_ai`` false: empty).
  """

  SPEC_CLASS = spec_lib.EmbeddingIndexSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self, embeddings: types.BaseChannel,
               baseline_index: Optional[types.BaseChannel] = None,
               graph_schema: Optional[types.BaseChannel] = None,
               index_config: Optional[Union[Mapping[str, Any], str]] = None):
    """Constructs an EmbeddingIndex.

    Args:
      embeddings: GraphInferrer's ``Embeddings`` of one node set (its ``embeddings``
        signature), one model's.
      baseline_index: The last blessed index (:func:`last_blessed_index`), for the churn
        check and the Vector Search ``delete/``; none: a first release.
      graph_schema: The graph's ``GraphSchema``: needed where ``index_config`` names
        ``restricts`` (node features).
      index_config: The index and its gate (a dict or its JSON; see
        ``gnn_trainer_component.index.config``); default: every key's default.

    Raises:
      ValueError: on an invalid config, at pipeline-definition time.
    """
    cfg = config_lib.parse(index_config)
    if cfg.restricts and graph_schema is None:
      raise config_lib.IndexConfigError(
          f"EmbeddingIndex: index_config restricts {list(cfg.restricts)} are node features: "
          "give graph_schema (the graph's GraphSchema) to read them from.")
    spec = spec_lib.EmbeddingIndexSpec(
        embeddings=embeddings, baseline_index=baseline_index, graph_schema=graph_schema,
        index_config=config_lib.dumps(cfg),
        index=types.Channel(type=tfx.types.standard_artifacts.Model),
        evaluation=types.Channel(type=tfx.types.standard_artifacts.ModelEvaluation),
        blessing=types.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
        vertex_ai=types.Channel(type=artifacts.VectorSearchBatch))
    super().__init__(spec=spec)


class LatestBlessedIndexStrategy(resolver.ResolverStrategy):
  """The newest index whose blessing says blessed: TFX's ``LatestBlessedModelStrategy``, by URI.

  An index and its blessing are outputs of one EmbeddingIndex execution, and an output has
  no ML Metadata id until the execution is published, so the blessing names its index by
  ``current_model`` (the URI) where the Evaluator's names its model by id too. Input and
  output keys: ``model`` (the indexes) and ``model_blessing`` (their blessings).
  """

  def resolve_artifacts(self, store: Any, input_dict: Dict[str, List[types.Artifact]]
                        ) -> Optional[Dict[str, List[types.Artifact]]]:
    """``{"model": [the newest blessed index], "model_blessing": [its blessing]}`` or empty."""
    del store  # the channels hold every candidate
    blessed = {b.get_string_custom_property(_CURRENT_MODEL): b
               for b in input_dict.get(_BLESSING_KEY, [])
               if b.get_int_custom_property(_BLESSED) == 1}
    for index in sorted(input_dict.get(_MODEL_KEY, []), key=lambda a: a.id, reverse=True):
      if index.uri in blessed:
        return {_MODEL_KEY: [index], _BLESSING_KEY: [blessed[index.uri]]}
    return {_MODEL_KEY: [], _BLESSING_KEY: []}


def last_blessed_index(component_id: str = "EmbeddingIndex") -> tfx.dsl.Resolver:
  """A resolver of the last index that ``component_id`` (an EmbeddingIndex) blessed.

  :class:`LatestBlessedIndexStrategy` over that component's own ``index`` and ``blessing``
  only (a pipeline's trained models are ``Model`` artifacts too). Its output ``model`` is
  EmbeddingIndex's ``baseline_index``; empty on a first run. It runs wherever TFX runs
  custom resolver strategies (LocalDagRunner, Kubeflow Pipelines); Vertex AI Pipelines
  compiles only TFX's built-in strategies.
  """
  return tfx.dsl.Resolver(
      strategy_class=LatestBlessedIndexStrategy,
      model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model,
                            producer_component_id=component_id, output_key=spec_lib.INDEX_KEY),
      model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing,
                                     producer_component_id=component_id,
                                     output_key=spec_lib.BLESSING_KEY),
  ).with_id(f"{component_id}_last_blessed")


__all__ = ["EmbeddingIndex", "LatestBlessedIndexStrategy", "last_blessed_index"]
