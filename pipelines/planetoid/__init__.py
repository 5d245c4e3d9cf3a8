"""Planetoid pipeline: tables -> GraphSampler -> StatisticsGen/SchemaGen -> GnnTrainer."""

import os as _os

from pipelines import REPO_ROOT as _REPO_ROOT

# The names the command line needs before anything heavy is imported (``run_local``'s flags,
# checked before TensorFlow and TFX load); ``pipeline`` and ``data`` use these.
#: The Planetoid datasets (``data.write_planetoid_tables``).
DATASETS = ("cora", "citeseer", "pubmed")
#: The default GnnTrainer module: a GCN (``module_files/planetoid_gcn.py``).
GCN_MODULE = _os.path.join(_REPO_ROOT, "module_files", "planetoid_gcn.py")
#: Above Cora's max degree (168) + self loop: the full 2-hop neighbourhood.
DEFAULT_FAN_OUTS = (200, 200)
#: Where GnnTrainer gets its subgraphs: sampled on the fly from the graph held
#: in memory, or GraphSampler's pre-sampled examples (Beam).
IN_MEMORY, SAMPLED = "in_memory", "sampled"
MODES = (IN_MEMORY, SAMPLED)


def default_data_dir() -> str:
  """Planetoid data dir: $PLANETOID_DATA_DIR, default ``../shared/data/planetoid``
  next to the project (cheap: imports neither TensorFlow nor TFX)."""
  project = _os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
  return _os.environ.get(
      "PLANETOID_DATA_DIR",
      _os.path.join(_os.path.dirname(project), "shared", "data", "planetoid"))
