"""Component configs given as a dict or its JSON: decoded and checked the same way everywhere.

Every component config (GnnTrainer's ``custom_config``, ``train_args``, ``seeds``,
``sampling_config``, ``link_config``; GnnTuner's ``tuning_config``; GraphInferrer's
``inference_config``; GraphEvaluator's ``eval_config``) is a dict at pipeline definition
and a JSON string in an execution's properties.
:func:`decode` reads either, :func:`check_keys` refuses unknown keys and
:func:`int_at_least` checks an int option, each error naming the component's
config and what to write. TFX-free.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping


def decode(value: Any, what: str, error: type[Exception], example: str = "", *,
           optional: bool = False) -> Mapping[str, Any]:
  """``value`` (a mapping, or its JSON) as a mapping: the one decoder of every component config.

  Args:
    value: The config.
    what: Names it in errors, e.g. ``"GraphInferrer inference_config"``.
    error: The exception class raised.
    example: A valid config, shown when ``value`` is not a mapping.
    optional: None, ``""`` and JSON ``null`` are an empty mapping (a config not given).

  Raises:
    error: ``value`` is not JSON, or not a mapping.
  """
  if optional and (value is None or value == ""):
    return {}
  if isinstance(value, str):
    try:
      value = json.loads(value)
    except json.JSONDecodeError as e:
      raise error(f"{what} is not valid JSON: {e}") from None
  if optional and value is None:
    return {}
  if not isinstance(value, Mapping):
    such = f" such as {example}" if example else ""
    raise error(f"{what} must be a JSON object (a dict){such}, got {type(value).__name__}.")
  return value


def check_keys(value: Mapping[str, Any], known: Iterable[str], what: str,
               error: type[Exception]) -> None:
  """Refuses keys of ``value`` not in ``known``, naming them and the known ones."""
  known = sorted(known)
  unknown = sorted(set(value) - set(known))
  if unknown:
    raise error(f"{what} has unknown keys {unknown}; known: {known}.")


def int_at_least(value: Mapping[str, Any], key: str, low: int,
                 fail: Callable[[str, Any, str], Exception]) -> int:
  """``value[key]``, an int (not a bool) >= ``low``; else raises ``fail(key, value, expected)``."""
  v = value[key]
  if isinstance(v, bool) or not isinstance(v, int) or v < low:
    raise fail(key, v, f"an int >= {low}")
  return v
