"""Shared fixtures and hooks. Expensive things (pipeline runs, training) are session-scoped.

Helper functions and constants are in tests/helpers.py.
"""

import collections
import json
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=g-import-not-at-top,wrong-import-position
import pytest

import gnn_trainer_component
gnn_trainer_component.setup_process()  # Keras 2, before TensorFlow loads
from tests.helpers import HOST_TESTS, host_test_skip_reason


#: The cluster a process is in (TF_CONFIG, Vertex AI's CLUSTER_SPEC). One leaking out of a
#: test makes every later in-process GnnTrainer a replica that waits for its cluster.
_CLUSTER_ENV = ("TF_CONFIG", "CLUSTER_SPEC")


@pytest.fixture(autouse=True)
def _no_cluster_leaks():
  """Fails the test that leaves TF_CONFIG / CLUSTER_SPEC changed, and restores them."""
  before = {k: os.environ.get(k) for k in _CLUSTER_ENV}
  yield
  after = {k: os.environ.get(k) for k in _CLUSTER_ENV}
  for key, value in before.items():
    if value is None:
      os.environ.pop(key, None)
    else:
      os.environ[key] = value
  assert after == before, f"the test left the cluster environment changed: {after}"


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory):
  """Small generated demo graph examples: {"examples": dir, "graph_schema": dir}."""
  from pipelines.demo import data as demo_data_lib
  return demo_data_lib.write_demo_data(str(tmp_path_factory.mktemp("demo_data")),
                                       num_nodes=600)


#: The test files that take longest (the CI report's "longest files" of both stacks, summed
#: worker seconds, longest first). Only an ordering hint for the workers: a stale entry costs
#: time, never a test.
LONGEST_FILES = ("test_containers.py", "test_recommendation_e2e.py", "test_mlmd_server.py",
                 "test_distributed.py", "test_edge_labels_e2e.py", "test_node_serving.py",
                 "test_pipeline_e2e.py", "test_speed_smoke.py", "test_planetoid.py",
                 "test_sampler.py", "test_inferrer.py", "test_input_data.py",
                 "test_multitask_e2e.py", "test_resume.py", "test_tuner_e2e.py",
                 "test_package.py", "test_reliability.py", "test_kubeflow.py",
                 "test_temporal_e2e.py", "test_link_prediction_e2e.py", "test_soak.py",
                 "test_quickstart.py", "test_beam_strategies.py", "test_scale_smoke.py")


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
  """Runs test files with ``slow`` tests first; skips the ``host`` tests whose GNN_REQUIRE_*
  variable is not 1 (helpers.HOST_TESTS).

  Slow files first, the longest (LONGEST_FILES) before the others, so a long file started
  last does not leave the other worker idle. pytest-xdist (``--dist loadfile``) starts the
  files with the most tests first and takes this order among equals; putting every long file
  first (``--no-loadscope-reorder``) was slower, twice (benchmarks/README.md, "CI runs": the
  long files then run all at once beside the other stack's and slow each other). The order
  inside a file stays as collected.
  """
  slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}

  def rank(item):
    name = item.path.name
    longest = LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES)
    return (item.path not in slow_files, longest)

  items.sort(key=rank)  # stable
  for item in items:
    if item.get_closest_marker("host") is None:
      continue
    kinds = [k for k in HOST_TESTS if item.get_closest_marker(k) is not None]
    reason = host_test_skip_reason(kinds, os.environ)
    if reason:
      item.add_marker(pytest.mark.skip(reason=reason))


def _cpu_seconds() -> float:
  """User + system CPU seconds of this process and of the children it has waited for."""
  own, children = (resource.getrusage(resource.RUSAGE_SELF),
                   resource.getrusage(resource.RUSAGE_CHILDREN))
  return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
  item.cpu_mark = _cpu_seconds()
  yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
  """Each phase's report carries its CPU seconds, since the test's last report
  (``cpu_seconds``; pytest-xdist sends a report's attributes to the controller): where a CI
  run's CPU goes, not only its time."""
  outcome = yield
  now = _cpu_seconds()
  if hasattr(item, "cpu_mark"):
    outcome.get_result().cpu_seconds = round(now - item.cpu_mark, 3)
  item.cpu_mark = now


#: The report lists a test's own CPU seconds from this many on (its file's are always there).
TEST_CPU_LISTED = 0.5


class _OutcomeReport:
  """Writes {nodeid: passed|failed|skipped}, each test file's seconds and CPU seconds (setup,
  call and teardown of its tests, fixtures included; CPU: the worker's and that of the
  processes it started and waited for), each test's CPU seconds from TEST_CPU_LISTED on (a
  module fixture counts for the test that made it) and the run's seconds to $GNN_TEST_REPORT.

  Read by scripts/ci_report.py (the per-stack summary of .ci/run, where the time went, and
  its check that every test runs on some stack). Works under pytest-xdist: reports reach the
  controller.
  """

  def __init__(self, path: str):
    self.path = path
    self.start = time.time()
    self.outcomes = {}
    self.file_seconds = collections.Counter()
    self.file_cpu_seconds = collections.Counter()
    self.test_cpu_seconds = collections.Counter()

  def pytest_runtest_logreport(self, report):
    path = report.nodeid.split("::", 1)[0]
    self.file_seconds[path] += report.duration
    self.file_cpu_seconds[path] += getattr(report, "cpu_seconds", 0)
    self.test_cpu_seconds[report.nodeid] += getattr(report, "cpu_seconds", 0)
    if report.failed:
      self.outcomes[report.nodeid] = "failed"
    elif report.skipped:
      self.outcomes.setdefault(report.nodeid, "skipped")
    elif report.when == "call":
      self.outcomes.setdefault(report.nodeid, "passed")

  def pytest_sessionfinish(self, session, exitstatus):  # pylint: disable=unused-argument
    os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
    with open(self.path, "w") as f:
      json.dump({"seconds": round(time.time() - self.start, 1), "exitstatus": int(exitstatus),
                 "outcomes": self.outcomes,
                 "file_seconds": {k: round(v, 1) for k, v in self.file_seconds.items()},
                 "file_cpu_seconds": {k: round(v, 1)
                                      for k, v in self.file_cpu_seconds.items()},
                 "test_cpu_seconds": {k: round(v, 1) for k, v in self.test_cpu_seconds.items()
                                      if v >= TEST_CPU_LISTED}},
                f, indent=1, sort_keys=True)


def pytest_configure(config):
  path = os.environ.get("GNN_TEST_REPORT")
  if path and not hasattr(config, "workerinput"):  # the xdist controller or a plain run
    config.pluginmanager.register(_OutcomeReport(path), "gnn_outcome_report")
