"""A component's graph parameters as TFX stores them: JSON execution properties, decoded.

TFX stores dict execution properties (``seeds``, ``sampling_config``,
``link_config``) as JSON strings; :func:`loads_json` decodes one, naming the
component and the parameter when it is not JSON. The checks against the graph
schema and an engine are :mod:`~gnn_trainer_component.graph.plan`'s. Pure
Python: no TensorFlow.
"""

from __future__ import annotations

import json
from typing import Any

from gnn_trainer_component.graph.errors import GraphInputError


def loads_json(value: Any, what: str, who: str) -> Any:
  """Decodes a JSON execution property (TFX stores dicts as JSON strings)."""
  if value is None or value == "":
    return None
  if isinstance(value, (dict, list)):
    return value
  try:
    return json.loads(value)
  except json.JSONDecodeError as e:
    raise GraphInputError(f"{who}: {what} is not valid JSON: {e}") from None
