"""Shared fixtures. Expensive things (pipeline runs, training) are session-scoped.

Only fixtures live here; helper functions and constants are in tests/helpers.py.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=g-import-not-at-top,wrong-import-position
import pytest

import gnn_trainer_component  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)


#: The cluster a process is in (TF_CONFIG, Vertex AI's CLUSTER_SPEC). One leaking out of a
#: test makes every later in-process GnnTrainer a replica that waits for its cluster.
_CLUSTER_ENV = ("TF_CONFIG", "CLUSTER_SPEC")


@pytest.fixture(autouse=True)
def _no_cluster_leaks():
  """Fails the test that leaves TF_CONFIG / CLUSTER_SPEC changed, and restores them."""
  before = {k: os.environ.get(k) for k in _CLUSTER_ENV}
  yield
  after = {k: os.environ.get(k) for k in _CLUSTER_ENV}
  for key, value in before.items():
    if value is None:
      os.environ.pop(key, None)
    else:
      os.environ[key] = value
  assert after == before, f"the test left the cluster environment changed: {after}"


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory):
  """Small generated demo graph examples: {"examples": dir, "graph_schema": dir}."""
  from pipelines.demo import data as demo_data_lib
  return demo_data_lib.write_demo_data(str(tmp_path_factory.mktemp("demo_data")),
                                       num_nodes=600)
