"""Child process for the kill/resume tests: runs the demo pipeline under a run id.

Usage: python -m tests.pipeline_child '<json args>'
"""

import json
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import logging

from pipelines.demo import pipeline as demo_pipeline
from pipelines.local_run import run_pipeline


def main(args: dict) -> None:
  logging.set_verbosity(logging.INFO)
  run_pipeline(demo_pipeline.create_pipeline(
      pipeline_name=args["pipeline_name"],
      pipeline_root=os.path.join(args["root"], "pipeline_root"),
      examples_dir=args["examples"], graph_schema_dir=args["graph_schema"],
      metadata_path=os.path.join(args["root"], "metadata.sqlite"),
      train_steps=args["train_steps"], custom_config=args["custom_config"],
      with_statistics=False), run_id=args["run_id"])


if __name__ == "__main__":
  main(json.loads(sys.argv[1]))
