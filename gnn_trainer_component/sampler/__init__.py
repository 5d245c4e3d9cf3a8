"""GraphSampler: node/edge tables -> sampled subgraph tf.Examples (TFX, Beam).

Public API::

  from gnn_trainer_component.sampler import GraphSampler

The pure logic (spec building, table reading, validation) lives in
:mod:`gnn_trainer_component.sampler.graph_tables`; the Beam pipeline in
:mod:`gnn_trainer_component.sampler.executor`; the Planetoid loader in
:mod:`gnn_trainer_component.sampler.planetoid`.
"""

from gnn_trainer_component.sampler.component import GraphSampler

__all__ = ["GraphSampler"]
