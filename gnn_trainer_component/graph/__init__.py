"""The graph core: one definition of tables, sampling, link rules and encoding for every engine.

GraphSampler, LinkSampler, GnnTrainer's graph in memory and both GraphInferrer
engines stand on it; it imports none of them.

* ``tables``: the one reader of node, edge and seed tables (CSV, TFRecord),
  and their checks;
* ``sampling``: hop config -> ``SamplingSpec`` -> ``SamplingPlan`` (a strategy
  per sampling op) and an engine's refusal of a strategy it does not run;
* ``choice``: one node's choice of edges per strategy and each hop's time
  bound (what the Beam samplers run; the in-memory kernel runs the same laws
  vectorized);
* ``links``: ``link_config``, the edge split, negatives and leakage rules;
* ``params``: a JSON execution property (seeds, sampling config,
  link_config) decoded, naming the component and the parameter;
* ``plan``: one call that checks the graph parameters against the schema and
  an engine before any table is read;
* ``readout``: the ``_readout`` structure names and a pair's readout;
* ``encoding``: the one tf.Example writer of sampled subgraphs;
* ``errors``: ``GraphInputError``, ``GraphTooLargeError``.
"""
