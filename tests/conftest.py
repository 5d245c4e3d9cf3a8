"""Shared fixtures. Expensive things (pipeline runs, training) are session-scoped."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=g-import-not-at-top,wrong-import-position
import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO_MODULE = os.path.join(REPO_ROOT, "module_files", "demo_node_classification.py")


def planetoid_dir() -> str:
  """Planetoid data dir: $PLANETOID_DATA_DIR, default ../shared/data/planetoid."""
  return os.environ.get(
      "PLANETOID_DATA_DIR",
      os.path.join(os.path.dirname(REPO_ROOT), "shared", "data", "planetoid"))


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory):
  """Small generated demo graph examples: {"examples": dir, "graph_schema": dir}."""
  from pipelines.demo import data as demo_data_lib
  return demo_data_lib.write_demo_data(str(tmp_path_factory.mktemp("demo_data")),
                                       num_nodes=600)


def require_planetoid(name: str = "cora") -> str:
  """Returns the Planetoid dir, or skips (fails under GNN_REQUIRE_DATA=1) if absent."""
  d = planetoid_dir()
  if not os.path.exists(os.path.join(d, f"ind.{name}.graph")):
    msg = (f"Planetoid {name} data not found in {d}; set PLANETOID_DATA_DIR to the "
           "folder holding ind.{name}.* files")
    if os.environ.get("GNN_REQUIRE_DATA") == "1":
      pytest.fail(msg)
    pytest.skip(msg)
  return d
