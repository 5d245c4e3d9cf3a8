"""Shared fixtures. Expensive things (pipeline runs, training) are session-scoped.

Only fixtures live here; helper functions and constants are in tests/helpers.py.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=g-import-not-at-top,wrong-import-position
import pytest

import gnn_trainer_component  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory):
  """Small generated demo graph examples: {"examples": dir, "graph_schema": dir}."""
  from pipelines.demo import data as demo_data_lib
  return demo_data_lib.write_demo_data(str(tmp_path_factory.mktemp("demo_data")),
                                       num_nodes=600)
