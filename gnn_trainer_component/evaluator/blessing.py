"""The blessing: every threshold rule checked against the metrics; the ones that failed, named.

As TFX's Evaluator: a model is blessed when every rule passes; a change rule
(``max_loss_vs_baseline_model``) without a baseline model is not checked (the
model is "rubber-stamped" on it) and the verdict says so.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

from gnn_trainer_component.evaluator import config as config_lib
from gnn_trainer_component.graph.errors import GraphInputError

#: The keys of the metrics mapping: the model's, and the baseline model's.
MODEL, BASELINE_MODEL = "model", "baseline_model"


class EvaluationInputError(GraphInputError):
  """The graph, labels or config cannot give the evaluation asked for; nothing was published."""


@dataclasses.dataclass(frozen=True)
class Verdict:
  """The outcome of the rules.

  Attributes:
    blessed: Every rule passed.
    checks: One entry per bound checked: ``rule``, ``bound``, ``value``,
      ``limit``, ``passed`` (and ``against``: the baseline compared with).
    failed: One sentence per failed bound.
    rubber_stamped: A change rule was not checked (no baseline model).
  """
  blessed: bool
  checks: tuple[Mapping[str, Any], ...]
  failed: tuple[str, ...]
  rubber_stamped: bool

  @property
  def message(self) -> str:
    if self.failed:
      return "Not blessed: " + "; ".join(self.failed)
    stamp = (" (max_loss_vs_baseline_model not checked: no baseline model, rubber-stamped)"
             if self.rubber_stamped else "")
    return f"Blessed: all {len(self.checks)} checks passed{stamp}"


#: ``(metric, slice, baseline, confidence) -> paired_interval`` of the model's gain over the
#: baseline on that slice's queries (:func:`metrics.paired_interval`).
Interval = Callable[[str, str, str, float], Mapping[str, float]]


def _compared(rule: config_lib.Rule, results: Mapping[str, Mapping[str, Mapping[str, float]]],
              baselines: Sequence[str]) -> dict[str, float]:
  """The rule's baselines that have its metric on its slice: ``{baseline: value}``."""
  names = rule.baselines or baselines
  missing = [b for b in names if b not in results]
  if missing:
    raise EvaluationInputError(
        f"GraphEvaluator: threshold {rule.describe()} names baselines {missing}, which this "
        f"graph does not have (its baselines: {list(baselines)}).")
  values = {b: results[b][rule.slice][rule.metric] for b in names
            if rule.metric in results[b][rule.slice]}
  if not values:
    raise EvaluationInputError(
        f"GraphEvaluator: threshold {rule.describe()}: no baseline has {rule.metric!r} on "
        f"slice {rule.slice!r}.")
  return values


def _best(rule: config_lib.Rule, results: Mapping[str, Mapping[str, Mapping[str, float]]],
          baselines: Sequence[str]) -> tuple[str, float]:
  values = _compared(rule, results, baselines)
  pick = min if rule.lower_is_better else max
  name = pick(values, key=values.get)
  return name, values[name]


def _gain_beyond_noise(rule: config_lib.Rule, limit: float,
                       results: Mapping[str, Mapping[str, Mapping[str, float]]],
                       baselines: Sequence[str], interval: Interval) -> dict[str, Any]:
  """``min_gain_over_baselines`` at ``gain_confidence``, against every compared baseline.

  The check names the baseline whose interval's lower bound is lowest; it
  passes when every baseline's lower bound beats ``limit``.
  """
  lows = {b: interval(rule.metric, rule.slice, b, rule.gain_confidence)
          for b in _compared(rule, results, baselines)}
  worst = min(lows, key=lambda b: lows[b]["low"])
  return {"against": worst, "gain": lows[worst]["gain"], "gain_low": lows[worst]["low"],
          "gain_high": lows[worst]["high"], "confidence": rule.gain_confidence,
          "passed": all(v["low"] > limit for v in lows.values())}


def judge(rules: Sequence[config_lib.Rule],
          results: Mapping[str, Mapping[str, Mapping[str, float]]],
          baselines: Sequence[str], interval: Optional[Interval] = None) -> Verdict:
  """Checks ``rules`` against ``results``.

  ``results``: ``{MODEL | baseline | BASELINE_MODEL: {slice: {metric: value}}}``;
  ``interval``: the gain intervals a rule with ``gain_confidence`` reads.

  Raises:
    EvaluationInputError: a rule's slice has no evaluated node (naming the slices there are).
  """
  model = results[MODEL]
  checks, failed, rubber_stamped = [], [], False
  for rule in rules:
    if rule.slice not in model:
      raise EvaluationInputError(
          f"GraphEvaluator: threshold {rule.describe()} names slice {rule.slice!r}, which holds "
          f"no evaluated node; the slices of this evaluation: {sorted(model)}.")
    if rule.metric not in model[rule.slice]:
      defined = sorted(k for k in model[rule.slice] if k != "num_nodes")
      raise EvaluationInputError(
          f"GraphEvaluator: threshold {rule.describe()}: the model has no {rule.metric!r} on "
          f"slice {rule.slice!r} (it has {defined}): AUC and average precision need both edges "
          "and negatives in the slice; MRR and hits@K need a model whose pair score is a "
          "weighted product of its ends' embeddings (dot product, Hadamard).")
    value = model[rule.slice][rule.metric]
    sign = -1.0 if rule.lower_is_better else 1.0
    for bound in config_lib.BOUNDS:
      limit = getattr(rule, bound)
      if limit is None:
        continue
      check: dict[str, Any] = {"rule": rule.describe(), "bound": bound, "value": value,
                               "limit": limit}
      against: Optional[float] = None
      if bound == "lower_bound":
        passed = value >= limit
      elif bound == "upper_bound":
        passed = value <= limit
      elif bound == "min_gain_over_baselines" and rule.gain_confidence is not None:
        if interval is None:
          raise EvaluationInputError(
              f"GraphEvaluator: threshold {rule.describe()}: this evaluation has no ranked "
              "queries to resample; gain_confidence bounds mrr and hits@K of link prediction.")
        check.update(_gain_beyond_noise(rule, limit, results, baselines, interval))
        passed = check.pop("passed")
      elif bound == "min_gain_over_baselines":
        check["against"], against = _best(rule, results, baselines)
        passed = sign * (value - against) > limit
      elif BASELINE_MODEL not in results:
        rubber_stamped = True
        continue
      else:
        check["against"] = BASELINE_MODEL
        against = results[BASELINE_MODEL][rule.slice].get(rule.metric)
        if against is None:
          raise EvaluationInputError(
              f"GraphEvaluator: threshold {rule.describe()}: the baseline model has no "
              f"{rule.metric!r} on slice {rule.slice!r}, so the change cannot be measured.")
        passed = sign * (against - value) <= limit
      check["passed"] = bool(passed)
      checks.append(check)
      if not passed and "gain_low" in check:
        failed.append(
            f"{rule.metric} on {rule.slice!r}: the gain over {check['against']} is "
            f"{check['gain']:.4f}, its {rule.gain_confidence:g} interval "
            f"[{check['gain_low']:.4f}, {check['gain_high']:.4f}]; {bound} {limit} needs the "
            "interval above it")
      elif not passed:
        versus = f" vs {check['against']} {against:.4f}" if against is not None else ""
        failed.append(f"{rule.metric} on {rule.slice!r} is {value:.4f}{versus}; {bound} {limit}")
  return Verdict(blessed=not failed, checks=tuple(checks), failed=tuple(failed),
                 rubber_stamped=rubber_stamped)
