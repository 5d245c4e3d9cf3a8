"""The speed benchmark (benchmarks/speed.py) runs end to end.

It runs ``python -m benchmarks.speed --smoke`` as a subprocess, as a user does, on
Planetoid Cora. W2's tables (the in-memory variant's input) are checked against its
examples on a tiny graph. (That the cache trains as no cache does is
``test_input_data.py``'s.)
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import REPO_ROOT
from tests.helpers import require_planetoid

pytestmark = pytest.mark.slow

#: Per child: Cora sampling (~1 min; 100 validation and test seeds) plus a few epochs on a busy
#: 2-core machine.
TIMEOUT_S = 1800


def _speed(work_dir: str, *args: str) -> dict:
  """Runs ``python -m benchmarks.speed`` and returns the JSON of its last stdout line."""
  env = dict(os.environ, PLANETOID_DATA_DIR=require_planetoid("cora"),
             TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run(
      [sys.executable, "-m", "benchmarks.speed", "--work-dir", work_dir, *args],
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
  assert proc.returncode == 0, (
      f"benchmarks.speed {' '.join(args)} exited {proc.returncode}\n"
      f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}")
  return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("gnn_speed"))


def test_smoke_reports_each_of_its_variants(work_dir):
  from benchmarks import speed  # pylint: disable=g-import-not-at-top
  report = _speed(work_dir, "--smoke")
  w1 = report["workloads"]["W1"]
  assert list(w1) == list(speed.SMOKE_VARIANTS)
  assert set(w1) < set(speed.WORKLOADS["W1"].variants)
  for variant, medians in w1.items():
    for metric in speed.REQUIRED_METRICS:
      value = medians[metric]
      assert isinstance(value, (int, float)) and math.isfinite(value), (variant, metric, value)
    assert 0 < medians["train_s"] and 0 <= medians["test_accuracy"] <= 1, (variant, medians)
  for variant in ("gnntrainer_fast", "gnntrainer_xla"):
    assert math.isfinite(w1[variant]["fixed_overhead_s"]), variant
  runs = report["runs"]["W1"]
  assert all(len(r["losses"]) == speed.SMOKE_EPOCHS for rs in runs.values() for r in rs)
  # XLA draws its own dropout masks (a seeded run differs as another seed would), so
  # only the validation losses of the same seed are compared, loosely.
  np.testing.assert_allclose(runs["gnntrainer_xla"][0]["val_losses"],
                             runs["gnntrainer_fast"][0]["val_losses"], rtol=1e-2)
  assert report["machine"]["cpu_count"] >= 1


def test_w2_tables_hold_the_examples_graph_and_roots(tmp_path):
  from benchmarks import large_graph  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  config = large_graph.GraphConfig(num_nodes=300, splits={"train": 40, "eval": 8, "test": 8})
  out = str(tmp_path)
  large_graph.write(out, config)
  # Loads the tables in memory and checks the sampled subgraphs' spec and roots.
  tables = large_graph.write_tables_once(out, config)
  assert tables["sampling_config"] == {"seed_node_set": "paper",
                                       "hops": [{"cites": 10}, {"cites": 5}]}
  assert tables["num_edges"] == 300 * 11  # out-edges and a self loop per node
  graph = large_graph.generate_graph(config)
  for split, size in config.splits.items():
    with open(os.path.join(tables["dir"], tables["seeds"][split])) as f:
      seeds = [int(line) for line in f.read().split()[1:]]
    assert len(seeds) == size
    records = tf.data.TFRecordDataset(
        sorted(tf.io.gfile.glob(os.path.join(out, "examples", f"Split-{split}", "*.gz"))),
        compression_type="GZIP")
    roots = [tf.train.Example.FromString(r.numpy()).features.feature["nodes/paper.feat"]
             .float_list.value[:config.feature_dim] for r in records]
    np.testing.assert_array_equal(np.array(roots, dtype=np.float32), graph.features[seeds])
  assert large_graph.write_tables_once(out, config) == tables  # cached

