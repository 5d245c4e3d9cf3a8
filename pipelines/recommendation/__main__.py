"""`python -m pipelines.recommendation`: generate a rating graph, train, compare with popularity.

Writes the tables (``pipelines.recommendation.data``) into ``<output-dir>/tables``,
runs ``pipelines/recommendation/pipeline.py`` on LocalDagRunner (ML Metadata in
``<output-dir>/metadata.sqlite``). A graph GraphValidator finds invalid stops the run
there: the command prints ``{"validation": ...}`` (the anomalies) and exits with status 1.
Otherwise it prints the Model's properties as one JSON line: sampled-negative ``eval_auc`` / ``eval_average_precision`` and the test ratings'
retrieval metrics, the model's (``retrieval_mrr``, ``retrieval_hits@20``, ...)
beside the most-popular-item ranking's (``retrieval_popularity_*``), and
``evaluation``: GraphEvaluator's verdict with the MRR and Hits@20 of the model
and every baseline (``item_knn_mrr``, ...) and the lower bound of the model's MRR
gain over each (``mrr_gain_low_vs_<baseline>``). A model that
GraphEvaluator blessed is pushed to ``<output-dir>/serving``, and ``served`` is then
what a fresh process with TensorFlow alone gets from the pushed model's ``recommend``
for user ``u0``: its 5 best items it has not rated (null: nothing was pushed).

A ranking model's items are indexed too: ``index`` is EmbeddingIndex's verdict (recall@10
against exact search, one query's p99 and, from the second release on, the churn of the
items' neighbourhoods against the last blessed index: ``jaccard@10``, ``changed_share``); a
blessed index is pushed to ``<output-dir>/index_serving``, and ``similar`` is then its ten
items nearest the first item, from a fresh process with TensorFlow alone. Each item's
``genre`` is a restrict in the index's Vertex AI Vector Search folder. ``--index-config`` (a
JSON file) replaces keys of the index's config (``pipeline.INDEX_CONFIG``).

With ``--tables DIR``, one's own tables instead (a folder whose ``graph_schema.pbtxt`` names
them; for the default module, the node sets at the pairs' ends declare ``#id``), with
``--link-config`` (a JSON file of ``LINK_CONFIG`` keys: its edge sets, splits and hops);
``--steps`` caps the training; ``served`` shows ``--user``'s items (default: the first node
of the source node set's table).

With ``--stars``, the generated ratings also have their stars and completion (``data.py``), the
default module is ``module_files/recommendation_stars.py`` (each rating's stars, edge
regression, from both ends and the rating's own completion: its ``edge_features``), and the
printed properties are the validation RMSE and MAE (``eval_rmse``, ``eval_mae``) and
GraphEvaluator's test RMSE and MAE of the model and of the mean and bias baselines
(``bias_rmse``, ...); nothing is served by user id.

With ``--refresh`` (after a run in the same ``--output-dir``): the tables a while
later, ``--new-users`` users and their ratings added, go to ``<output-dir>/tables_refreshed``,
and the refresh pipeline gives the latest blessed model those tables without training
(``create_refresh_pipeline``); ``served`` is then the first new user's 5 best items.

  python -m pipelines.recommendation [--output-dir DIR] [--users N] [--items N]
                                     [--ratings-per-user N] [--epochs N] [--batch-size N]
                                     [--negative-sampling uniform|popularity]
                                     [--module-file FILE] [--tables DIR]
                                     [--link-config FILE.json] [--steps N] [--user ID]
                                     [--refresh [--new-users N]] [--stars]
                                     [--index-config FILE.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from typing import Optional, Sequence

# First: Keras 2 for TF-GNN, before TensorFlow is imported.
import gnn_trainer_component  # pylint: disable=g-bad-import-order
gnn_trainer_component.setup_process()

# pylint: disable=g-import-not-at-top,wrong-import-position
from gnn_trainer_component.graph import link_config as link_config_lib
from pipelines import serving
from pipelines import validation
from pipelines.recommendation import data
from pipelines.recommendation import pipeline as recommendation


def main(argv: Optional[Sequence[str]] = None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--output-dir", default="recommendation_output")
  parser.add_argument("--users", type=int, default=600)
  parser.add_argument("--items", type=int, default=200)
  parser.add_argument("--ratings-per-user", type=float, default=8)
  parser.add_argument("--epochs", type=int, default=recommendation.TRAINING["epochs"])
  parser.add_argument("--batch-size", type=int,
                      default=recommendation.TRAINING["global_batch_size"])
  parser.add_argument("--negative-sampling", choices=link_config_lib.NEGATIVE_SAMPLING,
                      default="uniform")
  parser.add_argument("--module-file",
                      help="the GnnTrainer module (its LINK_CONFIG too); default: "
                           "module_files/recommendation_ranking.py (with --stars: "
                           "recommendation_stars.py)")
  parser.add_argument("--tables", help="a folder of one's own tables (its graph_schema.pbtxt "
                      "names them; the pairs' end node sets declare #id) instead of generated "
                      "ones; with --refresh, the newer tables")
  parser.add_argument("--link-config", help="a JSON file whose keys replace the module's "
                      "LINK_CONFIG: the edge sets, splits and hops of one's own graph")
  parser.add_argument("--steps", type=int, help="train at most this many steps in all")
  parser.add_argument("--user", help="the source node whose items 'served' shows (default: u0, "
                      "the first new user with --refresh, or with --tables the first node of "
                      "the source node set's table)")
  parser.add_argument("--refresh", action="store_true",
                      help="give the latest blessed model newer tables, without training")
  parser.add_argument("--new-users", type=int, default=20,
                      help="with --refresh: users (and their ratings) the newer tables add")
  parser.add_argument("--stars", action="store_true",
                      help="predict each rating's stars (the generated tables get them)")
  parser.add_argument("--index-config", help="a JSON file whose keys replace the items' "
                      "index_config (EmbeddingIndex; pipeline.INDEX_CONFIG)")
  args = parser.parse_args(argv)
  args.module_file = args.module_file or (
      recommendation.STARS_MODULE_FILE if args.stars else recommendation.MODULE_FILE)
  from tfx import v1 as tfx
  from pipelines.runtime import mlmd_utils
  out = os.path.abspath(args.output_dir)
  tables = _tables(args, out)
  link_config = {} if args.stars else {"negative_sampling": args.negative_sampling}
  if args.link_config:
    with open(args.link_config) as f:
      link_config.update(json.load(f))
  metadata = os.path.join(out, "metadata.sqlite")
  serving_dir = os.path.join(out, "serving")
  index_config = dict(recommendation.INDEX_CONFIG)
  if not args.tables:
    index_config["restricts"] = ["genre"]  # the generated items' genre, for Vector Search
  if args.index_config:
    with open(args.index_config) as f:
      index_config.update(json.load(f))
  common = dict(pipeline_root=os.path.join(out, "pipeline_root"), metadata_path=metadata,
                tables_dir=tables, module_file=os.path.abspath(args.module_file),
                custom_config={"epochs": args.epochs, "global_batch_size": args.batch_size},
                link_config=link_config, serving_dir=serving_dir,
                index_serving_dir=os.path.join(out, "index_serving"),
                index_config=index_config)
  if args.refresh:
    create = recommendation.create_refresh_pipeline
  else:
    create = functools.partial(recommendation.create_pipeline, train_steps=args.steps)
  before = serving.latest_push(serving_dir)
  index_before = serving.latest_push(common["index_serving_dir"])
  tfx.orchestration.LocalDagRunner().run(create(**common))
  checked = validation.verdict(metadata, recommendation.PIPELINE_NAME)
  if not checked["valid"]:  # nothing after GraphValidator ran
    print(json.dumps({"validation": checked}))
    raise SystemExit(1)
  pushed = serving.latest_push(serving_dir)
  model = mlmd_utils.latest_artifact(metadata, "Model", recommendation.PIPELINE_NAME,
                                     producer=recommendation.TRAINER_ID)
  props = mlmd_utils.custom_properties(model)
  shown = {k: v for k, v in sorted(props.items())
           if k.startswith(("eval_auc", "eval_average_precision", "retrieval_", "eval_rmse",
                            "eval_mae"))}
  user = args.user or (_first_source(tables, {
      **recommendation.link_config_of(args.module_file), **link_config}) if args.tables
      else f"u{args.users}" if args.refresh else "u0")
  # None: not pushed, or a model of ratings' values (nothing served by user id)
  served = _recommend(pushed, user) if pushed != before and not args.stars else None
  index_pushed = serving.latest_push(common["index_serving_dir"])
  index = None if args.stars else _index(metadata)
  similar = (serving.neighbours_in_fresh_process(index_pushed, index["first_id"])
             if index and index_pushed != index_before else None)
  print(json.dumps({"model": model.uri, **shown, "evaluation": _verdict(metadata),
                    "served": served, "index": index, "similar": similar}))
  return props


def _tables(args: argparse.Namespace, out: str) -> str:
  """``--tables``, or the generated tables (``tables_refreshed`` with ``--refresh``)."""
  if args.tables:
    return os.path.abspath(args.tables)
  tables = os.path.join(out, "tables_refreshed" if args.refresh else "tables")
  data.write_tables(tables, num_users=args.users, num_items=args.items,
                    ratings_per_user=args.ratings_per_user,
                    new_users=args.new_users if args.refresh else 0, with_stars=args.stars)
  return tables


def _first_source(tables_dir: str, link_config: dict) -> str:
  """The first node of the link's source node set, in its table's order."""
  from gnn_trainer_component import graph_schema
  from gnn_trainer_component.graph import ids as graph_ids
  from gnn_trainer_component.graph import tables
  schema = graph_schema.read_graph_schema(
      os.path.join(tables_dir, graph_schema.GRAPH_SCHEMA_FILE))
  source = schema.node_sets[schema.edge_sets[link_config["edge_set"]].source]
  ids = tables.read_ids(tables_dir, source.metadata.filename, "pipelines.recommendation")
  return graph_ids.id_bytes(ids[:1])[0].decode()


def _verdict(metadata: str) -> dict:
  """GraphEvaluator's verdict, and MRR and Hits@20 (RMSE and MAE) of the model and every baseline."""
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  from pipelines.runtime import mlmd_utils
  result = evaluation_lib.read(mlmd_utils.latest_artifact(
      metadata, "ModelEvaluation", recommendation.PIPELINE_NAME, producer="GraphEvaluator").uri)
  out = {"blessed": result["blessed"], "message": result["message"]}
  for predictor, by_slice in result["metrics"].items():
    out.update({f"{predictor}_{m}": round(by_slice["all"][m], 6)
                for m in ("mrr", "hits@20", "rmse", "mae") if m in by_slice["all"]})
  for baseline, gains in result["gains"].items():
    out[f"mrr_gain_low_vs_{baseline}"] = round(gains["mrr"]["low"], 6)
  return out


def _index(metadata: str) -> Optional[dict]:
  """The items' index: its verdict, its gate's measurements and the first item indexed."""
  from gnn_trainer_component.index import executor as index_executor
  from pipelines.runtime import mlmd_utils
  try:
    evaluation = mlmd_utils.latest_artifact(metadata, "ModelEvaluation",
                                            recommendation.PIPELINE_NAME,
                                            producer=recommendation.INDEX_ID)
    embeddings = mlmd_utils.latest_artifact(metadata, "gnn_trainer_component.Embeddings",
                                            recommendation.PIPELINE_NAME,
                                            producer="item_embeddings")
  except LookupError:
    return None
  path = os.path.join(evaluation.uri, index_executor.EVALUATION_FILE)
  if not os.path.exists(path):  # skipped: the model was not blessed
    return {"blessed": False, "message": mlmd_utils.custom_properties(evaluation)["skipped"]}
  with open(path) as f:
    result = json.load(f)
  return {"blessed": result["blessed"], "message": result["message"],
          "first_id": serving.first_embedded_id(embeddings.uri),
          **{k: round(v, 6) if isinstance(v, float) else v
             for k, v in result["metrics"].items()
             if k in ("num_vectors", "kind", "recall@10", "p99_ms", "jaccard@10",
                      "changed_share", "removed", "added")}}


def _recommend(pushed: str, user: str) -> dict:
  """The pushed model's ``recommend`` for ``user``, from a fresh process."""
  done = subprocess.run([sys.executable, "-c", serving.RECOMMEND_SCRIPT, pushed, user, "5"],
                        check=True, capture_output=True, text=True, cwd="/",
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
  main()
