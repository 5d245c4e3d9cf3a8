"""End to end, link prediction on the graph in memory: tables -> GnnTrainer (link_config).

The community graph of ``test_link_prediction_e2e`` without LinkSampler: GnnTrainer
splits the edges, draws negatives every epoch and, after training, ranks each
test edge against every paper (retrieval metrics as Model properties).
"""

import json
import os

import pytest

from pipelines.runtime import mlmd_utils
from tests import helpers
from tests import test_link_prediction_e2e as links_e2e

pytestmark = [pytest.mark.slow]

PIPELINE = "links-in-memory-e2e"


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
  from tfx import v1 as tfx
  from pipelines.planetoid import pipeline as planetoid_pipeline
  root = str(tmp_path_factory.mktemp("links_in_memory"))
  tables = os.path.join(root, "tables")
  num_edges = links_e2e._write_tables(tables)
  link = planetoid_pipeline.link_config([5, 3], seed=1)
  link["splits"] = {"train": 0.7, "eval": 0.15, "test": 0.15}
  metadata = os.path.join(root, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(planetoid_pipeline.create_link_pipeline(
      pipeline_name=PIPELINE, pipeline_root=os.path.join(root, "pipeline_root"),
      tables_dir=tables, metadata=metadata, link=link, mode=planetoid_pipeline.IN_MEMORY,
      custom_config={"global_batch_size": 64, "epochs": 6, "seed": 2,
                     "summarize_every_n_steps": "never", "restore_best_weights": True,
                     "restore_best_weights_by": "max:val_auc",
                     "retrieval_splits": ["test"]}))
  return {"metadata": metadata, "num_edges": num_edges}


def test_trains_in_memory_and_ranks_test_edges_against_every_node(pipeline_run):
  model = mlmd_utils.latest_artifact(pipeline_run["metadata"], "Model", PIPELINE)
  props = mlmd_utils.custom_properties(model)
  assert props["graph_mode"] == "sampled" and props["eval_auc"] > 0.75, props
  assert props["retrieval_splits"] == "test"
  # 15 % of the distinct edges (rounding as the split does), each one query.
  assert abs(props["retrieval_queries"] - 0.15 * pipeline_run["num_edges"]) <= 1
  assert 0 < props["retrieval_mrr"] <= 1
  assert props["retrieval_hits@20"] <= props["retrieval_hits@50"] <= props["retrieval_hits@100"]
  # 240 candidates, about 29 in the target's community: a uniform ranking has
  # Hits@50 ~0.21; embeddings that know the communities put most targets there.
  assert props["retrieval_hits@50"] > 0.5, props
  store = mlmd_utils.store(pipeline_run["metadata"])
  execution, name = helpers.producer(store, model.id)
  assert name.endswith("GnnTrainer")
  assert set(helpers.execution_inputs(store, execution.id)) == {
      "gnn_trainer_component.GraphSchema"}
  run = mlmd_utils.latest_artifact(pipeline_run["metadata"], "ModelRun", PIPELINE)
  with open(os.path.join(run.uri, "metrics.json")) as f:
    metrics = json.load(f)
  assert metrics["retrieval"].pop("retrieval_splits") == "test"
  assert metrics["retrieval"] == pytest.approx(
      {k: v for k, v in props.items() if k.startswith("retrieval_") and k != "retrieval_splits"},
      rel=1e-5)
