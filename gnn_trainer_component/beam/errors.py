"""Running a sampler's Beam pipeline.

The Beam executors (GraphSampler, LinkSampler, GraphInferrer's Beam engine) run their
pipeline through :func:`run_pipeline`: inside the data-plane fix (:mod:`beam_data_plane`),
timed.
"""

from __future__ import annotations

import time
from typing import Sequence

from absl import logging
import apache_beam as beam

from gnn_trainer_component.beam import data_plane as beam_data_plane


def run_pipeline(pipeline: beam.Pipeline, beam_pipeline_args: Sequence[str], who: str) -> None:
  """Runs ``pipeline`` to the end with Beam's data plane fixed.

  Args:
    pipeline: The built pipeline (from the executor's ``_make_beam_pipeline``).
    beam_pipeline_args: The executor's Beam arguments (logged).
    who: The component (named in the log).

  Raises:
    Exception: whatever the runner raised, unchanged.
  """
  start = time.monotonic()
  logging.info("%s: running the Beam pipeline (Beam pipeline args: %s)", who,
               list(beam_pipeline_args) or "none")
  with beam_data_plane.writes_locked_against_periodic_flush(who):
    pipeline.run().wait_until_finish()
  logging.info("%s: Beam pipeline ran in %.1f s", who, time.monotonic() - start)
