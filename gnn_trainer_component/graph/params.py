"""A component's graph parameters as TFX stores them: JSON execution properties, decoded.

TFX stores dict execution properties (``seeds``, ``sampling_config``,
``link_config``) as JSON strings; :func:`loads_json` decodes one (with every
component config's decoder, :func:`gnn_trainer_component.config_dicts.decode`),
naming the component and the parameter when it is not a JSON object. The
checks against the graph schema and an engine are
:mod:`~gnn_trainer_component.graph.plan`'s. Pure Python: no TensorFlow.
"""

from __future__ import annotations

from typing import Any, Optional

from gnn_trainer_component import config_dicts
from gnn_trainer_component.graph.errors import GraphInputError


def loads_json(value: Any, what: str, who: str) -> Optional[dict[str, Any]]:
  """A dict execution property (TFX stores dicts as JSON strings); None when not given.

  Raises:
    GraphInputError: it is not a JSON object, naming ``who`` and ``what``.
  """
  return dict(config_dicts.decode(value, f"{who}: {what}", GraphInputError,
                                  optional=True)) or None
