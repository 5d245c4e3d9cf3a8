"""LinkSampler: a TFX Beam component from node/edge tables to link-prediction Examples.

Example::

  graph_tables = tfx.dsl.Importer(
      source_uri="path/to/tables",       # graph_schema.pbtxt + tables
      artifact_type=GraphSchema).with_id("graph_tables")
  links = LinkSampler(
      graph_schema=graph_tables.outputs["result"],
      link_config={"edge_set": "cites",
                   "splits": {"train": 0.85, "eval": 0.05, "test": 0.10},
                   "negatives_per_positive": 1,
                   "hops": [{"cites": 10}, {"cites": 5}],
                   "undirected": True, "seed": 0})
  trainer = GnnTrainer(examples=links.outputs["examples"],
                       graph_schema=links.outputs["output_graph_schema"], ...)
"""

from __future__ import annotations

from typing import Any, Mapping

from tfx import v1 as tfx
from tfx.dsl.components.base import base_beam_component
from tfx.dsl.components.base import executor_spec
from tfx.utils import json_utils

from gnn_trainer_component import spec as spec_lib
from gnn_trainer_component.sampler import staging
from gnn_trainer_component.sampler.link import executor


class LinkSampler(base_beam_component.BaseBeamComponent):
  """Splits an edge set's edges, samples negatives, and a subgraph around each pair.

  Each example holds the union of the subgraphs sampled (``hops``, or each
  end's own) around the two ends of one supervised pair, in the message-passing graph (the
  ``message_split``'s edges and the other edge sets; the held-out splits'
  edges never, and the pair's own edge never), plus TF-GNN's link-prediction
  readout: node set ``_readout`` (float ``label``: 1 edge, 0 negative) and
  edge sets ``_readout/source``, ``_readout/target``. Train it with
  ``runner.DotProductLinkPrediction`` / ``HadamardProductLinkPrediction`` (or
  ``gnn_trainer_component.tasks.DotProductLinkPrediction``, which adds AUC
  metrics). With ``"edge_label"`` in ``link_config`` every pair is an edge,
  ``label`` its value of that feature, and no negative is drawn: train it with
  ``tasks.EdgeRegression`` or ``tasks.EdgeBinaryClassification``.

  Outputs:
    examples: ``Examples`` with one ``Split-<name>`` per split (GZIP
      TFRecords, like ExampleGen), custom properties ``num_positives_<split>``
      and ``num_negatives_<split>``.
    output_graph_schema: ``GraphSchema`` that parses those examples.
  """

  SPEC_CLASS = spec_lib.LinkSamplerSpec
  EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

  def __init__(self, graph_schema: tfx.types.BaseChannel, link_config: Mapping[str, Any],
               num_shards: int = 1):
    """Constructs a LinkSampler.

    Args:
      graph_schema: ``GraphSchema`` artifact: a folder with
        ``graph_schema.pbtxt`` whose node/edge sets name CSV or TFRecord tables
        in ``metadata.filename`` (TF-GNN unigraph format).
      link_config: ``edge_set`` (the edges to predict), ``splits``
        (``{name: fraction}``, adding up to 1), ``negatives_per_positive``
        (> 0, or one per split), ``hops`` (``[{edge_set: fan_out}, ...]`` from
        each end) or ``source_hops`` and ``target_hops`` (one list per end,
        e.g. for an edge set between two node sets), optional
        ``reverse_edge_set`` (the same edges reversed: held out with them),
        ``negative_sampling`` (``"uniform"`` or ``"popularity"``),
        ``message_split`` (default ``"train"``), ``undirected`` (default
        false) and ``seed`` (default 0). Checked against the graph schema
        when the component runs (``docs/samplers.md``).
      num_shards: Output files per split (0: the Beam runner decides).

    Raises:
      ValueError: if ``link_config`` is not a mapping.
    """
    if not isinstance(link_config, Mapping):
      raise ValueError("LinkSampler needs link_config={'edge_set': ..., 'splits': {...}, "
                       "'negatives_per_positive': ..., 'hops': [...]}.")
    spec = spec_lib.LinkSamplerSpec(
        graph_schema=graph_schema,
        link_config=json_utils.dumps(dict(link_config)),
        num_shards=num_shards,
        **staging.output_channels())
    super().__init__(spec=spec)


__all__ = ["LinkSampler"]
