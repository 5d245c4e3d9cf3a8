"""End to end: GraphEvaluator blesses a useful model and not a trivial one; Pusher obeys.

On the quickstart's tables, LocalDagRunner trains two models in memory: the
quickstart's module, and the same module with every node's input zeroed (a
model that can only learn the class prior: the majority class). One
GraphEvaluator each, with the default rule (beat every baseline on accuracy),
and one stock Pusher each. A second run of the same pipeline name (cache on: the
trainers are reused) evaluates the trivial model with only a change threshold
against the latest blessed model (TFX's ``LatestBlessedModelStrategy``
resolver): it is not blessed, and the blessing names the baseline model.
ML Metadata holds the lineage Model + GraphSchema -> GraphEvaluator ->
ModelBlessing -> Pusher.
"""

import json
import os
import runpy

import pytest

from pipelines.runtime import mlmd_utils
from tests import helpers
from tests.helpers import REPO_ROOT

pytestmark = [pytest.mark.slow]

PIPELINE = "graph-evaluator-e2e"
DATA_DIR = os.path.join(REPO_ROOT, "pipelines", "quickstart", "data")
MODULE_FILE = os.path.join(REPO_ROOT, "module_files", "quickstart.py")
#: The quickstart module's line that makes a node's first state from its features.
_STATE_LINE = '  return tf.keras.layers.Dense(32, activation="relu")(x)\n'
EVAL_CONFIG = {"task": "classification", "label": "label", "test_seeds": "seeds-test.csv",
               "train_seeds": "seeds-train.csv"}


def _trivial_module(path: str) -> str:
  """The quickstart module with every input zeroed: it can learn the class prior only."""
  with open(MODULE_FILE, encoding="utf-8") as f:
    text = f.read()
  assert text.count(_STATE_LINE) == 1
  with open(path, "w", encoding="utf-8") as f:
    f.write(text.replace(_STATE_LINE, _STATE_LINE.replace("(x)", "(tf.zeros_like(x))")))
  return path


def _pipeline(root: str, trivial_module: str, *, change_run: bool):
  from tfx import v1 as tfx
  from gnn_trainer_component import GnnTrainer, GraphEvaluator, GraphSchema
  task = runpy.run_path(MODULE_FILE)
  sampling = {"seed_node_set": task["SEED_NODE_SET"], "hops": task["HOPS"]}
  tables = tfx.dsl.Importer(source_uri=DATA_DIR, artifact_type=GraphSchema).with_id("tables")
  components = [tables]

  def trainer(name, module_file):
    component = GnnTrainer(
        graph_schema=tables.outputs["result"], module_file=module_file,
        seeds={"train": "seeds-train.csv", "eval": "seeds-eval.csv"}, sampling_config=sampling,
        train_args=tfx.proto.TrainArgs(splits=["train"]),
        eval_args=tfx.proto.EvalArgs(splits=["eval"]),
        custom_config={"global_batch_size": 32, "epochs": 8, "seed": 1,
                       "summarize_every_n_steps": "never"}).with_id(f"trainer_{name}")
    components.append(component)
    return component

  def evaluate_and_push(name, trainer_component, eval_config, **kwargs):
    evaluator = GraphEvaluator(
        model=trainer_component.outputs["model"], graph_schema=tables.outputs["result"],
        sampling_config=sampling, eval_config=eval_config, **kwargs).with_id(f"evaluator_{name}")
    pusher = tfx.components.Pusher(
        model=trainer_component.outputs["model"], model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(filesystem=tfx.proto.PushDestination.Filesystem(
            base_directory=os.path.join(root, "serving", name)))).with_id(f"pusher_{name}")
    components.extend([evaluator, pusher])

  trivial = trainer("trivial", trivial_module)
  if change_run:
    latest_blessed = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model")
    components.append(latest_blessed)
    evaluate_and_push("change", trivial, dict(EVAL_CONFIG, thresholds=[
        {"metric": "accuracy", "max_loss_vs_baseline_model": 0.05}]),
        baseline_model=latest_blessed.outputs["model"])
  else:
    evaluate_and_push("useful", trainer("useful", MODULE_FILE), EVAL_CONFIG)
    evaluate_and_push("trivial", trivial, EVAL_CONFIG)
  return tfx.dsl.Pipeline(
      pipeline_name=PIPELINE, pipeline_root=os.path.join(root, "pipeline_root"),
      components=components, enable_cache=True,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          os.path.join(root, "metadata.sqlite")))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  from tfx import v1 as tfx
  root = str(tmp_path_factory.mktemp("graph_evaluator"))
  trivial = _trivial_module(os.path.join(root, "trivial.py"))
  tfx.orchestration.LocalDagRunner().run(_pipeline(root, trivial, change_run=False))
  tfx.orchestration.LocalDagRunner().run(_pipeline(root, trivial, change_run=True))
  return {"root": root, "metadata": os.path.join(root, "metadata.sqlite")}


def _latest(store, node_id: str):
  """The latest execution of a pipeline node (its MLMD "node" context)."""
  context = store.get_context_by_type_and_name("node", f"{PIPELINE}.{node_id}")
  return max(store.get_executions_by_context(context.id), key=lambda e: e.id)


def _artifacts(store, execution, kind: str) -> dict:
  """``{input or output key: artifact}`` of an execution (kind "INPUT" or "OUTPUT")."""
  from ml_metadata.proto import metadata_store_pb2 as pb
  events = [e for e in store.get_events_by_execution_ids([execution.id])
            if e.type == getattr(pb.Event, kind)]
  artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}
  return {e.path.steps[0].key: artifacts[e.artifact_id] for e in events}


def _outputs_of(store, node_id: str) -> tuple[dict, object]:
  execution = _latest(store, node_id)
  return _artifacts(store, execution, "OUTPUT"), execution


def test_a_useful_model_is_blessed_and_pushed_a_majority_class_one_is_not(runs):
  store = mlmd_utils.store(runs["metadata"])
  useful, useful_run = _outputs_of(store, "evaluator_useful")
  trivial, _ = _outputs_of(store, "evaluator_trivial")
  props = mlmd_utils.custom_properties(useful["evaluation"])
  assert mlmd_utils.custom_properties(useful["blessing"])["blessed"] == 1, props
  # The useful model beats both baselines on the 60 test users, by far.
  assert props["accuracy"] > max(props["majority_class_accuracy"],
                                 props["label_propagation_accuracy"]) + 0.2, props
  assert props["num_nodes"] == 60
  # The trivial model predicts the majority class: no better than it, not blessed.
  trivial_props = mlmd_utils.custom_properties(trivial["evaluation"])
  assert trivial_props["accuracy"] == pytest.approx(trivial_props["majority_class_accuracy"])
  blessing = mlmd_utils.custom_properties(trivial["blessing"])
  assert blessing["blessed"] == 0
  assert "accuracy on 'all'" in blessing["blessing_message"], blessing
  assert os.path.exists(os.path.join(trivial["blessing"].uri, "NOT_BLESSED"))
  # Its files: the evaluation, one row per test node, the report.
  with open(os.path.join(useful["evaluation"].uri, "evaluation.json")) as f:
    evaluation = json.load(f)
  assert evaluation["blessed"] and evaluation["num_nodes"] == 60
  assert set(evaluation["metrics"]) == {"model", "majority_class", "label_propagation"}
  assert any(s.startswith("degree:") for s in evaluation["metrics"]["model"])
  assert os.path.getsize(os.path.join(useful["evaluation"].uri, "report.png")) > 10_000
  # Pusher pushed the blessed model only.
  pushed, _ = _outputs_of(store, "pusher_useful")
  assert mlmd_utils.custom_properties(pushed["pushed_model"])["pushed"] == 1
  not_pushed, _ = _outputs_of(store, "pusher_trivial")
  assert mlmd_utils.custom_properties(not_pushed["pushed_model"]).get("pushed", 0) == 0
  assert not os.path.exists(os.path.join(runs["root"], "serving", "trivial"))
  # Lineage: Model + GraphSchema -> GraphEvaluator -> ModelBlessing -> Pusher.
  inputs = _artifacts(store, useful_run, "INPUT")
  assert set(inputs) == {"model", "graph_schema"}
  assert helpers.producer(store, inputs["model"].id)[1].endswith("GnnTrainer")
  assert helpers.producer(store, inputs["graph_schema"].id)[1].endswith("Importer")
  pusher_inputs = _artifacts(store, _latest(store, "pusher_useful"), "INPUT")
  assert pusher_inputs["model_blessing"].id == useful["blessing"].id
  assert pusher_inputs["model"].id == inputs["model"].id


def test_the_change_threshold_compares_with_the_latest_blessed_model(runs):
  store = mlmd_utils.store(runs["metadata"])
  useful, _ = _outputs_of(store, "evaluator_useful")
  change, change_run = _outputs_of(store, "evaluator_change")
  blessing = mlmd_utils.custom_properties(change["blessing"])
  # The resolver gave the latest blessed model: the useful one.
  useful_model = _artifacts(store, _latest(store, "evaluator_useful"), "INPUT")["model"]
  assert blessing["baseline_model_id"] == useful_model.id
  assert blessing["blessed"] == 0
  assert "baseline_model" in blessing["blessing_message"], blessing
  with open(os.path.join(change["evaluation"].uri, "evaluation.json")) as f:
    evaluation = json.load(f)
  assert "baseline_model" in evaluation["metrics"]
  assert evaluation["metrics"]["baseline_model"]["all"]["accuracy"] == pytest.approx(
      mlmd_utils.custom_properties(useful["evaluation"])["accuracy"], abs=1e-6)
  inputs = _artifacts(store, change_run, "INPUT")
  assert inputs["baseline_model"].id == useful_model.id
  assert helpers.producer(store, inputs["model"].id)[0].id == helpers.producer(
      store, _artifacts(store, _latest(store, "evaluator_trivial"), "INPUT")["model"].id)[0].id


# ---- bad input: the executor on the trained model, nothing published ----

def _copy_tables(tmp_path, edit=None) -> str:
  import shutil
  tables = str(tmp_path / "tables")
  shutil.copytree(DATA_DIR, tables)
  if edit:
    edit(tables)
  return tables


def _do(runs, tmp_path, *, tables=DATA_DIR, sampling=None, **eval_config):
  """GraphEvaluator's executor on the useful model; returns the output folders."""
  from tfx.types import standard_artifacts
  from gnn_trainer_component import GraphSchema
  from gnn_trainer_component.evaluator import config as config_lib
  from gnn_trainer_component.evaluator import executor
  store = mlmd_utils.store(runs["metadata"])
  model = standard_artifacts.Model()
  model.uri = _artifacts(store, _latest(store, "evaluator_useful"), "INPUT")["model"].uri
  schema = GraphSchema()
  schema.uri = tables
  evaluation, blessing = standard_artifacts.ModelEvaluation(), standard_artifacts.ModelBlessing()
  evaluation.uri, blessing.uri = str(tmp_path / "evaluation"), str(tmp_path / "blessing")
  task = runpy.run_path(MODULE_FILE)
  sampling = sampling or {"seed_node_set": task["SEED_NODE_SET"], "hops": task["HOPS"]}
  executor.Executor().Do(
      {"model": [model], "graph_schema": [schema]},
      {"evaluation": [evaluation], "blessing": [blessing]},
      {"eval_config": config_lib.dumps(config_lib.parse(dict(EVAL_CONFIG, **eval_config))),
       "sampling_config": json.dumps(sampling)})
  return evaluation, blessing


def _assert_nothing_published(tmp_path):
  for name in ("evaluation", "blessing"):
    folder = tmp_path / name
    assert not folder.exists() or not list(folder.iterdir()), name


def _relabel(tables, user, label):
  path = os.path.join(tables, "users.csv")
  with open(path) as f:
    lines = f.read().splitlines()
  lines = [f"{user},{line.split(',', 3)[1]},{line.split(',', 3)[2]},{label}"
           if line.startswith(f"{user},") else line for line in lines]
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")


@pytest.mark.parametrize("case", ["label", "node_set", "slice", "overlap", "empty", "class"])
def test_bad_input_fails_clearly_and_publishes_nothing(runs, tmp_path, case):
  from gnn_trainer_component.evaluator.blessing import EvaluationInputError
  from gnn_trainer_component.graph.errors import GraphInputError
  from gnn_trainer_component.model.loading import InferenceInputError
  kwargs, error, match = {}, EvaluationInputError, None
  if case == "label":
    kwargs = {"label": "segment"}
    match = (r"label 'segment' is not a feature of node set 'user' \(table users.csv; its "
             r"features: \['age', 'label', 'visits'\]\)")
  elif case == "node_set":
    def rename(tables):
      path = os.path.join(tables, "graph_schema.pbtxt")
      with open(path) as f:
        text = f.read()
      with open(path, "w") as f:
        f.write(text.replace('key: "user"', 'key: "customer"').replace(
            'source: "user"', 'source: "customer"'))
    kwargs = {"tables": _copy_tables(tmp_path, rename),
              "sampling": {"seed_node_set": "customer", "hops": [{"bought": 4}]}}
    error, match = InferenceInputError, r"node set 'customer' is not in the graph schema the model"
  elif case == "slice":
    kwargs = {"thresholds": [{"metric": "accuracy", "slice": "degree:64-127", "lower_bound": 0.5}]}
    match = r"names slice 'degree:64-127', which holds no evaluated node; the slices of this"
  elif case == "overlap":
    kwargs = {"test_seeds": "seeds-train.csv"}
    match = r"180 test seeds \(seeds-train.csv\) are also train seeds \(seeds-train.csv\), e.g."
  elif case == "empty":
    def empty(tables):
      with open(os.path.join(tables, "seeds-test.csv"), "w") as f:
        f.write("id\n")
    kwargs = {"tables": _copy_tables(tmp_path, empty)}
    error, match = GraphInputError, r"GraphEvaluator: split 'test': seed table 'seeds-test.csv' is empty"
  else:
    with open(os.path.join(DATA_DIR, "seeds-test.csv")) as f:
      user = f.read().splitlines()[1]
    kwargs = {"tables": _copy_tables(tmp_path, lambda t: _relabel(t, user, 7))}
    match = (rf"node b?'{user}'? of the test seeds has label 'label' = 7 in users.csv, outside "
             r"the model's 3 classes \[0, 2\]")
  with pytest.raises(error, match=match):
    _do(runs, tmp_path, **kwargs)
  _assert_nothing_published(tmp_path)
