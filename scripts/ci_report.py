"""The end of .ci/run: one summary line per stack, and the check that every test runs somewhere.

  python3 scripts/ci_report.py COLLECTED STACK=REPORT.json [STACK=REPORT.json ...]

COLLECTED is ``pytest --collect-only -q`` of the whole suite (every node id, no marker
filter); each REPORT is what tests/conftest.py wrote to $GNN_TEST_REPORT in that stack's run.
Prints ``<stack>: N passed, N skipped, N failed in S s`` per stack, its longest test
files (the seconds of their tests summed, as the workers spent them) and the files that used
most CPU (the workers' and their waited-for children's: on a 2-core machine shared by both
stacks, CPU is what the budget buys) and the tests that used most, then fails (exit 1) when a
collected test passed on no stack: it ran nowhere (deselected or skipped on every stack), or
failed. Standard library only: it runs with the host's python3.
"""

import collections
import json
import sys

#: Test files listed per stack, longest first (where a change that makes CI cheaper looks).
LONGEST = 10


def _top(seconds):
  """``test_a.py 12, test_b.py 9, ...``: the LONGEST files with the most seconds, most first."""
  top = sorted(seconds.items(), key=lambda kv: -kv[1])[:LONGEST]
  return ", ".join(f"{name.rsplit('/', 1)[-1]} {s:.0f}" for name, s in top)


def main(argv):
  if len(argv) < 3:
    print(__doc__, file=sys.stderr)
    return 2
  with open(argv[1]) as f:
    collected = [line.strip() for line in f if "::" in line]
  if not collected:
    print(f"ci_report: no test ids in {argv[1]}", file=sys.stderr)
    return 1
  passed_somewhere = set()
  ok = True
  for arg in argv[2:]:
    stack, _, path = arg.partition("=")
    try:
      with open(path) as f:
        report = json.load(f)
    except (OSError, ValueError) as e:
      print(f"ci_report: {stack}: no test report ({e}); did its pytest start?")
      ok = False
      continue
    counts = collections.Counter(report["outcomes"].values())
    print(f"ci_report: {stack}: {counts['passed']} passed, {counts['skipped']} skipped, "
          f"{counts['failed']} failed in {report['seconds']:.0f} s (pytest)")
    if report.get("file_seconds"):
      print(f"ci_report: {stack}: longest files (s summed over tests, fixtures included): "
            + _top(report["file_seconds"]))
    cpu = report.get("file_cpu_seconds", {})
    if cpu:
      print(f"ci_report: {stack}: CPU {sum(cpu.values()):.0f} s in all (the workers and the "
            "processes they waited for); most CPU: " + _top(cpu))
    if report.get("test_cpu_seconds"):
      print(f"ci_report: {stack}: tests with most CPU (a module fixture counts for the test "
            "that made it): " + _top(report["test_cpu_seconds"]))
    passed_somewhere |= {n for n, o in report["outcomes"].items() if o == "passed"}
  nowhere = [n for n in collected if n not in passed_somewhere]
  print(f"ci_report: {len(collected)} tests collected, {len(collected) - len(nowhere)} passed "
        "on at least one stack")
  if nowhere:
    print(f"ci_report: {len(nowhere)} tests ran and passed on no stack "
          "(a marker in docs/stacks.md 'Test tiers' must select each test somewhere):")
    for n in nowhere:
      print(f"ci_report:   {n}")
    ok = False
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv))
