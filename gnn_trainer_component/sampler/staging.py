"""The outputs both samplers publish, and how: staged, then moved into place atomically.

A sampler run writes its ``Examples`` the way ExampleGen does (one folder per
split, named by TFX's ``artifact_utils.get_split_uri``, GZIP TFRecords
``data_tfrecord-SSSSS-of-NNNNN.gz``) and a ``GraphSchema`` that parses them.
The Beam job writes into a staging folder inside the examples' folder
(:func:`staged_splits`); only when every split has files are they moved into
the split folders, so a failed run publishes no examples.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, Sequence

from absl import logging
import apache_beam as beam
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tfx import types
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils
from tfx.types import standard_artifacts

from gnn_trainer_component import artifacts
from gnn_trainer_component import graph_schema
from gnn_trainer_component import spec as spec_lib

#: File name prefix of the examples in each split folder (as ExampleGen writes them).
EXAMPLES_FILE_PREFIX = "data_tfrecord"
#: Folder inside the examples' folder that a run writes into before publishing.
STAGING_DIR = ".graph_sampler_staging"


def output_channels() -> Dict[str, types.Channel]:
  """The output channels of a sampler component: ``examples`` and ``output_graph_schema``."""
  return {spec_lib.EXAMPLES_KEY: types.Channel(type=standard_artifacts.Examples),
          spec_lib.OUTPUT_GRAPH_SCHEMA_KEY: types.Channel(type=artifacts.GraphSchema)}


@dataclasses.dataclass(frozen=True)
class SamplerArtifacts:
  """What a sampler executor reads and writes, resolved from TFX's dicts.

  Attributes:
    schema_dir: The input ``GraphSchema`` folder (table names are relative to it).
    schema: Its graph schema.
    examples: The output ``Examples`` artifact.
    output_graph_schema: The output ``GraphSchema`` artifact.
    num_shards: Output files per split (0: the Beam runner decides).
  """
  schema_dir: str
  schema: tfgnn.GraphSchema
  examples: types.Artifact
  output_graph_schema: types.Artifact
  num_shards: int


def resolve_artifacts(input_dict: Mapping[str, List[types.Artifact]],
                      output_dict: Mapping[str, List[types.Artifact]],
                      exec_properties: Mapping[str, Any]) -> SamplerArtifacts:
  """Reads the input graph schema and picks the output artifacts of a sampler's ``Do``.

  Raises:
    graph_schema.GraphSchemaError: if the input schema is missing or invalid.
  """
  schema_dir = artifact_utils.get_single_uri(input_dict[spec_lib.GRAPH_SCHEMA_KEY])
  return SamplerArtifacts(
      schema_dir=schema_dir, schema=graph_schema.read_artifact_schema(schema_dir),
      examples=artifact_utils.get_single_instance(output_dict[spec_lib.EXAMPLES_KEY]),
      output_graph_schema=artifact_utils.get_single_instance(
          output_dict[spec_lib.OUTPUT_GRAPH_SCHEMA_KEY]),
      num_shards=int(exec_properties.get(spec_lib.NUM_SHARDS_KEY) or 0))


@dataclasses.dataclass(frozen=True)
class Staging:
  """The staging folder of one run.

  Attributes:
    root: The folder (fresh; deleted after the run). A pipeline may keep its
      own files in it, outside ``split_dirs``.
    split_dirs: Split name -> the staged folder its example files go to.
  """
  root: str
  split_dirs: Mapping[str, str]


def _rm(path: str) -> None:
  if tf.io.gfile.exists(path):
    tf.io.gfile.rmtree(path)


@contextlib.contextmanager
def staged_splits(examples: types.Artifact, splits: Sequence[str], who: str
                  ) -> Iterator[Staging]:
  """A fresh staging folder for a Beam job's split files, published on success.

  After the ``with`` body, every split must have files; they are then moved
  into the split folders of ``examples`` and the artifact gets ExampleGen's
  properties (split names, tf.Example payload, GZIP TFRecords). The staging
  folder is always deleted, so a failed job publishes nothing.

  Args:
    examples: The output ``Examples`` artifact (its ``split_names`` are set).
    splits: The split names.
    who: The component named in errors.

  Yields:
    The :class:`Staging` to write into.

  Raises:
    RuntimeError: if a split produced no files (nothing is published).
  """
  examples.split_names = artifact_utils.encode_split_names(sorted(splits))
  published = {s: artifact_utils.get_split_uri([examples], s) for s in splits}
  root = os.path.join(examples.uri, STAGING_DIR)
  staged = {s: os.path.join(root, "examples", os.path.relpath(published[s], examples.uri))
            for s in splits}
  _rm(root)
  tf.io.gfile.makedirs(root)
  try:
    yield Staging(root=root, split_dirs=staged)
    written = {}
    for split in splits:
      written[split] = tf.io.gfile.glob(os.path.join(staged[split], "*.gz"))
      if not written[split]:
        raise RuntimeError(f"{who}: split {split!r} produced no output files.")
    for split, files in written.items():
      tf.io.gfile.makedirs(published[split])
      for f in files:
        tf.io.gfile.rename(f, os.path.join(published[split], os.path.basename(f)),
                           overwrite=True)
  finally:
    _rm(root)
  examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
  examples_utils.set_file_format(examples, "tfrecords_gzip")


def write_splits(examples: beam.PCollection, *, split_of: Callable[[bytes], str],
                 staging: Staging, num_shards: int, who: str) -> None:
  """Writes ``(example key, serialized tf.Example)`` pairs into their staged split folders.

  Args:
    examples: The examples, keyed by an id that names their split.
    split_of: Example key -> split name (one of ``staging.split_dirs``).
    staging: Where the splits go (:func:`staged_splits`).
    num_shards: Output files per split (0: the runner decides).
    who: Namespace of the ``examples/<split>`` Beam counters.
  """
  split_names = sorted(staging.split_dirs)
  parts = examples | "BySplit" >> beam.Partition(
      lambda kv, n: split_names.index(split_of(kv[0])), len(split_names))
  for i, split in enumerate(split_names):
    counter = beam.metrics.Metrics.counter(who, f"examples/{split}")

    def _value(kv, c=counter):
      c.inc()
      return kv[1]

    _ = (parts[i]
         | f"Values/{split}" >> beam.Map(_value)
         | f"Write/{split}" >> beam.io.WriteToTFRecord(
             os.path.join(staging.split_dirs[split], EXAMPLES_FILE_PREFIX),
             file_name_suffix=".gz", num_shards=num_shards))


def finish(run: SamplerArtifacts, out_schema: tfgnn.GraphSchema,
           int_properties: Mapping[str, int], who: str) -> None:
  """After :func:`staged_splits` published the examples: their properties and the schema.

  Args:
    run: The run's artifacts.
    out_schema: The graph schema that parses the examples.
    int_properties: Custom properties of the examples (counts per split).
    who: The component named in the log.
  """
  for name, value in int_properties.items():
    run.examples.set_int_custom_property(name, value)
  graph_schema.write_artifact_schema(out_schema, run.output_graph_schema.uri)
  logging.info("%s: wrote splits %s to %s", who,
               artifact_utils.decode_split_names(run.examples.split_names), run.examples.uri)
