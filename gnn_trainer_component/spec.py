"""Keys and ComponentSpecs of the package's components: the one place that defines them.

The components are GnnTrainer, GnnTuner, GraphSampler, LinkSampler, GraphInferrer,
GraphEvaluator, EmbeddingIndex, GraphStatisticsGen and GraphValidator.
As ``tfx.types.standard_component_specs`` does for the stock components, this
module holds the names (defined in the TFX-free ``keys``, re-exported here) and
the ``ComponentSpec`` classes built from them. GnnTrainer's keys are
the stock Trainer's (same names, same types) plus ``graph_schema``.
"""

from __future__ import annotations

from tfx.proto import trainer_pb2
from tfx.types import component_spec
from tfx.types import standard_artifacts
from tfx.types import system_executions

from gnn_trainer_component import artifacts
from gnn_trainer_component.keys import *


class GnnTrainerSpec(component_spec.ComponentSpec):
  """ComponentSpec of GnnTrainer: the stock TrainerSpec plus graph_schema.

  It also takes GraphSampler's seeds and sampling parameters (or LinkSampler's link_config)
  for a graph held in memory (then without examples).
  """

  PARAMETERS = {
      TRAIN_ARGS_KEY: component_spec.ExecutionParameter(type=trainer_pb2.TrainArgs),
      EVAL_ARGS_KEY: component_spec.ExecutionParameter(type=trainer_pb2.EvalArgs),
      MODULE_FILE_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      MODULE_PATH_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      CUSTOM_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      # The graph in memory instead of examples (GraphSampler's parameters).
      SEEDS_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      SAMPLING_SPEC_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      SAMPLING_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      LINK_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
      EXAMPLES_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.Examples, optional=True),
      GRAPH_SCHEMA_KEY: component_spec.ChannelParameter(type=artifacts.GraphSchema),
      SCHEMA_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.Schema, optional=True),
      TRANSFORM_GRAPH_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.TransformGraph, optional=True),
      BASE_MODEL_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.Model, optional=True),
      HYPERPARAMETERS_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.HyperParameters, optional=True),
  }
  OUTPUTS = {
      MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
      MODEL_RUN_KEY: component_spec.ChannelParameter(type=standard_artifacts.ModelRun),
  }
  TYPE_ANNOTATION = system_executions.Train


class GnnTunerSpec(component_spec.ComponentSpec):
  """ComponentSpec of GnnTuner (GnnTrainer's inputs and parameters, the stock Tuner's outputs)."""

  PARAMETERS = {
      **GnnTrainerSpec.PARAMETERS,
      TUNING_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {k: v for k, v in GnnTrainerSpec.INPUTS.items()
            if k not in (BASE_MODEL_KEY, HYPERPARAMETERS_KEY)}
  OUTPUTS = {
      BEST_HYPERPARAMETERS_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.HyperParameters),
      TUNER_RESULTS_KEY: component_spec.ChannelParameter(type=standard_artifacts.TunerResults),
  }


class GraphSamplerSpec(component_spec.ComponentSpec):
  """ComponentSpec of GraphSampler."""

  PARAMETERS = {
      SEEDS_KEY: component_spec.ExecutionParameter(type=str),
      SAMPLING_SPEC_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      SAMPLING_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      NUM_SHARDS_KEY: component_spec.ExecutionParameter(type=int, optional=True),
  }
  INPUTS = {
      GRAPH_SCHEMA_KEY: component_spec.ChannelParameter(type=artifacts.GraphSchema),
  }
  OUTPUTS = {
      EXAMPLES_KEY: component_spec.ChannelParameter(type=standard_artifacts.Examples),
      OUTPUT_GRAPH_SCHEMA_KEY: component_spec.ChannelParameter(type=artifacts.GraphSchema),
  }


class LinkSamplerSpec(component_spec.ComponentSpec):
  """ComponentSpec of LinkSampler (GraphSampler's inputs and outputs)."""

  PARAMETERS = {
      LINK_CONFIG_KEY: component_spec.ExecutionParameter(type=str),
      NUM_SHARDS_KEY: component_spec.ExecutionParameter(type=int, optional=True),
  }
  INPUTS = GraphSamplerSpec.INPUTS
  OUTPUTS = GraphSamplerSpec.OUTPUTS


#: GraphSampler's sampling parameters, as GraphInferrer and GraphEvaluator take them (optional:
#: one of the two).
_SAMPLING_PARAMETERS = {
    SAMPLING_SPEC_KEY: component_spec.ExecutionParameter(type=str, optional=True),
    SAMPLING_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
}


class GraphInferrerSpec(component_spec.ComponentSpec):
  """ComponentSpec of GraphInferrer: a Model (blessed, optionally) and tables in, Embeddings out.

  ``model_blessing`` is the stock BulkInferrer's (TFX's Evaluator output).
  """

  PARAMETERS = {
      **_SAMPLING_PARAMETERS,
      NODES_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      LINK_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      PAIRS_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      INFERENCE_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
      MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
      MODEL_BLESSING_KEY: component_spec.ChannelParameter(type=standard_artifacts.ModelBlessing,
                                                          optional=True),
      GRAPH_SCHEMA_KEY: component_spec.ChannelParameter(type=artifacts.GraphSchema),
  }
  OUTPUTS = {
      EMBEDDINGS_KEY: component_spec.ChannelParameter(type=artifacts.Embeddings),
  }


class GraphEvaluatorSpec(component_spec.ComponentSpec):
  """ComponentSpec of GraphEvaluator: a Model (and a baseline model) and tables in.

  Out: the stock Evaluator's ``evaluation`` and ``blessing``.
  """

  PARAMETERS = {
      EVAL_CONFIG_KEY: component_spec.ExecutionParameter(type=str),
      **_SAMPLING_PARAMETERS,
      LINK_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
      MODEL_KEY: GraphInferrerSpec.INPUTS[MODEL_KEY],
      BASELINE_MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model,
                                                          optional=True),
      GRAPH_SCHEMA_KEY: GraphInferrerSpec.INPUTS[GRAPH_SCHEMA_KEY],
  }
  OUTPUTS = {
      EVALUATION_KEY: component_spec.ChannelParameter(type=standard_artifacts.ModelEvaluation),
      BLESSING_KEY: component_spec.ChannelParameter(type=standard_artifacts.ModelBlessing),
  }
  TYPE_ANNOTATION = system_executions.Evaluate


class EmbeddingIndexSpec(component_spec.ComponentSpec):
  """ComponentSpec of EmbeddingIndex: Embeddings in; the index, its evaluation, a blessing out.

  The index is a ``Model`` and the others have the stock Evaluator's names, so Pusher
  pushes a blessed index.
  """

  PARAMETERS = {
      INDEX_CONFIG_KEY: component_spec.ExecutionParameter(type=str),
  }
  INPUTS = {
      EMBEDDINGS_KEY: component_spec.ChannelParameter(type=artifacts.Embeddings),
      BASELINE_INDEX_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model,
                                                          optional=True),
      GRAPH_SCHEMA_KEY: component_spec.ChannelParameter(type=artifacts.GraphSchema,
                                                        optional=True),
  }
  OUTPUTS = {
      INDEX_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
      EVALUATION_KEY: GraphEvaluatorSpec.OUTPUTS[EVALUATION_KEY],
      BLESSING_KEY: GraphEvaluatorSpec.OUTPUTS[BLESSING_KEY],
      VERTEX_AI_KEY: component_spec.ChannelParameter(type=artifacts.VectorSearchBatch),
  }


class GraphStatisticsGenSpec(component_spec.ComponentSpec):
  """ComponentSpec of GraphStatisticsGen: a graph's tables in; TFDV's and the graph's statistics.

  ``statistics`` is the stock StatisticsGen's output (one split per table).
  """

  PARAMETERS = {
      SEEDS_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      STATISTICS_CONFIG_KEY: component_spec.ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
      GRAPH_SCHEMA_KEY: GraphSamplerSpec.INPUTS[GRAPH_SCHEMA_KEY],
  }
  OUTPUTS = {
      STATISTICS_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.ExampleStatistics),
      GRAPH_STATISTICS_KEY: component_spec.ChannelParameter(type=artifacts.GraphStatistics),
  }


class GraphValidatorSpec(component_spec.ComponentSpec):
  """ComponentSpec of GraphValidator: GraphStatisticsGen's outputs in; the stock anomalies out."""

  PARAMETERS = {
      VALIDATION_CONFIG_KEY: component_spec.ExecutionParameter(type=str),
  }
  INPUTS = {
      STATISTICS_KEY: GraphStatisticsGenSpec.OUTPUTS[STATISTICS_KEY],
      GRAPH_STATISTICS_KEY: GraphStatisticsGenSpec.OUTPUTS[GRAPH_STATISTICS_KEY],
      BASELINE_STATISTICS_KEY: component_spec.ChannelParameter(
          type=artifacts.GraphStatistics, optional=True),
  }
  OUTPUTS = {
      ANOMALIES_KEY: component_spec.ChannelParameter(type=standard_artifacts.ExampleAnomalies),
  }
