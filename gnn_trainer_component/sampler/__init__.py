"""GraphSampler: node/edge tables -> sampled subgraph tf.Examples (TFX, Beam).

``graph_tables`` holds the pure logic (spec building, table reading,
validation); ``executor`` the Beam pipeline; ``component`` the TFX component
(also exported as ``gnn_trainer_component.GraphSampler``).
"""
