"""The parameter, input and output names of the components: one place, TFX-free.

The same strings as the stock components' (``tfx.types.standard_component_specs``)
where they mean the same thing. ``spec`` builds the ``ComponentSpec`` classes
from them (and re-exports them, as TFX's ``standard_component_specs`` holds
both); code that must not import TFX (the compile and submit tools, their dry
runs) imports this module.
"""

# GnnTrainer: the stock Trainer's keys (tfx.types.standard_component_specs) ...
EXAMPLES_KEY = "examples"
SCHEMA_KEY = "schema"
TRANSFORM_GRAPH_KEY = "transform_graph"
BASE_MODEL_KEY = "base_model"
HYPERPARAMETERS_KEY = "hyperparameters"
MODULE_FILE_KEY = "module_file"
MODULE_PATH_KEY = "module_path"
TRAIN_ARGS_KEY = "train_args"
EVAL_ARGS_KEY = "eval_args"
CUSTOM_CONFIG_KEY = "custom_config"
MODEL_KEY = "model"
MODEL_RUN_KEY = "model_run"
# ... plus the graph schema (also GraphSampler's input).
GRAPH_SCHEMA_KEY = "graph_schema"

# GnnTuner: GnnTrainer's inputs and parameters, the stock Tuner's outputs, and
# the search (tuning_config: gnn_trainer_component.tuner.config).
TUNING_CONFIG_KEY = "tuning_config"
BEST_HYPERPARAMETERS_KEY = "best_hyperparameters"
TUNER_RESULTS_KEY = "tuner_results"

# GraphSampler.
SEEDS_KEY = "seeds"
SAMPLING_SPEC_KEY = "sampling_spec"
SAMPLING_CONFIG_KEY = "sampling_config"
NUM_SHARDS_KEY = "num_shards"
OUTPUT_GRAPH_SCHEMA_KEY = "output_graph_schema"

# LinkSampler (also NUM_SHARDS_KEY and GraphSampler's inputs and outputs).
LINK_CONFIG_KEY = "link_config"

# GraphInferrer (also MODEL_KEY, GRAPH_SCHEMA_KEY and GraphSampler's sampling keys).
MODEL_BLESSING_KEY = "model_blessing"
NODES_KEY = "nodes"
#: GraphInferrer with link_config: the table of pairs to infer (default: the edge set's edges).
PAIRS_KEY = "pairs"
INFERENCE_CONFIG_KEY = "inference_config"
EMBEDDINGS_KEY = "embeddings"

# GraphEvaluator (also MODEL_KEY, GRAPH_SCHEMA_KEY and GraphSampler's sampling keys): the
# stock Evaluator's names.
BASELINE_MODEL_KEY = "baseline_model"
EVAL_CONFIG_KEY = "eval_config"
EVALUATION_KEY = "evaluation"
BLESSING_KEY = "blessing"

# EmbeddingIndex (also EMBEDDINGS_KEY, GRAPH_SCHEMA_KEY, EVALUATION_KEY and BLESSING_KEY).
INDEX_CONFIG_KEY = "index_config"
#: The last blessed index (a ``Model`` EmbeddingIndex wrote), for the churn check.
BASELINE_INDEX_KEY = "baseline_index"
#: The Vertex AI Vector Search batch folder (``VectorSearchBatch``).
VERTEX_AI_KEY = "vertex_ai"
#: The index: a standard ``Model`` artifact (a SavedModel), so the stock Pusher pushes it.
INDEX_KEY = "index"

# GraphStatisticsGen (also GRAPH_SCHEMA_KEY and SEEDS_KEY): the stock StatisticsGen's
# ``statistics`` (TFDV's, one split per table) and the graph's own.
STATISTICS_CONFIG_KEY = "statistics_config"
STATISTICS_KEY = "statistics"
GRAPH_STATISTICS_KEY = "graph_statistics"

# GraphValidator (also STATISTICS_KEY and GRAPH_STATISTICS_KEY): the stock ExampleValidator's
# ``anomalies``.
VALIDATION_CONFIG_KEY = "validation_config"
#: The last snapshot's GraphStatistics (through a resolver), for drift.
BASELINE_STATISTICS_KEY = "baseline_statistics"
ANOMALIES_KEY = "anomalies"

#: Executor class paths, as a compiled pipeline names them.
TRAINER_EXECUTOR_CLASS = "gnn_trainer_component.trainer.executor.Executor"
TRAINER_LAUNCHER_CLASS = "gnn_trainer_component.trainer.launcher.Executor"
TUNER_EXECUTOR_CLASS = "gnn_trainer_component.tuner.executor.Executor"
