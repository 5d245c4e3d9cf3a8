"""Helpers shared by the tests (imported as ``from tests.helpers import ...``).

Fixtures live in tests/conftest.py; plain functions and constants live here.
TensorFlow and TFX are imported inside the functions, so importing this module
is cheap.
"""

import os
from typing import Optional

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO_MODULE = os.path.join(REPO_ROOT, "module_files", "demo_node_classification.py")
#: With GNN_REQUIRE_DATA=1 (set by .ci/run) a test whose data set is missing
#: fails instead of skipping.
REQUIRE_DATA_ENV = "GNN_REQUIRE_DATA"


#: Tests marked ``host`` change or need the machine itself: marker -> (the variable that
#: enables them, what they do). They run only where that variable is 1 (``make test-all``
#: sets both; CI sets them on its native stack), so a plain ``make test`` changes nothing.
HOST_TESTS = {
    "container": ("GNN_REQUIRE_CONTAINERS",
                  "builds a ~4 GB image with podman (apt-get installs podman, buildah, runc, "
                  "debootstrap if missing)"),
    "mlmd_server": ("GNN_REQUIRE_MARIADB",
                    "starts a MariaDB server (apt-get installs mariadb-server if missing)"),
}


def host_test_skip_reason(kinds, environ):
  """Why a ``host`` test with these HOST_TESTS markers skips under ``environ``; None: it runs.

  Raises:
    ValueError: ``kinds`` is empty or names a marker HOST_TESTS does not know (a host test
      must say which variable enables it).
  """
  unknown = sorted(set(kinds) - set(HOST_TESTS))
  if not kinds or unknown:
    raise ValueError(f"a test marked host must also carry one of {sorted(HOST_TESTS)} "
                     f"(got {sorted(kinds)})")
  for kind in kinds:
    env, what = HOST_TESTS[kind]
    if environ.get(env) != "1":
      return f"{what}: run `make test-all` or set {env}=1 to enable"
  return None


def planetoid_dir() -> str:
  """Planetoid data dir: $PLANETOID_DATA_DIR, default ../shared/data/planetoid."""
  from pipelines.planetoid import default_data_dir  # pylint: disable=g-import-not-at-top
  return default_data_dir()


def require_planetoid(name: str = "cora") -> str:
  """Returns the Planetoid data dir holding ``ind.<name>.*``.

  If the files are absent the calling test is skipped, or fails when
  GNN_REQUIRE_DATA=1 (CI, where the data-dependent tests must run).
  """
  d = planetoid_dir()
  if not os.path.exists(os.path.join(d, f"ind.{name}.graph")):
    msg = (f"Planetoid {name} data not found in {d}: set PLANETOID_DATA_DIR to the folder "
           f"with ind.{name}.{{x,tx,allx,y,ty,ally,graph,test.index}}")
    if os.environ.get(REQUIRE_DATA_ENV) == "1":
      pytest.fail(f"{msg} ({REQUIRE_DATA_ENV}=1: missing data is a failure)", pytrace=False)
    pytest.skip(msg)
  return d


def write_examples_artifact_dir(uri: str, records_by_split: dict) -> str:
  """Lays out records as ExampleGen does: <uri>/Split-<name>/data_tfrecord-00000-of-00001.gz."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for split, records in records_by_split.items():
    os.makedirs(os.path.join(uri, f"Split-{split}"), exist_ok=True)
    path = os.path.join(uri, f"Split-{split}", "data_tfrecord-00000-of-00001.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as w:
      for r in records:
        w.write(r)
  return uri


def read_records(path: str) -> list:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def demo_records(demo_data: dict, split: str) -> list:
  """The serialized examples of one split of the ``demo_data`` fixture."""
  return read_records(os.path.join(demo_data["examples"], split, "data.tfrecord"))


def demo_examples_artifact(demo_data: dict, uri: str, splits=("train", "eval")) -> str:
  """The ``demo_data`` splits laid out as an ExampleGen Examples artifact at ``uri``."""
  return write_examples_artifact_dir(uri, {s: demo_records(demo_data, s) for s in splits})


def run_executor(tmp_dir: str, *, examples_uri: Optional[str], graph_schema_dir: str,
                 module_file: str = DEMO_MODULE, train_steps: int = 20,
                 eval_steps: int = 0, custom_config=None, eval_splits=("eval",),
                 split_names=("train", "eval"), base_model_uri=None,
                 hyperparameters: dict = None, schema_uri: str = None, run: bool = True,
                 seeds: Optional[dict] = None, sampling_config: Optional[dict] = None):
  """Runs the real GnnTrainer Executor.Do on hand-made artifacts (as TFX's own
  executor tests do). Returns (model, model_run) artifacts; with ``run=False``
  it runs nothing and returns the execution ``(input_dict, output_dict,
  exec_properties)``. With ``examples_uri=None``, ``seeds`` and
  ``sampling_config``: the graph in memory, ``graph_schema_dir`` its tables."""
  # pylint: disable=g-import-not-at-top
  import json
  from tfx.types import artifact_utils, standard_artifacts
  from gnn_trainer_component import GraphSchema
  from gnn_trainer_component.trainer import component, config

  schema = GraphSchema()
  schema.uri = graph_schema_dir
  model = standard_artifacts.Model()
  model.uri = os.path.join(tmp_dir, "model")
  model_run = standard_artifacts.ModelRun()
  model_run.uri = os.path.join(tmp_dir, "model_run")
  inputs = {"graph_schema": [schema]}
  if examples_uri is not None:
    examples = standard_artifacts.Examples()
    examples.uri = examples_uri
    examples.split_names = artifact_utils.encode_split_names(list(split_names))
    inputs["examples"] = [examples]
  if base_model_uri:
    base = standard_artifacts.Model()
    base.uri = base_model_uri
    inputs["base_model"] = [base]
  if schema_uri:
    tfmd = standard_artifacts.Schema()
    tfmd.uri = schema_uri
    inputs["schema"] = [tfmd]
  if hyperparameters is not None:
    hp = standard_artifacts.HyperParameters()
    hp.uri = os.path.join(tmp_dir, "hparams")
    os.makedirs(hp.uri, exist_ok=True)
    with open(os.path.join(hp.uri, "best_hyperparameters.txt"), "w") as f:
      json.dump({"space": [], "values": hyperparameters}, f)
    inputs["hyperparameters"] = [hp]
  exec_properties = {
      "module_file": module_file,
      "train_args": json.dumps({"splits": ["train"], "num_steps": train_steps}),
      "eval_args": json.dumps({"splits": list(eval_splits), "num_steps": eval_steps}),
      "custom_config": json.dumps(custom_config if custom_config is not None else
                                  {"global_batch_size": 16, "epochs": 1,
                                   "summarize_every_n_steps": "never", "seed": 1}),
  }
  if seeds is not None:
    exec_properties["seeds"] = json.dumps(seeds)
    exec_properties["sampling_config"] = json.dumps(sampling_config)
  outputs = {"model": [model], "model_run": [model_run]}
  if not run:
    return inputs, outputs, exec_properties
  cfg = config.make_trainer_config(exec_properties["train_args"], exec_properties["eval_args"],
                                   exec_properties["custom_config"])
  component.executor_class(cfg)().Do(inputs, outputs, exec_properties)
  return model, model_run


def assert_nothing_published(tmp_dir: str):
  model_dir = os.path.join(tmp_dir, "model")
  assert not os.path.exists(os.path.join(model_dir, "Format-Serving")), os.listdir(model_dir)


def run_beam_sampler(executor_cls, tmp_path, graph_dir, exec_properties: dict,
                     beam_pipeline_args=()):
  """Runs a sampler executor (GraphSampler's or LinkSampler's) as TFX would.

  Returns:
    ``(examples, output_graph_schema)`` artifacts under ``tmp_path / "out"``.
  """
  from tfx.dsl.components.base import base_beam_executor
  from tfx.types import standard_artifacts
  from gnn_trainer_component import artifacts
  schema_in = artifacts.GraphSchema()
  schema_in.uri = str(graph_dir)
  examples = standard_artifacts.Examples()
  examples.uri = str(tmp_path / "out" / "examples")
  schema_out = artifacts.GraphSchema()
  schema_out.uri = str(tmp_path / "out" / "graph_schema")
  os.makedirs(examples.uri, exist_ok=True)
  ctx = base_beam_executor.BaseBeamExecutor.Context(
      beam_pipeline_args=list(beam_pipeline_args), tmp_dir=str(tmp_path / "tmp"), unique_id="1")
  executor_cls(ctx).Do({"graph_schema": [schema_in]},
                       {"examples": [examples], "output_graph_schema": [schema_out]},
                       exec_properties)
  return examples, schema_out


def reachable(edges, starts, hops: int):
  """Nodes and edges reached from ``starts`` in ``hops`` hops along directed ``edges``.

  The exact neighbourhood a sampler with unlimited fan-out returns (brute force).
  """
  out = {}
  for s, t in edges:
    out.setdefault(s, set()).add(t)
  nodes, reached = set(starts), set()
  for start in starts:
    frontier = {start}
    for _ in range(hops):
      nxt = set()
      for u in frontier:
        for v in out.get(u, ()):
          reached.add((u, v))
          nxt.add(v)
      nodes |= nxt
      frontier = nxt
  return nodes, reached


def serve_in_fresh_process(saved_model_dir: str, records: list, tmp_dir: str) -> dict:
  """``serving_default`` on ``records`` in a new Python process (no test imports).

  Returns:
    ``{"outputs": {name: nested list}, "tfgnn_imported": bool}``.
  """
  import json  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = os.path.join(tmp_dir, "requests.tfrecord")
  with tf.io.TFRecordWriter(path) as w:
    for r in records:
      w.write(r)
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  from pipelines import serving  # pylint: disable=g-import-not-at-top
  proc = subprocess.run([sys.executable, "-c", serving.FRESH_PROCESS_SCRIPT, saved_model_dir, path],
                        capture_output=True, text=True, env=env, cwd="/", timeout=300,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def producer(store, artifact_id: int):
  """(execution, execution type name) that output an artifact, from MLMD events."""
  from pipelines.runtime import mlmd_utils  # pylint: disable=g-import-not-at-top
  return mlmd_utils.producer(store, artifact_id)


def execution_inputs(store, execution_id: int) -> dict:
  """{artifact type name: artifact} of an execution's inputs (the last, if several)."""
  from pipelines.runtime import mlmd_utils  # pylint: disable=g-import-not-at-top
  return {name: artifacts[-1]
          for name, artifacts in mlmd_utils.execution_inputs(store, execution_id).items()}


def assert_validated(store, execution_id: int) -> None:
  """The execution ran inside a pipeline's ``tfx.dsl.Cond`` on GraphValidator's verdict.

  TFX gives a conditional node the predicate's artifact as an input: its ``ExampleAnomalies``
  came from GraphValidator and says the graph was valid.
  """
  anomalies = execution_inputs(store, execution_id)["ExampleAnomalies"]
  assert producer(store, anomalies.id)[1].endswith("GraphValidator")
  assert anomalies.custom_properties["valid"].int_value == 1


def assert_demo_lineage(store, model, transform: bool = True) -> None:
  """Model <- GnnTrainer <- (Examples <- Transform <- Examples <- ImportExampleGen); without
  ``transform`` (the demo's ``--no-transform``): Model <- GnnTrainer <- Examples <-
  ImportExampleGen."""
  trainer_exec, trainer_type = producer(store, model.id)
  assert trainer_type.endswith("GnnTrainer")
  trainer_inputs = execution_inputs(store, trainer_exec.id)
  if not transform:
    assert set(trainer_inputs) == {"Examples", "gnn_trainer_component.GraphSchema"}
    assert producer(store, trainer_inputs["Examples"].id)[1].endswith("ImportExampleGen")
    return
  assert {"Examples", "TransformGraph", "Schema",
          "gnn_trainer_component.GraphSchema"} <= set(trainer_inputs)
  transform_exec, transform_type = producer(store, trainer_inputs["Examples"].id)
  assert transform_type.endswith("Transform")
  _, example_gen_type = producer(store, execution_inputs(store, transform_exec.id)["Examples"].id)
  assert example_gen_type.endswith("ImportExampleGen")


#: Queries a pushed EmbeddingIndex with TensorFlow alone (argv: the SavedModel, a JSON request
#: {"embedding": [[...]], "ids": [...], "unknown_ids": [...]}); prints {"ids": [[...]],
#: "by_id": [[...]], "error": ""} (error: of neighbours on unknown_ids).
_INDEX_SCRIPT = """
import json, sys
import numpy as np
import tensorflow as tf
assert 'gnn_trainer_component' not in sys.modules
m = tf.saved_model.load(sys.argv[1])
request = json.loads(sys.argv[2])
def ids(out):
  return [[i.decode() for i in row] for row in out['ids'].numpy()]
got = {'ids': [], 'by_id': [], 'error': ''}
if request.get('embedding'):
  got['ids'] = ids(m.signatures['serving_default'](
      embedding=tf.constant(np.array(request['embedding'], np.float32))))
if request['ids']:
  got['by_id'] = ids(m.signatures['neighbours'](ids=tf.constant(request['ids'])))
if request['unknown_ids']:
  try:
    m.signatures['neighbours'](ids=tf.constant(request['unknown_ids']))
  except tf.errors.InvalidArgumentError as e:
    got['error'] = str(e)
print(json.dumps(got))
"""


def query_index_in_fresh_process(saved_model_dir: str, *, embedding=(), ids=(),
                                 unknown_ids=()) -> dict:
  """A pushed EmbeddingIndex's ``serving_default`` on ``embedding`` and ``neighbours`` on
  ``ids`` (then on ``unknown_ids``, which must fail), in a new Python process that imports
  TensorFlow alone.

  Returns:
    ``{"ids": [[id, ...] per embedding], "by_id": [[id, ...] per id], "error": ""}`` (the
    error of ``neighbours`` on ``unknown_ids``).
  """
  import json  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  request = json.dumps({"embedding": [list(map(float, e)) for e in embedding],
                        "ids": list(ids), "unknown_ids": list(unknown_ids)})
  proc = subprocess.run([sys.executable, "-c", _INDEX_SCRIPT, saved_model_dir, request],
                        capture_output=True, text=True, timeout=300, check=False, cwd="/",
                        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])
