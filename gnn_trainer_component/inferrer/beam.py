"""GraphInferrer's Beam engine: GraphSampler's Beam sampling around every node, then the model.

For graphs beyond one machine: the node and edge tables are read and sampled
exactly as GraphSampler does (the Beam samplers' own engine, every node as of
``as_of`` with a time-aware plan), every node of the node set (or of the
``nodes`` table) a seed; the subgraphs are batched and run through the export's
signatures on the workers (each loads the SavedModel once), and the rows are
written as one Parquet file with the in-memory engine's columns. Rows come in no
particular order: the ``id`` column keys them.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, Sequence

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import tensorflow as tf
import tensorflow_gnn as tfgnn

from gnn_trainer_component.beam import errors as beam_errors
from gnn_trainer_component.beam import sampling as beam_sampling
from gnn_trainer_component.beam import subgraphs
from gnn_trainer_component.graph import readout
from gnn_trainer_component.graph import sampling
from gnn_trainer_component.graph import tables
from gnn_trainer_component.inferrer import config as config_lib
from gnn_trainer_component.inferrer import signatures as signatures_lib
from gnn_trainer_component.model import embeddings_table as table
from gnn_trainer_component.model import loading

WHO = signatures_lib.WHO


class _RunSignatures(beam.DoFn):
  """Batches of ``(node id, serialized subgraph)`` -> table rows."""

  def __init__(self, model_dir: str, columns: Mapping[tuple[str, str], str],
               as_end: Optional[readout.NodeAsEnd]):
    super().__init__()
    self._model_dir = model_dir
    self._columns = dict(columns)
    self._as_end = as_end
    self._signatures: Optional[loading.Signatures] = None
    self._nodes = beam.metrics.Metrics.counter(signatures_lib.WHO, "nodes")

  def setup(self):
    loaded = tf.saved_model.load(self._model_dir)
    self._signatures = loading.Signatures(
        {name: loaded.signatures[name] for name, _ in self._columns}, self._columns, WHO,
        self._as_end)
    self._loaded = loaded  # keeps the functions' variables alive

  def process(self, batch: Sequence[tuple[bytes, tf.train.Example]]):
    ids, examples = [], []
    for node_id, example in batch:
      if self._as_end is not None:
        readout.add_node_readout(example, self._as_end)
      ids.append(node_id)
      examples.append(example.SerializeToString())
    outputs = self._signatures.run(tf.constant(examples), f"of {self._model_dir} ")
    self._nodes.inc(len(ids))
    for i, node_id in enumerate(ids):
      row = {table.ID_COLUMN: node_id}
      row.update({column: table.cell(values, i) for column, values in outputs.items()})
      yield row


def arrow_schema(signatures: loading.Signatures, id_kind: pa.DataType) -> pa.Schema:
  """The table's schema: ``id`` and each output's :func:`table.column_type`."""
  fields = [pa.field(table.ID_COLUMN, id_kind)]
  for (name, key), column in sorted(signatures.columns.items(), key=lambda kv: kv[1]):
    if column:
      shape = signatures.functions[name].structured_outputs[key].shape.as_list()
      fields.append(pa.field(column, table.column_type(shape)))
  return pa.schema(fields)


def build_inference_pipeline(root: beam.Pipeline, *, schema: tfgnn.GraphSchema, data_dir: str,
                             plan: sampling.SamplingPlan, nodes_table: str, model_dir: str,
                             signatures: loading.Signatures, path: str,
                             batch_size: int, as_of: Optional[float] = None) -> None:
  """Adds sampling, inference and the Parquet write to the Beam pipeline ``root``.

  Args:
    root: The Beam pipeline.
    schema: The graph schema (tables named in ``metadata.filename``).
    data_dir: Folder the table names are relative to.
    plan: The sampling plan; its seed node set is the node set inferred (any
      strategy; a time-aware one as of ``as_of``), sampled as GraphSampler does.
    nodes_table: The node table whose ids are the seeds (the node set's own
      table for every node).
    model_dir: The exported SavedModel.
    signatures: From :func:`loading.load_signatures` (its functions give
      the output widths; the workers load the model themselves).
    path: The Parquet file.
    batch_size: Subgraphs per model call.
    as_of: A time-aware plan: the time every node is embedded as of.
  """
  ids = subgraphs.read_node_ids(root, data_dir, nodes_table, "nodes", WHO)
  seed_time = 0.0 if as_of is None else float(as_of)
  examples = subgraphs.own_examples(
      root, schema=schema, data_dir=data_dir, plan=plan,
      roots=ids | "Seeds" >> beam.Map(lambda node_id: (node_id, (node_id, seed_time))),
      broadcast=beam_sampling.should_broadcast(schema, data_dir, schema.node_sets, WHO),
      who=WHO)
  _ = (examples
       | "Batch" >> beam.BatchElements(min_batch_size=min(batch_size, 32),
                                       max_batch_size=batch_size)
       | "Infer" >> beam.ParDo(_RunSignatures(model_dir, signatures.columns, signatures.as_end))
       | "Ids" >> beam.Map(_decoded_id)
       | "Write" >> beam.io.WriteToParquet(path, arrow_schema(signatures, pa.string()),
                                           num_shards=1, shard_name_template=""))


def _decoded_id(row: dict[str, Any]) -> dict[str, Any]:
  node_id = row[table.ID_COLUMN]
  try:
    row[table.ID_COLUMN] = node_id.decode("utf-8") if isinstance(node_id, bytes) else str(node_id)
  except UnicodeDecodeError as e:
    raise signatures_lib.InferenceInputError(
        f"{signatures_lib.WHO}: node id {node_id!r} is not UTF-8; the Beam engine writes ids as "
        "strings (the in-memory engine writes binary ids).") from e
  return row


def node_table(schema: tfgnn.GraphSchema, node_set: str, nodes: Optional[str]) -> str:
  """The table whose ids are the seeds: ``nodes``, or the node set's own table."""
  return nodes or schema.node_sets[node_set].metadata.filename


def infer(make_pipeline: Callable[[], beam.Pipeline], beam_pipeline_args: Sequence[str],
          schema_dir: str, model_dir: str, path: str, *, cfg: config_lib.InferenceConfig,
          sampling_spec: Optional[str] = None,
          sampling_config: Optional[Mapping[str, Any]] = None,
          nodes: Optional[str] = None) -> signatures_lib.Result:
  """As :func:`gnn_trainer_component.inferrer.in_memory.infer`, sampling on Beam.

  The sampler runs on the pipeline ``make_pipeline()``. The tables and the
  ``nodes`` table are validated before any Beam work, as GraphSampler validates
  them.
  """
  start = time.monotonic()
  schema, plan, signatures = signatures_lib.prepare(schema_dir, model_dir, cfg, sampling_spec,
                                               sampling_config)
  signatures_lib.check_as_of(plan, cfg)
  node_set = plan.seed_node_set
  seeds_table = node_table(schema, node_set, nodes)
  tables.check_graph(schema, schema_dir, node_set, {"nodes": seeds_table}, signatures_lib.WHO)
  pipeline = make_pipeline()
  build_inference_pipeline(pipeline, schema=schema, data_dir=schema_dir, plan=plan,
                           nodes_table=seeds_table, model_dir=model_dir, signatures=signatures,
                           path=path, batch_size=cfg.batch_size, as_of=cfg.as_of)
  beam_errors.run_pipeline(pipeline, beam_pipeline_args, signatures_lib.WHO)
  metadata = pq.ParquetFile(path)
  return signatures_lib.Result(node_set=node_set, rows=metadata.metadata.num_rows,
                          columns=list(metadata.schema_arrow.names),
                          seconds=time.monotonic() - start)
