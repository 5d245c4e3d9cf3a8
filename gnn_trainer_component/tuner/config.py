"""The one plain, typed configuration a GnnTuner search runs with.

Pure functions: GnnTuner's ``tuning_config`` (a dict, or the JSON string TFX
stores in ML Metadata) in, a frozen :class:`TuningConfig` out. Nothing here
imports TFX, TensorFlow or keras-tuner.

``tuning_config`` keys (all optional)::

  {"algorithm": "random",        # "random" | "bayesian" | "hyperband"
   "max_trials": 10,             # trials to run (random, bayesian)
   "objective": "val_loss",      # what to optimize, as history.json names it:
                                 # "max:val_<metric>", "min:val_<metric>", or a
                                 # bare loss/error name (lowest is best)
   "seed": null,                 # the search algorithm's seed
   "default_trial": true,        # random, bayesian: trial 0 trains the values
                                 # GnnTrainer would use without a tuner
   "hyperband_factor": 3,        # hyperband: reduction factor
   "hyperband_max_epochs": null, # hyperband: most epochs of one trial
                                 # (default: custom_config["epochs"])
   "bayesian_initial_points": null}  # bayesian: random trials first
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Union

from gnn_trainer_component import config_dicts
from gnn_trainer_component.trainer import config as trainer_config

ALGORITHMS = ("random", "bayesian", "hyperband")


class TuningConfigError(trainer_config.ConfigError):
  """GnnTuner's ``tuning_config`` (or its module's search space) is invalid."""


@dataclasses.dataclass(frozen=True)
class TuningConfig:
  """How GnnTuner searches.

  Attributes:
    algorithm: "random", "bayesian" or "hyperband" (keras-tuner's oracles).
    max_trials: Trials to run (random, bayesian); hyperband derives its own
      count from ``hyperband_max_epochs`` and ``hyperband_factor``.
    objective: The validation metric as history.json names it (``val_...``).
    direction: "max" or "min".
    seed: The search algorithm's seed (None: random).
    hyperband_factor: Hyperband's reduction factor.
    hyperband_max_epochs: Hyperband's most epochs per trial (None: the
      trainer config's ``epochs``).
    bayesian_initial_points: Random trials before the Gaussian process (None:
      keras-tuner's default, 3 x the number of hyperparameters).
    default_trial: The first trial trains the configuration GnnTrainer would
      train without a tuner (``HPARAMS`` with ``custom_config["hparams"]``),
      so the best trial is never worse on the objective than the untuned model.
      Random and Bayesian search only (default True there).
  """
  algorithm: str = "random"
  max_trials: int = 10
  objective: str = "val_loss"
  direction: str = "min"
  seed: Optional[int] = None
  hyperband_factor: int = 3
  hyperband_max_epochs: Optional[int] = None
  bayesian_initial_points: Optional[int] = None
  default_trial: bool = True

  @property
  def metric(self) -> str:
    """The objective as GnnTrainer's eval metrics name it (without ``val_``)."""
    return self.objective[len("val_"):]


_KEYS = ("algorithm", "max_trials", "objective", "seed", "default_trial", "hyperband_factor",
         "hyperband_max_epochs", "bayesian_initial_points")


def _is_int(v: Any) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _fail(key: str, expected: str, value: Any) -> TuningConfigError:
  return TuningConfigError(
      f"GnnTuner tuning_config[{key!r}] must be {expected}, got {value!r}.")


def make_tuning_config(tuning_config: Union[None, str, Mapping[str, Any]]) -> TuningConfig:
  """Validates GnnTuner's ``tuning_config`` and fills defaults.

  Args:
    tuning_config: A dict, its JSON string, or None (all defaults).

  Returns:
    The validated config.

  Raises:
    TuningConfigError: on an unknown key or an invalid value, naming it.
  """
  raw = dict(config_dicts.decode(tuning_config, "GnnTuner tuning_config", TuningConfigError,
                                 optional=True))
  unknown = sorted(set(raw) - set(_KEYS))
  if unknown:
    raise TuningConfigError(
        f"GnnTuner tuning_config has unknown keys {unknown}. Allowed keys: "
        f"{', '.join(_KEYS)}.")
  algorithm = raw.get("algorithm", "random")
  if algorithm not in ALGORITHMS:
    raise _fail("algorithm", f"one of {', '.join(ALGORITHMS)}", algorithm)
  max_trials = raw.get("max_trials", TuningConfig.max_trials)
  if not _is_int(max_trials) or max_trials < 1:
    raise _fail("max_trials", "an int >= 1", max_trials)
  if algorithm == "hyperband" and "max_trials" in raw:
    raise TuningConfigError(
        "GnnTuner tuning_config: 'max_trials' does not apply to algorithm 'hyperband' "
        "(it runs as many trials as 'hyperband_max_epochs' and 'hyperband_factor' make); "
        "drop the key.")
  try:
    objective, direction = trainer_config.parse_monitor(
        raw.get("objective", TuningConfig.objective), what="GnnTuner tuning_config['objective']")
  except trainer_config.ConfigError as e:
    raise TuningConfigError(str(e)) from None
  seed = raw.get("seed")
  if seed is not None and not _is_int(seed):
    raise _fail("seed", "an int or null", seed)
  factor = raw.get("hyperband_factor", TuningConfig.hyperband_factor)
  if not _is_int(factor) or factor < 2:
    raise _fail("hyperband_factor", "an int >= 2", factor)
  max_epochs = raw.get("hyperband_max_epochs")
  if max_epochs is not None and (not _is_int(max_epochs) or max_epochs < 1):
    raise _fail("hyperband_max_epochs", "an int >= 1 or null", max_epochs)
  initial = raw.get("bayesian_initial_points")
  if initial is not None and (not _is_int(initial) or initial < 1):
    raise _fail("bayesian_initial_points", "an int >= 1 or null", initial)
  for key, only in (("hyperband_factor", "hyperband"), ("hyperband_max_epochs", "hyperband"),
                    ("bayesian_initial_points", "bayesian")):
    if key in raw and algorithm != only:
      raise TuningConfigError(
          f"GnnTuner tuning_config[{key!r}] only applies with algorithm {only!r}, "
          f"not {algorithm!r}; drop the key.")
  default_trial = raw.get("default_trial", algorithm != "hyperband")
  if not isinstance(default_trial, bool):
    raise _fail("default_trial", "a bool", default_trial)
  if default_trial and algorithm == "hyperband":
    raise TuningConfigError(
        "GnnTuner tuning_config['default_trial'] does not apply to algorithm 'hyperband' "
        "(its brackets choose every trial's values); drop the key.")
  return TuningConfig(algorithm=algorithm, max_trials=max_trials, objective=objective,
                      direction=direction, seed=seed, hyperband_factor=factor,
                      hyperband_max_epochs=max_epochs, bayesian_initial_points=initial,
                      default_trial=default_trial)
