"""LinkSampler: component, executor, its Beam pipeline and the subgraphs of each pair."""
