"""The model contract: what a GnnTrainer export is, in one room.

GnnTrainer writes it; GraphInferrer, GraphEvaluator, EmbeddingIndex, GnnTuner
and the pipelines read it. It stands on the graph core and imports no engine and no
component.

* ``export``: the export written during ``runner.run`` (``ServingExporter``):
  ``serving_default`` and ``embeddings`` on serialized subgraphs, the parsers
  in front of the model (context-label defaults, the seed readout of served
  subgraphs), the graph schema and whole-graph functions kept beside them;
* ``embeddings``: the embeddings rule, the state each task reads;
* ``whole_graph``: the export's functions over a whole graph (GraphInferrer's
  mode ``full_graph``) and the asset that describes them;
* ``loading``: an export loaded and checked against a graph (node set,
  features, signatures), its outputs as columns;
* ``served_sampler``: the training's sampling plan run with TensorFlow ops
  over a snapshot of the graph held in variables (the sampler inside a served
  model);
* ``node_serving``: the export's signatures by node id (serve_node_ids) and on new nodes,
  the snapshot sampled around each id and run through the model;
* ``assets``: the export's JSON assets beside its graph schema, one writer and
  one reader;
* ``recommend``: a link model's recommendation by id, every target node scored
  for a source id by the task's own edge scorer, the best k returned;
* ``embeddings_table``: the Embeddings artifact's Parquet table (GraphInferrer writes
  it, EmbeddingIndex reads it).
"""
