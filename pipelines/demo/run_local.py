"""`make demo`: runs the demo pipeline on LocalDagRunner with a SQLite MLMD.

Everything goes under ``$DEMO_OUTPUT_DIR`` (default ``./demo_output``):
``data/`` (generated graph examples + graph schema), ``pipeline_root/``
(artifacts) and ``metadata.sqlite``. Ends by printing the model URI, its
metrics and how to look at MLMD and TensorBoard.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import logging
from tfx import v1 as tfx

from pipelines.demo import data as demo_data
from pipelines.demo import pipeline as demo_pipeline
from pipelines import mlmd_utils

PIPELINE_NAME = "gnn-demo"


def main() -> int:
  logging.set_verbosity(logging.INFO)
  out = os.path.abspath(os.environ.get("DEMO_OUTPUT_DIR", "demo_output"))
  start = time.time()
  paths = demo_data.write_demo_data(os.path.join(out, "data"))
  metadata_path = os.path.join(out, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(demo_pipeline.create_pipeline(
      pipeline_name=PIPELINE_NAME, pipeline_root=os.path.join(out, "pipeline_root"),
      examples_dir=paths["examples"], graph_schema_dir=paths["graph_schema"],
      metadata_path=metadata_path, serving_dir=os.path.join(out, "serving_model")))
  model = mlmd_utils.latest_artifact(metadata_path, "Model", PIPELINE_NAME)
  model_run = mlmd_utils.latest_artifact(metadata_path, "ModelRun", PIPELINE_NAME)
  props = mlmd_utils.custom_properties(model)
  print("\n=== GnnTrainer demo finished in %.0f s ===" % (time.time() - start))
  print(f"Model artifact (id {model.id}): {model.uri}")
  print(f"  SavedModel: {os.path.join(model.uri, 'Format-Serving')}")
  for key in sorted(props):
    print(f"  {key}: {props[key]}")
  blessing = mlmd_utils.latest_artifact(metadata_path, "ModelBlessing", PIPELINE_NAME)
  pushed = mlmd_utils.latest_artifact(metadata_path, "PushedModel", PIPELINE_NAME)
  evaluation = mlmd_utils.latest_artifact(metadata_path, "ModelEvaluation", PIPELINE_NAME)
  print(f"Evaluator (TFMA on raw eval examples): {evaluation.uri}")
  for name, value in sorted(mlmd_utils.tfma_metrics(evaluation.uri).items()):
    print(f"  {name}: {value:.4f}")
  print(f"  blessed: {bool(mlmd_utils.custom_properties(blessing).get('blessed'))}")
  pushed_props = mlmd_utils.custom_properties(pushed)
  print(f"Pusher: pushed={bool(pushed_props.get('pushed'))} "
        f"{pushed_props.get('pushed_destination', '')}")
  print(f"MLMD (SQLite): {metadata_path}")
  print("  inspect: python -c \"from ml_metadata import metadata_store; "
        "from ml_metadata.proto import metadata_store_pb2 as p; c=p.ConnectionConfig(); "
        f"c.sqlite.filename_uri='{metadata_path}'; "
        "s=metadata_store.MetadataStore(c); print(s.get_artifacts_by_type('Model'))\"")
  print(f"TensorBoard: tensorboard --logdir {model_run.uri}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
