"""The graph core: one definition of tables, sampling, link rules and encoding for every engine.

GraphSampler, LinkSampler, GnnTrainer's graph in memory and both GraphInferrer
engines stand on it; it imports none of them.

* ``tables``: the one reader of node, edge and seed tables (CSV, TFRecord,
  Parquet), and their checks;
* ``table_formats``: a table's format and files, and the CSV and TFRecord
  readers of a file as checked chunks;
* ``parquet_format``: the Parquet reader (Arrow columns to checked chunks);
* ``ids``: node ids, integer or bytes: ``IdFinder``, wanted ids looked up, ids
  as bytes;
* ``sampling``: hop config -> ``SamplingSpec`` -> ``SamplingPlan`` (a strategy
  per sampling op) and an engine's refusal of a strategy it does not run;
* ``choice``: one node's choice of edges per strategy and each hop's time
  bound (what the Beam samplers run; the in-memory kernel runs the same laws
  vectorized);
* ``link_config``: ``link_config`` checked against the schema, each end's
  plan and the link examples' schema;
* ``links``: the edge split (random or by time), each split's supervised pairs
  and the leakage rules;
* ``negatives``: the rule of a negative (``EdgeKeys``), the draws (training,
  and each ranked query's), and the one definition of a node's popularity
  (popularity negatives and baselines);
* ``ranking``: how a held-out edge is ranked (filtered among every target,
  among its own negatives, as of its time) and MRR / hits@K;
* ``csr``: the one builder of a CSR index: the row offsets, the order by row,
  each entry's offset within its row;
* ``params``: the graph parameters of an execution (seeds, sampling config,
  link_config) decoded into one ``GraphParams``, naming the component and
  the parameter;
* ``plan``: one call that checks the graph parameters against the schema and
  an engine before any table is read;
* ``readout``: the ``_readout`` structure names and a pair's readout;
* ``encoding``: the one tf.Example writer of sampled subgraphs;
* ``statistics``: a graph's statistics over the core's arrays (degrees and
  their log2 buckets, self loops, multi-edges, dangling ends, duplicate ids,
  homophily, seeds shared by splits);
* ``table_statistics``: a graph's statistics from its tables read with their
  faults counted (one JSON-ready dict per graph; how well a feature predicts
  the label);
* ``feature_statistics``: TFDV's feature statistics of a table (its features as
  an Arrow record batch, one dataset and split per table);
* ``errors``: ``GraphInputError``, ``GraphTooLargeError``.
"""
