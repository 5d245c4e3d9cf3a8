"""The recommendation pipeline: a user-item graph's tables -> GnnTrainer in memory -> Model.

Both pipelines start with the graph's validation (``pipelines/validation.py``); what follows
runs under ``tfx.dsl.Cond`` on GraphValidator's verdict.

Importer (the tables folder as a ``GraphSchema`` artifact) -> GnnTrainer with
the module's ``LINK_CONFIG`` (user -> item link prediction, each end with its
own hops): GnnTrainer splits the ratings, trains on (user, item) pairs with
fresh negative items every epoch, then ranks each held-out test rating against
every item and publishes those retrieval metrics, with the most-popular-item
ranking's beside them, as Model properties. With ``mode=SAMPLED``, LinkSampler
writes the pairs' subgraphs as examples first (the same split and rules) and
GnnTrainer trains on them. In both modes GraphEvaluator then ranks the test
ratings with the export, beside the most-popular-item ranking and item- and
user-kNN, and blesses the model only if its MRR and Hits@20 beat popularity's
beyond noise (:data:`EVAL_CONFIG`); Pusher pushes a blessed model. A ranking model's items
are then indexed: GraphInferrer embeds every item (the blessed model only) -> EmbeddingIndex
(:data:`INDEX_CONFIG`, gated on recall, latency and churn against the last index it blessed)
-> a second Pusher pushes the index (items like this one; the items nearest a user's
embedding) and the ``vertex_ai`` folder is ready for Vector Search.
:func:`create_refresh_pipeline` gives the latest blessed model newer tables without training,
and indexes its items again.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any, Mapping, Optional

from tfx import v1 as tfx

from gnn_trainer_component import EmbeddingIndex
from gnn_trainer_component import GnnTrainer
from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component import GraphEvaluator
from gnn_trainer_component import GraphInferrer
from gnn_trainer_component import GraphSchema
from gnn_trainer_component import LinkSampler
from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.index.component import last_blessed_index
from pipelines import REPO_ROOT
from pipelines.validation import validate_graph

PIPELINE_NAME = "gnn-recommendation"
MODULE_FILE = os.path.join(REPO_ROOT, "module_files", "recommendation_ranking.py")
#: ``--stars``: the module that predicts each rating's stars.
STARS_MODULE_FILE = os.path.join(REPO_ROOT, "module_files", "recommendation_stars.py")
#: GnnTrainer's custom_config: 128 pairs per step; the epoch that ranks the validation
#: ratings best (MRR against every item, after each epoch) is exported; the held-out test
#: ratings are ranked against every item.
#: ``serve_by_node_id``: the export recommends items for a user id (``recommend``).
TRAINING = {"global_batch_size": 128, "epochs": 10, "seed": 1,
            "restore_best_weights": True, "restore_best_weights_by": "max:val_retrieval_mrr",
            "retrieval_splits": ["test"], "summarize_every_n_steps": "never",
            "serve_by_node_id": True}


#: The metric that picks the exported epoch in ``mode=SAMPLED``: examples hold no graph to rank
#: every item against, so the validation pairs' ROC AUC.
SAMPLED_SELECTION = "max:val_auc"


#: GraphEvaluator's eval_config: the test ratings, ranked against every item, beside
#: popularity, item-kNN and user-kNN; blessed when the model's MRR and Hits@20 beat the
#: most-popular-item ranking's beyond noise (the lower bound of the gain's 95 % paired bootstrap
#: interval above zero; ``sampling_seed``: the training's). The shipped module ranks at
#: item-kNN's level on this graph, not beyond noise (docs/tasks.md), so the rule names popularity.
EVAL_CONFIG = {"task": "link_prediction", "split": "test", "thresholds": [
    {"metric": metric, "min_gain_over_baselines": 0.0, "gain_confidence": 0.95,
     "baselines": ["popularity"]} for metric in ("mrr", "hits@20")]}


#: A module whose ``LINK_CONFIG`` names an ``edge_label`` (``recommendation_stars.py``) predicts
#: each rating's value: the epoch with the lowest validation RMSE is exported, nothing is ranked
#: or served by user id, and GraphEvaluator blesses the model when its test RMSE beats the
#: training ratings' mean and their user + item biases.
RATING_TRAINING = {"restore_best_weights_by": "min:val_rmse", "retrieval_splits": None,
                   "serve_by_node_id": None}
RATING_EVAL_CONFIG = {"task": "edge_regression", "split": "test", "thresholds": [
    {"metric": "rmse", "min_gain_over_baselines": 0.0}]}

#: EmbeddingIndex's index_config for the items: the model's score (dot product), the ten
#: nearest; one query's p99 within 50 ms (a laptop or a shared CI machine, not a server).
#: The churn bounds are the defaults (docs/embedding_index.md).
INDEX_CONFIG = {"metric": "dot_product", "k": 10, "max_p99_ms": 50.0}
#: The component ids of the items' index (its resolver scopes to it) and of the trainer.
INDEX_ID, TRAINER_ID = "item_index", "GnnTrainer"


def _training(link: Mapping[str, Any], custom_config: Optional[Mapping[str, Any]]
              ) -> dict[str, Any]:
  """GnnTrainer's custom_config for ``link``.

  :data:`TRAINING` (with :data:`RATING_TRAINING` for an edge label's value), then
  ``custom_config``; a None value removes its key.
  """
  training = {**TRAINING, **(RATING_TRAINING if link.get("edge_label") else {}),
              **(custom_config or {})}
  return {k: v for k, v in training.items() if v is not None}


def link_config_of(module_file: str) -> dict[str, Any]:
  """The module file's ``LINK_CONFIG`` (the module may import the files beside it)."""
  folder = os.path.dirname(os.path.abspath(module_file))
  added = folder not in sys.path
  if added:
    sys.path.insert(0, folder)
  try:
    return dict(runpy.run_path(module_file)["LINK_CONFIG"])
  finally:
    if added:
      sys.path.remove(folder)


#: ``mode`` of :func:`create_pipeline`: GnnTrainer samples the pairs' subgraphs in memory, or
#: LinkSampler writes them as examples first (Beam; for graphs beyond one machine).
IN_MEMORY, SAMPLED = "in_memory", "sampled"


def create_pipeline(*, pipeline_root: str, metadata_path: str, tables_dir: str,
                    module_file: str = MODULE_FILE,
                    custom_config: Optional[Mapping[str, Any]] = None,
                    link_config: Optional[Mapping[str, Any]] = None,
                    mode: str = IN_MEMORY,
                    pipeline_name: str = PIPELINE_NAME,
                    serving_dir: Optional[str] = None,
                    train_steps: Optional[int] = None,
                    index_serving_dir: Optional[str] = None,
                    index_config: Optional[Mapping[str, Any]] = None) -> tfx.dsl.Pipeline:
  """Builds the recommendation pipeline.

  Args:
    pipeline_root: Folder of every artifact.
    metadata_path: The ML Metadata SQLite file.
    tables_dir: The tables folder (``pipelines.recommendation.data``).
    module_file: The GnnTrainer module; it also holds ``LINK_CONFIG``.
    custom_config: Replaces keys of :data:`TRAINING`.
    link_config: Replaces keys of the module's ``LINK_CONFIG``.
    mode: :data:`IN_MEMORY` (tables -> GnnTrainer, with the retrieval
      evaluation) or :data:`SAMPLED` (tables -> LinkSampler -> GnnTrainer on
      its examples: no graph to rank against, so no ``retrieval_splits``, and the
      epoch is chosen by :data:`SAMPLED_SELECTION`).
    pipeline_name: Name in ML Metadata.
    serving_dir: Where Pusher pushes a blessed model (a numbered version
      folder, as TF Serving reads them); None: no Pusher.
    train_steps: At most this many training steps in all (``train_args.num_steps``,
      spread over the epochs); None: every pair of every epoch.
    index_serving_dir: Where the second Pusher pushes a blessed index of the items;
      None: the index is built and gated, not pushed.
    index_config: EmbeddingIndex's config (default :data:`INDEX_CONFIG`).

  Returns:
    The pipeline, on SQLite ML Metadata.

  Raises:
    ValueError: an unknown ``mode``.
  """
  if mode not in (IN_MEMORY, SAMPLED):
    raise ValueError(f"mode must be {IN_MEMORY!r} or {SAMPLED!r}, got {mode!r}.")
  link = {**link_config_of(module_file), **(link_config or {})}
  training = _training(link, custom_config)
  tables = tfx.dsl.Importer(source_uri=tables_dir,
                            artifact_type=GraphSchema).with_id("graph_tables")
  validation, graph_is_valid = validate_graph(tables)
  with tfx.dsl.Cond(graph_is_valid):  # nothing trains on a graph with an error
    if mode == IN_MEMORY:
      components = []
      data = dict(graph_schema=tables.outputs["result"], link_config=link)
    else:
      sampler = LinkSampler(graph_schema=tables.outputs["result"], link_config=link)
      components = [sampler]
      data = dict(examples=sampler.outputs["examples"],
                  graph_schema=sampler.outputs["output_graph_schema"])
      training.pop("retrieval_splits", None)
      training.pop("serve_by_node_id", None)  # the graph in memory only
      if training.get("restore_best_weights_by") == TRAINING["restore_best_weights_by"]:
        training["restore_best_weights_by"] = SAMPLED_SELECTION  # no graph to rank against
    trained = _train_evaluate_push(module_file, training, link, tables, data, serving_dir,
                                   train_steps)
    components += trained + _index_items(trained, link, tables, tables_dir, index_config,
                                         index_serving_dir)
  return _pipeline(pipeline_name, pipeline_root, metadata_path,
                   [tables, *validation, *components])


def create_refresh_pipeline(*, pipeline_root: str, metadata_path: str, tables_dir: str,
                            serving_dir: str, module_file: str = MODULE_FILE,
                            custom_config: Optional[Mapping[str, Any]] = None,
                            link_config: Optional[Mapping[str, Any]] = None,
                            pipeline_name: str = PIPELINE_NAME,
                            index_serving_dir: Optional[str] = None,
                            index_config: Optional[Mapping[str, Any]] = None
                            ) -> tfx.dsl.Pipeline:
  """Gives the latest blessed model newer tables without training, and pushes it.

  Run it under the training pipeline's name and ML Metadata: a Resolver finds that
  pipeline's latest blessed Model; GnnTrainer with ``refresh_only`` exports its weights
  with the newer tables (``serve_by_node_id``: ``recommend`` then serves their snapshot,
  new users included); GraphEvaluator ranks the newer tables' test ratings with it and
  Pusher pushes it when blessed; its items are indexed again, and the churn against the last
  blessed index gates the new one. ML Metadata records the new Model with the blessed Model
  and the new tables as its inputs. Arguments as :func:`create_pipeline`'s (in memory).

  Returns:
    The pipeline, on SQLite ML Metadata.
  """
  link = {**link_config_of(module_file), **(link_config or {})}
  if link.get("edge_label"):
    raise ValueError(f"the refresh pipeline serves recommendations by user id; the module "
                     f"{module_file} predicts edge_label {link['edge_label']!r}, which it "
                     "does not serve.")
  training = {**TRAINING, **(custom_config or {}), "refresh_only": True}
  tables = tfx.dsl.Importer(source_uri=tables_dir,
                            artifact_type=GraphSchema).with_id("graph_tables")
  validation, graph_is_valid = validate_graph(tables)
  latest = tfx.dsl.Resolver(  # GnnTrainer's models: the items' index is a Model too
      strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
      model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model,
                            producer_component_id=TRAINER_ID, output_key="model"),
      model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing,
                                     producer_component_id="GraphEvaluator",
                                     output_key="blessing"),
  ).with_id("latest_blessed_model")
  with tfx.dsl.Cond(graph_is_valid):  # the newer tables are served only if valid
    trained = _train_evaluate_push(
        module_file, training, link, tables,
        dict(graph_schema=tables.outputs["result"], link_config=link,
             base_model=latest.outputs["model"]), serving_dir)
    indexed = _index_items(trained, link, tables, tables_dir, index_config, index_serving_dir)
  return _pipeline(pipeline_name, pipeline_root, metadata_path,
                   [tables, *validation, latest, *trained, *indexed])


def _train_evaluate_push(module_file: str, training: Mapping[str, Any],
                         link: Mapping[str, Any], tables, data: Mapping[str, Any],
                         serving_dir: Optional[str], train_steps: Optional[int] = None) -> list:
  """GnnTrainer on ``data`` -> GraphEvaluator on ``tables`` -> Pusher (with a ``serving_dir``)."""
  trainer = GnnTrainer(
      module_file=module_file,
      train_args=tfx.proto.TrainArgs(splits=["train"], num_steps=train_steps),
      eval_args=tfx.proto.EvalArgs(splits=["eval"]), custom_config=dict(training), **data)
  evaluator = GraphEvaluator(
      model=trainer.outputs["model"], graph_schema=tables.outputs["result"], link_config=link,
      eval_config={**(RATING_EVAL_CONFIG if link.get("edge_label") else EVAL_CONFIG),
                   "sampling_seed": int(training.get("seed") or 0)})
  components = [trainer, evaluator]
  if serving_dir:
    components.append(tfx.components.Pusher(
        model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_dir))))
  return components


def _index_items(trained: list, link: Mapping[str, Any], tables, tables_dir: str,
                 index_config: Optional[Mapping[str, Any]],
                 serving_dir: Optional[str]) -> list:
  """GraphInferrer (the link's target node set) -> EmbeddingIndex -> Pusher, for a ranking model.

  ``trained``: GnnTrainer first, GraphEvaluator second (:func:`_train_evaluate_push`). A model
  of ratings' values (``edge_label``) ranks nothing: no index.
  """
  if link.get("edge_label"):
    return []
  trainer, evaluator = trained[0], trained[1]
  schema = graph_schema_lib.read_graph_schema(
      os.path.join(tables_dir, graph_schema_lib.GRAPH_SCHEMA_FILE))
  parsed = link_config_lib.parse_link_config(schema, link, who="pipelines.recommendation")
  items = GraphInferrer(
      model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
      graph_schema=tables.outputs["result"],
      sampling_config={"seed_node_set": schema.edge_sets[parsed.edge_set].target,
                       "hops": list(parsed.target_hops)},
      inference_config={"signatures": ["embeddings"]}).with_id("item_embeddings")
  last = last_blessed_index(INDEX_ID)
  index = EmbeddingIndex(embeddings=items.outputs["embeddings"],
                         baseline_index=last.outputs["model"],
                         graph_schema=tables.outputs["result"],
                         index_config=dict(INDEX_CONFIG if index_config is None
                                           else index_config)).with_id(INDEX_ID)
  components = [items, last, index]
  if serving_dir:
    components.append(tfx.components.Pusher(
        model=index.outputs["index"], model_blessing=index.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_dir))
    ).with_id("item_index_pusher"))
  return components


def _pipeline(pipeline_name: str, pipeline_root: str, metadata_path: str,
              components: list) -> tfx.dsl.Pipeline:
  return tfx.dsl.Pipeline(
      pipeline_name=pipeline_name, pipeline_root=pipeline_root, components=components,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path))
