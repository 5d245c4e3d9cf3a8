"""Running a sampler's Beam pipeline, and what its known failures mean to a user.

Both sampler executors run their pipeline through :func:`run_pipeline`: inside
the data-plane fix (:mod:`beam_data_plane`), timed, with a known Beam failure
raised as :class:`BeamSamplerError` and its explanation instead of a worker
traceback.
"""

from __future__ import annotations

import re
import time
from typing import Optional, Sequence

from absl import logging
import apache_beam as beam

from gnn_trainer_component import errors
from gnn_trainer_component.beam import data_plane as beam_data_plane

# TF-GNN 1.0.3's executor_lib joins the outputs of several sampling stages per
# example (Flatten + GroupByKey in CombineInputs) and raises a bare KeyError in
# MatchCombinedOutputs when one stage's output is missing for an example.
_LOST_STAGE_OUTPUT = re.compile(
    r"KeyError: \W*(stage\d+) \[while running '([^']*/Inputs/Match)'\]")


class BeamSamplerError(errors.GnnError, RuntimeError):
  """A sampler failed inside its Beam pipeline; nothing was published."""


def explain_beam_failure(error: BaseException, beam_pipeline_args: Sequence[str],
                         who: str = "GraphSampler") -> Optional[str]:
  """A user-facing explanation of a known Beam sampler failure, or None.

  Args:
    error: What ``pipeline.run()`` raised: the KeyError itself (Beam's
      in-process runners re-raise it with the transform's label added), or a
      RuntimeError whose text holds the worker's traceback (worker processes).
    beam_pipeline_args: The executor's Beam arguments (named in the message).
    who: The component named in the message.

  Returns:
    The explanation when ``error`` is the lost-stage-output KeyError of TF-GNN's
    ``executor_lib.CombineInputs``; None for any other error.
  """
  found = _LOST_STAGE_OUTPUT.search(f"{type(error).__name__}: {error}")
  if not found:
    return None
  stage, transform = found.groups()
  return (
      f"{who}: TF-GNN's Beam sampler found examples without the output of "
      f"sampling {stage} when joining stage outputs in '{transform}' (KeyError in "
      f"tensorflow_gnn/experimental/sampler/beam/executor_lib.py MatchCombinedOutputs): "
      f"elements were lost between Beam stages. Nothing was published. Beam pipeline "
      f"args: {list(beam_pipeline_args) or 'none'}. It is not an input error: Beam's "
      f"DirectRunner used to lose stage inputs this way on large graphs (a data-plane race "
      f"that {who} now fixes while it runs, gnn_trainer_component/sampler/"
      f"beam_data_plane.py; benchmarks/README.md, 'GraphSampler at scale'), so if you see "
      f"this, the runner lost data some other way: rerun on a distributed runner "
      f"(beam_pipeline_args for Dataflow, Flink or Spark; docs/scaling.md) and report "
      f"it with this message.")


def run_pipeline(pipeline: beam.Pipeline, beam_pipeline_args: Sequence[str], who: str) -> None:
  """Runs ``pipeline`` to the end with Beam's data plane fixed, explaining known failures.

  Args:
    pipeline: The built pipeline (from the executor's ``_make_beam_pipeline``).
    beam_pipeline_args: The executor's Beam arguments (named in explanations).
    who: The component (named in the log and in explanations).

  Raises:
    BeamSamplerError: for a failure :func:`explain_beam_failure` knows.
    Exception: whatever else the runner raised, unchanged.
  """
  start = time.monotonic()
  with beam_data_plane.writes_locked_against_periodic_flush(who):
    try:
      pipeline.run().wait_until_finish()
    except Exception as e:  # Beam raises RuntimeError with the worker's traceback
      explanation = explain_beam_failure(e, beam_pipeline_args, who)
      if explanation:
        raise BeamSamplerError(explanation) from e
      raise
  logging.info("%s: Beam pipeline ran in %.1f s", who, time.monotonic() - start)
