"""Feature drift by TFDV's comparators, and anomalies as TFDV's ``Anomalies`` protos.

:func:`feature_drift` compares one table's TFDV statistics with the last snapshot's:
``tfdv.validate_statistics`` against a schema inferred from this snapshot, each feature
given a drift comparator (Jensen-Shannon divergence for numbers, L-infinity for strings),
so only drift is reported. :func:`to_proto` writes a split's anomalies as the
``Anomalies`` proto TFX's ExampleValidator writes (``SchemaDiff.pb``), which TFDV reads
(``tensorflow_data_validation.utils.anomalies_util.load_anomalies_binary``) and shows
(``tfdv.display_anomalies``).
"""

from __future__ import annotations

from typing import Sequence

import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_metadata.proto.v0 import statistics_pb2

from gnn_trainer_component.validator import checks
from gnn_trainer_component.validator import config as config_lib

_SEVERITY = {config_lib.ERROR: anomalies_pb2.AnomalyInfo.ERROR,
             config_lib.WARNING: anomalies_pb2.AnomalyInfo.WARNING}


def feature_drift(split: str, now: statistics_pb2.DatasetFeatureStatisticsList,
                  before: statistics_pb2.DatasetFeatureStatisticsList,
                  cfg: config_lib.ValidationConfig) -> list[checks.Anomaly]:
  """The features of one table (``split``) that drifted since the last snapshot."""
  severity = cfg.severity["feature_drift"]
  if severity == config_lib.OFF or not now.datasets or not now.datasets[0].features:
    return []
  schema = tfdv.infer_schema(now)
  for feature in schema.feature:
    comparator = (feature.drift_comparator.infinity_norm if feature.type == schema_pb2.BYTES
                  else feature.drift_comparator.jensen_shannon_divergence)
    comparator.threshold = cfg.max_feature_drift
  found = tfdv.validate_statistics(now, schema, previous_statistics=before)
  return [checks.Anomaly(split, "feature_drift", key, severity,
                         f"table {split!r}: feature {key!r}: {info.description} "
                         f"(max_feature_drift {cfg.max_feature_drift}).")
          for key, info in sorted(found.anomaly_info.items())]


def to_proto(found: Sequence[checks.Anomaly]) -> anomalies_pb2.Anomalies:
  """One split's anomalies as TFDV's ``Anomalies``: one entry per key, a reason per anomaly."""
  proto = anomalies_pb2.Anomalies(
      anomaly_name_format=anomalies_pb2.Anomalies.SERIALIZED_PATH)
  for anomaly in found:
    info = proto.anomaly_info[anomaly.key]
    if not info.path.step:
      info.path.step.append(anomaly.key)
    info.severity = max(info.severity, _SEVERITY[anomaly.severity])
    info.short_description = (anomaly.name if not info.short_description
                              else "Multiple errors")
    info.description = " ".join(filter(None, [info.description, anomaly.description]))
    info.reason.add(type=anomalies_pb2.AnomalyInfo.CUSTOM_VALIDATION,
                    short_description=anomaly.name, description=anomaly.description)
  return proto
