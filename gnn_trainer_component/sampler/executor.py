"""GraphSampler executor: TF-GNN's Beam sampler inside a TFX BaseBeamExecutor.

It reuses the building blocks of ``tensorflow_gnn.experimental.sampler.beam``
(``sampler.get_sampling_model``, ``sampler.create_program``,
``unigraph_utils.ReadAndConvertUnigraph``, ``executor_lib.execute``) in one Beam
pipeline for all splits, and works around the 1.0.3 traps:

* its sampling-model artifacts folder must not exist: a fresh one is made
  under a staging folder per execution and deleted afterwards;
* it writes uncompressed records: we write GZIP TFRecords as ExampleGen does
  (``Split-<name>/data_tfrecord-SSSSS-of-NNNNN.gz``);
* it samples uniformly whatever strategy the spec names (warned about).

Inputs are validated before any Beam work; output files go to a staging folder
and are moved into ``Split-<name>`` only once every split is complete, so a
failed execution publishes no examples. Before the pipeline runs, Beam's
data-plane race that drops stage inputs on the DirectRunner is fixed
(:mod:`beam_data_plane`).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

from absl import logging
import apache_beam as beam
import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.data import unigraph
from tensorflow_gnn.experimental import sampler as exp_sampler
from tensorflow_gnn.experimental.sampler.beam import executor_lib
from tensorflow_gnn.experimental.sampler.beam import sampler as beam_sampler
from tensorflow_gnn.experimental.sampler.beam import unigraph_utils
from tfx import types
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils

from gnn_trainer_component import graph_schema
from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.sampler import beam_data_plane
from gnn_trainer_component.sampler import graph_tables

EXAMPLES_FILE_PREFIX = "data_tfrecord"
STAGING_DIR = ".graph_sampler_staging"


# TF-GNN 1.0.3's executor_lib joins the outputs of several sampling stages per
# example (Flatten + GroupByKey in CombineInputs) and raises a bare KeyError in
# MatchCombinedOutputs when one stage's output is missing for an example.
_LOST_STAGE_OUTPUT = re.compile(
    r"KeyError: \W*(stage\d+) \[while running '([^']*/Inputs/Match)'\]")


class BeamSamplerError(RuntimeError):
  """TF-GNN's Beam sampler failed inside the Beam pipeline; nothing was published."""


def explain_beam_failure(error: BaseException, beam_pipeline_args: Sequence[str]
                         ) -> Optional[str]:
  """A user-facing explanation of a known Beam sampler failure, or None.

  Args:
    error: What ``pipeline.run()`` raised (Beam wraps worker errors in a
      RuntimeError whose text holds the worker's traceback).
    beam_pipeline_args: The executor's Beam arguments (named in the message).

  Returns:
    The explanation when ``error`` is the lost-stage-output KeyError of TF-GNN's
    ``executor_lib.CombineInputs``; None for any other error.
  """
  found = _LOST_STAGE_OUTPUT.search(str(error))
  if not found:
    return None
  stage, transform = found.groups()
  return (
      f"GraphSampler: TF-GNN's Beam sampler found examples without the output of "
      f"sampling {stage} when joining stage outputs in '{transform}' (KeyError in "
      f"tensorflow_gnn/experimental/sampler/beam/executor_lib.py MatchCombinedOutputs): "
      f"elements were lost between Beam stages. Nothing was published. Beam pipeline "
      f"args: {list(beam_pipeline_args) or 'none'}. It is not an input error: Beam's "
      f"DirectRunner used to lose stage inputs this way on large graphs (a data-plane race "
      f"that GraphSampler now fixes before it runs, gnn_trainer_component/sampler/"
      f"beam_data_plane.py; benchmarks/README.md, 'GraphSampler at scale'), so if you see "
      f"this, the runner lost data some other way: rerun on a distributed runner "
      f"(beam_pipeline_args for Dataflow, Flink or Spark; README 'Scaling out') and report "
      f"it with this message.")


def _seed_values(node_id: bytes) -> list:
  """Seed input of the sampling program for one node (batch of 1, ragged)."""
  return [[np.array([node_id], dtype=np.object_), np.array([1], dtype=np.int64)]]


def _rm(path: str) -> None:
  if tf.io.gfile.exists(path):
    tf.io.gfile.rmtree(path)


@contextlib.contextmanager
def staged_splits(examples: types.Artifact, splits: Sequence[str], who: str
                  ) -> Iterator[str]:
  """A fresh staging folder for a Beam job's ``Split-<name>/*.gz``, published on success.

  After the ``with`` body, every split must have files; they are then moved
  into ``<examples.uri>/Split-<name>`` and the artifact gets ExampleGen's
  properties (split names, tf.Example payload, GZIP TFRecords). The staging
  folder is always deleted, so a failed job publishes nothing.
  """
  staging = os.path.join(examples.uri, STAGING_DIR)
  _rm(staging)
  tf.io.gfile.makedirs(staging)
  try:
    yield staging
    written = {}
    for split in splits:
      files = tf.io.gfile.glob(os.path.join(staging, f"Split-{split}", "*.gz"))
      if not files:
        raise RuntimeError(f"{who}: split {split!r} produced no output files.")
      written[split] = files
    for split, files in written.items():
      dest = os.path.join(examples.uri, f"Split-{split}")
      tf.io.gfile.makedirs(dest)
      for f in files:
        tf.io.gfile.rename(f, os.path.join(dest, os.path.basename(f)), overwrite=True)
  finally:
    _rm(staging)
  examples.split_names = artifact_utils.encode_split_names(sorted(splits))
  examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
  examples_utils.set_file_format(examples, "tfrecords_gzip")


def build_sampling_pipeline(root: beam.Pipeline, *, schema: tfgnn.GraphSchema,
                            data_dir: str, spec, seeds: Dict[str, str],
                            staging_dir: str, num_shards: int) -> None:
  """Adds the sampling of every split to the Beam pipeline ``root``.

  Args:
    root: The Beam pipeline.
    schema: Input graph schema with table file names in ``metadata.filename``.
    data_dir: Folder table names are relative to.
    spec: The ``tensorflow_gnn.sampler.SamplingSpec``.
    seeds: Split name -> seed table file name (relative to data_dir).
    staging_dir: Output folder (must not exist yet): gets ``artifacts/`` (the
      sampling models) and ``Split-<name>/`` GZIP TFRecords.
    num_shards: Output shards per split (0: the runner decides).
  """
  # TF-GNN's executor looks up the program's layers by Keras' default names
  # ("sink", ...). Keras uniquifies names per process ("sink_1" on the second
  # sampler built in a LocalDagRunner / test process), so start from fresh names.
  tf.keras.backend.clear_session()
  model, layers_mapping = beam_sampler.get_sampling_model(schema, spec)
  program_pb, sampler_artifacts = exp_sampler.create_program(model)
  artifacts_path = os.path.join(staging_dir, "artifacts")
  if tf.io.gfile.exists(artifacts_path):  # the TF-GNN sampler's own trap
    raise ValueError(f"{artifacts_path} already exists.")
  tf.io.gfile.makedirs(artifacts_path)
  beam_sampler.save_artifacts(sampler_artifacts, artifacts_path)

  feeds = dict(root | "ReadGraph" >> unigraph_utils.ReadAndConvertUnigraph(schema, data_dir))
  feeds.update({layer: feeds[piece] for layer, piece in layers_mapping.items()})

  seed_pcolls = []
  for split, filename in sorted(seeds.items()):
    files = graph_tables.resolve_table(data_dir, filename)
    path = files[0] if len(files) == 1 else filename
    if not os.path.isabs(path):
      path = os.path.join(data_dir, path)
    seed_pcolls.append(
        unigraph.read_node_set(root, path, f"seeds_{split}")
        | f"SeedKeys/{split}" >> beam.Keys()
        | f"MakeSeeds/{split}" >> beam.Map(
            lambda node_id, s=split: (graph_tables.seed_key(s, node_id),
                                      _seed_values(node_id))))
  all_seeds = tuple(seed_pcolls) | "FlattenSeeds" >> beam.Flatten()
  examples = executor_lib.execute(program_pb, {"Input": all_seeds}, feeds=feeds,
                                  artifacts_path=artifacts_path)
  split_names = sorted(seeds)
  parts = examples | "BySplit" >> beam.Partition(
      lambda kv, n: split_names.index(graph_tables.split_of_key(kv[0])), len(split_names))
  for i, split in enumerate(split_names):
    counter = beam.metrics.Metrics.counter("GraphSampler", f"examples/{split}")

    def _serialize(kv, c=counter):
      c.inc()
      return kv[1].SerializeToString()

    _ = (parts[i]
         | f"Serialize/{split}" >> beam.Map(_serialize)
         | f"Write/{split}" >> beam.io.WriteToTFRecord(
             os.path.join(staging_dir, f"Split-{split}", EXAMPLES_FILE_PREFIX),
             file_name_suffix=".gz", num_shards=num_shards))


class Executor(base_beam_executor.BaseBeamExecutor):
  """Samples subgraphs around the seeds of every split with TF-GNN's Beam sampler."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Runs the sampler.

    Args:
      input_dict: ``graph_schema``: GraphSchema artifact whose folder holds
        ``graph_schema.pbtxt`` and the tables it names.
      output_dict: ``examples`` (Examples) and ``output_graph_schema``.
      exec_properties: ``seeds`` (JSON {split: seed table}), ``sampling_spec``
        or ``sampling_config`` (JSON), ``num_shards``.

    Raises:
      graph_tables.GraphInputError: on invalid inputs (nothing published).
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    schema_dir = artifact_utils.get_single_uri(input_dict[spec_lib.GRAPH_SCHEMA_KEY])
    schema = graph_schema.read_artifact_schema(schema_dir)
    seeds = graph_tables.loads_json(exec_properties.get(spec_lib.SEEDS_KEY), spec_lib.SEEDS_KEY) or {}
    spec = graph_tables.sampling_spec_from_config(
        schema, exec_properties.get(spec_lib.SAMPLING_SPEC_KEY),
        graph_tables.loads_json(exec_properties.get(spec_lib.SAMPLING_CONFIG_KEY), spec_lib.SAMPLING_CONFIG_KEY))
    num_shards = int(exec_properties.get(spec_lib.NUM_SHARDS_KEY) or 0)

    start = time.monotonic()
    counts = graph_tables.validate_graph(schema, schema_dir, spec.seed_op.node_set_name, seeds)
    logging.info("GraphSampler: inputs valid in %.1f s; seeds per split: %s",
                 time.monotonic() - start, counts)

    examples = artifact_utils.get_single_instance(output_dict[spec_lib.EXAMPLES_KEY])
    with staged_splits(examples, sorted(seeds), "GraphSampler") as staging:
      start = time.monotonic()
      beam_data_plane.lock_writes_against_periodic_flush()
      pipeline = self._make_beam_pipeline()
      build_sampling_pipeline(pipeline, schema=schema, data_dir=schema_dir, spec=spec,
                              seeds=seeds, staging_dir=staging, num_shards=num_shards)
      try:
        pipeline.run().wait_until_finish()
      except Exception as e:  # Beam raises RuntimeError with the worker's traceback
        explanation = explain_beam_failure(e, self._beam_pipeline_args)
        if explanation:
          raise BeamSamplerError(explanation) from e
        raise
      logging.info("GraphSampler: Beam pipeline ran in %.1f s", time.monotonic() - start)
    for split, n in counts.items():
      examples.set_int_custom_property(f"num_seeds_{split}", n)

    out_schema = artifact_utils.get_single_instance(output_dict[spec_lib.OUTPUT_GRAPH_SCHEMA_KEY])
    graph_schema.write_artifact_schema(graph_tables.output_graph_schema(schema), out_schema.uri)
    logging.info("GraphSampler: wrote splits %s to %s", sorted(seeds), examples.uri)
