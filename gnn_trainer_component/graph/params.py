"""A component's graph parameters as TFX stores them: JSON execution properties, decoded.

What graph a component asks for is four execution properties: ``seeds``
(split -> seed table), ``sampling_spec`` or ``sampling_config`` (the hops),
or ``link_config`` instead of them. TFX stores the dict ones as JSON strings;
:func:`read` decodes them all into one :class:`GraphParams` (with every
component config's decoder, :func:`gnn_trainer_component.config_dicts.decode`),
naming the component and the parameter when one is not a JSON object. The
checks against the graph schema and an engine are
:mod:`~gnn_trainer_component.graph.plan`'s. Pure Python: no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from gnn_trainer_component import config_dicts
from gnn_trainer_component import keys
from gnn_trainer_component.graph.errors import GraphInputError


@dataclasses.dataclass(frozen=True)
class GraphParams:
  """The graph a component asks for, decoded (not yet checked against a schema).

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


def read(exec_properties: Mapping[str, Any], who: str,
         error: type[Exception] = GraphInputError) -> GraphParams:
  """The graph parameters of an execution, each decoded (absent, None or empty: None).

  Raises:
    ``error`` (GraphInputError): a dict parameter that is not a JSON object,
    naming ``who`` and the parameter.
  """
  dicts = {key: dict(config_dicts.decode(exec_properties.get(key), f"{who}: {key}", error,
                                         optional=True)) or None
           for key in (keys.SEEDS_KEY, keys.SAMPLING_CONFIG_KEY, keys.LINK_CONFIG_KEY)}
  return GraphParams(sampling_spec=exec_properties.get(keys.SAMPLING_SPEC_KEY) or None, **dicts)
