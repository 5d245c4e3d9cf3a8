"""Serving by node id: the export samples each requested node's subgraph itself.

With ``custom_config["serve_by_node_id"]`` (the graph in memory, node tasks),
GnnTrainer's export holds a snapshot of the graph and the training's sampling
plan (:mod:`served_sampler`) and gets three more signatures:

* ``serve_node_ids``: input ``node_ids`` (``[batch]``, int64 or string as the
  node table's ids); every edge counts (no time bound), sampling seed 0, so the
  same id gets the same answer;
* ``serve_node_ids_as_of``: inputs ``node_ids``, ``as_of`` (float64
  ``[batch]``: time-aware hops sample only edges before it) and ``seed``
  (int64 ``[batch]``: each row's sampling seed);
* ``serve_new_nodes``: nodes the snapshot lacks, each given by its features
  (``feature_<name>``) and its out-edges to known nodes (``edges_<edge set>``, ids
  padded with ``""`` or -1), sampled around as if the tables held them
  (:class:`served_sampler.NewNodes`).

Each returns ``serving_default``'s outputs and, where the export has them,
``embeddings``' (same names), one row per id, computed on the subgraph that
GraphInferrer's in-memory engine would sample for the node, plus ``status``
(int32): :data:`SERVED`, :data:`UNKNOWN_ID` for an id that is not in the
snapshot, :data:`UNKNOWN_NEIGHBOUR` for a new node with an edge to one (their
outputs are zeros; the other rows are answered). The functions are
plain TensorFlow: a fresh process loads and serves them without TF-GNN.

``node_serving.json`` beside the graph schema (``assets.extra``) describes them:
the node set, the id dtype, the signatures, the plan, the snapshot's size.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Optional

import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component import process
from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph.errors import GraphInputError
from gnn_trainer_component.model import assets
from gnn_trainer_component.model import embeddings as embeddings_lib
from gnn_trainer_component.model import served_sampler

#: The signatures, and their input names.
SIGNATURE, SIGNATURE_AS_OF = "serve_node_ids", "serve_node_ids_as_of"
NODE_IDS, AS_OF, SEED = "node_ids", "as_of", "seed"
#: The per-row status output, and its values.
STATUS = "status"
#: SERVED: answered; UNKNOWN_ID: the id is not in the snapshot; BAD_K: ``recommend``'s ``k``
#: out of range; UNKNOWN_NEIGHBOUR: a new node's edge goes to a node not in the snapshot.
SERVED, UNKNOWN_ID, BAD_K, UNKNOWN_NEIGHBOUR = 0, 1, 2, 3
#: The signature on nodes a request adds, and its input names' prefixes.
SIGNATURE_NEW = "serve_new_nodes"
FEATURE_INPUT, EDGES_INPUT = "feature_", "edges_"
#: The name of the one plan of a node model in its :class:`served_sampler.ServedSampler`.
NODES = "nodes"
#: Beside the export's graph schema: what the signatures serve (:func:`write`).
ASSET_FILE = "node_serving.json"


@dataclasses.dataclass(frozen=True)
class ServedGraph:
  """What an export needs to serve node ids: the graph, its schema and the training's plan.

  Attributes:
    snapshot: The graph's arrays (built by the in-memory engine).
    plan: The sampling plan training sampled with.
    schema: The schema of the sampled subgraphs (what ``serving_default`` parses).
  """
  snapshot: served_sampler.Snapshot
  plan: sampling.SamplingPlan
  schema: tfgnn.GraphSchema

  def check(self, who: str, budget_bytes: int) -> None:
    """Refuses what cannot be served by node id, before training (GraphInputError).

    A plan the served sampler does not run, a schema with context features (a
    request holds node ids only), a snapshot above ``budget_bytes``.
    """
    served_sampler.check_plan(self.plan, who)
    if self.schema.context.features:
      raise GraphInputError(
          f"{who}: serve_by_node_id answers node ids; the graph schema has context features "
          f"{sorted(self.schema.context.features)}, which a request by id cannot hold.")
    check_budget(self.snapshot, who, budget_bytes)

  def functions(self, run_result: Any, **kwargs: Any
                ) -> tuple[served_sampler.ServedSampler, dict[str, Any], dict]:
    """:func:`functions` of this graph (``kwargs``: its keyword arguments)."""
    return functions(run_result, self, **kwargs)


def check_budget(snapshot: served_sampler.Snapshot, who: str, budget_bytes: int) -> None:
  """Refuses a snapshot above ``budget_bytes`` (GraphInputError naming both sizes)."""
  size = snapshot.nbytes
  if size > budget_bytes:
    raise GraphInputError(
        f"{who}: serve_by_node_id puts the graph into the export: {size / 2**20:.0f} MiB of "
        f"arrays, above the budget of {budget_bytes / 2**20:.0f} MiB (custom_config "
        "'serve_by_node_id_budget_mb'). Raise the budget, or serve with GraphInferrer.")


@dataclasses.dataclass(frozen=True)
class PairEnds:
  """How a link model reads each served subgraph's seed: as one end of a pair.

  The readout of :class:`~gnn_trainer_component.graph.readout.NodeAsEnd`:
  ``_readout/source`` and ``_readout/target`` into one ``_readout`` node per
  subgraph, from the seed (node 0 of ``seed_node_set``) and from the other end:
  the seed itself within one node set, else a node without features or edges
  appended to ``other_node_set`` (it adds no message).

  Attributes:
    end: ``"source"`` or ``"target"``: which end the seed is.
    seed_node_set: The seed's node set.
    other_node_set: The other end's node set; None: the seed's own.
  """
  end: str
  seed_node_set: str
  other_node_set: Optional[str] = None


def _shaped(values: tf.Tensor, feature_spec: tf.TensorSpec) -> tf.Tensor:
  values.set_shape([None] + feature_spec.shape[1:].as_list())
  return values


def _gather(table: tf.Tensor, nodes: tf.Tensor, new: Optional[tf.Tensor]) -> tf.Tensor:
  """``table``'s rows at ``nodes``; node ``len(table) + i`` is row ``i`` of ``new``."""
  if new is None:
    return tf.gather(table, nodes)
  size = tf.shape(table, out_type=tf.int64)[0]
  # A row of zeros to gather from when none is new (a request of no rows).
  new = tf.concat([new, tf.zeros(tf.concat([[1], tf.shape(new)[1:]], 0), new.dtype)], 0)
  old = nodes < size
  return tf.where(
      tf.reshape(old, tf.concat([tf.shape(old), tf.ones([new.shape.rank - 1], tf.int32)], 0)),
      tf.gather(table, tf.minimum(nodes, size - 1)),
      tf.gather(new, tf.maximum(nodes - size, 0)))


def _node_set(graph: served_sampler.ServedSampler, name: str, sizes: tf.Tensor,
              nodes: tf.Tensor, node_spec: Any, appended: bool,
              new: Optional[Mapping[str, tf.Tensor]] = None) -> tuple[dict, tf.Tensor]:
  """A node set's features and sizes; ``appended``: one node of zeros after each subgraph's.

  ``new``: the features of the nodes a request adds to the node set.
  """
  features = {f: _gather(graph.node_features[name][f], nodes, None if new is None else new[f])
              for f in node_spec.features_spec}
  if appended:
    graphs = tf.repeat(tf.range(tf.size(sizes, out_type=tf.int64)), sizes)
    # Node i of subgraph g moves down by g: the appended nodes of the subgraphs before it.
    rows = (tf.range(tf.size(nodes, out_type=tf.int64)) + graphs)[:, tf.newaxis]
    total = tf.reshape(tf.size(nodes, out_type=tf.int64) + tf.size(sizes, out_type=tf.int64), [1])
    features = {f: tf.scatter_nd(rows, v, tf.concat([total, tf.shape(v, tf.int64)[1:]], 0))
                for f, v in features.items()}
    sizes = sizes + 1
  return {f: _shaped(v, node_spec.features_spec[f]) for f, v in features.items()}, sizes


def graph_tensor(graph: served_sampler.ServedSampler, sampled: served_sampler.Sampled,
                 spec: tfgnn.GraphTensorSpec, num_graphs: tf.Tensor,
                 pair: Optional[PairEnds] = None,
                 new_features: Optional[Mapping[str, Mapping[str, tf.Tensor]]] = None
                 ) -> tfgnn.GraphTensor:
  """The subgraphs as the served examples parse and merge: one component per row.

  ``pair``: read each seed as one end of a pair (a link model), else no readout.
  ``new_features``: node set -> feature -> values of the nodes a request adds.
  """
  dtype = spec.indices_dtype
  node_sets, offsets, own_sizes = {}, {}, {}
  for name, (sizes, nodes) in sampled.nodes.items():
    own_sizes[name] = sizes
    features, sizes = _node_set(graph, name, sizes, nodes, spec.node_sets_spec[name],
                                appended=pair is not None and name == pair.other_node_set,
                                new=(new_features or {}).get(name))
    offsets[name] = tf.cumsum(sizes, exclusive=True)
    node_sets[name] = tfgnn.NodeSet.from_fields(sizes=tf.cast(sizes, dtype), features=features)
  edge_sets = {}
  for name, (sizes, src, tgt, positions) in sampled.edges.items():
    edge_spec = spec.edge_sets_spec[name]
    ends = edge_spec.adjacency_spec
    source = tf.cast(src + tf.repeat(offsets[ends.source_name], sizes), dtype)
    target = tf.cast(tgt + tf.repeat(offsets[ends.target_name], sizes), dtype)
    edge_sets[name] = tfgnn.EdgeSet.from_fields(
        sizes=tf.cast(sizes, dtype),
        adjacency=tfgnn.Adjacency.from_indices((ends.source_name, source),
                                               (ends.target_name, target)),
        features={f: _shaped(tf.gather(graph.edge_features[name][f], positions), s)
                  for f, s in edge_spec.features_spec.items()})
  if pair is not None:
    _add_pair_readout(node_sets, edge_sets, offsets, own_sizes, pair, spec, num_graphs)
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(sizes=tf.ones([num_graphs], dtype)),
      node_sets=node_sets, edge_sets=edge_sets)


def _add_pair_readout(node_sets: dict, edge_sets: dict, offsets: Mapping[str, tf.Tensor],
                      own_sizes: Mapping[str, tf.Tensor], pair: PairEnds,
                      spec: tfgnn.GraphTensorSpec, num_graphs: tf.Tensor) -> None:
  """The ``_readout`` node of each subgraph and its two edges (:class:`PairEnds`)."""
  dtype = spec.indices_dtype
  ones = tf.ones([num_graphs], dtype)
  readout_spec = spec.node_sets_spec[readout.READOUT]
  node_sets[readout.READOUT] = tfgnn.NodeSet.from_fields(sizes=ones, features={
      f: tf.zeros(tf.concat([tf.reshape(num_graphs, [1]), s.shape[1:]], 0), s.dtype)
      for f, s in readout_spec.features_spec.items()})  # the label: no answer given
  seed = offsets[pair.seed_node_set]
  other = (seed if pair.other_node_set is None
           else offsets[pair.other_node_set] + own_sizes[pair.other_node_set])
  ends = {"source": seed, "target": other} if pair.end == "source" else {
      "source": other, "target": seed}
  for key, name in (("source", readout.READOUT_SOURCE), ("target", readout.READOUT_TARGET)):
    node_set = spec.edge_sets_spec[name].adjacency_spec.source_name
    edge_sets[name] = tfgnn.EdgeSet.from_fields(
        sizes=ones, adjacency=tfgnn.Adjacency.from_indices(
            (node_set, tf.cast(ends[key], dtype)),
            (readout.READOUT, tf.range(tf.cast(num_graphs, dtype)))))


def padded(values: tf.Tensor, pad: tf.Tensor, value: Any) -> tf.Tensor:
  """``values`` and ``pad`` (a ``[1]`` count) more ``value``: a request's one stand-in row."""
  return tf.concat([values, tf.fill(pad, tf.constant(value, values.dtype))], 0)


def stand_in(rows: tf.Tensor) -> tf.Tensor:
  """``[1]``: how many stand-in rows keep the model's batch non-empty (1 when ``rows`` is)."""
  return tf.reshape(1 - tf.minimum(tf.size(rows, out_type=tf.int64), 1), [1])


def describe_ops(plan: sampling.SamplingPlan) -> list[dict[str, Any]]:
  """The plan's ops as the asset describes them."""
  return [{"name": op.name, "edge_set": op.edge_set, "fanout": op.size,
           "strategy": op.strategy} for op in plan.ops]


def scatter_rows(values: tf.Tensor, rows: tf.Tensor, num_rows: tf.Tensor) -> tf.Tensor:
  """``values`` of the served rows at their ``rows`` of the request, zeros elsewhere."""
  shape = tf.concat([tf.reshape(num_rows, [1]), tf.shape(values, out_type=tf.int64)[1:]], 0)
  return tf.scatter_nd(rows[:, tf.newaxis], values, shape)


def functions(run_result: Any, served: ServedGraph, *, reads_out_seeds: bool,
              serving_names: Any, embeddings_tasks: Optional[Mapping[str, Any]],
              single_task: bool) -> tuple[served_sampler.ServedSampler, dict[str, Any], dict]:
  """``(the graph module, {signature: concrete function}, the asset's description)``.

  Args:
    run_result: From ``runner.run``.
    served: The graph and plan.
    reads_out_seeds: The model reads each subgraph's seed by structured
      readout (trained on merged batches or the whole graph); else its tasks
      read the first node of each subgraph.
    serving_names: ``serving_default``'s output names, nested like the model's output.
    embeddings_tasks: The tasks whose embeddings are returned too (None: none).
    single_task: Name the embeddings without a task prefix.
  """
  plan, schema = served.plan, served.schema
  graph = served_sampler.ServedSampler(served.snapshot, {NODES: plan}, schema)
  spec = tfgnn.create_graph_spec_from_schema_pb(schema)
  preprocessing = run_result.preprocess_model.layers[-1]
  id_dtype = graph.ids[plan.seed_node_set].key_dtype

  def model_outputs(roots, seeds, bounds, new=None, new_features=None):
    num_graphs = tf.size(roots, out_type=tf.int64)
    inputs = graph_tensor(graph, graph.sample(NODES, roots, seeds, bounds, new), spec,
                          num_graphs, new_features=new_features)
    if reads_out_seeds:
      inputs = tfgnn.add_readout_from_first_node(
          inputs, key=readout.SEED_KEY, node_set_name=plan.seed_node_set,
          readout_node_set=readout.READOUT)
    gnn_inputs, *_ = preprocessing(inputs)
    result = dict(zip(tf.nest.flatten(serving_names),
                      tf.nest.flatten(run_result.trained_model(gnn_inputs)), strict=False))
    embedded = {} if embeddings_tasks is None else embeddings_lib.outputs(
        embeddings_tasks, run_result.base_model(gnn_inputs), single_task=single_task)
    clash = sorted((set(embedded) | {STATUS}) & set(result) | set(embedded) & {STATUS})
    if clash:
      raise GraphInputError(
          f"GnnTrainer: serve_by_node_id returns serving_default's outputs {sorted(result)}, "
          f"the embeddings {sorted(embedded)} and {STATUS!r}, each under its own name; "
          f"{clash} would be two. Rename the output with custom_config 'serving_output_name'.")
    return {**result, **embedded}

  def serve(node_ids, as_of, seed):
    index = graph.lookup(plan.seed_node_set, node_ids)
    rows = tf.where(index != served_sampler.UNKNOWN)[:, 0]
    # At least one subgraph through the model: node 0 when no row is known (or none asked).
    pad = stand_in(rows)
    result = model_outputs(padded(tf.gather(index, rows), pad, 0),
                           padded(tf.gather(seed, rows), pad, 0),
                           padded(tf.gather(as_of, rows), pad, 0.0))
    num_rows = tf.size(node_ids, out_type=tf.int64)
    out = {name: scatter_rows(value[:tf.size(rows)], rows, num_rows)
           for name, value in result.items()}
    out[STATUS] = tf.where(index != served_sampler.UNKNOWN, SERVED, UNKNOWN_ID)
    return out

  ids_spec = tf.TensorSpec([None], id_dtype, name=NODE_IDS)
  serve_as_of = process.trace(
      serve, [ids_spec, tf.TensorSpec([None], tf.float64, name=AS_OF),
              tf.TensorSpec([None], tf.int64, name=SEED)], f"The {SIGNATURE_AS_OF} signature")

  def serve_ids(node_ids):  # calls the traced serve_as_of: the model is traced once for both
    rows = tf.shape(node_ids, out_type=tf.int64)
    return serve_as_of(node_ids, tf.fill(rows, tf.constant(float("inf"), tf.float64)),
                       tf.zeros(rows, tf.int64))

  new_nodes = _new_nodes_function(graph, plan, schema, spec, model_outputs)
  traced = {SIGNATURE: process.trace(serve_ids, [ids_spec], f"The {SIGNATURE} signature"),
            SIGNATURE_AS_OF: serve_as_of, **new_nodes}
  description = {
      "node_set": plan.seed_node_set, "id_dtype": id_dtype.name,
      "signatures": sorted(traced), "time_aware": plan.timed,
      "ops": describe_ops(plan),
      "snapshot_bytes": served.snapshot.nbytes}
  return graph, traced, description


def input_name(prefix: str, name: str) -> str:
  """A signature input's name: ``prefix`` then ``name``, any character not in [A-Za-z0-9_] as _."""
  return prefix + re.sub(r"[^A-Za-z0-9_]", "_", name)


def new_node_edge_sets(plan: sampling.SamplingPlan, schema: tfgnn.GraphSchema) -> list[str]:
  """The edge sets a new node's request gives edges in: sampled from the seeds, no features."""
  return sorted({op.edge_set for op in plan.ops if plan.seed_op in op.inputs
                 and not schema.edge_sets[op.edge_set].features})


def _new_edges(graph: served_sampler.ServedSampler, target_set: str, ids: tf.Tensor,
               missing: Any) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """``(indptr, targets, unknown per row)`` of a ``[rows, width]`` id matrix.

  The matrix is padded with ``missing``; an unknown id is dropped and marks its row.
  """
  rows = tf.shape(ids, out_type=tf.int64)[0]
  present = ids != missing
  of_row = tf.repeat(tf.range(rows), tf.reduce_sum(tf.cast(present, tf.int64), 1))
  index = graph.lookup(target_set, tf.boolean_mask(ids, present))
  known = index != served_sampler.UNKNOWN
  counts = tf.math.unsorted_segment_sum(tf.cast(known, tf.int64), of_row, rows)
  unknown = tf.math.unsorted_segment_max(tf.cast(~known, tf.int32), of_row, rows) > 0
  return (tf.concat([tf.zeros([1], tf.int64), tf.cumsum(counts)], 0),
          tf.boolean_mask(index, known), unknown)


def _new_nodes_function(graph: served_sampler.ServedSampler, plan: sampling.SamplingPlan,
                        schema: tfgnn.GraphSchema, spec: tfgnn.GraphTensorSpec,
                        model_outputs: Any) -> dict[str, Any]:
  """``{SIGNATURE_NEW: traced}``: the model on nodes described by the request alone."""
  seed_set = plan.seed_node_set
  features = spec.node_sets_spec[seed_set].features_spec
  edge_sets = new_node_edge_sets(plan, schema)
  if not features and not edge_sets:
    return {}  # nothing a request could say of a new node
  id_dtype = graph.ids[seed_set].key_dtype
  missing = "" if id_dtype == tf.string else -1
  size = graph.num_nodes(seed_set)

  def serve_new(inputs):
    first = next(iter(inputs.values()))
    rows = tf.shape(first, out_type=tf.int64)[0]
    bad, edges = tf.zeros([rows], tf.bool), {}
    for name in edge_sets:
      indptr, targets, unknown = _new_edges(graph, schema.edge_sets[name].target,
                                            inputs[input_name(EDGES_INPUT, name)], missing)
      edges[name], bad = (indptr, targets), bad | unknown
    new = served_sampler.NewNodes(count=rows, edges=edges)
    roots = size + tf.range(rows)
    pad = stand_in(roots)
    result = model_outputs(
        padded(roots, pad, 0), tf.zeros([rows + pad[0]], tf.int64),
        tf.fill([rows + pad[0]], tf.constant(float("inf"), tf.float64)), new,
        {seed_set: {f: inputs[input_name(FEATURE_INPUT, f)] for f in features}})
    out = {name: tf.where(tf.reshape(bad, [-1] + [1] * (value.shape.rank - 1)),
                          tf.zeros_like(value[:rows]), value[:rows])
           for name, value in result.items()}
    out[STATUS] = tf.where(bad, UNKNOWN_NEIGHBOUR, SERVED)
    return out

  signature = {
      **{input_name(FEATURE_INPUT, f): tf.TensorSpec([None] + s.shape[1:].as_list(), s.dtype,
                                                     name=input_name(FEATURE_INPUT, f))
         for f, s in features.items()},
      **{input_name(EDGES_INPUT, e): tf.TensorSpec([None, None], id_dtype,
                                                   name=input_name(EDGES_INPUT, e))
         for e in edge_sets}}
  return {SIGNATURE_NEW: process.trace(serve_new, [signature],
                                       f"The {SIGNATURE_NEW} signature")}


def write(folder: str, description: Mapping[str, Any]) -> None:
  """Writes :data:`ASSET_FILE` into the export's ``folder`` (its ``assets.extra``)."""
  assets.write_json(folder, ASSET_FILE, description)


def read(folder: str) -> Optional[dict[str, Any]]:
  """The description :func:`write` wrote (None: the export does not serve node ids)."""
  return assets.read_json(folder, ASSET_FILE)
