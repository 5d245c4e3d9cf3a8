"""GraphStatisticsGen: a graph's statistics against brute force, each injected fault counted.

A small labelled, timed graph written as CSV tables: papers citing papers (with a time),
authors writing papers, train and test seeds with times. The statistics of the clean graph
equal plain loops over its rows; each fault the validator must catch (a dangling edge, a
duplicate id, a future edge, a label copied into a feature, overlapping splits, an unknown
seed) shows as its own count and no other; the executor writes TFDV statistics that TFDV's
and TFX's own readers load.
"""

import collections
import json
import os

import numpy as np
import pytest

from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.statistics_gen import config as config_lib
from gnn_trainer_component.statistics_gen import executor as executor_lib
from tests.graph_faults import CONFIG, NUM_AUTHORS, NUM_PAPERS, SCHEMA, SEEDS
from tests.graph_faults import graph as _graph
from tests.graph_faults import write as _write
from tests.graph_faults import FAULTS

def _compute(rows_by_table, folder, config=None, seeds=None, schema=SCHEMA):
  spec = config_lib.parse(CONFIG if config is None else config,
                          SEEDS if seeds is None else seeds).spec
  return executor_lib.compute(_write(rows_by_table, folder, schema), spec)[0]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
  rows = _graph()
  return rows, _compute(rows, tmp_path_factory.mktemp("clean"))


def test_the_clean_graphs_statistics_equal_loops_over_its_rows(clean):
  rows, stats = clean
  papers = {r[0]: r for r in rows["papers.csv"][1:]}
  cites = rows["cites.csv"][1:]
  ends = {s for s, _, _ in cites} | {t for _, t, _ in cites} | {
      r[1] for r in rows["writes.csv"][1:]}
  assert stats["node_sets"]["paper"] == {"nodes": NUM_PAPERS, "table": "papers.csv",
                                         "duplicate_ids": 0,
                                         "isolated": NUM_PAPERS - len(ends)}
  writers = {r[0] for r in rows["writes.csv"][1:]}
  assert stats["node_sets"]["author"]["isolated"] == NUM_AUTHORS - len(writers)
  cited = stats["edge_sets"]["cites"]
  pairs = [(s, t) for s, t, _ in cites]
  assert (cited["edges"], cited["multi_edges"], cited["self_loops"]) == (
      len(cites), len(pairs) - len(set(pairs)), sum(s == t for s, t in pairs))
  assert cited["dangling_sources"] == cited["dangling_targets"] == 0
  out = collections.Counter(s for s, _ in pairs)
  assert cited["out_degree"]["max"] == max(out.values())
  assert cited["out_degree"]["isolated"] == NUM_PAPERS - len(out)
  assert cited["in_degree"]["isolated"] == NUM_PAPERS - len({t for _, t in pairs})
  same = [papers[s][1] == papers[t][1] for s, t in pairs]
  assert cited["homophily"] == {"share": pytest.approx(np.mean(same)), "edges": len(pairs)}
  assert cited["time"] == {"feature": "ts", "min": min(r[2] for r in cites),
                           "max": max(r[2] for r in cites)}
  assert "homophily" not in stats["edge_sets"]["writes"]  # its source is not the label's set
  for split, table in SEEDS.items():
    ids = [r[0] for r in rows[table][1:]]
    labels = collections.Counter(str(papers[i][1]) for i in ids)
    got = stats["splits"][split]
    assert got["labels"] == {c: labels.get(c, 0) for c in ("0", "1", "2")}
    assert (got["seeds"], got["duplicate_ids"], got["unknown_ids"]) == (len(ids), 0, 0)
    assert got["edges_at_or_after_seed_time"] == {"cites": 0}
  assert stats["split_overlap"] == {"test|train": 0}
  label = stats["label"]
  assert label["labelled"] == NUM_PAPERS
  assert sum(label["classes"].values()) == NUM_PAPERS
  assert label["label_purity"]["year"] < 0.9  # a year does not tell the label


def _faults(stats) -> dict:
  """Every count a fault can raise, by name."""
  cites, writes = stats["edge_sets"]["cites"], stats["edge_sets"]["writes"]
  return {
      "duplicate_ids": sum(s["duplicate_ids"] for s in stats["node_sets"].values()),
      "dangling": sum(e["dangling_sources"] + e["dangling_targets"] for e in (cites, writes)),
      "future_edges": sum(sum(s["edges_at_or_after_seed_time"].values())
                          for s in stats["splits"].values()),
      "overlap": sum(stats["split_overlap"].values()),
      "unknown_seeds": sum(s["unknown_ids"] for s in stats["splits"].values()),
      "label_copy": int(stats["label"]["label_purity"].get("copy", 0) == 1.0),
  }


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_injected_fault_shows_as_its_own_count(fault, clean, tmp_path):
  assert set(_faults(clean[1]).values()) == {0}
  rows = _graph()
  FAULTS[fault](rows)
  got = _faults(_compute(rows, tmp_path))
  assert got == {name: int(name == fault) for name in got}


def test_a_label_copied_into_a_feature_predicts_it_perfectly(tmp_path):
  rows = _graph()
  schema = SCHEMA.replace('features { key: "year"',
                          'features { key: "copy" value { dtype: DT_FLOAT } }\n  '
                          'features { key: "year"')
  rows["papers.csv"] = [rows["papers.csv"][0][:2] + ["copy"] + rows["papers.csv"][0][2:]] + [
      r[:2] + [float(r[1])] + r[2:] for r in rows["papers.csv"][1:]]
  stats = _compute(rows, tmp_path, schema=schema)
  assert stats["label"]["label_purity"]["copy"] == 1.0
  assert _faults(stats)["label_copy"] == 1


def test_a_malformed_row_is_still_refused_naming_file_and_line(tmp_path):
  rows = _graph()
  rows["cites.csv"].append(["p1", "p2", "soon"])
  with pytest.raises(GraphInputError, match=r"cites\.csv.*line 122"):
    _compute(rows, tmp_path)


@pytest.mark.parametrize("config, seeds, error, match", [
    ({"label": "label"}, None, config_lib.StatisticsConfigError, "without seed_node_set"),
    ({}, SEEDS, config_lib.StatisticsConfigError, "seeds given without seed_node_set"),
    ({"seed_node_set": "paper", "lables": "x"}, {}, config_lib.StatisticsConfigError,
     r"unknown keys \['lables'\]"),
    ({"seed_node_set": "paper", "times": ["ts"]}, {}, config_lib.StatisticsConfigError,
     "times must map names to names"),
    ({"seed_node_set": "papers"}, {}, GraphInputError, "'papers' is not a node set"),
    ({"seed_node_set": "paper", "label": "venue"}, {}, GraphInputError,
     "must be a scalar feature of node set 'paper'"),
    ({"seed_node_set": "paper", "times": {"cite": "ts"}}, {}, GraphInputError,
     "'cite', not an edge set"),
    ({"seed_node_set": "paper", "times": {"writes": "ts"}}, {}, GraphInputError,
     "'ts' is not a feature of edge set 'writes'"),
])
def test_a_bad_config_names_the_key_and_what_to_write(config, seeds, error, match, tmp_path):
  with pytest.raises(error, match=match):
    _compute(_graph(), tmp_path, config, seeds)


def test_seed_tables_without_a_time_column_are_refused_when_times_are_asked(tmp_path):
  rows = _graph()
  rows["train.csv"] = [r[:1] for r in rows["train.csv"]]
  with pytest.raises(GraphInputError, match=r"train\.csv.*'time'"):
    _compute(rows, tmp_path)


def test_tfdv_reads_vector_string_and_integer_features_as_list_columns():
  import tensorflow_data_validation as tfdv
  from gnn_trainer_component.graph import feature_statistics
  features = {"emb": np.arange(12, dtype=np.float32).reshape(4, 3),
              "kind": np.array([b"a", b"b", b"a", b""], dtype=object),
              "count": np.array([3, 1, 4, 1])}
  stats = feature_statistics.table_statistics(features, 4, "nodes-x").datasets[0]
  assert (stats.name, stats.num_examples) == ("nodes-x", 4)
  emb = tfdv.get_feature_stats(stats, tfdv.FeaturePath(["emb"])).num_stats
  assert (emb.common_stats.min_num_values, emb.min, emb.max) == (3, 0, 11)
  kind = tfdv.get_feature_stats(stats, tfdv.FeaturePath(["kind"])).string_stats
  assert kind.unique == 3 and kind.top_values[0].value == "a"
  count = tfdv.get_feature_stats(stats, tfdv.FeaturePath(["count"])).num_stats
  assert count.mean == pytest.approx(2.25)


def test_the_executor_writes_statistics_tfdv_and_tfx_read(tmp_path):
  import tensorflow_data_validation as tfdv
  from tfx.components.statistics_gen import stats_artifact_utils
  from tfx.types import artifact_utils
  from tfx.types import standard_artifacts

  from gnn_trainer_component import artifacts
  from gnn_trainer_component.statistics_gen import component

  rows = _graph()
  FAULTS["dangling"](rows)
  graph = artifacts.GraphSchema()
  graph.uri = _write(rows, tmp_path / "graph")
  stats, graph_stats = standard_artifacts.ExampleStatistics(), artifacts.GraphStatistics()
  stats.uri, graph_stats.uri = str(tmp_path / "stats"), str(tmp_path / "graph_stats")
  made = component.GraphStatisticsGen(graph_schema=component.types.Channel(
      type=artifacts.GraphSchema), seeds=SEEDS, statistics_config=CONFIG)
  executor_lib.Executor().Do({"graph_schema": [graph]},
                             {"statistics": [stats], "graph_statistics": [graph_stats]},
                             made.exec_properties)
  splits = artifact_utils.decode_split_names(stats.split_names)
  assert splits == ["edges-cites", "edges-writes", "nodes-author", "nodes-paper"]
  papers = stats_artifact_utils.load_statistics(stats, "nodes-paper").proto()
  assert papers.datasets[0].num_examples == NUM_PAPERS
  year = tfdv.get_feature_stats(papers.datasets[0], tfdv.FeaturePath(["year"]))
  years = [float(r[2]) for r in rows["papers.csv"][1:]]
  assert (year.num_stats.min, year.num_stats.max) == (min(years), max(years))
  writes = tfdv.load_stats_binary(os.path.join(stats.uri, "Split-edges-writes",
                                               "FeatureStats.pb"))
  assert writes.datasets[0].num_examples == NUM_PAPERS + 1
  assert not writes.datasets[0].features  # an edge table without features
  with open(os.path.join(graph_stats.uri, "graph_statistics.json"), encoding="utf-8") as f:
    written = json.load(f)
  assert written["edge_sets"]["writes"]["dangling_targets"] == 1
  with open(os.path.join(graph_stats.uri, "report.png"), "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert graph_stats.get_int_custom_property("dangling_edges") == 1
  assert graph_stats.get_int_custom_property("edges") == 120 + NUM_PAPERS + 1


def _loo_by_hand(feature, codes) -> float:
  right = labelled = 0
  for i, (value, label) in enumerate(zip(feature, codes, strict=True)):
    if label < 0:
      continue
    labelled += 1
    others = collections.Counter(c for j, (v, c) in enumerate(zip(feature, codes, strict=True))
                                 if j != i and c >= 0 and v == value)
    top = others.most_common(2)
    if top and (len(top) == 1 or top[0][1] > top[1][1]) and top[0][0] == label:
      right += 1
  return right / labelled if labelled else 0.0


@pytest.mark.parametrize("seed", range(4))
def test_label_purity_is_the_leave_one_out_vote_by_hand(seed):
  from gnn_trainer_component.graph import table_statistics
  rng = np.random.default_rng(seed)
  for _ in range(50):
    n = int(rng.integers(1, 40))
    feature = rng.integers(0, int(rng.integers(1, 10)), n)
    codes = rng.integers(-1, int(rng.integers(1, 5)), n)
    assert table_statistics.label_purity(feature, codes) == pytest.approx(
        _loo_by_hand(feature, codes))


def _numbers(dataset) -> dict:
  """What TFDV says of each feature of a table, the parts both engines compute exactly."""
  import tensorflow_data_validation as tfdv
  out = {}
  for feature in dataset.features:
    stats = tfdv.get_feature_stats(dataset, tfdv.FeaturePath(list(feature.path.step)))
    if stats.HasField("num_stats"):
      n = stats.num_stats
      out[feature.path.step[0]] = (n.common_stats.num_non_missing, n.min, n.max,
                                   round(n.mean, 6), round(n.std_dev, 6), n.num_zeros)
    else:
      out[feature.path.step[0]] = (stats.string_stats.common_stats.num_non_missing,
                                   stats.string_stats.unique,
                                   [(v.value, v.frequency) for v in stats.string_stats.top_values])
  return dataset.num_examples, out


@pytest.mark.slow
def test_beam_gives_the_in_memory_statistics_of_a_faulty_graph(tmp_path):
  from tfx.types import standard_artifacts

  from gnn_trainer_component import artifacts
  from gnn_trainer_component.graph import feature_statistics
  from gnn_trainer_component.statistics_gen import component

  rows = _graph()
  for fault in FAULTS.values():  # every fault at once: each count has something to count
    fault(rows)
  graph = artifacts.GraphSchema()
  graph.uri = _write(rows, tmp_path / "graph")
  in_memory, in_memory_features = executor_lib.compute(
      graph.uri, config_lib.parse(CONFIG, SEEDS).spec)
  stats, graph_stats = standard_artifacts.ExampleStatistics(), artifacts.GraphStatistics()
  stats.uri, graph_stats.uri = str(tmp_path / "stats"), str(tmp_path / "graph_stats")
  made = component.GraphStatisticsGen(
      graph_schema=component.types.Channel(type=artifacts.GraphSchema), seeds=SEEDS,
      statistics_config=dict(CONFIG, engine="beam"))
  executor_lib.Executor().Do({"graph_schema": [graph]},
                             {"statistics": [stats], "graph_statistics": [graph_stats]},
                             made.exec_properties)
  with open(os.path.join(graph_stats.uri, "graph_statistics.json"), encoding="utf-8") as f:
    on_beam = json.load(f)
  assert on_beam == json.loads(json.dumps(in_memory))
  assert on_beam["edge_sets"]["writes"]["dangling_targets"] == 1  # the faults are in it
  assert on_beam["split_overlap"] == {"test|train": 1}
  for split, memory in sorted(in_memory_features.items()):
    assert _numbers(feature_statistics.load(stats.uri, split).datasets[0]) == _numbers(
        memory.datasets[0]), split
