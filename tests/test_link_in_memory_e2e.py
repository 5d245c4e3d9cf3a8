"""End to end, link prediction on the graph in memory: tables -> GnnTrainer (link_config).

The community graph of ``test_link_prediction_e2e`` without LinkSampler: GnnTrainer
splits the edges, draws negatives every epoch and, after training, ranks each
test edge against every paper (retrieval metrics as Model properties).
"""

import glob
import json
import os
import re

import pytest

from pipelines.runtime import mlmd_utils
from tests import helpers
from tests import test_link_prediction_e2e as links_e2e

pytestmark = [pytest.mark.slow]

PIPELINE = "links-in-memory-e2e"


def _link_config():
  from pipelines.planetoid import pipeline as planetoid_pipeline
  link = planetoid_pipeline.link_config([5, 3], seed=1)
  link["splits"] = {"train": 0.7, "eval": 0.15, "test": 0.15}
  return link


def _run(root, name, evaluation_split=None, **custom_config):
  from tfx import v1 as tfx
  from pipelines.planetoid import pipeline as planetoid_pipeline
  tables = os.path.join(root, "tables")
  num_edges = links_e2e._write_tables(tables)
  link = _link_config()
  metadata = os.path.join(root, "metadata.sqlite")
  tfx.orchestration.LocalDagRunner().run(planetoid_pipeline.create_link_pipeline(
      pipeline_name=name, pipeline_root=os.path.join(root, "pipeline_root"),
      tables_dir=tables, metadata=metadata, link=link, mode=planetoid_pipeline.IN_MEMORY,
      evaluation_split=evaluation_split,
      custom_config={"global_batch_size": 64, "epochs": 6, "seed": 2,
                     "summarize_every_n_steps": "never", **custom_config}))
  return {"metadata": metadata, "num_edges": num_edges}


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
  return _run(str(tmp_path_factory.mktemp("links_in_memory")), PIPELINE, evaluation_split="test",
              restore_best_weights=True, restore_best_weights_by="max:val_auc",
              retrieval_splits=["test"])


# GnnTrainer on the graph in memory, end to end, on the legacy stack too (docs/stacks.md).
@pytest.mark.compat
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
  # The most-popular ranking on the same queries and candidates, published beside it.
  assert 0 < props["retrieval_popularity_mrr"] < props["retrieval_mrr"], props
  assert props["retrieval_popularity_hits@50"] < props["retrieval_hits@50"], props
  store = mlmd_utils.store(pipeline_run["metadata"])
  execution, name = helpers.producer(store, model.id)
  assert name.endswith("GnnTrainer")
  assert set(helpers.execution_inputs(store, execution.id)) == {
      "gnn_trainer_component.GraphSchema", "ExampleAnomalies"}
  helpers.assert_validated(store, execution.id)
  run = mlmd_utils.latest_artifact(pipeline_run["metadata"], "ModelRun", PIPELINE)
  with open(os.path.join(run.uri, "metrics.json")) as f:
    metrics = json.load(f)
  assert metrics["retrieval"].pop("retrieval_splits") == "test"
  assert metrics["retrieval"] == pytest.approx(
      {k: v for k, v in props.items() if k.startswith("retrieval_") and k != "retrieval_splits"},
      rel=1e-5)


def test_graph_evaluator_scores_and_ranks_the_test_edges_beside_three_baselines(pipeline_run):
  """GraphEvaluator splits the edges again by the same link_config: the test edges and
  negatives GnnTrainer held out, on the message graph it trained on. Its ranking is the
  trainer's retrieval protocol on the export (embedded as GraphInferrer embeds)."""
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  metadata = pipeline_run["metadata"]
  artifact = mlmd_utils.latest_artifact(metadata, "ModelEvaluation", PIPELINE)
  result = evaluation_lib.read(artifact.uri)
  assert result["task"] == "link_prediction" and result["node_set"] == "cites"
  overall = {name: by_slice["all"] for name, by_slice in result["metrics"].items()}
  assert set(overall) == {"model", "popularity", "common_neighbours", "adamic_adar"}
  model = overall["model"]
  # The test split's edges and as many fixed negatives.
  queries = mlmd_utils.custom_properties(
      mlmd_utils.latest_artifact(metadata, "Model", PIPELINE))["retrieval_queries"]
  assert model["num_nodes"] == 2 * queries
  assert {"auc", "average_precision", "mrr", "hits@20", "hits@50", "hits@100"} <= set(model)
  # The module's Hadamard scorer is found from the pairs; with the training's sampling seed,
  # the export's ranking is the one GnnTrainer computed with the trained model.
  props = mlmd_utils.custom_properties(mlmd_utils.latest_artifact(metadata, "Model", PIPELINE))
  assert model["mrr"] == pytest.approx(props["retrieval_mrr"], rel=1e-3)
  assert model["hits@50"] == pytest.approx(props["retrieval_hits@50"], rel=1e-3)
  assert overall["popularity"]["mrr"] == pytest.approx(props["retrieval_popularity_mrr"],
                                                       abs=1e-6)
  assert model["auc"] == pytest.approx(props["eval_auc"], abs=0.1)
  # Communities: common neighbours know them too; the GNN must beat every baseline on AUC.
  assert model["auc"] > max(o["auc"] for n, o in overall.items() if n != "model")
  assert result["blessed"], result["message"]
  blessing = mlmd_utils.latest_artifact(metadata, "ModelBlessing", PIPELINE)
  assert mlmd_utils.custom_properties(blessing)["blessed"] == 1
  assert any(s.startswith("degree:") for s in result["metrics"]["model"])
  assert os.path.getsize(os.path.join(artifact.uri, "report.png")) > 10_000


@pytest.mark.distributed
def test_two_workers_each_hold_the_graph_and_sample_their_share(tmp_path):
  """Multi-worker training on the graph in memory (a local job: two worker processes,
  MultiWorkerMirroredStrategy): each worker loads the graph and samples around its
  own share of the training pairs; the chief alone publishes the Model."""
  name = "links-in-memory-two-workers"
  run = _run(str(tmp_path), name, local_workers=2, epochs=3)
  model = mlmd_utils.latest_artifact(run["metadata"], "Model", name)
  props = mlmd_utils.custom_properties(model)
  assert props["graph_mode"] == "sampled" and props["eval_auc"] > 0.7, props
  assert sorted(os.listdir(model.uri)) == ["Format-Serving"]
  model_run = mlmd_utils.latest_artifact(run["metadata"], "ModelRun", name)
  shares = {}
  for path in glob.glob(os.path.join(model_run.uri, "cluster", "*.log")):
    text = open(path, errors="replace").read()
    shares[os.path.basename(path)] = re.findall(
        r"input pipeline (\d+) of (\d+) samples around (\d+) of the (\d+) seeds of link "
        r"splits train", text)
  assert sorted(shares) == ["chief-0.log", "worker-0.log"], shares
  firsts = sorted(found[0] for found in shares.values())
  assert [f[:2] for f in firsts] == [("0", "2"), ("1", "2")], shares
  total = int(firsts[0][3])  # every training pair sampled once per epoch, by one worker
  assert sum(int(f[2]) for f in firsts) == total and abs(
      int(firsts[0][2]) - int(firsts[1][2])) <= 1


def test_ogb_style_ranking_among_sampled_negatives(pipeline_run, tmp_path):
  """GraphEvaluator's executor on the trained model with negatives_per_query: each test edge
  ranked among 50 negatives of its own, the same for every predictor; fewer candidates than
  every paper, so no rank is worse and the MRR is higher than the full ranking's."""
  import json as json_lib
  from tfx.types import standard_artifacts
  from gnn_trainer_component import GraphSchema
  from gnn_trainer_component.evaluator import config as config_lib
  from gnn_trainer_component.evaluator import evaluation as evaluation_lib
  from gnn_trainer_component.evaluator import executor
  metadata = pipeline_run["metadata"]
  full = mlmd_utils.latest_artifact(metadata, "ModelEvaluation", PIPELINE)
  store = mlmd_utils.store(metadata)
  execution, _ = helpers.producer(store, full.id)
  inputs = helpers.execution_inputs(store, execution.id)
  model, schema = standard_artifacts.Model(), GraphSchema()
  model.uri, schema.uri = inputs["Model"].uri, inputs["gnn_trainer_component.GraphSchema"].uri
  evaluation, blessing = standard_artifacts.ModelEvaluation(), standard_artifacts.ModelBlessing()
  evaluation.uri, blessing.uri = str(tmp_path / "evaluation"), str(tmp_path / "blessing")
  cfg = config_lib.parse({"task": "link_prediction", "negatives_per_query": 50,
                          "hits_at": [1, 10, 51], "sampling_seed": 2})
  executor.Executor().Do({"model": [model], "graph_schema": [schema]},
                         {"evaluation": [evaluation], "blessing": [blessing]},
                         {"eval_config": config_lib.dumps(cfg),
                          "link_config": json_lib.dumps(_link_config())})
  sampled = evaluation_lib.read(evaluation.uri)["metrics"]
  everything = evaluation_lib.read(full.uri)["metrics"]
  for predictor in ("model", "popularity", "adamic_adar"):
    assert sampled[predictor]["all"]["hits@51"] == 1.0  # 50 negatives: no rank beyond 51
    assert sampled[predictor]["all"]["mrr"] >= everything[predictor]["all"]["mrr"]
  assert sampled["model"]["all"]["auc"] == everything["model"]["all"]["auc"]
