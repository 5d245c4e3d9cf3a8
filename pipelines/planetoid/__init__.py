"""Planetoid pipeline: tables -> GraphSampler -> StatisticsGen/SchemaGen -> GnnTrainer."""

import os as _os


def default_data_dir() -> str:
  """Planetoid data dir: $PLANETOID_DATA_DIR, default ``../shared/data/planetoid``
  next to the project (cheap: imports neither TensorFlow nor TFX)."""
  project = _os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
  return _os.environ.get(
      "PLANETOID_DATA_DIR",
      _os.path.join(_os.path.dirname(project), "shared", "data", "planetoid"))
