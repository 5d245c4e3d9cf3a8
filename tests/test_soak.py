"""Crash soak, CI size: a seeded K = 3 run of devtools/soak.py (the full soak is K = 10).

The demo pipeline is SIGKILLed at 3 seeded moments (seed 5: while a checkpoint
is written, in the parity check, right after publish), retried under the same
pipeline run id each time, then run to completion; every invariant of
``soak.check_invariants`` must hold. Failure messages show the attempt table.
"""

import pytest

from devtools import soak

pytestmark = [pytest.mark.slow, pytest.mark.reliability]

KILLS = 3
SEED = 5
INVARIANTS = ("final_attempt_exit_0", "one_trainer_execution_complete", "one_live_model",
              "model_serves", "no_staging_or_temp", "no_leftover_folders",
              "live_artifacts_have_files", "resume_dir_gone", "model_properties")


@pytest.fixture(scope="module")
def soak_result(demo_data, tmp_path_factory):
  return soak.run_soak(KILLS, SEED, demo_data, str(tmp_path_factory.mktemp("soak")),
                       verbose=False)


def test_plan_is_seeded_and_in_pipeline_order():
  plan = soak.plan_kills(10, 0)
  assert plan == soak.plan_kills(10, 0)
  assert [k.phase for k in plan] == sorted((k.phase for k in plan), key=soak.PHASES.index)
  assert set(soak.PHASES) <= {k.phase for k in plan}  # K >= 7 covers every phase
  assert len({k.phase for k in soak.plan_kills(KILLS, SEED)}) == KILLS


def test_every_attempt_ran(soak_result):
  table = soak.format_table(soak_result)
  print(table)  # shown by pytest -rA
  rows = soak_result["attempts"]
  assert len(rows) == KILLS + 1, table
  assert not any(r.get("timeout") for r in rows), table
  # The first attempt cannot finish before its kill: nothing is done yet.
  assert rows[0]["killed"], table


@pytest.mark.parametrize("name", INVARIANTS)
def test_invariant(soak_result, name):
  result = soak_result["invariants"][name]
  assert result["ok"], f"{name}: {result['detail']}\n\n{soak.format_table(soak_result)}"
