"""Artifact types of gnn_trainer_component.

TF-GNN parses tf.Examples into GraphTensors with a ``tensorflow_gnn.GraphSchema``
(``graph_schema.pbtxt``), which a TFMD ``Schema`` cannot express. It travels
through the pipeline as a :class:`GraphSchema` artifact: a folder holding
``graph_schema.pbtxt``, so it is an input with lineage in MLMD.

The type name follows the KubeflowV2 / Vertex rule (``<namespace>.<Title>``,
importable as a class path, no PROPERTIES), so pipelines using it compile for
Vertex AI Pipelines.
"""

from tfx.types import artifact

# Re-exported: GRAPH_SCHEMA_FILE was defined here before graph_schema.py.
from gnn_trainer_component.graph_schema import GRAPH_SCHEMA_FILE as GRAPH_SCHEMA_FILE


class GraphSchema(artifact.Artifact):
  """A TF-GNN GraphSchema: a folder with ``graph_schema.pbtxt``.

  Bring one into a pipeline with an Importer::

    graph_schema = tfx.dsl.Importer(
        source_uri="path/to/dir_with_graph_schema_pbtxt",
        artifact_type=gnn_trainer_component.GraphSchema,
    ).with_id("graph_schema_importer")
  """
  TYPE_NAME = "gnn_trainer_component.GraphSchema"


class Embeddings(artifact.Artifact):
  """Per-node outputs of a model over a whole node set: a folder with ``embeddings.parquet``.

  GraphInferrer writes it: one row per node, column ``id`` (the node table's
  id) and one column per signature output (``embedding``, ``logits``, ...):
  a float32 list of the output's width. Read it with pandas or pyarrow::

    pandas.read_parquet(os.path.join(artifact.uri, "embeddings.parquet"))
  """
  TYPE_NAME = "gnn_trainer_component.Embeddings"


class VectorSearchBatch(artifact.Artifact):
  """A release's vectors in Vertex AI Vector Search's batch input format (EmbeddingIndex).

  A folder of JSON-lines files (``{"id": ..., "embedding": [...]}``, each id once) and,
  where ids were removed since the last blessed index, ``delete/removed.txt``. Point an
  index's ``contentsDeltaUri`` at the artifact's ``uri``.
  """
  TYPE_NAME = "gnn_trainer_component.VectorSearchBatch"


class GraphStatistics(artifact.Artifact):
  """A graph's own statistics (GraphStatisticsGen): ``graph_statistics.json`` and ``report.png``.

  Counts per node and edge set (nodes, edges, duplicate ids, self loops, multi-edges,
  dangling ends), degree summaries and histograms, seeds and labels per split, overlap
  between splits, time ranges, label homophily. Read it with ``json``::

    json.load(open(os.path.join(artifact.uri, "graph_statistics.json")))

  Its custom property ``statistics_uri`` names the ``ExampleStatistics`` (TFDV's, per table)
  written with it.
  """
  TYPE_NAME = "gnn_trainer_component.GraphStatistics"


#: GraphStatistics: the statistics' file, and the property naming its ExampleStatistics.
GRAPH_STATISTICS_FILE = "graph_statistics.json"
STATISTICS_URI_PROPERTY = "statistics_uri"
