"""Writing a GnnTrainer export: its signatures, the parsers in front of the model, its assets.

During ``runner.run`` the :class:`ServingExporter` writes the SavedModel (GnnTrainer
then checks and publishes it: ``trainer/publish.py``); what reads an export is
:mod:`loading`. The export keeps, beside its signatures, the graph schema
``serving_default`` parses and the whole-graph functions' description
(:data:`GRAPH_SCHEMA_ASSET_DIR`, :mod:`whole_graph`).

The signatures
--------------

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

import os
import shutil
import tempfile
from typing import Any, Mapping, Optional

from google.protobuf import text_format
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn import runner

from gnn_trainer_component import graph_schema
from gnn_trainer_component import outputs
from gnn_trainer_component import process
from gnn_trainer_component.graph import readout
from gnn_trainer_component.model import embeddings as embeddings_lib
from gnn_trainer_component.model import node_serving
from gnn_trainer_component.model import recommend
from gnn_trainer_component.model import whole_graph

#: The input name of every signature on serialized examples.
SERVING_INPUT_NAME = "examples"
#: The signature on served examples.
SERVING_SIGNATURE = "serving_default"
#: In the export: the graph schema ``serving_default`` parses (GraphInferrer names the
#: features a graph lacks from it), as TF Serving keeps extra files in ``assets.extra``.
GRAPH_SCHEMA_ASSET_DIR = "assets.extra"
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


def run_result_in_training(model: tf.keras.Model, gtspec: tfgnn.GraphTensorSpec,
                           processors: Any, task: Any) -> runner.RunResult:
  """What ``runner.run`` returns after training, for the ``model`` it is training now.

  The same parsing and preprocessing models (TF-GNN 1.0.3's builders: feature
  ``processors``, then each task's ``preprocess``) around the model being
  trained, whose base GNN is its tagged layer, so :func:`build_serving_model`
  gives what the export will serve with the weights of the moment (a check
  after each epoch). The processors hold no weights (TF-GNN requires trainable
  input transformations inside ``model_fn``).
  """
  from tensorflow_gnn.runner import orchestration  # pylint: disable=g-import-not-at-top
  # pylint: disable=protected-access  # the runner's own builders, as runner.run calls them
  preprocessing, _ = orchestration._make_preprocessing_model(
      gtspec, processors or (), tf.nest.map_structure(lambda t: t.preprocess, task))
  return runner.RunResult(
      preprocess_model=orchestration._make_parsing_preprocessing_model(gtspec, preprocessing),
      base_model=model.get_layer(orchestration._BASE_MODEL_TAG), trained_model=model)


def signature_function(model: tf.keras.Model, names: Any = None):
  """A ``tf.function`` on serialized examples returning ``model``'s outputs by name.

  ``names`` nests like the model's output (None: a model returning a flat dict,
  each output named by its key). The export's signatures are these functions.

  It is traced here, without AutoGraph where the model allows it
  (:func:`process.trace_unconverted`: converting took 75 s of the 101 s of the demo
  pipeline's GnnTrainer), else with AutoGraph.
  """
  names = own_names(model) if names is None else names

  def fn(examples):
    return dict(zip(tf.nest.flatten(names), tf.nest.flatten(model(examples)), strict=False))

  return process.trace(fn, [tf.TensorSpec([None], tf.string, name=SERVING_INPUT_NAME)],
                       "The serving signature")


def _export(root: tf.keras.Model, signatures: Mapping[str, tuple[tf.keras.Model, Any]],
            export_dir: str, functions: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
  """Saves ``root`` (without traces: loadable without TF-GNN) with the named signatures.

  Every model shares ``root``'s variables (they are built from the same layers);
  ``functions`` are signatures on other inputs, already traced. The signatures are
  given as their concrete functions: a ``tf.function`` would be traced again inside
  the save (its context is part of the trace's key).
  """
  traced = {**{name: signature_function(model, names)
               for name, (model, names) in signatures.items()}, **(functions or {})}
  root.save(export_dir, save_format="tf", include_optimizer=False, save_traces=False,
            signatures={name: function.get_concrete_function()
                        for name, function in traced.items()})
  return traced


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
               graph_spec: Optional[tfgnn.GraphTensorSpec] = None,
               served_graph: Optional[recommend.ServedById] = None):
    self._chief = chief
    self._served_graph = served_graph
    self._graph_spec = graph_spec
    self._graph_schema = graph_schema
    self._subgraph_parser = subgraph_parser
    self._single_task_name = single_task_name
    self._label_defaults = label_defaults
    self._raw_parser = raw_parser
    self._embeddings_tasks = embeddings_tasks
    self.training_model: Optional[tf.keras.Model] = None
    self.embeddings_model: Optional[tf.keras.Model] = None
    self.embeddings_signature: Any = None
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

  def embeddings_function(self, run_result: runner.RunResult):
    """The ``embeddings`` signature's function on ``run_result`` (None: no embeddings)."""
    _, embeddings = self._build(run_result)
    return None if embeddings is None else signature_function(embeddings)

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
      signatures = {SERVING_SIGNATURE: (training, names)}
    else:
      # serving_default / embeddings take raw examples; the training-format
      # models get the transformed_* signatures (the parity check's).
      root, root_embeddings = self._build(run_result, self._raw_parser)
      signatures = {SERVING_SIGNATURE: (root, names), TRANSFORMED_SIGNATURE: (training, names)}
      if training_embeddings is not None:
        signatures[embeddings_lib.TRANSFORMED_SIGNATURE] = (
            training_embeddings, own_names(training_embeddings))
    if root_embeddings is not None:
      signatures[embeddings_lib.SIGNATURE] = (root_embeddings, own_names(root_embeddings))
    whole = None
    if self._graph_spec is not None:
      whole = {"refused": whole_graph.refusal(self._graph_spec, self._embeddings_tasks,
                                              self._raw_parser is not None)}
      if not whole["refused"]:
        functions, whole = whole_graph.functions(run_result, self._graph_spec,
                                                 self._embeddings_tasks, names)
        for attribute, function in functions.items():
          # As concrete functions: a tf.function would be traced again inside the save.
          setattr(root, attribute, function.get_concrete_function())
    by_id, by_id_description = {}, None
    if self._served_graph is not None:
      root.served_by_id, by_id, by_id_description = self._served_graph.functions(
          run_result, reads_out_seeds=self._subgraph_parser is not None,
          serving_names=names, embeddings_tasks=self._embeddings_tasks,
          single_task=self._single_task_name is not None)
    traced = _export(root, signatures, export_dir, by_id)
    if whole is not None:
      whole_graph.write(os.path.join(export_dir, GRAPH_SCHEMA_ASSET_DIR), whole)
    if by_id_description is not None:
      node_serving.write(os.path.join(export_dir, GRAPH_SCHEMA_ASSET_DIR), by_id_description)
    if self._graph_schema is not None:
      graph_schema.write_artifact_schema(self._graph_schema,
                                         os.path.join(export_dir, GRAPH_SCHEMA_ASSET_DIR))
    self.training_model = training
    self.embeddings_model = training_embeddings
    self.embeddings_signature = traced.get(embeddings_lib.SIGNATURE if self._raw_parser is None
                                           else embeddings_lib.TRANSFORMED_SIGNATURE)
    self.output_names = names


def own_names(model: tf.keras.Model) -> dict[str, str]:
  """A model returning a flat dict: each output named by its key."""
  return {k: k for k in model.output}


class SubgraphReadoutParser(tf.keras.layers.Layer):
  """Serialized GraphSampler-format subgraphs -> one merged GraphTensor with the seed readout.

  What the export of a model trained on the whole graph or on merged batches
  serves: each subgraph's first node of ``seed_node_set`` is its seed, read out
  as in training.
  """

  def __init__(self, schema: tfgnn.GraphSchema, seed_node_set: str, **kwargs):
    super().__init__(**kwargs)
    self._schema = schema
    self._seed_node_set = seed_node_set
    self._parse = tfgnn.keras.layers.ParseExample(tfgnn.create_graph_spec_from_schema_pb(schema))

  def get_config(self):
    return dict(super().get_config(), schema=text_format.MessageToString(self._schema),
                seed_node_set=self._seed_node_set)

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["schema"] = tfgnn.parse_schema(config["schema"])
    return cls(**config)

  def call(self, serialized):
    graph = self._parse(serialized).merge_batch_to_components()
    return tfgnn.add_readout_from_first_node(
        graph, key=readout.SEED_KEY, node_set_name=self._seed_node_set,
        readout_node_set=readout.READOUT)
