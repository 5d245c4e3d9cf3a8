"""The export's whole-graph functions: the model over a whole graph, every node read out at once.

GraphInferrer's ``mode: "full_graph"`` runs the model on one GraphTensor of the whole
graph (each node sees its whole neighbourhood, as in full-batch training)
instead of a sampled subgraph per node. A SavedModel signature takes only
tensors, so the export carries this as two ``tf.function`` attributes of the
SavedModel that take the pieces of a one-component GraphTensor of the model's
graph as plain tensors (:func:`tensors_spec`: the export still loads without
TF-GNN), with TF-GNN's structured readout ``_readout/seed`` from the nodes to
read out:

* ``embed_graph``: the outputs of the ``embeddings`` signature for each
  readout node;
* ``serve_graph``: those of ``serving_default`` (only for models that were
  trained with the seed readout in their input, i.e. on the graph in memory:
  their heads read it).

``whole_graph.json``, beside the graph schema the export keeps (``assets.extra``),
says which functions there
are, the node set they read out, and otherwise why the model cannot run on the
whole graph (its tasks read the first node of a subgraph, link prediction, a
Transform graph, no embeddings).

Layer by layer (:func:`layer_functions`): where the model (``model_fn``'s) is a
chain of layers, each taking the one before's graph, the export also carries
one function per step, so that GraphInferrer can run the ``embeddings`` pass
one layer at a time over chunks of nodes, its memory bounded by a chunk's
edges rather than the graph's (``graph_prepare``: the training input's
preprocessing; ``graph_layer_<i>``: layer ``i``, returning its node states;
``graph_readout``: the embeddings read out of the last layer's graph).
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

from absl import logging
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import process
from gnn_trainer_component import tasks as tasks_lib
from gnn_trainer_component.graph import readout
from gnn_trainer_component.model import assets
from gnn_trainer_component.model import embeddings as embeddings_lib

#: The export's functions by the signature whose outputs they return.
FUNCTIONS = {embeddings_lib.SIGNATURE: "embed_graph", "serving_default": "serve_graph"}
#: Beside the export's graph schema: what the export holds (:func:`write`).
ASSET_FILE = "whole_graph.json"
#: Keys of a set's tensors in a whole-graph function's input (:func:`tensors_spec`).
SIZE, SOURCE, TARGET = "#size", "#source", "#target"
#: How a layer-wise step reads the graph: each node's own features only, or its
#: incident edges and their other ends too.
NODE_WISE, NEIGHBOURS = "nodes", "neighbours"


def _seed_node_set(spec: tfgnn.GraphTensorSpec, tasks: Mapping[str, Any]) -> Optional[str]:
  """The node set the seed readout reads: the training input's, else the tasks' own."""
  if readout.READOUT_SEED in spec.edge_sets_spec:
    return spec.edge_sets_spec[readout.READOUT_SEED].adjacency_spec.source_name
  names = {getattr(task, "_logits_node_set_name", None) for task in tasks.values()}
  return names.pop() if len(names) == 1 and None not in names else None


def refusal(spec: tfgnn.GraphTensorSpec, tasks: Optional[Mapping[str, Any]],
            transformed: bool) -> str:
  """Why a model cannot run on the whole graph ("" if it can)."""
  if tasks is None:
    return "it was exported without embeddings (custom_config export_embeddings false)"
  if transformed:
    return "it parses raw examples through a Transform graph"
  if readout.READOUT_SOURCE in spec.edge_sets_spec:
    return ("it scores pairs of nodes (link prediction); its embeddings need a pair per "
            "node, which the sampled mode reads")
  problems = tasks_lib.seed_readout_errors(tasks)
  if problems:
    return (f"{'; '.join(problems)}: on the whole graph every node is read by structured "
            f"readout (key {readout.SEED_KEY!r})")
  if _seed_node_set(spec, tasks) is None:
    return "its tasks do not say which node set they read"
  return ""


def _input_spec(spec: tfgnn.GraphTensorSpec, node_set: str) -> tfgnn.GraphTensorSpec:
  """``spec`` with the seed readout from ``node_set`` (kept if it has one), sizes relaxed."""
  spec = spec.relax(num_nodes=True, num_edges=True)
  if readout.READOUT_SEED in spec.edge_sets_spec:
    return spec
  return readout.seed_readout_spec(_zeros(spec), node_set)


def _zeros(spec: tfgnn.GraphTensorSpec) -> tfgnn.GraphTensor:
  """An empty GraphTensor of ``spec`` (to derive specs from)."""
  return _graph(tf.nest.map_structure(
      lambda s: tf.zeros([0 if d is None else d for d in s.shape], s.dtype),
      tensors_spec(spec)), spec)


def _pieces(graph: tfgnn.GraphTensor, keep_readout: bool, onto: tfgnn.GraphTensor = None
            ) -> tfgnn.GraphTensor:
  """``onto`` (or ``graph``) with ``graph``'s seed readout pieces kept or dropped."""
  base = onto if onto is not None else graph
  aux = (readout.READOUT, readout.READOUT_SEED)
  node_sets = {k: v for k, v in base.node_sets.items() if k not in aux}
  edge_sets = {k: v for k, v in base.edge_sets.items() if k not in aux}
  if keep_readout:
    node_sets[readout.READOUT] = graph.node_sets[readout.READOUT]
    edge_sets[readout.READOUT_SEED] = graph.edge_sets[readout.READOUT_SEED]
  return tfgnn.GraphTensor.from_pieces(context=base.context, node_sets=node_sets,
                                       edge_sets=edge_sets)


def tensors_spec(spec: tfgnn.GraphTensorSpec) -> dict[str, Any]:
  """The nested dict of TensorSpecs a whole-graph function takes for a graph of ``spec``.

  ``{"context": {feature: ...}, "nodes": {set: {SIZE: [1], feature: ...}},
  "edges": {set: {SIZE: [1], SOURCE: [None], TARGET: [None], feature: ...}}}``:
  plain tensors, so that the export still loads without TF-GNN.
  """
  def features(piece):
    return {name: tf.TensorSpec(s.shape, s.dtype) for name, s in piece.features_spec.items()}
  size = tf.TensorSpec([1], spec.indices_dtype)
  index = tf.TensorSpec([None], spec.indices_dtype)
  return {"context": features(spec.context_spec),
          "nodes": {name: {SIZE: size, **features(piece)}
                    for name, piece in spec.node_sets_spec.items()},
          "edges": {name: {SIZE: size, SOURCE: index, TARGET: index, **features(piece)}
                    for name, piece in spec.edge_sets_spec.items()}}


def _graph(tensors: Mapping[str, Any], spec: tfgnn.GraphTensorSpec) -> tfgnn.GraphTensor:
  """The one-component GraphTensor of ``spec`` that :func:`tensors_spec`'s ``tensors`` hold."""
  def features(fields):
    return {k: v for k, v in fields.items() if k not in (SIZE, SOURCE, TARGET)}
  edge_sets = {}
  for name, fields in tensors["edges"].items():
    adjacency = spec.edge_sets_spec[name].adjacency_spec
    edge_sets[name] = tfgnn.EdgeSet.from_fields(
        sizes=fields[SIZE], features=features(fields),
        adjacency=tfgnn.Adjacency.from_indices((adjacency.source_name, fields[SOURCE]),
                                               (adjacency.target_name, fields[TARGET])))
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(sizes=tf.ones([1], spec.indices_dtype),
                                        features=tensors["context"]),
      node_sets={name: tfgnn.NodeSet.from_fields(sizes=fields[SIZE], features=features(fields))
                 for name, fields in tensors["nodes"].items()},
      edge_sets=edge_sets)


def functions(run_result: Any, spec: tfgnn.GraphTensorSpec, tasks: Mapping[str, Any],
              serving_names: Any) -> tuple[dict[str, Any], dict[str, Any]]:
  """``({attribute: traced tf.function}, the asset's description)`` for the export.

  Args:
    run_result: From ``runner.run``.
    spec: The training input's spec (``runner.run``'s ``gtspec``).
    tasks: The module's tasks (with an embeddings rule each).
    serving_names: ``serving_default``'s output names, nested like the model's output.
  """
  node_set = _seed_node_set(spec, tasks)
  graph_spec = _input_spec(spec, node_set)
  trained_with_readout = readout.READOUT_SEED in spec.edge_sets_spec
  preprocessing = run_result.preprocess_model.layers[-1]
  single_task = len(tasks) == 1
  inputs = tensors_spec(graph_spec)

  def embed(tensors):
    graph = _graph(tensors, graph_spec)
    gnn_inputs, *_ = preprocessing(_pieces(graph, trained_with_readout))
    out = run_result.base_model(gnn_inputs)
    if not trained_with_readout:
      out = _pieces(graph, True, onto=out)
    return embeddings_lib.outputs(tasks, out, single_task=single_task)

  def serve(tensors):
    gnn_inputs, *_ = preprocessing(_graph(tensors, graph_spec))
    return dict(zip(tf.nest.flatten(serving_names),
                    tf.nest.flatten(run_result.trained_model(gnn_inputs)), strict=False))

  chosen = {embeddings_lib.SIGNATURE: embed}
  if trained_with_readout:
    chosen["serving_default"] = serve
  traced, start = {}, time.monotonic()
  for signature, fn in chosen.items():
    what = f"The whole-graph function of {signature!r}"
    traced[FUNCTIONS[signature]] = process.trace(fn, [inputs], what)
  layered, layers = layer_functions(run_result, graph_spec, tasks, node_set,
                                    trained_with_readout)
  traced.update(layered)
  logging.info("GnnTrainer export: whole-graph functions %s traced in %.1f s", sorted(traced),
               time.monotonic() - start)
  return traced, {"node_set": node_set, "functions": {s: FUNCTIONS[s] for s in chosen},
                  "layers": layers}


def chain(model: Any) -> Optional[list[Any]]:
  """``model``'s layers in order if each takes exactly the one before's output, else None.

  A Sequential is a chain; a layer that is itself a chain model (the runner
  wraps ``model_fn``'s model in a Sequential) is replaced by its layers.
  """
  if isinstance(model, tf.keras.Sequential):
    layers = model.layers
  else:
    layers = [layer for layer in getattr(model, "layers", [])
              if not isinstance(layer, tf.keras.layers.InputLayer)]
    previous, own = None, getattr(model, "_network_nodes", set())  # pylint: disable=protected-access
    for layer in layers:
      # The calls of the layer within this model (a Keras node key: "<layer>_ib-<index>").
      nodes = [n for i, n in enumerate(getattr(layer, "_inbound_nodes", []))
               if f"{layer.name}_ib-{i}" in own]
      inbound = tf.nest.flatten(nodes[0].inbound_layers) if len(nodes) == 1 else None
      if inbound is None or len(inbound) != 1 or (
          inbound[0] is not previous if previous is not None
          else not isinstance(inbound[0], tf.keras.layers.InputLayer)):
        return None
      previous = layer
    if getattr(model, "_output_layers", [previous]) != [previous]:
      return None
  out = []
  for layer in layers:
    inner = chain(layer) if isinstance(layer, tf.keras.Model) else None
    out.extend(inner or [layer])
  return out or None


def _node_wise(layer: Any) -> bool:
  """Whether a built ``layer`` maps each node's own features only (a MapFeatures of nodes)."""
  # pylint: disable=protected-access
  return isinstance(layer, tfgnn.keras.layers.MapFeatures) and layer._context_model is None and (
      not any((layer._edge_set_models or {}).values()))


def _tensors(graph: tfgnn.GraphTensor) -> dict[str, Any]:
  """The plain tensors of a one-component ``graph`` (:func:`_graph`'s inverse)."""
  return {"context": dict(graph.context.features),
          "nodes": {name: {SIZE: piece.sizes, **piece.features}
                    for name, piece in graph.node_sets.items()},
          "edges": {name: {SIZE: piece.sizes, SOURCE: piece.adjacency.source,
                           TARGET: piece.adjacency.target, **piece.features}
                    for name, piece in graph.edge_sets.items()}}


def _step(layer: Any, spec: tfgnn.GraphTensorSpec, after: dict[str, Any], name: str) -> Any:
  """A layer-wise step: the graph's tensors before ``layer`` -> its node features after.

  Tracing it records the spec of the graph after the layer as ``after[name]``.
  """
  def step(tensors):
    out = layer(_graph(tensors, spec))
    after[name] = out.spec.relax(num_nodes=True, num_edges=True)
    return {"nodes": {set_name: dict(piece.features) for set_name, piece in out.node_sets.items()}}
  return step


def layer_functions(run_result: Any, graph_spec: tfgnn.GraphTensorSpec,
                    tasks: Mapping[str, Any], node_set: str, trained_with_readout: bool
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
  """The ``embeddings`` pass step by step: ``({attribute: tf.function}, description)``.

  The description is ``{"prepare": ..., "steps": [[attribute, NODE_WISE or
  NEIGHBOURS], ...], "readout": ...}``, or ``{"refused": why}`` when the model
  is not a chain of layers. A step's function takes the graph before its layer
  (:func:`tensors_spec` of it) and returns ``{"nodes": {set: features}}`` after
  it; edge and context features are those ``graph_prepare`` returns.
  """
  layers = chain(run_result.base_model)
  if layers is None:
    return {}, {"refused": "its model_fn's model is not a chain of layers, each taking the "
                           "graph the one before returns"}
  preprocessing = run_result.preprocess_model.layers[-1]
  after = {}  # the spec of the graph each traced function ends with, recorded as it is traced

  def prepare(tensors):
    # The runner's preprocessing returns (base GNN inputs, labels): the first input is the graph.
    inputs, *_ = preprocessing(_pieces(_graph(tensors, graph_spec), trained_with_readout))
    graph = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
    after["prepare"] = graph.spec.relax(num_nodes=True, num_edges=True)
    return _tensors(graph)

  traced = {"graph_prepare": process.trace(prepare, [tensors_spec(graph_spec)],
                                           "The whole-graph preparation")}
  spec, steps = after["prepare"], []
  for i, layer in enumerate(layers):
    name = f"graph_layer_{i}"
    traced[name] = process.trace(_step(layer, spec, after, name), [tensors_spec(spec)],
                                 f"The whole-graph layer {i}")
    steps.append([name, NODE_WISE if _node_wise(layer) else NEIGHBOURS])
    spec = after[name]
  final = spec if trained_with_readout else readout.seed_readout_spec(_zeros(spec), node_set)

  def read_out(tensors):
    return embeddings_lib.outputs(tasks, _graph(tensors, final), single_task=len(tasks) == 1)

  traced["graph_readout"] = process.trace(read_out, [tensors_spec(final)],
                                          "The whole-graph readout")
  return traced, {"prepare": "graph_prepare", "steps": steps, "readout": "graph_readout"}


def input_spec(function: Any) -> dict[str, Any]:
  """The nested dict of TensorSpecs a whole-graph function takes (of a loaded export or traced).

  A loaded export holds a concrete function (a ``tf.function`` in exports made before
  GnnTrainer saved them as concrete functions); a traced one is a ``tf.function``.
  """
  if hasattr(function, "structured_input_signature"):
    concrete = function
  elif hasattr(function, "concrete_functions"):
    concrete = function.concrete_functions[0]
  else:
    concrete = function.get_concrete_function()
  args, _ = concrete.structured_input_signature
  return args[0]


def write(folder: str, description: Mapping[str, Any]) -> None:
  """Writes the asset that GraphInferrer reads (:func:`read`) into the export's ``folder``."""
  assets.write_json(folder, ASSET_FILE, description)
  if description.get("refused"):
    logging.info("GnnTrainer: the export cannot run on the whole graph: %s.",
                 description["refused"])


def read(folder: str) -> Optional[dict[str, Any]]:
  """The asset :func:`write` wrote into ``folder`` (None: the export predates it)."""
  return assets.read_json(folder, ASSET_FILE)
