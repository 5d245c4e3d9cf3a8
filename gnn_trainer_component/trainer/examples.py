"""Training on examples on disk: the ``examples`` artifact's splits as a TrainingData.

:func:`locate` finds the record files of the splits (before the user module
loads: TFX's own split lookup fails with a bare ValueError); the function it
returns reads the graph schema (Transform applied), reads every record end to
end and samples it against the schema, and returns an :class:`ExamplesData`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

from absl import logging
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tfx import types
from tfx.types import artifact_utils
from tfx.utils import io_utils
from tensorflow_metadata.proto.v0 import schema_pb2

from gnn_trainer_component import graph_schema as graph_schema_lib
from gnn_trainer_component import outputs
from gnn_trainer_component import training_data
from gnn_trainer_component.trainer import config as config_lib
from gnn_trainer_component.trainer import publish
from gnn_trainer_component.trainer import input_data
from gnn_trainer_component.trainer import splits as splits_lib
from gnn_trainer_component.trainer import transform
from gnn_trainer_component.trainer import validation


@dataclasses.dataclass(frozen=True)
class ExamplesData:
  """Serialized graph tf.Examples of the training and validation splits, checked.

  Attributes:
    schema: The GraphSchema that parses them (Transform applied).
    raw_parser: Parses *raw* examples into the schema's spec (with Transform), or None.
    train_splits, eval_splits: The split names (``train_args`` / ``eval_args``).
    train_files, eval_files: Their TFRecord files.
    train_compression, eval_compression: "GZIP" or None.
    train_size, eval_size: Records and bytes, from the pre-flight pass.
  """
  schema: tfgnn.GraphSchema
  raw_parser: Optional[tf.keras.layers.Layer]
  train_splits: Sequence[str]
  eval_splits: Sequence[str]
  train_files: Sequence[str]
  train_compression: Optional[str]
  eval_files: Sequence[str]
  eval_compression: Optional[str]
  train_size: validation.DataSize
  eval_size: validation.DataSize

  mode = training_data.EXAMPLES

  @property
  def train_records(self) -> int:
    return self.train_size.records

  @property
  def eval_records(self) -> int:
    return self.eval_size.records

  def feed(self, request: training_data.Request) -> training_data.Feed:
    """Both splits' files parsed, cached as ``request.cache`` resolves to."""
    cache = input_data.resolve_cache(request.cache, budget_mb=request.cache_budget_mb,
                                     read_once=request.read_once,
                                     data=self.train_size + self.eval_size)
    cache_dir = None
    if cache not in (input_data.MEMORY, input_data.NONE):
      cache_dir = input_data.attempt_cache_dir(cache)
    spec_ = tfgnn.create_graph_spec_from_schema_pb(self.schema)

    def provider(role, splits, files, compression, size, training):
      return input_data.dataset_provider(
          files, compression, spec_, shuffle=training,
          shuffle_buffer_size=request.shuffle_buffer_size,
          what=f"{role} splits {', '.join(splits)}", check_finite=request.check_finite,
          cache=f"{cache_dir}/{'train' if training else 'eval'}" if cache_dir else cache,
          num_records=size.records)

    def close():
      if cache_dir and tf.io.gfile.exists(cache_dir):
        tf.io.gfile.rmtree(cache_dir)

    return training_data.Feed(
        train=provider("train_args", self.train_splits, self.train_files,
                       self.train_compression, self.train_size, True),
        valid=provider("eval_args", self.eval_splits, self.eval_files,
                       self.eval_compression, self.eval_size, False),
        spec=spec_, whole_steps=False, train_records=self.train_size.records,
        keep_batches=cache == input_data.MEMORY and request.local, close=close)

  def parity_examples(self, n: int) -> list[bytes]:
    return publish.read_examples(self.eval_files, self.eval_compression, n)

  def ranking_metrics(self, embed: Callable, *, single_task: bool,
                      seed: int) -> dict[str, Any]:
    del embed, single_task, seed  # examples hold no graph to rank against
    return {}

  def validation_ranker(self, *, single_task: bool, seed: int, max_queries: int) -> None:
    del single_task, seed, max_queries  # examples hold no graph to rank against
    return None

  def served_graph(self) -> None:
    return None  # examples on disk: no graph to serve node ids from

  def held_out_tables(self) -> dict[str, str]:
    return {}  # the held-out examples are the user's own

  def describe(self) -> str:
    return (f"train {list(self.train_splits)} ({len(self.train_files)} files, "
            f"{self.train_size.records} examples), eval {list(self.eval_splits)} "
            f"({len(self.eval_files)} files, {self.eval_size.records} examples)")


def _locations(examples: list[types.Artifact]) -> list[splits_lib.ExamplesLocation]:
  return [splits_lib.ExamplesLocation(
      uri=a.uri,
      split_names=artifact_utils.decode_split_names(a.split_names) if a.split_names else [],
      file_format=(a.get_string_custom_property("file_format")
                   if a.has_custom_property("file_format") else None))
          for a in examples]


def schemas(graph_schema_uri: str, schema_uri: Optional[str],
            transform_graph_uri: Optional[str]):
  """The graph schema to train on and the raw-example parser (with Transform), checked.

  Args:
    graph_schema_uri: The GraphSchema artifact's folder.
    schema_uri: The optional TFMD Schema artifact's folder (checked to agree).
    transform_graph_uri: The optional Transform graph's folder.
  """
  raw_graph_schema = graph_schema_lib.read_artifact_schema(graph_schema_uri)
  if schema_uri:
    schema_file = io_utils.get_only_uri_in_dir(schema_uri)
    transform.check_schema_agreement(
        raw_graph_schema, io_utils.parse_pbtxt_file(schema_file, schema_pb2.Schema()),
        schema_file)
  if not transform_graph_uri:
    return raw_graph_schema, None
  import tensorflow_transform as tft  # Imported here: loaded only with a Transform graph.
  tft_output = tft.TFTransformOutput(transform_graph_uri)
  graph_schema = transform.transformed_graph_schema(
      raw_graph_schema, tft_output.transformed_metadata.schema,
      raw_keys=set(tft_output.raw_feature_spec()))
  logging.info("GnnTrainer: training on Transform output; derived graph schema:\n%s",
               graph_schema)
  return graph_schema, transform.RawGraphParser(
      transform_graph_uri, raw_graph_schema, graph_schema, name="raw_graph_parser")


def _checked(by_split: dict[str, list[str]], compression: Optional[str], role: str,
             graph_schema: tfgnn.GraphSchema):
  """Files of the splits (listed once), each read end to end and sampled against the schema.

  Returns:
    (files, size): size counts the records and their bytes.
  """
  size = validation.DataSize()
  for split, files in by_split.items():
    size += validation.check_files(files, compression, graph_schema, split=split, role=role)
  return tuple(f for files in by_split.values() for f in files), size


def locate(examples: list[types.Artifact], cfg: config_lib.TrainerConfig, *,
           graph_schema_uri: str, schema_uri: Optional[str] = None,
           transform_graph_uri: Optional[str] = None
           ) -> Callable[[Mapping[str, Any]], ExamplesData]:
  """Finds the splits' files; the function that reads and checks them.

  Args:
    examples: The ``examples`` artifacts.
    cfg: The trainer's config (the splits, and keys that must not be set).
    graph_schema_uri: The GraphSchema artifact's folder.
    schema_uri: The optional TFMD Schema artifact's folder.
    transform_graph_uri: The optional Transform graph's folder.

  Raises:
    config_lib.ConfigError: a key that applies to the graph in memory only.
    splits_lib.SplitError: a split that the examples do not have.
  """
  for key, value, default in (("graph_mode", cfg.graph_mode, training_data.AUTO),
                              ("deduplicate_batches", cfg.deduplicate_batches, "auto"),
                              ("retrieval_splits", cfg.retrieval_splits, None)):
    if value and value != default:
      raise config_lib.ConfigError(
          f"GnnTrainer custom_config {key}={value!r} applies to a graph held in memory "
          "('seeds' + 'sampling_config', or 'link_config'), but this training reads "
          f"'examples'. Remove {key}, or pass the graph instead of the examples.")
  locations = _locations(examples)
  train, train_comp = splits_lib.resolve_splits(locations, cfg.train_splits, role="train_args")
  evaluation, eval_comp = splits_lib.resolve_splits(locations, cfg.eval_splits, role="eval_args")

  def read(tasks: Mapping[str, Any]) -> ExamplesData:
    del tasks  # the same examples for any task
    graph_schema, raw_parser = schemas(graph_schema_uri, schema_uri, transform_graph_uri)
    outputs.log_phase("validate")
    train_files, train_size = _checked(train, train_comp, "train_args", graph_schema)
    eval_files, eval_size = _checked(evaluation, eval_comp, "eval_args", graph_schema)
    return ExamplesData(
        schema=graph_schema, raw_parser=raw_parser, train_splits=tuple(cfg.train_splits),
        eval_splits=tuple(cfg.eval_splits), train_files=train_files,
        train_compression=train_comp, eval_files=eval_files, eval_compression=eval_comp,
        train_size=train_size, eval_size=eval_size)

  return read
