"""A component's graph parameters, decoded once: seed tables, the sampling config or spec, links.

TFX stores dict execution properties as JSON strings. :func:`loads_json`
decodes one; :func:`parse` decodes GnnTrainer's (and GnnTuner's) ``seeds``,
``sampling_config`` and ``link_config`` and keeps the text ``sampling_spec``,
into one :class:`GraphParams`. The checks against the graph schema and an
engine are :mod:`~gnn_trainer_component.graph.plan`'s. Pure Python: no
TensorFlow, so a configuration that holds them stays light.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Optional

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


@dataclasses.dataclass(frozen=True)
class GraphParams:
  """The graph held in memory, as the parameters ask for it (decoded, not yet checked).

  Attributes:
    seeds: Split name -> seed table (relative to the graph_schema folder), or None.
    sampling_spec: Text-format SamplingSpec, or None.
    sampling_config: ``{"seed_node_set": ..., "hops": [...]}``, or None.
    link_config: LinkSampler's ``link_config`` instead of the three above, or None.
  """
  seeds: Optional[Mapping[str, str]] = None
  sampling_spec: Optional[str] = None
  sampling_config: Optional[Mapping[str, Any]] = None
  link_config: Optional[Mapping[str, Any]] = None


def parse(*, seeds: Any, sampling_spec: Optional[str], sampling_config: Any, link_config: Any,
          who: str) -> Optional[GraphParams]:
  """The graph parameters (each JSON or decoded), or None when neither seeds nor links are given.

  Raises:
    GraphInputError: a parameter that is not valid JSON.
  """
  if not seeds and not link_config:
    return None
  return GraphParams(link_config=loads_json(link_config, "link_config", who),
                     sampling_config=loads_json(sampling_config, "sampling_config", who),
                     seeds=loads_json(seeds, "seeds", who), sampling_spec=sampling_spec or None)
