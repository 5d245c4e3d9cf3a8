"""The Beam engine: sampling plans run on Apache Beam, beside the in-memory engine.

GraphSampler, LinkSampler, GraphInferrer's and GraphStatisticsGen's Beam engines stand on it; it
stands on the graph core and imports no component.

* ``sampling``: the own engine, a plan run as joins (every strategy, node
  features broadcast or joined, example assembly);
* ``subgraphs``: subgraphs around seeds, by the own engine (GraphSampler,
  GraphInferrer);
* ``statistics``: a graph's statistics as Beam aggregates, assembled into the
  in-memory engine's numbers (GraphStatisticsGen's Beam engine);
* ``errors``: running a pipeline (inside the data-plane fix, timed);
* ``data_plane``: the fix of Beam's data-plane race, applied only while a
  pipeline runs.
"""
