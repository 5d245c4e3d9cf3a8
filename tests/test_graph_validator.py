"""GraphValidator: each injected fault caught with its named anomaly; clean graphs clean.

GraphStatisticsGen's and GraphValidator's executors run on the small graph of
``tests/graph_faults.py`` (clean, or with one fault), the last snapshot being the clean
graph where a fault is a change (an edge set emptied by a bad join, degrees shifted, a
feature's mean moved by 3 sigma); the anomalies are read back with TFDV's own reader.
"""

import json
import os

import numpy as np
import pytest

from tensorflow_data_validation.utils import anomalies_util
from tfx.types import artifact_utils
from tfx.types import standard_artifacts

from gnn_trainer_component import artifacts
from gnn_trainer_component.statistics_gen import component as statistics_component
from gnn_trainer_component.statistics_gen import executor as statistics_executor
from gnn_trainer_component.validator import anomalies
from gnn_trainer_component.validator import config as config_lib
from gnn_trainer_component.validator import executor as validator_executor
from tests import graph_faults


def _statistics(rows, folder, schema=graph_faults.SCHEMA, artifact_id=0):
  """GraphStatisticsGen's executor on ``rows``: its two output artifacts."""
  graph = artifacts.GraphSchema()
  graph.uri = graph_faults.write(rows, os.path.join(folder, "graph"), schema)
  stats, graph_stats = standard_artifacts.ExampleStatistics(), artifacts.GraphStatistics()
  stats.uri, graph_stats.uri = os.path.join(folder, "stats"), os.path.join(folder, "gstats")
  graph_stats.id = artifact_id
  made = statistics_component.GraphStatisticsGen(
      graph_schema=statistics_component.types.Channel(type=artifacts.GraphSchema),
      seeds=graph_faults.SEEDS, statistics_config=graph_faults.CONFIG)
  statistics_executor.Executor().Do({"graph_schema": [graph]},
                                    {"statistics": [stats], "graph_statistics": [graph_stats]},
                                    made.exec_properties)
  return stats, graph_stats


def _validate(current, folder, baseline=None, config=None):
  """GraphValidator's executor: ``(anomalies artifact, {split: TFDV Anomalies})``."""
  out = standard_artifacts.ExampleAnomalies()
  out.uri = os.path.join(folder, "anomalies")
  inputs = {"statistics": [current[0]], "graph_statistics": [current[1]]}
  if baseline is not None:
    inputs["baseline_statistics"] = [baseline[1], current[1]]  # the resolver's newest two
  validator_executor.Executor().Do(inputs, {"anomalies": [out]},
                                   {"validation_config": json.dumps(config or {})})
  return out, {split: anomalies_util.load_anomalies_binary(
      os.path.join(out.uri, f"Split-{split}", "SchemaDiff.pb"))
               for split in artifact_utils.decode_split_names(out.split_names)}


def _names(by_split) -> dict:
  """``{(split, anomaly name)}`` from the anomalies' reasons."""
  return {(split, reason.short_description) for split, a in by_split.items()
          for info in a.anomaly_info.values() for reason in info.reason}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
  folder = str(tmp_path_factory.mktemp("clean"))
  return _statistics(graph_faults.graph(), folder, artifact_id=1)


def test_the_clean_graph_is_valid_alone_and_against_itself(clean, tmp_path):
  for baseline in (None, clean):
    out, by_split = _validate(clean, str(tmp_path / str(baseline is None)), baseline)
    assert _names(by_split) == set()
    assert sorted(by_split) == ["edges-cites", "edges-writes", "nodes-author", "nodes-paper",
                                "seeds"]
    assert (out.get_int_custom_property("valid"), out.get_int_custom_property("errors")) == (1, 0)
    assert out.get_json_value_custom_property("blessed") == {s: 1 for s in by_split}


def _label_copy(rows):
  rows["papers.csv"] = [rows["papers.csv"][0] + ["copy"]] + [
      r + [float(r[1])] for r in rows["papers.csv"][1:]]
  return graph_faults.SCHEMA.replace(
      'features { key: "year"', 'features { key: "copy" value { dtype: DT_FLOAT } }\n  '
      'features { key: "year"')


def _drop_edges(rows):  # a bad join: 30 % of the citations gone
  rows["cites.csv"] = rows["cites.csv"][:1 + int(0.7 * (len(rows["cites.csv"]) - 1))]


def _more_edges(rows):  # degrees shifted by 10 %: each paper cites as before, plus some
  rng = np.random.default_rng(7)
  extra = int(0.1 * (len(rows["cites.csv"]) - 1))
  rows["cites.csv"] += [[f"p{a}", f"p{b}", 50] for a, b in rng.integers(0, 35, (extra, 2))]


def _shift_year(rows):  # a feature's mean moved by 3 sigma
  years = np.array([r[2] for r in rows["papers.csv"][1:]])
  for r in rows["papers.csv"][1:]:
    r[2] = r[2] + 3 * float(years.std())


#: fault -> (what it does, whether it is a change against the clean last snapshot, and the
#: anomalies it must raise: {(split, anomaly)}).
CASES = {
    "dangling": (graph_faults.dangling, False, {("edges-writes", "dangling_edges")}),
    "duplicate_ids": (graph_faults.duplicate, False, {("nodes-author", "duplicate_ids")}),
    "future_edges": (graph_faults.future, False, {("seeds", "future_edges")}),
    "overlap": (graph_faults.overlap, False, {("seeds", "split_overlap")}),
    "unknown_seeds": (graph_faults.unknown_seed, False, {("seeds", "unknown_seeds")}),
    "label_copy": (_label_copy, False, {("nodes-paper", "label_leak")}),
    "emptied_by_a_join": (_drop_edges, True, {("edges-cites", "count_change"),
                                              ("edges-cites", "degree_shift")}),
    "degree_shift": (_more_edges, True, {("edges-cites", "degree_shift")}),
    "feature_shift": (_shift_year, True, {("nodes-paper", "feature_drift")}),
}


@pytest.mark.parametrize("fault", sorted(CASES))
def test_each_injected_fault_is_caught_with_its_named_anomaly(fault, clean, tmp_path):
  inject, is_change, want = CASES[fault]
  rows = graph_faults.graph()
  schema = inject(rows) or graph_faults.SCHEMA
  current = _statistics(rows, str(tmp_path), schema, artifact_id=2)
  out, by_split = _validate(current, str(tmp_path), clean if is_change else None)
  assert _names(by_split) == want
  with open(os.path.join(out.uri, "anomalies.json"), encoding="utf-8") as f:
    listed = json.load(f)
  assert {(a["split"], a["name"]) for a in listed} == want
  assert all(a["severity"] == config_lib.SEVERITIES[a["name"]] for a in listed)
  errors = sum(a["severity"] == config_lib.ERROR for a in listed)
  assert out.get_int_custom_property("errors") == errors
  assert out.get_int_custom_property("warnings") == len(listed) - errors
  assert out.get_int_custom_property("valid") == int(not errors)
  with open(os.path.join(out.uri, "report.png"), "rb") as f:  # this snapshot against the last
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_message_names_the_set_table_and_number_against_its_bound(tmp_path):
  rows = graph_faults.graph()
  graph_faults.dangling(rows)
  _, by_split = _validate(_statistics(rows, str(tmp_path)), str(tmp_path))
  (info,) = by_split["edges-writes"].anomaly_info.values()
  assert info.description == (
      "edge set 'writes' (table 'writes.csv'): 1 edge end(s) not in their node table (0 "
      "source ids not in 'author', 1 target ids not in 'paper'; max_dangling_edges 0).")


def test_severity_off_drops_an_anomaly_and_warning_keeps_the_graph_valid(tmp_path):
  rows = graph_faults.graph()
  graph_faults.dangling(rows)
  graph_faults.overlap(rows)
  current = _statistics(rows, str(tmp_path))
  out, by_split = _validate(current, str(tmp_path / "a"), config={
      "severity": {"dangling_edges": "off", "split_overlap": "warning"}})
  assert _names(by_split) == {("seeds", "split_overlap")}
  assert (out.get_int_custom_property("valid"), out.get_int_custom_property("warnings")) == (1, 1)
  out, _ = _validate(current, str(tmp_path / "b"), config={"max_split_overlap": 1,
                                                         "max_dangling_edges": 1})
  assert out.get_int_custom_property("valid") == 1


@pytest.mark.parametrize("config, match", [
    ({"max_dangling": 0}, r"unknown keys \['max_dangling'\]"),
    ({"max_isolated_share": -0.1}, "max_isolated_share must be a number >= 0"),
    ({"max_dangling_edges": 0.5}, "max_dangling_edges must be an int >= 0"),
    ({"severity": {"dangling": "error"}}, r"unknown anomalies \['dangling'\]"),
    ({"severity": {"dangling_edges": "fatal"}}, '"error", "warning" or "off"'),
])
def test_a_bad_config_names_the_key_and_what_to_write(config, match):
  with pytest.raises(config_lib.ValidationConfigError, match=match):
    config_lib.parse(config)


def test_the_baseline_is_the_newest_snapshot_older_than_this_one():
  def stats(artifact_id):
    a = artifacts.GraphStatistics()
    a.uri, a.id = f"/s/{artifact_id}", artifact_id
    return a
  current = stats(5)
  assert validator_executor.last_snapshot(current, [stats(3), stats(5), stats(4)]).id == 4
  assert validator_executor.last_snapshot(current, [current]) is None
  assert validator_executor.last_snapshot(current, None) is None


def _cora(folder):
  from pipelines.planetoid import data
  from tests.helpers import require_planetoid
  written = data.write_planetoid_tables(require_planetoid(), "cora", folder)
  return folder, written["seeds"], {"seed_node_set": data.NODE_SET, "label": "label"}


def _quickstart(folder):
  del folder
  from pipelines.quickstart import pipeline
  return pipeline.DATA_DIR, pipeline.SEEDS, {"seed_node_set": "user", "label": "label"}


def _recommendation(folder):
  from pipelines.recommendation import data
  data.write_tables(folder, with_stars=True)
  return folder, {}, {}


def _power_law(folder):
  from benchmarks import power_law_graph
  written = power_law_graph.generate(folder, num_nodes=10_000, num_edges=100_000)
  return folder, written["seed_tables"], {"seed_node_set": "user", "label": "label"}


@pytest.mark.parametrize("make", [_cora, _quickstart, _recommendation, _power_law],
                         ids=["cora", "quickstart", "recommendation", "power_law"])
def test_the_shipped_and_benchmark_graphs_have_no_anomaly(make, tmp_path):
  from gnn_trainer_component.statistics_gen import config as statistics_config
  from gnn_trainer_component.validator import checks
  folder, seeds, config = make(str(tmp_path / "graph"))
  stats, features = statistics_executor.compute(folder,
                                                statistics_config.parse(config, seeds).spec)
  assert checks.check(stats, config_lib.parse({}), baseline=stats) == []
  assert not [split for split, s in features.items()
              if anomalies.feature_drift(split, s, s, config_lib.parse({}))]


def test_the_resolver_gives_the_newest_two_statistics_or_none():
  from gnn_trainer_component.validator import component
  made = []
  for artifact_id in (3, 9, 5):
    made.append(artifacts.GraphStatistics())
    made[-1].id = artifact_id
  strategy = component.LatestStatisticsStrategy()
  got = strategy.resolve_artifacts(None, {"baseline_statistics": made})
  assert [a.id for a in got["baseline_statistics"]] == [9, 5]
  assert strategy.resolve_artifacts(None, {"baseline_statistics": []}) == {
      "baseline_statistics": []}
