"""Serving by node id: the export samples each node's subgraph itself and answers as GraphInferrer.

Fast: the served sampler (TensorFlow ops over the snapshot) against the in-memory kernel
(every deterministic strategy and full fan-outs: the same subgraphs, array for array; uniform
draws: their law) and the plans it refuses. Slow: one LocalDagRunner pipeline trains three
GnnTrainer models on the graph in memory with ``serve_by_node_id`` (one node set, seed readout;
two node sets with top_k and latest hops; user -> item links) and re-exports the first with a
fresh snapshot of its tables (``refresh_only``); a fresh process with TensorFlow only (TF-GNN
and this package cannot be imported there) loads each pushed export and serves every node by id,
which must equal GraphInferrer's in-memory engine on the same tables.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import kernel
from gnn_trainer_component.in_memory import snapshot as snapshot_lib
from gnn_trainer_component.model import node_serving
from gnn_trainer_component.model import served_sampler
from tests import test_recommendation as recommendation
from tests.test_inferrer import SAMPLING as ONE_SET_SAMPLING
from tests.test_inferrer import _write_tables as write_one_set_tables
from tests.test_sampling_strategies import _load
from tests.test_sampling_strategies import _random_graph
from tests.test_sampling_strategies import _write

NUM_NODES = 40
TOP_K = {"fanout": 3, "strategy": "top_k", "weight": "w"}
LATEST = {"fanout": 2, "strategy": "latest", "time": "t"}


def _served(graph, plan):
  return served_sampler.ServedSampler(snapshot_lib.snapshot(graph, plan), {"p": plan},
                                      graph.schema)


def _arrays(sub):
  return ({n: [np.asarray(a) for a in v] for n, v in sub.nodes.items()},
          {n: [np.asarray(a) for a in v] for n, v in sub.edges.items()})


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
  d = tmp_path_factory.mktemp("served-sampler")
  _write(d, _random_graph(np.random.default_rng(0), num_nodes=NUM_NODES),
         {"train": [(n, 10) for n in range(NUM_NODES)]})
  return d


@pytest.mark.parametrize("hops", [
    [{"e": TOP_K}, {"e": LATEST}],
    [{"e": LATEST}, {"e": dict(LATEST, time_inclusive=True)}],
    [{"e": 100}, {"e": 100}],
    [{"e": dict(LATEST, strategy="uniform_before", fanout=100)}],
], ids=["top_k-latest", "latest-inclusive", "uniform-every-edge", "uniform_before-every-edge"])
def test_the_served_sampler_samples_as_the_in_memory_kernel(tables, hops):
  """Deterministic strategies, and fan-outs that take every edge: the kernel's subgraphs, node
  for node and edge for edge, in its order (each row at its own time where hops are timed)."""
  splits = _load(tables, hops)
  graph, plan = splits.sampler.graph, splits.sampler.plan
  roots = np.arange(NUM_NODES, dtype=np.int64)
  times = np.arange(NUM_NODES, dtype=np.float64) % 21  # times in the tables: 0..19
  got = _served(graph, plan).sample("p", tf.constant(roots), tf.zeros([NUM_NODES], tf.int64),
                                    tf.constant(times if plan.timed else np.full(NUM_NODES,
                                                                                 np.inf)))
  want = kernel.sample(graph, plan, roots, np.random.default_rng(0),
                       times=times if plan.timed else None)
  got_nodes, got_edges = _arrays(got)
  for name, arrays in want.nodes.items():
    for a, b in zip(arrays, got_nodes[name], strict=True):
      np.testing.assert_array_equal(a, b)
  for name, arrays in want.edges.items():
    for a, b in zip(arrays, got_edges[name], strict=True):
      np.testing.assert_array_equal(a, b)


def test_uniform_draws_follow_the_law_and_a_row_depends_on_its_own_seed_only(tables):
  """Fan-out 3 of 12 out-edges: each edge in 1/4 of the subgraphs, three distinct a subgraph;
  the same seed gives the same subgraph whatever else the request holds."""
  splits = _load(tables, [{"e": 3}])
  graph, plan = splits.sampler.graph, splits.sampler.plan
  served = _served(graph, plan)
  draws = 4000
  sub = served.sample("p", tf.zeros([draws], tf.int64), tf.range(draws, dtype=tf.int64),
                      tf.fill([draws], np.inf))
  sizes, _, _, positions = (np.asarray(a) for a in sub.edges["e"])
  assert (sizes == 3).all()
  per_row = positions.reshape(draws, 3)
  assert all(len(set(row)) == 3 for row in per_row)
  counts = np.bincount(positions, minlength=graph.edge_sets["e"].indptr[1])
  expected = draws * 3 / 12
  assert ((counts - expected) ** 2 / expected).sum() < 35  # chi-square, 11 dof: p < 1e-4
  alone = served.sample("p", tf.constant([0], tf.int64), tf.constant([17], tf.int64),
                        tf.constant([np.inf]))
  np.testing.assert_array_equal(np.asarray(alone.edges["e"][3]), per_row[17])


@pytest.mark.parametrize("hop, match", [
    ({"fanout": 2, "strategy": "weighted", "weight": "w"},
     r"op 'hop1_e'.*strategy 'weighted', which the served sampler .*does not run"),
    (dict(LATEST, time_respecting=True), r"op 'hop1_e'.*time_respecting"),
])
def test_a_plan_the_served_sampler_does_not_run_is_refused_by_name(tables, hop, match):
  plan = _load(tables, [{"e": hop}]).sampler.plan
  with pytest.raises(GraphInputError, match=match):
    served_sampler.check_plan(plan, "GnnTrainer")


def test_a_graph_above_the_budget_is_refused_before_training(tables):
  splits = _load(tables, [{"e": 3}])
  graph, plan = splits.sampler.graph, splits.sampler.plan
  served = node_serving.ServedGraph(snapshot_lib.snapshot(graph, plan), plan, graph.schema)
  served.check("GnnTrainer", served.snapshot.nbytes)
  with pytest.raises(GraphInputError, match=r"above the budget.*serve_by_node_id_budget_mb"):
    served.check("GnnTrainer", served.snapshot.nbytes - 1)


# --- End to end: LocalDagRunner, the pushed export served by id in a fresh process. -------------

TWO_SETS_SCHEMA = """
node_sets { key: "u" value {
  features { key: "x" value { dtype: DT_FLOAT } }
  features { key: "label" value { dtype: DT_INT64 } }
  metadata { filename: "users.csv" } } }
node_sets { key: "i" value {
  features { key: "z" value { dtype: DT_FLOAT } }
  metadata { filename: "items.csv" } } }
edge_sets { key: "rates" value { source: "u" target: "i"
  features { key: "w" value { dtype: DT_FLOAT } }
  features { key: "t" value { dtype: DT_INT64 } }
  metadata { filename: "rates.csv" } } }
edge_sets { key: "rated_by" value { source: "i" target: "u"
  features { key: "w" value { dtype: DT_FLOAT } }
  features { key: "t" value { dtype: DT_INT64 } }
  metadata { filename: "rated_by.csv" } } }
"""
#: top_k and latest hops whose fan-outs take every edge before the time (at most 9 a node).
TWO_SETS_SAMPLING = {"seed_node_set": "u", "hops": [
    {"rates": {"fanout": 16, "strategy": "top_k", "weight": "w"}},
    {"rated_by": {"fanout": 16, "strategy": "latest", "time": "t"}}]}
AS_OF = 15.0
TWO_SETS_MODULE = '''
import tensorflow as tf
import tensorflow_gnn as tfgnn
from gnn_trainer_component import tasks as task_lib

def model_fn(spec):
  graph = inputs = tf.keras.Input(type_spec=spec)
  def features(node_set, node_set_name):
    value = node_set["x"] if node_set_name == "u" else node_set["z"]
    return tf.keras.layers.Dense(8, "relu")(value[:, None])
  graph = tfgnn.keras.layers.MapFeatures(node_sets_fn=features)(graph)
  for _ in range(2):
    graph = tfgnn.keras.layers.GraphUpdate(node_sets={
        "u": tfgnn.keras.layers.NodeSetUpdate(
            {"rates": tfgnn.keras.layers.SimpleConv(tf.keras.layers.Dense(8), "sum",
                                                     receiver_tag=tfgnn.SOURCE)},
            tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(8, "relu"))),
        "i": tfgnn.keras.layers.NodeSetUpdate(
            {"rated_by": tfgnn.keras.layers.SimpleConv(tf.keras.layers.Dense(8), "sum",
                                                        receiver_tag=tfgnn.SOURCE)},
            tfgnn.keras.layers.NextStateFromConcat(tf.keras.layers.Dense(8, "relu")))})(graph)
  return tf.keras.Model(inputs, graph)

def task():
  return task_lib.SeedMulticlassClassification(
      "u", num_classes=2, label_fn=task_lib.SeedLabelFn("u", feature_name="label"))
'''


def _write_two_sets_tables(d):
  rng = np.random.default_rng(1)
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "graph_schema.pbtxt"), "w") as f:
    f.write(TWO_SETS_SCHEMA)
  users, items = 30, 12
  x = rng.normal(size=users)
  pd.DataFrame({"id": np.arange(users) * 7 + 100, "x": x.round(4),
                "label": (x > 0).astype(int)}).to_csv(os.path.join(d, "users.csv"), index=False)
  pd.DataFrame({"id": [f"item{j}" for j in range(items)],
                "z": rng.normal(size=items).round(4)}).to_csv(os.path.join(d, "items.csv"),
                                                               index=False)
  rows = [(u * 7 + 100, f"item{j}", float(rng.integers(1, 4)), int(rng.integers(0, 30)))
          for u in range(users) for j in rng.choice(items, size=3, replace=False)]
  rates = pd.DataFrame(rows, columns=["source", "target", "w", "t"])
  rates.to_csv(os.path.join(d, "rates.csv"), index=False)
  rates.rename(columns={"source": "target", "target": "source"})[
      ["source", "target", "w", "t"]].to_csv(os.path.join(d, "rated_by.csv"), index=False)
  ids = np.arange(users) * 7 + 100
  pd.DataFrame({"id": ids[:24], "time": int(AS_OF)}).to_csv(os.path.join(d, "train.csv"),
                                                        index=False)
  pd.DataFrame({"id": ids[24:], "time": int(AS_OF)}).to_csv(os.path.join(d, "eval.csv"),
                                                        index=False)
  with open(os.path.join(d, "module.py"), "w") as f:
    f.write(TWO_SETS_MODULE)


RECOMMEND_MODULE = '''
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.models import vanilla_mpnn
from gnn_trainer_component import tasks as task_lib

def model_fn(spec):
  def first(node_set, node_set_name):
    ident = tf.cast(node_set["ident"], tf.float32)
    if node_set_name == "user":
      return tf.keras.layers.Dense(8, "relu")(tf.stack([node_set["x"], ident / 10], -1))
    if node_set_name == "item":
      return tf.keras.layers.Dense(8, "relu")(ident[:, None] / 100)
    return None  # the readout node set
  graph = inputs = tf.keras.Input(type_spec=spec)
  graph = tfgnn.keras.layers.MapFeatures(node_sets_fn=first)(graph)
  for _ in range(2):
    graph = vanilla_mpnn.VanillaMPNNGraphUpdate(
        units=8, message_dim=8, receiver_tag=tfgnn.SOURCE, node_set_names=["user", "item"],
        reduce_type="mean")(graph)
  return tf.keras.Model(inputs, graph)

def task():
  return task_lib.DotProductLinkPrediction()
'''


#: A node the trained snapshot of "one" lacks, and its out-edges (the fresh snapshot holds them).
NEW_NODE = {"x": 0.25, "y": -1.5, "ident": 999, "label": 1}
NEW_NODE_EDGES = ["n3", "n7", "n11", "n30"]


def _write_fresh_snapshot(tables, fresh):
  """``tables`` with the node "fresh" (:data:`NEW_NODE`) and its edges added."""
  import shutil
  shutil.copytree(tables, fresh)
  with open(os.path.join(fresh, "nodes.csv"), "a") as f:
    f.write("fresh," + ",".join(str(NEW_NODE[k]) for k in ("x", "y", "ident", "label")) + "\n")
  with open(os.path.join(fresh, "edges.csv"), "a") as f:
    f.writelines(f"fresh,{n}\n" for n in NEW_NODE_EDGES)
  with open(os.path.join(fresh, "seeds-fresh.csv"), "w") as f:
    f.write("id\nfresh\n")


def _trainer(tables, importer, name, seeds, sampling, base_model=None, **custom_config):
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer
  graph = ({"link_config": sampling} if seeds is None else
           {"seeds": seeds, "sampling_config": sampling})
  return GnnTrainer(
      module_file=os.path.join(tables, "module.py"), graph_schema=importer.outputs["result"],
      base_model=base_model, **graph,
      train_args=tfx.proto.TrainArgs(splits=["train"], num_steps=4),
      eval_args=tfx.proto.EvalArgs(splits=["eval"]),
      custom_config={"global_batch_size": 8, "epochs": 1, "seed": 1,
                     "summarize_every_n_steps": "never", "serve_by_node_id": True,
                     **custom_config}).with_id(name)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
  """One LocalDagRunner run: three GnnTrainers, each pushed to its own folder, and "one"'s
  weights re-exported (refresh_only) with a fresh snapshot of its tables, pushed too."""
  from tfx import v1 as tfx
  from gnn_trainer_component import GraphSchema
  from pipelines.runtime import mlmd_connection
  root = str(tmp_path_factory.mktemp("node-serving"))
  one, two, links, fresh = (os.path.join(root, name)
                            for name in ("one", "two", "links", "one_fresh"))
  write_one_set_tables(one)
  _write_fresh_snapshot(one, fresh)
  _write_two_sets_tables(two)
  recommendation.write_graph(links)
  with open(os.path.join(links, "module.py"), "w") as f:
    f.write(RECOMMEND_MODULE)
  components, models = [], {}
  one_seeds = {"train": "seeds-all.csv", "eval": "seeds-eval.csv"}
  for name, tables, seeds, sampling, extra in (
      ("one", one, one_seeds, ONE_SET_SAMPLING, {}),
      ("two", two, {"train": "train.csv", "eval": "eval.csv"}, TWO_SETS_SAMPLING,
       {"graph_mode": "sampled"}),  # one: the whole graph (auto, a small graph)
      ("links", links, None, recommendation.CONFIG, {"graph_mode": "sampled"}),
      ("refreshed", fresh, one_seeds, ONE_SET_SAMPLING, {"refresh_only": True})):
    importer = tfx.dsl.Importer(source_uri=tables, artifact_type=GraphSchema).with_id(
        f"tables_{name}")
    trainer = _trainer(tables, importer, f"trainer_{name}", seeds, sampling,
                       base_model=models.get("one") if name == "refreshed" else None, **extra)
    models[name] = trainer.outputs["model"]
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(
                base_directory=os.path.join(root, f"served_{name}")))).with_id(f"pusher_{name}")
    components += [importer, trainer, pusher]
  metadata = os.path.join(root, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name="node-serving", pipeline_root=os.path.join(root, "pipeline_root"),
      components=components,
      metadata_connection_config=mlmd_connection.pipeline_connection_config(metadata)))
  return {"root": root, "metadata": metadata, "one": one, "two": two, "links": links,
          "one_fresh": fresh}


#: Runs in a fresh process: TF-GNN and gnn_trainer_component cannot be imported.
SERVE = r'''
import json, sys
import numpy as np
class Refuse:
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in ("tensorflow_gnn", "gnn_trainer_component"):
      raise ImportError(f"{name} is not installed where the model is served")
sys.meta_path.insert(0, Refuse())
import tensorflow as tf
model_dir, out, ids, kind, as_of = sys.argv[1:6]
ids = json.loads(ids)
ids = tf.constant(ids, tf.int64 if kind == "int" else tf.string)
model = tf.saved_model.load(model_dir)
plain = model.signatures["serve_node_ids"](node_ids=ids)
dated = model.signatures["serve_node_ids_as_of"](
    node_ids=ids, as_of=tf.fill(tf.shape(ids), tf.constant(float(as_of), tf.float64)),
    seed=tf.zeros(tf.shape(ids), tf.int64))
np.savez(out, **{f"plain/{k}": v.numpy() for k, v in plain.items()},
         **{f"dated/{k}": v.numpy() for k, v in dated.items()},
         modules=np.array(sorted(m for m in sys.modules if "tensorflow_gnn" in m)))
'''


def _serve_fresh(model_dir, out, ids, kind, as_of=np.inf):
  proc = subprocess.run(
      [sys.executable, "-c", SERVE, model_dir, out, json.dumps(ids), kind, str(as_of)],
      capture_output=True, text=True, cwd="/", timeout=600, check=False,
      env=dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return dict(np.load(out, allow_pickle=True))


def _pushed(pipeline, name):
  folder = os.path.join(pipeline["root"], f"served_{name}")
  (version,) = os.listdir(folder)
  return os.path.join(folder, version)


def _inferred(tables, model_dir, path, sampling, as_of=None):
  from gnn_trainer_component.inferrer import config as config_lib
  from gnn_trainer_component.inferrer import in_memory
  in_memory.infer(tables, model_dir, path, sampling_config=sampling,
                  cfg=config_lib.InferenceConfig(signatures=("embeddings", "serving_default"),
                                                 as_of=as_of))
  return pd.read_parquet(path)


@pytest.mark.slow
def test_the_pushed_model_serves_every_node_by_id_as_graph_inferrer_in_a_fresh_process(
    pipeline, tmp_path):
  """One node set (string ids, seed readout): every node, and an unknown id answered by status."""
  model_dir = _pushed(pipeline, "one")
  want = _inferred(pipeline["one"], model_dir, str(tmp_path / "one.parquet"), ONE_SET_SAMPLING)
  ids = list(want["id"]) + ["no-such-node"]
  got = _serve_fresh(model_dir, str(tmp_path / "one.npz"), ids, "str")
  assert len(got["modules"]) == 0
  np.testing.assert_array_equal(got["plain/status"], [0] * len(want) + [1])
  for column in ("embedding", "logits"):
    np.testing.assert_allclose(got[f"plain/{column}"][:-1], np.stack(want[column]), atol=1e-5)
    np.testing.assert_array_equal(got[f"plain/{column}"][-1], 0)
  np.testing.assert_allclose(got["dated/logits"], got["plain/logits"], atol=1e-6)
  asset = node_serving.read(os.path.join(model_dir, "assets.extra"))
  assert asset["node_set"] == "v" and asset["id_dtype"] == "string"
  assert asset["signatures"] == sorted([node_serving.SIGNATURE, node_serving.SIGNATURE_AS_OF,
                                        node_serving.SIGNATURE_NEW])


@pytest.mark.slow
def test_two_node_sets_with_top_k_and_latest_hops_are_served_as_of_a_time(pipeline, tmp_path):
  """Ids as the CSV table writes them (text); as_of bounds the latest hop as GraphInferrer's
  as_of does, and without it every edge counts (GraphInferrer as of a time after every edge)."""
  model_dir = _pushed(pipeline, "two")
  dated = _inferred(pipeline["two"], model_dir, str(tmp_path / "dated.parquet"),
                    TWO_SETS_SAMPLING, as_of=AS_OF)
  every = _inferred(pipeline["two"], model_dir, str(tmp_path / "every.parquet"),
                    TWO_SETS_SAMPLING, as_of=1e9)
  got = _serve_fresh(model_dir, str(tmp_path / "two.npz"), list(dated["id"]), "str", as_of=AS_OF)
  assert (got["dated/status"] == 0).all() and (got["plain/status"] == 0).all()
  np.testing.assert_allclose(got["dated/logits"], np.stack(dated["logits"]), atol=1e-5)
  np.testing.assert_allclose(got["plain/logits"], np.stack(every["logits"]), atol=1e-5)
  assert np.abs(np.stack(dated["logits"]) - np.stack(every["logits"])).max() > 1e-4


@pytest.mark.slow
def test_bad_requests_are_refused_by_field_or_answered_by_status(pipeline):
  model = tf.saved_model.load(_pushed(pipeline, "two"))
  serve = model.signatures[node_serving.SIGNATURE]
  # TensorFlow refuses a request whose input has the wrong dtype (TF Serving names the input).
  with pytest.raises(tf.errors.InvalidArgumentError, match="expected to be a string tensor"):
    serve(node_ids=tf.constant([100], tf.int64))  # the ids of a CSV table are text
  empty = serve(node_ids=tf.zeros([0], tf.string))
  assert empty["status"].shape == [0] and empty["logits"].shape[0] == 0
  unknown = serve(node_ids=tf.constant(["5", "100"]))
  assert unknown["status"].numpy().tolist() == [node_serving.UNKNOWN_ID, node_serving.SERVED]
  dated = model.signatures[node_serving.SIGNATURE_AS_OF]
  with pytest.raises(tf.errors.InvalidArgumentError, match="expected to be a double tensor"):
    dated(node_ids=tf.constant(["100"]), as_of=tf.constant(["yesterday"]),
          seed=tf.constant([0], tf.int64))


@pytest.mark.slow
def test_the_model_serving_by_id_is_published_in_mlmd_with_its_graph_schema(pipeline):
  from pipelines.runtime import mlmd_utils
  model = mlmd_utils.latest_artifact(pipeline["metadata"], "Model", "node-serving")
  assert node_serving.read(os.path.join(model.uri, "Format-Serving", "assets.extra"))


#: The recommendation signature in a fresh process: argv model_dir, out, ids (JSON), k, exclude.
RECOMMEND = SERVE.split("model_dir, out")[0] + r'''
model_dir, out, ids = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
k, exclude = int(sys.argv[4]), sys.argv[5] == "1"
got = tf.saved_model.load(model_dir).signatures["recommend"](
    node_ids=tf.constant(ids), k=tf.constant([k] * len(ids), tf.int64),
    exclude_linked=tf.constant([exclude] * len(ids)))
np.savez(out, **{k: v.numpy() for k, v in got.items()},
         modules=np.array(sorted(m for m in sys.modules if "tensorflow_gnn" in m)))
'''


def _recommend_fresh(model_dir, out, ids, k, exclude):
  proc = subprocess.run(
      [sys.executable, "-c", RECOMMEND, model_dir, out, json.dumps(ids), str(k),
       "1" if exclude else "0"],
      capture_output=True, text=True, cwd="/", timeout=600, check=False,
      env=dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return dict(np.load(out, allow_pickle=True))


@pytest.mark.slow
def test_recommend_ranks_every_item_as_the_trainers_retrieval_in_a_fresh_process(
    pipeline, tmp_path):
  """Users -> items at full fan-out: the scores of every item for every user are the dot
  products of the retrieval's embeddings (each node's subgraph on the message-passing graph,
  read as its end of a pair by the export's embeddings signature), best first; excluding
  linked items leaves out exactly the user's items in that graph."""
  from gnn_trainer_component.in_memory import adapters
  from gnn_trainer_component.in_memory import retrieval
  model_dir = _pushed(pipeline, "links")
  splits = adapters.load(pipeline["links"], link_config=recommendation.CONFIG,
                         splits=["train", "eval"])
  model = tf.saved_model.load(model_dir)
  ends = retrieval.end_embeddings(
      splits, lambda examples: model.signatures["embeddings"](examples=examples))
  want = ends["source"]["source_embedding"] @ ends["target"]["target_embedding"].T
  graph = splits.message_graph
  users = [i.decode() for i in graph.node_sets["user"].ids]
  items = np.array([i.decode() for i in graph.node_sets["item"].ids])
  num_items = len(items)
  got = _recommend_fresh(model_dir, str(tmp_path / "all.npz"), users, num_items, False)
  assert len(got["modules"]) == 0 and (got["status"] == 0).all()
  order = np.argsort(-want, axis=1, kind="stable")
  np.testing.assert_allclose(got["scores"], np.take_along_axis(want, order, 1), atol=1e-5)
  position = {item: j for j, item in enumerate(items)}
  got_index = np.vectorize(lambda i: position[i.decode()])(got["target_ids"])
  np.testing.assert_allclose(np.take_along_axis(want, got_index, 1), got["scores"], atol=1e-5)
  # Without the items each user rated in the message-passing graph.
  top = _recommend_fresh(model_dir, str(tmp_path / "new.npz"), users, 3, True)
  rated = graph.edge_sets["rated"]
  for u, row in enumerate(top["target_ids"]):
    linked = set(items[rated.target[rated.indptr[u]:rated.indptr[u + 1]]])
    allowed = [j for j in order[u] if items[j] not in linked]
    assert [i.decode() for i in row] == list(items[allowed[:3]]), u


@pytest.mark.slow
def test_recommend_answers_bad_rows_by_status(pipeline):
  recommend_fn = tf.saved_model.load(_pushed(pipeline, "links")).signatures["recommend"]
  got = recommend_fn(node_ids=tf.constant(["u1", "u1", "u1", "nobody"]),
                     k=tf.constant([0, 2, recommendation.NUM_ITEMS + 1, 2], tf.int64),
                     exclude_linked=tf.constant([False] * 4))
  assert got["status"].numpy().tolist() == [2, 0, 2, 1]
  assert got["target_ids"].shape == [4, 2]
  assert [i for i in got["target_ids"].numpy()[[0, 2, 3]].ravel()] == [b""] * 6
  assert (got["scores"].numpy()[1] != 0).all()


@pytest.mark.slow
def test_a_new_node_is_answered_as_graph_inferrer_answers_it_once_in_the_tables(
    pipeline, tmp_path):
  """serve_new_nodes: a node the snapshot lacks, given by its features and out-edges, gets what
  GraphInferrer gives it on tables holding it (the same subgraph at full fan-out); a row with an
  edge to an unknown node gets status 3 and zeros, the other rows their answers."""
  model_dir = _pushed(pipeline, "one")
  from gnn_trainer_component.inferrer import config as config_lib
  from gnn_trainer_component.inferrer import in_memory
  in_memory.infer(pipeline["one_fresh"], model_dir, str(tmp_path / "fresh.parquet"),
                  nodes="seeds-fresh.csv", sampling_config=ONE_SET_SAMPLING,
                  cfg=config_lib.InferenceConfig(signatures=("embeddings", "serving_default")))
  want = pd.read_parquet(tmp_path / "fresh.parquet")
  serve = tf.saved_model.load(model_dir).signatures[node_serving.SIGNATURE_NEW]
  new, neighbours = NEW_NODE, NEW_NODE_EDGES
  got = serve(feature_x=tf.constant([new["x"], 0.0, new["x"]]),
              feature_y=tf.constant([new["y"], 0.0, new["y"]]),
              feature_ident=tf.constant([new["ident"]] * 3, tf.int64),
              feature_label=tf.constant([new["label"]] * 3, tf.int64),
              edges_e=tf.constant([neighbours, ["n1", "nobody", "", ""],
                                   neighbours[:2] + ["", ""]]))
  assert got["status"].numpy().tolist() == [node_serving.SERVED, node_serving.UNKNOWN_NEIGHBOUR,
                                            node_serving.SERVED]
  for column in ("embedding", "logits"):
    np.testing.assert_allclose(got[column].numpy()[0], np.stack(want[column])[0], atol=1e-5)
    np.testing.assert_array_equal(got[column].numpy()[1], 0)
  assert np.abs(got["logits"].numpy()[2] - got["logits"].numpy()[0]).max() > 1e-6
  empty = serve(feature_x=tf.zeros([0]), feature_y=tf.zeros([0]),
                feature_ident=tf.zeros([0], tf.int64), feature_label=tf.zeros([0], tf.int64),
                edges_e=tf.zeros([0, 0], tf.string))
  assert empty["status"].shape == [0]


@pytest.mark.slow
def test_a_fresh_snapshot_is_served_with_the_trained_weights_and_recorded_in_mlmd(
    pipeline, tmp_path):
  """refresh_only: GnnTrainer exports trainer_one's weights, untrained, with a fresh snapshot
  of its tables (a node and its edges added). Served by id in a fresh process, every node of
  the fresh snapshot, the new one too, gets what GraphInferrer gives it with the trained Model
  on those tables; MLMD records the refreshed Model with both the trained Model and the new
  GraphSchema as its execution's inputs, and Pusher pushed it."""
  from gnn_trainer_component import GraphSchema
  from pipelines.runtime import mlmd_utils
  trained, refreshed = _pushed(pipeline, "one"), _pushed(pipeline, "refreshed")
  want = _inferred(pipeline["one_fresh"], trained, str(tmp_path / "want.parquet"),
                   ONE_SET_SAMPLING)
  assert "fresh" in set(want["id"])
  got = _serve_fresh(refreshed, str(tmp_path / "got.npz"), list(want["id"]), "str")
  assert (got["plain/status"] == node_serving.SERVED).all()
  for column in ("embedding", "logits"):
    np.testing.assert_allclose(got[f"plain/{column}"], np.stack(want[column]), atol=1e-5)
  before = tf.saved_model.load(trained).signatures[node_serving.SIGNATURE](
      node_ids=tf.constant(["fresh"]))
  assert before["status"].numpy().tolist() == [node_serving.UNKNOWN_ID]
  store = mlmd_utils.store(pipeline["metadata"])
  models = {a.uri: a for a in store.get_artifacts_by_type("Model")}
  schemas = {a.uri: a for a in store.get_artifacts_by_type(GraphSchema.TYPE_NAME)}
  (refreshed_model,) = [a for uri, a in models.items() if "trainer_refreshed" in uri]
  execution, _ = mlmd_utils.producer(store, refreshed_model.id)
  inputs = mlmd_utils.execution_inputs(store, execution.id)
  assert [a.uri for a in inputs["Model"]] == [
      next(uri for uri in models if "trainer_one" in uri)]
  assert [a.id for a in inputs[GraphSchema.TYPE_NAME]] == [schemas[pipeline["one_fresh"]].id]
  properties = mlmd_utils.custom_properties(refreshed_model)
  assert properties["train_steps"] == 0 and properties["epochs"] == 0
  assert properties["refreshed_from"].startswith(inputs["Model"][0].uri)
  assert "eval_loss" in properties
  pushed = [a for a in store.get_artifacts_by_type("PushedModel")
            if mlmd_utils.custom_properties(a).get("pushed") == 1]
  assert any(mlmd_utils.producer(store, a.id)[0].id in {
      e.execution_id for e in store.get_events_by_artifact_ids([refreshed_model.id])}
      for a in pushed)
