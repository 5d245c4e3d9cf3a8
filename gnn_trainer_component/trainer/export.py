"""Export and publish: the serving signature, the parity check, the run files, the atomic publish.

One concern in one place. During ``runner.run`` the :class:`ServingExporter`
writes the SavedModel into a staging folder; then, on the chief, the executor
makes one call, :func:`publish`: reload the staged export and compare its
predictions with the in-memory model's (:func:`parity_check`), write the run
files into ``model_run`` (``metrics.json``, ``history.json``, ``curves.png``,
``parity/``, ``held_out/`` of link prediction in memory,
``model_properties.json``) and rename the export into
``<model uri>/Format-Serving``. Nothing reaches ``Format-Serving`` unless all
of that succeeded; :func:`published_properties` lets a retry that finds a
published model only re-publish.

The signature
-------------

``serving_default`` takes a batch of serialized tf.Examples under the input
name ``examples`` and returns:

* one task (module exports ``task``): ``{custom_config['serving_output_name']: logits}``,
  ``"logits"`` by default;
* several tasks (module exports ``tasks``): one output per task, keyed by the
  task name (``"<task>/<key>"`` if a task predicts a dict).

Label features are not needed at serving time. Node/edge labels parse as
optional anyway. Graph-level (context) labels read with
``runner.ContextLabelFn`` would be required by the parser, so the signature
prepends a serialized default tf.Example holding zeros for them: protobuf merge
semantics make a label present in the request win, and the model's outputs do
not depend on the label branch.

``embeddings`` (unless ``custom_config["export_embeddings"]`` is false) takes
the same input and returns the base GNN's state each task reads
(:mod:`embeddings`). With a Transform graph, ``transformed_examples`` and
``transformed_embeddings`` are the same models on transformed examples; the
parity check compares those.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Any, Mapping, Optional, Sequence

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component import embeddings as embeddings_lib
from gnn_trainer_component import errors
from gnn_trainer_component import graph_schema
from gnn_trainer_component import outputs
from gnn_trainer_component import process
from gnn_trainer_component.trainer import curves
from gnn_trainer_component.trainer import whole_graph

SERVING_INPUT_NAME = "examples"
#: Files written into the ModelRun folder.
METRICS_FILE = "metrics.json"
HISTORY_FILE = "history.json"
# The eval examples of the pre-publish parity check and the in-memory model's
# predictions on them (to re-check serving anywhere later).
PARITY_EXAMPLES_FILE = "parity/examples.tfrecord"
PARITY_PREDICTIONS_FILE = "parity/predictions.json"
PARITY_EMBEDDINGS_FILE = "parity/embeddings.json"
#: Folder in the ModelRun of the held-out pairs of link prediction in memory, a CSV per split.
HELD_OUT_DIR = "held_out"
# The Model's custom properties, written before the export is renamed into
# place, so that a retry after that point only re-publishes.
MODEL_PROPERTIES_FILE = "model_properties.json"
#: In the export: the graph schema ``serving_default`` parses (GraphInferrer names the
#: features a graph lacks from it), as TF Serving keeps extra files in ``assets.extra``.
GRAPH_SCHEMA_ASSET_DIR = "assets.extra"
#: Under the Model URI: where runner.run writes the export before publish.
STAGING_DIR = "_staging_Format-Serving"
class ExportError(errors.GnnError, RuntimeError):
  """The exported model does not reproduce the trained one; nothing was published."""


#: With a Transform graph: a second signature on already-transformed examples.
TRANSFORMED_SIGNATURE = "transformed_examples"


def context_label_features(tasks: Mapping[str, Any]) -> list[str]:
  """Names of context features that the tasks read as labels."""
  names = []
  for task in tasks.values():
    for value in vars(task).values():
      if isinstance(value, runner.ContextLabelFn):
        names.append(value.get_config()["feature_name"])
  return sorted(set(names))


def label_defaults_example(schema: tfgnn.GraphSchema,
                           context_features: list[str]) -> Optional[bytes]:
  """A serialized tf.Example with zero values for the given context features."""
  if not context_features:
    return None
  example = tf.train.Example()
  for name in context_features:
    feature = schema.context.features[name]
    size = 1
    for dim in feature.shape.dim:
      size *= max(int(dim.size), 1)
    kind = graph_schema.example_kind(feature.dtype)
    default = {graph_schema.BYTES: b"", graph_schema.FLOAT: 0.0, graph_schema.INT64: 0}[kind]
    getattr(example.features.feature[f"context/{name}"], kind).value.extend([default] * size)
  return example.SerializeToString()


class PrependSerialized(tf.keras.layers.Layer):
  """Prepends fixed serialized proto bytes to each string (a proto merge)."""

  def __init__(self, prefix: bytes, **kwargs):
    super().__init__(**kwargs)
    self._prefix = prefix

  def call(self, serialized):
    return tf.strings.join([tf.constant(self._prefix), serialized])

  def get_config(self):
    return dict(super().get_config(), prefix=self._prefix.hex())

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["prefix"] = bytes.fromhex(config["prefix"])
    return cls(**config)


def output_names(output: Any, single_task_name: Optional[str]) -> Any:
  """Signature output names with the same nesting as the model's output."""
  def names(value, path):
    if isinstance(value, Mapping):
      return {k: names(v, path + [str(k)]) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
      return type(value)(names(v, path + [str(i)]) for i, v in enumerate(value))
    return "/".join(path)
  if single_task_name is not None:
    if isinstance(output, (Mapping, list, tuple)):
      return names(output, [])
    return single_task_name
  return names(output, [])


def metric_prefixes(model: tf.keras.Model) -> dict[str, str]:
  """Keras metric-name prefix -> task name, for a model with one output per task.

  Keras names the metrics of a model with several outputs by the output
  layer's name (``classification_logits_loss``, the task's ``name``
  argument), not by the task's key in ``tasks``; this maps one to the other.
  Empty for a model with a single output (Keras adds no prefix).
  """
  if len(model.output_names) < 2 or not isinstance(model.output, Mapping):
    return {}
  return dict(zip(model.output_names, tf.nest.flatten(output_names(model.output, None)),
                  strict=False))


def by_task(metrics: Mapping[str, float], prefixes: Mapping[str, str]) -> dict[str, float]:
  """``metrics`` with each output-layer prefix replaced by its task name.

  ``prefixes`` is :func:`metric_prefixes` of the model.
  """
  renamed = {}
  for key, value in metrics.items():
    for prefix in sorted(prefixes, key=len, reverse=True):
      if key.startswith(prefix + "_") or key.startswith("val_" + prefix + "_"):
        start = key.index(prefix)
        key = key[:start] + prefixes[prefix] + key[start + len(prefix):]
        break
    renamed[key] = value
  return renamed


def _serving_inputs(run_result: runner.RunResult, label_defaults: Optional[bytes],
                    raw_parser: Optional[tf.keras.layers.Layer] = None,
                    subgraph_parser: Optional[tf.keras.layers.Layer] = None):
  """``(examples Input, preprocessed GraphTensor)``: parsing + preprocessing, as served."""
  examples = tf.keras.Input(shape=(), dtype=tf.string, name=SERVING_INPUT_NAME)
  serialized = examples
  if label_defaults:
    serialized = PrependSerialized(label_defaults, name="label_defaults")(examples)
  if raw_parser is None and subgraph_parser is None:
    gnn_inputs, *_ = run_result.preprocess_model(serialized)
  else:
    # runner's parsing model is Input -> ParseExample -> merge -> preprocessing
    # model; keep the last one (feature processors + Task.preprocess).
    preprocessing = run_result.preprocess_model.layers[-1]
    graph = (subgraph_parser(serialized) if subgraph_parser is not None
             else raw_parser(serialized).merge_batch_to_components())
    gnn_inputs, *_ = preprocessing(graph)
  return examples, gnn_inputs


def build_serving_model(run_result: runner.RunResult, label_defaults: Optional[bytes],
                        raw_parser: Optional[tf.keras.layers.Layer] = None,
                        subgraph_parser: Optional[tf.keras.layers.Layer] = None,
                        embeddings_tasks: Optional[Mapping[str, Any]] = None,
                        single_task: bool = True
                        ) -> tuple[tf.keras.Model, Optional[tf.keras.Model]]:
  """Stacks parsing + preprocessing and the trained model, as KerasModelExporter does.

  Args:
    run_result: From ``runner.run``.
    label_defaults: Serialized default context labels to prepend, or None.
    raw_parser: Optional layer mapping serialized raw examples to a batched
      GraphTensor of the training spec (the Transform path). Without it, the
      examples are parsed as the training data was.
    subgraph_parser: Optional layer mapping serialized subgraphs to one merged
      GraphTensor of the training spec (a model trained on the whole graph
      serves sampled subgraphs: the seed readout is added to them).
    embeddings_tasks: The tasks whose embeddings the second model returns
      (None: no embeddings model); see :mod:`embeddings`.
    single_task: Name the embeddings without a task prefix.

  Returns:
    The serving model (task outputs) and the embeddings model on the same
    input, or None.
  """
  examples, gnn_inputs = _serving_inputs(run_result, label_defaults, raw_parser,
                                         subgraph_parser)
  serving = tf.keras.Model(examples, run_result.trained_model(gnn_inputs))
  embedding = None
  if embeddings_tasks is not None:
    embedding = embeddings_lib.model(run_result.base_model, gnn_inputs, examples,
                                     embeddings_tasks, single_task=single_task)
  return serving, embedding


def signature_function(model: tf.keras.Model, names: Any = None):
  """A ``tf.function`` on serialized examples returning ``model``'s outputs by name.

  ``names`` nests like the model's output (None: a model returning a flat dict,
  each output named by its key). The export's signatures are these functions.

  It is traced here, without AutoGraph where the model allows it
  (:func:`process.trace_unconverted`: converting took 75 s of the 101 s of the demo
  pipeline's GnnTrainer), else with AutoGraph.
  """
  names = _own_names(model) if names is None else names

  def fn(examples):
    return dict(zip(tf.nest.flatten(names), tf.nest.flatten(model(examples)), strict=False))

  return process.trace(fn, [tf.TensorSpec([None], tf.string, name=SERVING_INPUT_NAME)],
                       "The serving signature")


def _export(root: tf.keras.Model, signatures: Mapping[str, tuple[tf.keras.Model, Any]],
            export_dir: str) -> None:
  """Saves ``root`` (without traces: loadable without TF-GNN) with the named signatures.

  Every model shares ``root``'s variables (they are built from the same layers).
  """
  root.save(export_dir, save_format="tf", include_optimizer=False, save_traces=False,
            signatures={name: signature_function(model, names)
                        for name, (model, names) in signatures.items()})


class ServingExporter(runner.ModelExporter):
  """Exports ``serving_default`` with stable output names; see the module doc.

  After ``save``, ``self.training_model`` is the in-memory model on
  training-format examples (the serving model differs from it only with a
  Transform graph; it is what the pre-publish parity check compares),
  ``self.output_names`` the signature output names, nested like the
  model's output, and ``self.embeddings_model`` the in-memory embeddings model
  on training-format examples (None without embeddings).
  """

  def __init__(self, *, single_task_name: Optional[str], label_defaults: Optional[bytes],
               raw_parser: Optional[tf.keras.layers.Layer] = None, chief: bool = True,
               subgraph_parser: Optional[tf.keras.layers.Layer] = None,
               embeddings_tasks: Optional[Mapping[str, Any]] = None,
               graph_schema: Optional[tfgnn.GraphSchema] = None,
               graph_spec: Optional[tfgnn.GraphTensorSpec] = None):
    self._chief = chief
    self._graph_spec = graph_spec
    self._graph_schema = graph_schema
    self._subgraph_parser = subgraph_parser
    self._single_task_name = single_task_name
    self._label_defaults = label_defaults
    self._raw_parser = raw_parser
    self._embeddings_tasks = embeddings_tasks
    self.training_model: Optional[tf.keras.Model] = None
    self.embeddings_model: Optional[tf.keras.Model] = None
    self.output_names: Any = None

  def save(self, run_result: runner.RunResult, export_dir: str):
    if not self._chief:
      # Every worker takes part in saving a distributed model; only the chief's
      # copy is kept (as Keras' own callbacks do for non-chief workers).
      scratch = tempfile.mkdtemp(prefix="gnntrainer-worker-export-")
      try:
        self._save(run_result, scratch)
      finally:
        shutil.rmtree(scratch, ignore_errors=True)
      return
    self._save(run_result, export_dir)

  def _build(self, run_result: runner.RunResult, raw_parser=None):
    return build_serving_model(run_result, self._label_defaults, raw_parser,
                               subgraph_parser=None if raw_parser else self._subgraph_parser,
                               embeddings_tasks=self._embeddings_tasks,
                               single_task=self._single_task_name is not None)

  def _save(self, run_result: runner.RunResult, export_dir: str):
    outputs.log_phase("export")
    training, training_embeddings = self._build(run_result)
    names = output_names(training.output, self._single_task_name)
    if self._raw_parser is None:
      root, root_embeddings = training, training_embeddings
      signatures = {"serving_default": (training, names)}
    else:
      # serving_default / embeddings take raw examples; the training-format
      # models get the transformed_* signatures (the parity check's).
      root, root_embeddings = self._build(run_result, self._raw_parser)
      signatures = {"serving_default": (root, names), TRANSFORMED_SIGNATURE: (training, names)}
      if training_embeddings is not None:
        signatures[embeddings_lib.TRANSFORMED_SIGNATURE] = (
            training_embeddings, _own_names(training_embeddings))
    if root_embeddings is not None:
      signatures[embeddings_lib.SIGNATURE] = (root_embeddings, _own_names(root_embeddings))
    whole = None
    if self._graph_spec is not None:
      whole = {"refused": whole_graph.refusal(self._graph_spec, self._embeddings_tasks,
                                              self._raw_parser is not None)}
      if not whole["refused"]:
        functions, whole = whole_graph.functions(run_result, self._graph_spec,
                                                 self._embeddings_tasks, names)
        for attribute, function in functions.items():
          setattr(root, attribute, function)
    _export(root, signatures, export_dir)
    if whole is not None:
      whole_graph.write(os.path.join(export_dir, GRAPH_SCHEMA_ASSET_DIR), whole)
    if self._graph_schema is not None:
      graph_schema.write_artifact_schema(self._graph_schema,
                                         os.path.join(export_dir, GRAPH_SCHEMA_ASSET_DIR))
    self.training_model = training
    self.embeddings_model = training_embeddings
    self.output_names = names


def _own_names(model: tf.keras.Model) -> dict[str, str]:
  """A model returning a flat dict: each output named by its key."""
  return {k: k for k in model.output}


@dataclasses.dataclass(frozen=True)
class TrainedModel:
  """What training hands to :func:`publish`."""
  train_metrics: dict[str, float]  # of the exported epoch
  eval_metrics: dict[str, float]  # its (or the last earlier) validation, no ``val_`` prefix
  history: list[dict[str, float]]  # Keras logs per epoch, resumed epochs included
  steps: int
  epochs: int
  task_names: list[str]
  resumed_from_step: int
  recoveries: int
  output_names: Any  # signature output names, nested like the model output
  training_model: Any  # in-memory tf.keras.Model on training-format examples
  parity_signature: str  # the export signature matching training_model
  exported_epoch: int  # 1-based epoch whose weights were exported (restore_best_weights)
  graph_mode: str = "examples"  # what training read: examples, sampled or full_graph
  embeddings_model: Any = None  # in-memory embeddings model on training-format examples
  # Model properties {"retrieval_splits": "test", "retrieval_mrr": ...} ({}: not run);
  # see in_memory/retrieval.py
  retrieval: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  @property
  def embeddings_signature(self) -> str:
    """The export signature matching ``embeddings_model``."""
    return (embeddings_lib.TRANSFORMED_SIGNATURE if self.parity_signature == TRANSFORMED_SIGNATURE
            else embeddings_lib.SIGNATURE)


def parity_check(model: tf.keras.Model, output_names: Any, export_dir: str,
                 serialized_examples: Sequence[bytes], *, atol: float = 1e-4,
                 signature: str = "serving_default", saved_model: Any = None) -> dict:
  """Reloads the export and compares its predictions with the in-memory model's.

  Args:
    model: The in-memory model that was exported as ``signature``.
    output_names: Signature output names, nested like ``model.output``.
    export_dir: The SavedModel directory.
    serialized_examples: Examples to predict on.
    atol: Allowed absolute difference.
    signature: The signature to call.
    saved_model: ``export_dir`` already loaded (else it is loaded here).

  Returns:
    ``{"max_abs_diff": float, "examples": n, "predictions": {output: nested list}}``
    where predictions are the in-memory model's.

  Raises:
    ExportError: if they differ beyond ``atol`` (nothing is then published).
  """
  import numpy as np
  if not serialized_examples:
    return {"max_abs_diff": 0.0, "examples": 0, "predictions": {}}
  batch = tf.constant(list(serialized_examples))
  expected = dict(zip(tf.nest.flatten(output_names),
                      tf.nest.flatten(model(batch, training=False)), strict=False))
  saved_model = saved_model or tf.saved_model.load(export_dir)
  got = saved_model.signatures[signature](examples=batch)
  if sorted(got) != sorted(expected):
    raise ExportError(f"Exported model at {export_dir} has outputs {sorted(got)}, "
                      f"expected {sorted(expected)}; not publishing it.")
  worst = max(float(np.max(np.abs(expected[k].numpy() - got[k].numpy()), initial=0.0))
              for k in expected)
  if worst > atol:
    raise ExportError(
        f"Exported model at {export_dir} disagrees with the trained model on "
        f"{len(serialized_examples)} eval examples in signature {signature!r} "
        f"(max |diff| = {worst:.3g} > {atol}); "
        "not publishing it.")
  return {"max_abs_diff": worst, "examples": len(serialized_examples),
          "predictions": {k: v.numpy().tolist() for k, v in expected.items()}}


def read_examples(files: Sequence[str], compression: Optional[str], n: int) -> list[bytes]:
  """The first ``n`` serialized records of ``files``."""
  if n <= 0:
    return []
  ds = tf.data.TFRecordDataset(list(files), compression_type=compression or "")
  return [r.numpy() for r in ds.take(n)]


def model_properties(trained: TrainedModel, parity: Mapping[str, Any]) -> dict[str, Any]:
  """The Model's custom properties (name -> int, float or str)."""
  props: dict[str, Any] = {}
  for prefix, metrics in (("train", trained.train_metrics), ("eval", trained.eval_metrics)):
    for name, value in sorted(metrics.items()):
      props[f"{prefix}_{name}"] = float(value)
  props.update(
      train_steps=int(trained.steps), resumed_from_step=int(trained.resumed_from_step),
      recoveries=int(trained.recoveries), epochs=int(trained.epochs),
      exported_epoch=int(trained.exported_epoch), graph_mode=trained.graph_mode,
      tasks=",".join(trained.task_names),
      serving_outputs=",".join(sorted(tf.nest.flatten(trained.output_names))),
      parity_max_abs_diff=float(parity["max_abs_diff"]))
  if trained.embeddings_model is not None:
    props["embeddings_outputs"] = ",".join(sorted(trained.embeddings_model.output))
  props.update(trained.retrieval)
  return props


def _write_json(path: str, value: Any) -> None:
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(json.dumps(value, indent=2, sort_keys=True))


def _write_run_files(model_run_dir: str, trained: TrainedModel, parity: dict[str, Any],
                     parity_examples: Sequence[bytes], held_out: Mapping[str, str]) -> None:
  """metrics.json, history.json, curves.png, parity/ and held_out/ in the ModelRun folder."""
  parity = dict(parity)
  predictions = parity.pop("predictions")
  embeddings = parity.pop("embeddings", None)
  _write_json(os.path.join(model_run_dir, METRICS_FILE),
              {"train": trained.train_metrics, "eval": trained.eval_metrics,
               "steps": trained.steps, "epochs": trained.epochs,
               "exported_epoch": trained.exported_epoch, "parity": parity,
               **({"retrieval": dict(trained.retrieval)} if trained.retrieval else {})})
  _write_json(os.path.join(model_run_dir, HISTORY_FILE), trained.history)
  curves.write_training_curves(trained.history, os.path.join(model_run_dir, curves.CURVES_FILE),
                               title=f"GnnTrainer: {', '.join(trained.task_names)}")
  tf.io.gfile.makedirs(os.path.join(model_run_dir, "parity"))
  with tf.io.TFRecordWriter(os.path.join(model_run_dir, PARITY_EXAMPLES_FILE)) as w:
    for record in parity_examples:
      w.write(record)
  _write_json(os.path.join(model_run_dir, PARITY_PREDICTIONS_FILE), predictions)
  if embeddings is not None:
    _write_json(os.path.join(model_run_dir, PARITY_EMBEDDINGS_FILE), embeddings)
  for split, table in held_out.items():
    tf.io.gfile.makedirs(os.path.join(model_run_dir, HELD_OUT_DIR))
    with tf.io.gfile.GFile(os.path.join(model_run_dir, HELD_OUT_DIR, f"{split}.csv"), "w") as f:
      f.write(table)


def _rename_into_place(staging: str, final: str) -> None:
  """Moves the staged SavedModel into place (atomic rename where supported)."""
  from tfx.utils import io_utils  # Imported here: nothing else in this module needs TFX.
  if tf.io.gfile.exists(final):
    tf.io.gfile.rmtree(final)
  try:
    tf.io.gfile.rename(staging, final)
  except (tf.errors.UnimplementedError, tf.errors.FailedPreconditionError):
    io_utils.copy_dir(staging, final)
    tf.io.gfile.rmtree(staging)


def publish(trained: TrainedModel, *, staging_dir: str, serving_dir: str, model_run_dir: str,
            parity_examples: Sequence[bytes],
            held_out: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
  """Checks the staged export, writes the run files and renames the export into place.

  Call on the chief only, after ``runner.run`` wrote ``staging_dir``.

  Args:
    trained: From training.
    staging_dir: The staged SavedModel.
    serving_dir: Where it is published (``<model uri>/Format-Serving``).
    model_run_dir: The ModelRun folder.
    parity_examples: Serialized validation examples the reloaded export must
      predict as the trained model does (none: no check).
    held_out: Split -> CSV text of its held-out pairs (``held_out/<split>.csv``).

  Returns:
    The Model's custom properties (also written to ``model_properties.json``).

  Raises:
    ExportError: if the export does not reproduce the trained model.
  """
  outputs.log_phase("parity")
  saved_model = tf.saved_model.load(staging_dir) if parity_examples else None
  parity = parity_check(trained.training_model, trained.output_names, staging_dir,
                        parity_examples, signature=trained.parity_signature,
                        saved_model=saved_model)
  if trained.embeddings_model is not None:
    checked = parity_check(trained.embeddings_model, _own_names(trained.embeddings_model),
                           staging_dir, parity_examples,
                           signature=trained.embeddings_signature, saved_model=saved_model)
    parity["embeddings_max_abs_diff"] = checked["max_abs_diff"]
    parity["embeddings"] = checked["predictions"]
  del saved_model
  _write_run_files(model_run_dir, trained, parity, parity_examples, held_out or {})
  properties = model_properties(trained, parity)
  _write_json(os.path.join(model_run_dir, MODEL_PROPERTIES_FILE), properties)
  outputs.log_phase("publish")
  _rename_into_place(staging_dir, serving_dir)
  return properties


def published_properties(serving_dir: str, staging_dir: str,
                         model_run_dir: str) -> Optional[dict[str, Any]]:
  """The Model properties if an earlier attempt of this execution published, else None.

  A retry reuses the execution's output URIs (TFX's launcher reuses a RUNNING
  execution; the KFP launcher keeps a task's URIs). Once the staged export
  has been renamed into place, the model is complete and its properties were
  written before the rename: a retry must not train again or read the
  (possibly half-deleted) resume dir.
  """
  path = os.path.join(model_run_dir, MODEL_PROPERTIES_FILE)
  if (tf.io.gfile.exists(staging_dir) or not tf.io.gfile.exists(serving_dir)
      or not tf.io.gfile.exists(path)):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)
