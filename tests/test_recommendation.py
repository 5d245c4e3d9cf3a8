"""Link prediction between two node sets (user -> item): config, both engines, retrieval.

A small user-item graph (``rated``: user -> item, and its reverse ``rated_by``)
is sampled by LinkSampler (Beam DirectRunner, for real) and by GnnTrainer's
in-memory engine with fan-outs above every degree, so each example must be the
brute-force neighbourhoods of its two ends, each end with its own hops, in the
message-passing graph: the held-out edges removed from both edge sets, a
pair's own edge from its example in both directions.
"""

import json
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner
from tfx.types import artifact_utils

from gnn_trainer_component.graph import link_config as link_config_lib
from gnn_trainer_component.graph import links
from gnn_trainer_component.graph import negatives as negatives_lib
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.in_memory import adapters
from gnn_trainer_component.in_memory import retrieval
from gnn_trainer_component.sampler.link import executor as link_executor
from tests.helpers import run_beam_sampler

SCHEMA = """
node_sets { key: "user" value {
  features { key: "x" value { dtype: DT_FLOAT } }
  features { key: "ident" value { dtype: DT_INT64 } }
  metadata { filename: "users.csv" } } }
node_sets { key: "item" value {
  features { key: "ident" value { dtype: DT_INT64 } }
  metadata { filename: "items.csv" } } }
edge_sets { key: "rated" value { source: "user" target: "item"
  metadata { filename: "rated.csv" } } }
edge_sets { key: "rated_by" value { source: "item" target: "user"
  metadata { filename: "rated_by.csv" } } }
"""
NUM_USERS, NUM_ITEMS = 12, 20
ITEM = 100  # item j has ident 100 + j: the two node sets' idents never meet
FULL = 50  # above every degree: the whole neighbourhood
CONFIG = {"edge_set": "rated", "reverse_edge_set": "rated_by",
          "splits": {"train": 0.6, "eval": 0.2, "test": 0.2},
          "negatives_per_positive": {"train": 2, "eval": 1, "test": 1},
          "source_hops": [{"rated": FULL}, {"rated_by": FULL}],
          "target_hops": [{"rated_by": FULL}, {"rated": FULL}], "seed": 3}


def _ratings():
  """(user, item): every user rates 2..4 items, item 0 the most popular."""
  rng = np.random.default_rng(7)
  out = []
  for u in range(NUM_USERS):
    items = rng.choice(np.arange(1, NUM_ITEMS), size=rng.integers(1, 4), replace=False)
    out += [(u, int(i)) for i in ([0] if u % 3 else []) + sorted(items)]
  return out


RATED = _ratings()


def write_graph(d, ratings=RATED):
  os.makedirs(d, exist_ok=True)
  files = {
      "graph_schema.pbtxt": SCHEMA,
      "users.csv": "id,x,ident\n" + "".join(f"u{i},{i / 10},{i}\n" for i in range(NUM_USERS)),
      "items.csv": "id,ident\n" + "".join(f"i{j},{ITEM + j}\n" for j in range(NUM_ITEMS)),
      "rated.csv": "source,target\n" + "".join(f"u{u},i{i}\n" for u, i in ratings),
      "rated_by.csv": "source,target\n" + "".join(f"i{i},u{u}\n" for u, i in ratings)}
  for name, text in files.items():
    with open(os.path.join(d, name), "w") as f:
      f.write(text)


def _decode(graph):
  """``(pair, label, nodes, edges)`` of one example, by ident; edges typed by edge set."""
  ident = {n: graph.node_sets[n]["ident"].numpy().tolist() for n in ("user", "item")}
  edges = set()
  for name, (src, tgt) in (("rated", ("user", "item")), ("rated_by", ("item", "user"))):
    adj = graph.edge_sets[name].adjacency
    edges |= {(name, ident[src][s], ident[tgt][t])
              for s, t in zip(adj.source.numpy(), adj.target.numpy(), strict=True)}
  pair = (ident["user"][int(graph.edge_sets["_readout/source"].adjacency.source[0])],
          ident["item"][int(graph.edge_sets["_readout/target"].adjacency.source[0])])
  label = float(graph.node_sets["_readout"]["label"][0])
  return pair, label, {n: tuple(v) for n, v in ident.items()}, edges


def _brute_force(pair, held_out):
  """Nodes and typed edges 2 hops from each end, each end with its own hops."""
  def usable(u, i):
    return (u, i) != pair and (u, i) not in held_out
  rated = [(u, ITEM + i) for u, i in RATED if usable(u, ITEM + i)]
  out = {"rated": {}, "rated_by": {}}
  for u, i in rated:
    out["rated"].setdefault(u, set()).add(i)
    out["rated_by"].setdefault(i, set()).add(u)
  nodes, edges = {"user": {pair[0]}, "item": {pair[1]}}, set()
  for start, hops, sets in ((pair[0], ("rated", "rated_by"), ("item", "user")),
                            (pair[1], ("rated_by", "rated"), ("user", "item"))):
    frontier = {start}
    for name, reached in zip(hops, sets, strict=True):
      frontier = {t for s in frontier for t in out[name].get(s, ())
                  if not edges.add((name, s, t))}
      nodes[reached] |= frontier
  return nodes, edges


def _check_examples(examples, positives):
  """Each example is its pair's brute force; pairs are users -> items; negatives non-edges."""
  held_out = {tuple(p) for s in ("eval", "test") for p in positives[s]}
  edges = {(u, ITEM + i) for u, i in RATED}
  for pair, label, ident, got_edges in examples:
    assert pair[0] < NUM_USERS <= ITEM <= pair[1] < ITEM + NUM_ITEMS, pair
    assert (label == 1.0) == (pair in edges), (pair, label)
    assert ident["user"][0] == pair[0] and ident["item"][0] == pair[1], "the ends come first"
    want_nodes, want_edges = _brute_force(pair, held_out)
    assert {n: set(v) for n, v in ident.items()} == want_nodes, pair
    assert got_edges == want_edges, pair
    assert len(ident["user"]) == len(set(ident["user"]))


@pytest.fixture(scope="module")
def beam_run(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("recommendation_beam")
  write_graph(tmp / "graph")
  examples, schema_out = run_beam_sampler(link_executor.Executor, tmp, tmp / "graph",
                                          {"link_config": json.dumps(CONFIG), "num_shards": 1})
  spec = tfgnn.create_graph_spec_from_schema_pb(
      tfgnn.read_schema(os.path.join(schema_out.uri, "graph_schema.pbtxt")))
  out = {}
  for split in CONFIG["splits"]:
    files = tf.io.gfile.glob(os.path.join(artifact_utils.get_split_uri([examples], split), "*"))
    out[split] = [_decode(tfgnn.parse_single_example(spec, tf.constant(r)))
                  for r in tf.data.TFRecordDataset(files, compression_type="GZIP")
                  .as_numpy_iterator()]
  return out


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory):
  d = tmp_path_factory.mktemp("recommendation_in_memory")
  write_graph(d)
  return adapters.load(str(d), link_config=CONFIG, splits=["train", "eval"])


def _positives_by_ident(splits):
  return {s: [(int(u), ITEM + int(i)) for u, i in p] for s, p in splits.positives.items()}


def test_linksampler_samples_each_end_with_its_own_hops_and_nothing_leaks(beam_run, in_memory):
  positives = {s: sorted(p for p, label, _, _ in g if label == 1.0) for s, g in beam_run.items()}
  assert positives == {s: sorted(p) for s, p in _positives_by_ident(in_memory).items()}
  assert sorted(p for ps in positives.values() for p in ps) == sorted(
      (u, ITEM + i) for u, i in RATED)
  _check_examples([e for g in beam_run.values() for e in g], positives)


def _in_memory_examples(splits, split, training=False, merged=False):
  provider = splits.provider([split], training=training, batch_size=4, seed=0, merged=merged)
  ds = provider.get_dataset(tf.distribute.InputContext())
  if merged:
    return list(ds)
  return [_decode(g) for g in ds]


def test_in_memory_engine_samples_the_same_subgraphs(in_memory, beam_run):
  positives = _positives_by_ident(in_memory)
  got = _in_memory_examples(in_memory, "eval")
  _check_examples(got, positives)
  # Full fan-outs: the same pairs give the same subgraphs as LinkSampler's (which
  # orders the other nodes by id, not by table row).
  def normal(examples):
    return sorted((pair, label, {n: (v[0], sorted(v[1:])) for n, v in ident.items()}, edges)
                  for pair, label, ident, edges in examples)
  assert normal(got) == normal(beam_run["eval"])
  train = _in_memory_examples(in_memory, "train", training=True)
  _check_examples(train, positives)  # fresh negatives: (user, item) non-edges
  assert sum(label == 0.0 for _, label, _, _ in train) == 2 * len(positives["train"])
  merged = _in_memory_examples(in_memory, "eval", merged=True)
  pairs = []
  for g in merged:  # each pair's readout points at its own ends in the merged graph
    idents = {n: g.node_sets[n]["ident"].numpy() for n in ("user", "item")}
    pairs += list(zip(idents["user"][g.edge_sets["_readout/source"].adjacency.source.numpy()],
                      idents["item"][g.edge_sets["_readout/target"].adjacency.source.numpy()],
                      strict=True))
  assert [tuple(map(int, p)) for p in pairs] == [p for p, _, _, _ in got]


def _brute_force_ranks(scores, queries, known):
  """Filtered rank of each (user, item) among all items (ties half), one at a time."""
  ranks = []
  for u, v in queries:
    others = [w for w in range(scores.shape[1]) if w != v and (u, w) not in known]
    ranks.append(1 + sum(scores[u, w] > scores[u, v] for w in others)
                 + 0.5 * sum(scores[u, w] == scores[u, v] for w in others))
  return np.array(ranks)


def test_retrieval_ranks_items_for_users_and_the_popularity_baseline(in_memory):
  spec = tfgnn.create_graph_spec_from_schema_pb(in_memory.schema)

  def embed(serialized):  # each end's first node: its ident and 1
    graph = tfgnn.parse_example(spec, serialized)

    def first(node_set):
      ident = graph.node_sets[node_set]["ident"]
      value = tf.cast(tf.gather(ident.values, ident.row_starts()), tf.float32)
      return tf.stack([value, tf.ones_like(value)], axis=1)
    return {"source_embedding": first("user"), "target_embedding": first("item")}

  got = retrieval.evaluate(in_memory, ["test"], embed,
                           {"links": runner.DotProductLinkPrediction()}, single_task=True)
  users = np.stack([np.arange(NUM_USERS), np.ones(NUM_USERS)], axis=1)
  items = np.stack([ITEM + np.arange(NUM_ITEMS), np.ones(NUM_ITEMS)], axis=1)
  queries = in_memory.positives["test"].tolist()
  known = set(RATED)
  want = _brute_force_ranks(users @ items.T, queries, known)
  assert got["retrieval_queries"] == len(queries)
  assert got["retrieval_mrr"] == pytest.approx(np.mean(1 / want))
  assert got["retrieval_hits@20"] == 1.0  # 20 candidates at most
  held_out = {tuple(p) for s in ("eval", "test") for p in in_memory.positives[s].tolist()}
  degree = np.bincount([i for u, i in RATED if (u, i) not in held_out], minlength=NUM_ITEMS)
  want = _brute_force_ranks(np.tile(degree, (NUM_USERS, 1)), queries, known)
  assert got["retrieval_popularity_mrr"] == pytest.approx(np.mean(1 / want))
  assert adapters.num_scores(in_memory, ["test"]) == len(queries) * NUM_ITEMS
  # The epoch's check (restore_best_weights_by "max:val_retrieval_*") is the same ranking:
  # on all the queries, the same metrics; on a sample, those of its queries' brute-force ranks.
  links = {"links": runner.DotProductLinkPrediction()}
  every = retrieval.validation(in_memory, ["test"], embed, links, single_task=True,
                               max_queries=10**6, seed=0)
  assert every == {k: v for k, v in got.items() if "popularity" not in k}
  some = retrieval.validation(in_memory, ["test"], embed, links, single_task=True,
                              max_queries=3, seed=5)
  drawn = np.sort(np.random.default_rng(5).choice(len(queries), 3, replace=False))
  want = _brute_force_ranks(users @ items.T, [queries[i] for i in drawn], known)
  assert some["retrieval_queries"] == 3
  assert some["retrieval_mrr"] == pytest.approx(np.mean(1 / want))


SCHEMA_PB = tfgnn.parse_schema(SCHEMA)


@pytest.mark.parametrize("change,match", [
    ({"source_hops": None, "target_hops": None, "hops": [{"rated": 5}]},
     r"hop 1 from the target end \(node set 'item'\) samples edge set 'rated' from node set "
     r"'user'.*The same hops are sampled from both ends.*give each end its own, source_hops "
     r"\(from 'user'\) and target_hops \(from 'item'\)"),
    ({"target_hops": None}, r"source_hops without its other end"),
    ({"hops": [{"rated": 5}]}, r"not both"),
    ({"target_hops": [{"rated": 5}]}, r"hop 1 from the target end \(node set 'item'\)"),
    ({"reverse_edge_set": None, "source_hops": [{"rated": 5}, {"rated_by": 5}]}, None),
    ({"reverse_edge_set": "rated"}, r"reverse_edge_set 'rated' goes from 'user' to 'item'; "
                                    r"the reverse of 'rated' is another edge set"),
    ({"reverse_edge_set": "likes"}, r"reverse_edge_set 'likes' is not in the graph schema"),
    ({"undirected": True}, r"undirected needs an edge set within one node set.*reverse_edge_set"),
    ({"source_hops": [{"rated": "5"}]}, r"hop 1, edge set 'rated': the fan-out"),
    ({"target_hops": "rated_by"}, r"target_hops must be a list of \{edge_set: fan_out\}"),
    ({"negative_sampling": "hard"}, r"negative_sampling must be one of \['uniform', "
                                    r"'popularity'\], got 'hard'"),
])
def test_link_config_between_two_node_sets(change, match):
  config = {k: v for k, v in {**CONFIG, **change}.items()
            if v is not None or (k == "reverse_edge_set" and k in change)}
  if match is None:
    assert link_config_lib.parse_link_config(SCHEMA_PB, config, who="LinkSampler").reverse_edge_set is None
    return
  with pytest.raises(GraphInputError, match=match):
    link_config_lib.parse_link_config(SCHEMA_PB, config, who="LinkSampler")


def test_an_undeclared_reverse_edge_set_in_the_hops_is_refused():
  config = {k: v for k, v in CONFIG.items() if k != "reverse_edge_set"}
  with pytest.raises(GraphInputError, match=r"the hops sample edge set\(s\) \['rated_by'\], "
                                            r"from node set 'item' to 'user'.*"
                                            r"\"reverse_edge_set\": 'rated_by'"):
    link_config_lib.parse_link_config(SCHEMA_PB, config, who="GnnTrainer")
  assert link_config_lib.parse_link_config(SCHEMA_PB, CONFIG, who="GnnTrainer").reverse_edge_set == (
      "rated_by")


def test_popularity_negatives_follow_the_training_degree_and_are_no_edges():
  link = link_config_lib.parse_link_config(SCHEMA_PB, {**CONFIG, "negative_sampling": "popularity"},
                                 who="GnnTrainer")
  users = pd.Index([f"u{i}".encode() for i in range(NUM_USERS)], dtype=object)
  items = pd.Index([f"i{j}".encode() for j in range(NUM_ITEMS)], dtype=object)
  source, target = (np.array(c) for c in zip(*RATED, strict=True))
  pairs = links.supervise(link, users, items, source, target, one_node_set=False,
                          negatives_for=link.splits, who="GnnTrainer")
  weight = np.bincount(pairs.positives["train"][:, 1], minlength=NUM_ITEMS) + 1.0
  np.testing.assert_allclose(np.diff(np.r_[0, pairs.target_cdf]), weight / weight.sum())
  for split, negatives in pairs.negatives.items():
    assert len(negatives) == link.negatives_for(split, len(pairs.positives[split]))
    assert not pairs.known.contains(negatives[:, 0], negatives[:, 1]).any()
  draws = negatives_lib.draw_negatives(np.random.default_rng(0), 40000, NUM_USERS, NUM_ITEMS,
                               negatives_lib.EdgeKeys(source[:0], target[:0], NUM_ITEMS, False),
                               one_node_set=False, what="a test", who="Test",
                               target_cdf=pairs.target_cdf)
  np.testing.assert_allclose(np.bincount(draws[:, 1], minlength=NUM_ITEMS) / len(draws),
                             weight / weight.sum(), atol=0.01)
  assert np.ptp(np.bincount(draws[:, 0], minlength=NUM_USERS)) < 0.3 * len(draws) / NUM_USERS


def test_a_node_is_read_as_its_end_with_an_edgeless_node_at_the_other(in_memory):
  """GraphInferrer's and retrieval's reading of one node of a two-node-set link model."""
  from gnn_trainer_component.graph import readout
  from gnn_trainer_component.in_memory import dataset as dataset_lib
  graph = in_memory.message_graph
  spec = tfgnn.create_graph_spec_from_schema_pb(in_memory.schema)
  for end, node_set, other in (("source", "user", "item"), ("target", "item", "user")):
    as_end = readout.node_as_end(in_memory.schema, graph.schema, node_set, who="Test")
    assert (as_end.end, as_end.other_node_set) == (end, other)
    sampler = dataset_lib.SubgraphSampler(graph, in_memory.end_plans[end])
    plain, example = (sampler.examples(np.array([3]), 0)[0] for _ in range(2))
    readout.add_node_readout(example, as_end)
    g = tfgnn.parse_single_example(spec, tf.constant(example.SerializeToString()))
    before = tfgnn.parse_single_example(
        tfgnn.create_graph_spec_from_schema_pb(graph.schema),
        tf.constant(plain.SerializeToString()))
    size = int(before.node_sets[other].sizes[0])
    assert int(g.node_sets[other].sizes[0]) == size + 1  # one node more, at the end
    assert int(g.node_sets[other]["ident"][-1]) == 0
    ends = {e: int(g.edge_sets[f"_readout/{e}"].adjacency.source[0])
            for e in ("source", "target")}
    assert ends == ({"source": 0, "target": size} if end == "source" else
                    {"source": size, "target": 0})
    for name in ("rated", "rated_by"):  # no edge reaches the added node
      adj = g.edge_sets[name].adjacency
      at_other = adj.target if graph.schema.edge_sets[name].target == other else adj.source
      assert size not in at_other.numpy().tolist()
      assert g.edge_sets[name].sizes.numpy().tolist() == (
          before.edge_sets[name].sizes.numpy().tolist())
  three = tfgnn.parse_schema(SCHEMA + 'node_sets { key: "tag" value { } }')
  examples_schema = link_config_lib.output_graph_schema(three, link_config_lib.parse_link_config(
      three, CONFIG, who="Test"), who="Test")
  with pytest.raises(GraphInputError, match=r"pairs from node set 'user' to node set 'item'; "
                                            r"node set 'tag' is neither end"):
    readout.node_as_end(examples_schema, three, "tag", who="GraphInferrer")
