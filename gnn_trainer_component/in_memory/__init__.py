"""The in-memory engine: the graph held once in memory, sampled on the fly, in layers.

``store`` (the tables as arrays, ids -> indices, CSR) -> ``choosers`` (a node's
out-edges chosen by each sampling strategy) -> ``kernel`` (a graph core
``SamplingPlan`` run over the store) -> ``batch`` (one batch of sampled
subgraphs by name, and its encoders) -> ``dataset`` (subgraphs as GraphTensors
in tf.data), ``deduplication`` (when training steps are deduplicated batches, and
the check on the model), ``full_graph`` (the whole graph every step, seeds by structured
readout), ``embed`` (every node through a model, batch by batch), ``blocks`` (a chunk of
nodes with their incident edges, for layer-wise inference), ``link_pairs``
(link prediction pairs, fresh negatives per batch), ``retrieval`` (held-out
edges ranked against every node), ``snapshot`` (the graph and the strategies'
edge orders as the served sampler's snapshot) -> ``adapters`` (the graph loaded
for GnnTrainer as its TrainingData: sampled, whole graph or link pairs; the
``graph_mode`` choice and the held-out ranking policy).
"""
