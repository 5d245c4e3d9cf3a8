"""GraphValidator's ``validation_config``: each anomaly's bound and severity, checked in one place.

Keys (all optional; the defaults below)::

  {"max_duplicate_ids": 0,      # node ids repeated in a node table
   "max_dangling_edges": 0,     # edges with an end not in its node table
   "min_edges": 1,              # edges of each edge set
   "max_isolated_share": 0.5,   # a node set's share of nodes at no end of any edge
   "max_unknown_seeds": 0,      # seed ids not in the seed node set
   "max_duplicate_seeds": 0,    # seed ids repeated in a split
   "max_split_overlap": 0,      # seeds in two splits
   "max_future_edges": 0,       # edges touching a seed at or after its time (times given)
   "max_label_purity": 0.98,    # how well one feature's value alone predicts the label
                                # (leave-one-out): above it, the label leaks into the feature
   "max_label_skew": 0.25,      # a split's label share against the train split's (L-infinity)
   # Against the last snapshot's statistics (baseline):
   "max_count_change": 0.2,     # relative change of a node or edge set's size
   "max_degree_change": 0.05,   # relative change of an edge set's mean degree
   "max_degree_distance": 0.05, # total variation of its log2 degree histogram's shares
   "max_label_shift": 0.1,      # a split's label shares (L-infinity)
   "max_feature_drift": 0.1,    # TFDV's drift comparators per table feature: Jensen-Shannon
                                # divergence for numbers, L-infinity for strings
   "severity": {}}              # anomaly -> "error" (stops the pipeline), "warning" or "off"

Anomalies and their default severity: :data:`SEVERITIES`. TFX-free.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

from gnn_trainer_component import config_dicts
from gnn_trainer_component import errors

ERROR, WARNING, OFF = "error", "warning", "off"
#: Each anomaly -> its default severity.
SEVERITIES = {
    "duplicate_ids": ERROR, "dangling_edges": ERROR, "empty_edge_set": ERROR,
    "isolated_nodes": WARNING, "unknown_seeds": ERROR, "duplicate_seeds": ERROR,
    "split_overlap": ERROR, "future_edges": WARNING, "label_leak": ERROR,
    "label_skew": WARNING, "count_change": ERROR, "degree_shift": ERROR,
    "label_shift": WARNING, "feature_drift": WARNING,
}


class ValidationConfigError(errors.GnnError, ValueError):
  """``validation_config`` has an unknown key or a bad value."""


@dataclasses.dataclass(frozen=True)
class ValidationConfig:
  """The bounds GraphValidator holds a graph's statistics to, and each anomaly's severity.

  Attributes: the module docstring's keys; ``severity`` complete (every anomaly of
  :data:`SEVERITIES`).
  """
  max_duplicate_ids: int = 0
  max_dangling_edges: int = 0
  min_edges: int = 1
  max_isolated_share: float = 0.5
  max_unknown_seeds: int = 0
  max_duplicate_seeds: int = 0
  max_split_overlap: int = 0
  max_future_edges: int = 0
  max_label_purity: float = 0.98
  max_label_skew: float = 0.25
  max_count_change: float = 0.2
  max_degree_change: float = 0.05
  max_degree_distance: float = 0.05
  max_label_shift: float = 0.1
  max_feature_drift: float = 0.1
  severity: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(SEVERITIES))


_WHAT = "GraphValidator validation_config"


def parse(config: Any) -> ValidationConfig:
  """``validation_config`` (a dict, its JSON or None) checked key by key.

  Raises:
    ValidationConfigError: an unknown key or anomaly, or a bad bound or severity.
  """
  raw = dict(config_dicts.decode(config, _WHAT, ValidationConfigError,
                                 '{"max_isolated_share": 0.2}', optional=True))
  fields = {f.name: f for f in dataclasses.fields(ValidationConfig)}
  config_dicts.check_keys(raw, fields, _WHAT, ValidationConfigError)
  for key, value in raw.items():
    if key == "severity":
      continue
    whole = isinstance(fields[key].default, int)
    if (isinstance(value, bool) or not isinstance(value, int if whole else (int, float))
        or value < 0):
      kind = "an int >= 0" if whole else "a number >= 0"
      raise ValidationConfigError(f"{_WHAT}: {key} must be {kind}, got {value!r}.")
  severity = raw.get("severity", {})
  if not isinstance(severity, Mapping):
    raise ValidationConfigError(f'{_WHAT}: severity must map anomalies to "error", "warning" '
                                f'or "off", such as {{"future_edges": "error"}}, got '
                                f"{severity!r}.")
  unknown = sorted(set(severity) - set(SEVERITIES))
  if unknown:
    raise ValidationConfigError(f"{_WHAT}: severity names unknown anomalies {unknown}; the "
                                f"anomalies: {sorted(SEVERITIES)}.")
  bad = {k: v for k, v in severity.items() if v not in (ERROR, WARNING, OFF)}
  if bad:
    raise ValidationConfigError(f'{_WHAT}: a severity is "error", "warning" or "off", got '
                                f"{bad}.")
  raw["severity"] = {**SEVERITIES, **severity}
  return ValidationConfig(**raw)


def dumps(cfg: ValidationConfig) -> str:
  """The config as the JSON execution property it travels as."""
  return json.dumps(dataclasses.asdict(cfg), sort_keys=True)
