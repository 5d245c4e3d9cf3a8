"""The samplers: node/edge tables -> tf.Examples for GnnTrainer (TFX, Beam).

* ``graph/``: ``GraphSampler`` (a subgraph around each seed node, with
  TF-GNN's Beam sampler): ``component``, ``executor``, ``pipeline`` (Beam),
  ``tables`` (pure logic: sampling spec, seed checks, example keys).
* ``link/``: ``LinkSampler`` (link-prediction examples: edge splits,
  negatives, subgraphs around both ends of each pair): ``component``,
  ``executor``, ``pipeline`` (Beam), ``links`` (pure logic).
* Shared by both: ``inputs`` (reading and checking the unigraph tables, the
  hop-by-hop sampling config, JSON properties), ``staging`` (output channels
  and artifacts, staged writing and atomic publish of the splits),
  ``beam_errors`` (running the pipeline, explaining known Beam failures),
  ``beam_data_plane`` (the fix of Beam's data-plane race, applied only while a
  sampler's pipeline runs).

Both components are exported as ``gnn_trainer_component.GraphSampler`` and
``gnn_trainer_component.LinkSampler``.
"""
