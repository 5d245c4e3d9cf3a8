"""The test tiers' plumbing (docs/stacks.md, "Test tiers"): host tests skip unless enabled,
and .ci/run's report fails when a test passed on no stack."""

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT, host_test_skip_reason


def test_host_tests_skip_with_the_variable_that_enables_them():
  reason = host_test_skip_reason(["container"], {})
  assert "make test-all" in reason and "GNN_REQUIRE_CONTAINERS=1" in reason
  assert "GNN_REQUIRE_MARIADB=1" in host_test_skip_reason(["mlmd_server"], {"CI": "true"})
  assert host_test_skip_reason(["container"], {"GNN_REQUIRE_CONTAINERS": "1"}) is None
  # Each needed variable must be 1; another one's does not count.
  assert host_test_skip_reason(["mlmd_server"], {"GNN_REQUIRE_CONTAINERS": "1"})
  with pytest.raises(ValueError, match="must also carry one of"):
    host_test_skip_reason([], {})
  with pytest.raises(ValueError, match="must also carry one of"):
    host_test_skip_reason(["gpu"], {"GNN_REQUIRE_GPU": "1"})


def _report(tmp_path, collected, file_seconds=None, file_cpu_seconds=None,
            test_cpu_seconds=None, **reports):
  (tmp_path / "collected.txt").write_text(
      "\n".join(collected) + f"\n\n{len(collected)} tests collected in 1.00s\n")
  args = []
  for stack, outcomes in reports.items():
    path = tmp_path / f"{stack}.json"
    if outcomes is not None:
      path.write_text(json.dumps({"seconds": 12.3, "exitstatus": 0, "outcomes": outcomes,
                                  **({"file_seconds": file_seconds} if file_seconds else {}),
                                  **({"file_cpu_seconds": file_cpu_seconds}
                                     if file_cpu_seconds else {}),
                                  **({"test_cpu_seconds": test_cpu_seconds}
                                     if test_cpu_seconds else {})}))
    args.append(f"{stack}={path}")
  return subprocess.run([sys.executable, "scripts/ci_report.py", str(tmp_path / "collected.txt"),
                         *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False)


def test_ci_report_passes_when_every_test_passed_somewhere(tmp_path):
  proc = _report(tmp_path, ["t.py::a", "t.py::b", "t.py::c"],
                 tfx116={"t.py::a": "passed", "t.py::c": "skipped"},
                 tfx121={"t.py::b": "passed", "t.py::c": "passed"})
  assert proc.returncode == 0, proc.stdout
  assert "tfx116: 1 passed, 1 skipped, 0 failed in 12 s" in proc.stdout
  assert "3 tests collected, 3 passed on at least one stack" in proc.stdout


def test_ci_report_names_the_longest_test_files(tmp_path):
  seconds = {f"tests/test_{i}.py": float(i) for i in range(12)}
  proc = _report(tmp_path, ["t.py::a"], file_seconds=seconds, tfx116={"t.py::a": "passed"})
  assert proc.returncode == 0, proc.stdout
  assert ("tfx116: longest files (s summed over tests, fixtures included): test_11.py 11, "
          "test_10.py 10, test_9.py 9,") in proc.stdout
  assert "test_1.py 1" not in proc.stdout  # ten files, longest first


def test_ci_report_names_the_files_and_tests_that_used_most_cpu(tmp_path):
  cpu = {f"tests/test_{i}.py": 10.0 * i for i in range(12)}
  tests = {f"tests/test_{i}.py::test_t": 5.0 * i for i in range(12)}
  proc = _report(tmp_path, ["t.py::a"], file_cpu_seconds=cpu, test_cpu_seconds=tests,
                 tfx116={"t.py::a": "passed"})
  assert proc.returncode == 0, proc.stdout
  assert ("tfx116: CPU 660 s in all (the workers and the processes they waited for); most "
          "CPU: test_11.py 110, test_10.py 100, test_9.py 90,") in proc.stdout
  assert ("tfx116: tests with most CPU (a module fixture counts for the test that made it): "
          "test_11.py::test_t 55, test_10.py::test_t 50,") in proc.stdout


def test_each_test_files_cpu_seconds_reach_the_report_from_the_workers(tmp_path):
  """Two pytest-xdist workers run a file whose test burns CPU in a child process and one
  that does nothing: the report holds each file's CPU seconds, the child's counted."""
  (tmp_path / "test_burns.py").write_text(
      "import subprocess, sys\n"
      "def test_burns():\n"
      "  subprocess.run([sys.executable, '-c', 'sum(i * i for i in range(2 * 10**7))'], "
      "check=True)\n")
  (tmp_path / "test_idle.py").write_text("def test_idle():\n  pass\n")
  report = tmp_path / "report.json"
  proc = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
       "-n", "2", "--dist", "loadfile", "--rootdir", str(tmp_path),
       str(tmp_path / "test_burns.py"), str(tmp_path / "test_idle.py")],
      cwd=REPO_ROOT, env={**os.environ, "GNN_TEST_REPORT": str(report)},
      capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  cpu = {os.path.basename(k): v for k, v in json.loads(report.read_text())[
      "file_cpu_seconds"].items()}
  assert set(cpu) == {"test_burns.py", "test_idle.py"}, cpu
  assert cpu["test_burns.py"] >= 0.6 > cpu["test_idle.py"], cpu
  tests = json.loads(report.read_text())["test_cpu_seconds"]  # from half a CPU second on
  assert [os.path.basename(k) for k in tests] == ["test_burns.py::test_burns"], tests


def test_ci_report_fails_for_a_test_that_ran_nowhere(tmp_path):
  proc = _report(tmp_path, ["t.py::a", "t.py::skipped_everywhere", "t.py::deselected"],
                 tfx116={"t.py::a": "passed", "t.py::skipped_everywhere": "skipped"},
                 tfx121={"t.py::a": "failed", "t.py::skipped_everywhere": "skipped"})
  assert proc.returncode == 1
  assert "2 tests ran and passed on no stack" in proc.stdout
  assert "t.py::skipped_everywhere" in proc.stdout and "t.py::deselected" in proc.stdout
  assert "tfx121: 0 passed, 1 skipped, 1 failed" in proc.stdout


def test_ci_report_fails_when_a_stack_wrote_no_report(tmp_path):
  proc = _report(tmp_path, ["t.py::a"], tfx116={"t.py::a": "passed"}, tfx121=None)
  assert proc.returncode == 1
  assert "tfx121: no test report" in proc.stdout
