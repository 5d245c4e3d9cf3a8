"""The samplers: node/edge tables -> tf.Examples for GnnTrainer (TFX, Beam).

* ``graph/``: ``GraphSampler`` (a subgraph around each seed node, on the
  Beam samplers' own engine):
  ``component``, ``executor``, ``pipeline`` (every split written at once; the
  seed keys).
* ``link/``: ``LinkSampler`` (link-prediction examples: edge splits,
  negatives, subgraphs around both ends of each pair): ``component``,
  ``executor``, ``pipeline`` (Beam, on the own engine), ``subgraphs`` (the
  pair's exclusion, example assembly).
* Shared by both: ``staging`` (output channels and artifacts, staged writing
  and atomic publish of the splits).

Tables, the hop config and the link rules are the graph core's
(:mod:`gnn_trainer_component.graph`); the Beam engine both run on is
:mod:`gnn_trainer_component.beam`. Both components are exported as
``gnn_trainer_component.GraphSampler`` and ``gnn_trainer_component.LinkSampler``.
"""
