"""Layer-wise inference's blocks: a chunk of nodes, exactly its incident edges, their ends."""

import numpy as np
import pytest

from gnn_trainer_component.in_memory import blocks as blocks_lib


def _graph(seed=0):
  rng = np.random.default_rng(seed)
  sizes = {"user": 30, "item": 20}
  edges = {"follows": ("user", "user", rng.integers(0, 30, 120), rng.integers(0, 30, 120)),
           "rated": ("user", "item", rng.integers(0, 30, 90), rng.integers(0, 20, 90))}
  # The store's order: sorted by source (the CSR), which the index takes as it is.
  edges["rated"] = ("user", "item", *(a[np.argsort(edges["rated"][2], kind="stable")]
                                      for a in edges["rated"][2:]))
  return sizes, edges


@pytest.mark.parametrize("node_set", ["user", "item"])
@pytest.mark.parametrize("max_edges", [1, 7, 40, 10_000])
def test_each_block_holds_exactly_its_chunks_incident_edges_and_their_ends(node_set, max_edges):
  sizes, edges = _graph()
  cut = blocks_lib.Blocks(sizes, edges)
  chunks = cut.chunks(node_set, max_edges)
  assert chunks[0][0] == 0 and chunks[-1][1] == sizes[node_set]
  assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:], strict=False))
  degrees = cut.degrees(node_set)
  seen = {name: np.zeros(len(e[2]), int) for name, e in edges.items()}
  for first, stop in chunks:
    # Within the budget, unless a single node has more edges than it.
    assert degrees[first:stop].sum() <= max_edges or stop - first == 1
    block = cut.block(node_set, first, stop)
    scanned = cut.block(node_set, first, stop, scan=True)  # the same, found without an index
    for name, (rows, src, tgt) in scanned.edges.items():
      order, theirs = np.argsort(rows), np.argsort(block.edges[name][0])
      for mine, other in zip((rows, src, tgt), block.edges[name], strict=True):
        np.testing.assert_array_equal(mine[order], other[theirs])
    np.testing.assert_array_equal(block.nodes[node_set][block.rows], np.arange(first, stop))
    for name, (src_set, tgt_set, src, tgt) in edges.items():
      rows, local_src, local_tgt = block.edges[name]
      inside = np.zeros(len(src), bool)
      if src_set == node_set:
        inside |= (src >= first) & (src < stop)
      if tgt_set == node_set:
        inside |= (tgt >= first) & (tgt < stop)
      np.testing.assert_array_equal(np.sort(rows), np.flatnonzero(inside))  # each once
      np.testing.assert_array_equal(block.nodes[src_set][local_src], src[rows])
      np.testing.assert_array_equal(block.nodes[tgt_set][local_tgt], tgt[rows])
      seen[name][rows] += 1
    for name, rows in block.nodes.items():
      assert np.all(np.diff(rows) > 0)
      ends = [edges[e][2][block.edges[e][0]] for e in edges if edges[e][0] == name]
      ends += [edges[e][3][block.edges[e][0]] for e in edges if edges[e][1] == name]
      expected = set(np.concatenate(ends).tolist()) if ends else set()
      if name == node_set:
        expected |= set(range(first, stop))
      assert set(rows.tolist()) == expected
  for name, (src_set, tgt_set, src, tgt) in edges.items():
    # Each edge lies in the block of each chunk holding an end of it.
    expected = np.full(len(src), (src_set == node_set) + (tgt_set == node_set))
    if src_set == tgt_set == node_set:
      expected = np.where(_same_chunk(chunks, src, tgt), 1, 2)
    np.testing.assert_array_equal(seen[name], expected)


def _same_chunk(chunks, src, tgt):
  starts = np.array([a for a, _ in chunks])
  return np.searchsorted(starts, src, "right") == np.searchsorted(starts, tgt, "right")


def test_a_node_wise_block_holds_the_chunk_alone():
  sizes, edges = _graph(1)
  block = blocks_lib.Blocks(sizes, edges).block("user", 4, 9, ends=())
  np.testing.assert_array_equal(block.nodes["user"], np.arange(4, 9))
  assert block.nodes["item"].size == 0
  assert all(rows.size == 0 for rows, _, _ in block.edges.values())


def test_a_node_with_more_edges_than_the_budget_is_a_chunk_of_its_own():
  sizes = {"v": 5}
  src = np.array([0, 0, 0, 0, 0, 0, 1, 2, 3, 4])
  tgt = np.array([1, 2, 3, 4, 1, 2, 0, 0, 4, 3])
  cut = blocks_lib.Blocks(sizes, {"e": ("v", "v", src, tgt)})
  np.testing.assert_array_equal(cut.degrees("v"), [8, 3, 3, 3, 3])
  assert cut.chunks("v", 4) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
  assert cut.chunks("v", 6) == [(0, 1), (1, 3), (3, 5)]
