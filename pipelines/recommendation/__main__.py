"""`python -m pipelines.recommendation`: generate a rating graph, train, compare with popularity.

Writes the tables (``pipelines.recommendation.data``) into ``<output-dir>/tables``,
runs ``pipelines/recommendation/pipeline.py`` on LocalDagRunner (ML Metadata in
``<output-dir>/metadata.sqlite``) and prints the Model's properties as one JSON
line: sampled-negative ``eval_auc`` / ``eval_average_precision`` and the test ratings'
retrieval metrics, the model's (``retrieval_mrr``, ``retrieval_hits@20``, ...)
beside the most-popular-item ranking's (``retrieval_popularity_*``). A model that
GraphEvaluator blessed is pushed to ``<output-dir>/serving``, and ``served`` is then
what a fresh process with TensorFlow alone gets from the pushed model's ``recommend``
for user ``u0``: its 5 best items it has not rated (null: nothing was pushed).

  python -m pipelines.recommendation [--output-dir DIR] [--users N] [--items N]
                                     [--ratings-per-user N] [--epochs N] [--batch-size N]
                                     [--negative-sampling uniform|popularity]
"""

from __future__ import annotations

import argparse
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
  args = parser.parse_args(argv)
  from tfx import v1 as tfx
  from pipelines.runtime import mlmd_utils
  out = os.path.abspath(args.output_dir)
  tables = os.path.join(out, "tables")
  data.write_tables(tables, num_users=args.users, num_items=args.items,
                    ratings_per_user=args.ratings_per_user)
  metadata = os.path.join(out, "metadata.sqlite")
  serving_dir = os.path.join(out, "serving")
  tfx.orchestration.LocalDagRunner().run(recommendation.create_pipeline(
      pipeline_root=os.path.join(out, "pipeline_root"), metadata_path=metadata,
      tables_dir=tables,
      custom_config={"epochs": args.epochs, "global_batch_size": args.batch_size},
      link_config={"negative_sampling": args.negative_sampling}, serving_dir=serving_dir))
  model = mlmd_utils.latest_artifact(metadata, "Model", recommendation.PIPELINE_NAME)
  props = mlmd_utils.custom_properties(model)
  shown = {k: v for k, v in sorted(props.items())
           if k.startswith(("eval_auc", "eval_average_precision", "retrieval_"))}
  print(json.dumps({"model": model.uri, **shown, "served": _recommend(serving_dir)}))
  return props


def _recommend(serving_dir: str) -> Optional[dict]:
  """The pushed model's ``recommend`` for user ``u0``, from a fresh process (None: not pushed)."""
  pushed = serving.latest_push(serving_dir)
  if pushed is None:
    return None
  done = subprocess.run([sys.executable, "-c", serving.RECOMMEND_SCRIPT, pushed, "u0", "5"],
                        check=True, capture_output=True, text=True, cwd="/",
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
  main()
