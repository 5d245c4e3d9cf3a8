"""GraphSampler: sampled subgraphs equal brute-force k-hop neighbourhoods; bad inputs fail.

The executor runs for real (its Beam engine on the DirectRunner) on a tiny
hand-built graph; no TFX or TF-GNN piece is mocked.
"""

import json
import os

import pytest

# pylint: disable=g-import-not-at-top
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tfx.types import artifact_utils

from gnn_trainer_component import graph_schema
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import table_formats
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.sampler import staging
from gnn_trainer_component.sampler.graph import executor as sampler_executor
from tests import helpers
from tests.helpers import run_beam_sampler

# GraphSampler's executor on Beam: its one end-to-end check on the legacy stack too (the fast
# tests; the power-law graph's Beam worker processes run on the current stack).
compat = pytest.mark.compat

# A small directed graph with cycles, a self loop, a hub and an isolated node.
NUM_NODES = 9
EDGES = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 0), (2, 4), (3, 5), (4, 4), (4, 6),
         (5, 7), (6, 1), (6, 7), (7, 0), (3, 0), (4, 0)]
FAN_OUTS = [10, 10]  # larger than any degree: the full neighbourhood

SCHEMA = """
node_sets { key: "v" value {
  features { key: "ident" value { dtype: DT_INT64 } }
  metadata { filename: "nodes.csv" } } }
edge_sets { key: "e" value { source: "v" target: "v"
  metadata { filename: "edges.csv" } } }
edge_sets { key: "r" value { source: "v" target: "v"
  features { key: "weight" value { dtype: DT_FLOAT } }
  metadata { filename: "reversed.csv" } } }
node_sets { key: "w" value {
  features { key: "f" value { dtype: DT_FLOAT } }
  metadata { filename: "other.csv" } } }
"""
#: Sets of SCHEMA that no hop samples: each example holds them empty.
UNSAMPLED_NODE_SETS, UNSAMPLED_EDGE_SETS = ["w"], ["r"]


def _write_graph(d, edges=EDGES, seeds=None, node_ids=None):
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "graph_schema.pbtxt"), "w") as f:
    f.write(SCHEMA)
  node_ids = range(NUM_NODES) if node_ids is None else node_ids
  with open(os.path.join(d, "nodes.csv"), "w") as f:
    f.write("id,ident\n" + "".join(f"n{i},{i}\n" for i in node_ids))
  with open(os.path.join(d, "edges.csv"), "w") as f:
    f.write("source,target\n" + "".join(f"n{s},n{t}\n" for s, t in edges))
  with open(os.path.join(d, "reversed.csv"), "w") as f:
    f.write("source,target,weight\n" + "".join(f"n{t},n{s},1.0\n" for s, t in edges))
  with open(os.path.join(d, "other.csv"), "w") as f:
    f.write("id,f\nw0,0.5\n")
  seeds = seeds if seeds is not None else {"train": [0, 3, 8], "eval": [5, 6]}
  for split, ids in seeds.items():
    with open(os.path.join(d, f"seeds-{split}.csv"), "w") as f:
      f.write("id\n" + "".join(f"n{i}\n" for i in ids))
  return {split: f"seeds-{split}.csv" for split in seeds}


def _run(tmp_path, graph_dir, seeds):
  return run_beam_sampler(sampler_executor.Executor, tmp_path, graph_dir, {
      "seeds": json.dumps(seeds), "num_shards": 1,
      "sampling_config": json.dumps(
          {"seed_node_set": "v", "hops": [{"e": f} for f in FAN_OUTS]})})


def _brute_force(seed, hops=len(FAN_OUTS)):
  """Nodes and edges the sampler reaches from ``seed`` with unlimited fan-out."""
  return helpers.reachable(EDGES, [seed], hops)


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("sampler")
  seeds = _write_graph(tmp / "graph")
  examples, schema_out = _run(tmp, tmp / "graph", seeds)
  return examples, schema_out


def _read(examples, split):
  split_dir = artifact_utils.get_split_uri([examples], split)
  files = tf.io.gfile.glob(os.path.join(split_dir, "*"))
  assert [os.path.basename(f) for f in files] == ["data_tfrecord-00000-of-00001.gz"]
  return list(tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator())


@compat
def test_output_layout_like_example_gen(sampled):
  examples, schema_out = sampled
  assert artifact_utils.decode_split_names(examples.split_names) == ["eval", "train"]
  assert examples.get_string_custom_property("file_format") == "tfrecords_gzip"
  assert examples.get_string_custom_property("payload_format") == "FORMAT_TF_EXAMPLE"
  assert not os.path.exists(os.path.join(examples.uri, staging.STAGING_DIR))
  schema = tfgnn.read_schema(os.path.join(schema_out.uri, "graph_schema.pbtxt"))
  assert not schema.node_sets["v"].metadata.HasField("filename")


@compat
@pytest.mark.parametrize("split,seeds", [("train", [0, 3, 8]), ("eval", [5, 6])])
def test_examples_are_exact_k_hop_neighbourhoods(sampled, split, seeds):
  examples, schema_out = sampled
  spec = tfgnn.create_graph_spec_from_schema_pb(
      tfgnn.read_schema(os.path.join(schema_out.uri, "graph_schema.pbtxt")))
  records = _read(examples, split)
  assert len(records) == len(seeds)
  got_seeds = []
  for record in records:
    graph = tfgnn.parse_single_example(spec, tf.constant(record))
    ident = graph.node_sets["v"]["ident"].numpy().tolist()
    seed = ident[0]  # the seed is node 0 of the seed node set
    got_seeds.append(seed)
    adj = graph.edge_sets["e"].adjacency
    edges = [(ident[s], ident[t]) for s, t in zip(adj.source.numpy(), adj.target.numpy())]
    want_nodes, want_edges = _brute_force(seed)
    assert len(ident) == len(set(ident)), "nodes are unique"
    assert set(ident) == want_nodes
    assert len(edges) == len(set(edges)), "edges are unique"
    assert set(edges) == want_edges
  assert sorted(got_seeds) == sorted(seeds)


@compat
def test_sets_no_hop_samples_are_in_every_example_empty(sampled):
  """A reverse edge set and a node set the hops never reach are in every example, empty, so
  GraphSampler's examples pass GnnTrainer's input checks against its own output schema (as
  the in-memory engine's subgraphs do)."""
  from gnn_trainer_component.trainer import validation
  examples, schema_out = sampled
  schema = tfgnn.read_schema(os.path.join(schema_out.uri, "graph_schema.pbtxt"))
  assert sorted(schema.edge_sets) == ["e", *UNSAMPLED_EDGE_SETS]
  for record in _read(examples, "train"):
    example = tf.train.Example.FromString(record)
    assert validation.check_example(example, schema) == []
    feature = example.features.feature
    for name in UNSAMPLED_NODE_SETS:
      assert list(feature[f"nodes/{name}.#size"].int64_list.value) == [0]
    for name in UNSAMPLED_EDGE_SETS:
      assert list(feature[f"edges/{name}.#size"].int64_list.value) == [0]
      assert feature[f"edges/{name}.weight"].WhichOneof("kind") == "float_list"
  plan = sampling.plan_from_hops(schema, "v", [{"e": 2}], who="GraphSampler")
  assert sampling.unreached_sets(plan, schema) == (UNSAMPLED_NODE_SETS, UNSAMPLED_EDGE_SETS)


def _assert_fails_unpublished(tmp_path, seeds, match, exc=GraphInputError,
                              remove=(), **graph_kwargs):
  """Writes the graph (minus the files in ``remove``), runs the sampler, expects ``exc``."""
  seed_files = _write_graph(tmp_path / "graph", seeds=seeds, **graph_kwargs)
  for name in remove:
    os.remove(tmp_path / "graph" / name)
  with pytest.raises(exc, match=match):
    _run(tmp_path, tmp_path / "graph", seed_files)
  out = tmp_path / "out"
  published = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
  assert not published, f"files published despite the error: {published}"


@compat
def test_unknown_node_ids_in_edge_table(tmp_path):
  _assert_fails_unpublished(
      tmp_path, {"train": [0]}, r"edges\.csv.*target ids not in node set 'v': \['n42'\].*edges\.csv, line \d+",
      edges=EDGES + [(1, 42)])


@compat
def test_seeds_missing_from_node_table(tmp_path):
  _assert_fails_unpublished(
      tmp_path, {"train": [0], "eval": [5, 77, 78]},
      r"split 'eval'.*seeds-eval\.csv.*missing from.*\['n77', 'n78'\]")


@compat
def test_split_without_seeds(tmp_path):
  _assert_fails_unpublished(
      tmp_path, {"train": [0], "test": []}, r"split 'test': seed table 'seeds-test\.csv' is empty")


@compat
def test_missing_graph_schema_file(tmp_path):
  _assert_fails_unpublished(
      tmp_path, {"train": [0]}, r"Graph schema file .*graph_schema\.pbtxt does not exist",
      exc=graph_schema.GraphSchemaError, remove=["graph_schema.pbtxt"])


@compat
def test_sampling_config_errors():
  schema = tfgnn.parse_schema(SCHEMA)
  with pytest.raises(GraphInputError, match="unknown edge set 'x'"):
    sampling.plan_from_hops(schema, "v", [{"x": 3}], who="GraphSampler")
  with pytest.raises(GraphInputError, match="exactly one"):
    sampling.plan_from_params(schema, None, None, who="GraphSampler")
  plan = sampling.plan_from_hops(schema, "v", [{"e": 4}, {"e": 2}], who="GraphSampler")
  assert [op.size for op in plan.ops] == [4, 2]
  assert list(plan.ops[1].inputs) == ["hop1_e"]


@compat
def test_sharded_csv_table_names_need_a_glob(tmp_path):
  """TF-GNN's CSV reader globs 'name@N' unexpanded (IndexError deep in Beam): named here."""
  with pytest.raises(GraphInputError,
                     match=r"'edges.csv@4'.*e\.g\. edges-\*-of-00004\.csv"):
    table_formats.resolve_table(str(tmp_path), "edges.csv@4", "GraphSampler")


@pytest.mark.slow
def test_power_law_graph_sampled_by_beam_worker_processes(tmp_path, monkeypatch):
  """benchmarks.power_law_graph's tables (sharded CSV, hubs) through GraphSampler on
  Beam's DirectRunner with 2 worker processes (--direct_running_mode=multi_processing):
  one example per seed, rooted at it, every sampled edge a real edge, fan-outs kept."""
  from benchmarks import power_law_graph  # pylint: disable=g-import-not-at-top
  graph_dir = tmp_path / "graph"
  graph = power_law_graph.generate(str(graph_dir), num_nodes=2000, num_edges=20000, shards=2,
                                   seed_fraction=0.02)
  assert graph["max_degree"] > 20 * graph["median_degree"]  # power law: hubs
  # Sampled examples carry features, not ids: identify nodes by their score.
  score = {}
  for path in graph_dir.glob("nodes-*-of-00002.csv"):
    for line in path.read_text().splitlines()[1:]:
      node_id, value, _ = line.split(",")
      score[node_id] = round(float(value), 5)
  edges = set()
  for path in graph_dir.glob("edges-*-of-00002.csv"):
    for line in path.read_text().splitlines()[1:]:
      src, tgt = line.strip().split(",")
      edges.add((score[src], score[tgt]))
  fan_outs = [8, 4]
  # With Beam args, TFX's BaseBeamExecutor parses sys.argv + them as absl flags: pytest's
  # "-v -rs" would read as --verbosity=-rs. Give it a launcher's argv.
  monkeypatch.setattr("sys.argv", ["graph_sampler"])
  examples, _ = run_beam_sampler(
      sampler_executor.Executor, tmp_path, graph_dir,
      {"seeds": json.dumps(graph["seed_tables"]), "num_shards": 1,
       "sampling_config": json.dumps({"seed_node_set": "user",
                                      "hops": [{"follows": f} for f in fan_outs]})},
      beam_pipeline_args=["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
  for split, n in graph["seeds"].items():
    seeds = sorted(score[line.strip()] for line in (graph_dir / f"seeds-{split}.csv")
                   .read_text().splitlines()[1:])
    records = _read(examples, split)
    assert len(records) == n
    roots = []
    for record in records:
      features = tf.train.Example.FromString(record).features.feature
      scores = [round(v, 5) for v in features["nodes/user.score"].float_list.value]
      roots.append(scores[0])  # the seed is node 0
      pairs = list(zip((scores[i] for i in features["edges/follows.#source"].int64_list.value),
                       (scores[i] for i in features["edges/follows.#target"].int64_list.value)))
      assert set(pairs) <= edges
      assert len(pairs) <= fan_outs[0] + fan_outs[0] * fan_outs[1]
    assert sorted(roots) == seeds


@compat
def test_in_memory_subgraphs_equal_graph_samplers(sampled, tmp_path):
  """With fan-outs that cover every neighbour, the graph held in memory yields
  GraphSampler's subgraphs: same spec, same nodes (seed first), same edges."""
  from gnn_trainer_component.in_memory import adapters
  examples, schema_out = sampled
  seeds = _write_graph(tmp_path / "graph")
  graph = adapters.load(
      str(tmp_path / "graph"), seeds=seeds, sampling_spec=None,
      sampling_config={"seed_node_set": "v", "hops": [{"e": f} for f in FAN_OUTS]},
      splits=["train", "eval"])
  spec = tfgnn.create_graph_spec_from_schema_pb(
      tfgnn.read_schema(os.path.join(schema_out.uri, "graph_schema.pbtxt")))
  for split in ("train", "eval"):
    beam = {}
    for record in _read(examples, split):
      g = tfgnn.parse_single_example(spec, tf.constant(record))
      beam[int(g.node_sets["v"]["ident"][0])] = g
    ds = graph.sampler.dataset(graph.seeds[split], batch_size=2, shuffle=False, fresh=False,
                               seed=0)
    assert ds.element_spec == spec
    for g in ds:
      ident = g.node_sets["v"]["ident"].numpy().tolist()
      want = beam.pop(ident[0])
      want_ident = want.node_sets["v"]["ident"].numpy().tolist()
      assert len(ident) == len(set(ident)) and set(ident) == set(want_ident)

      def edges(graph, ident):
        adj = graph.edge_sets["e"].adjacency
        out = [(ident[s], ident[t]) for s, t in zip(adj.source.numpy(), adj.target.numpy())]
        assert len(out) == len(set(out))
        return set(out)
      assert edges(g, ident) == edges(want, want_ident)
    assert not beam, f"seeds GraphSampler sampled and memory did not: {sorted(beam)}"
