"""GraphStatisticsGen: a graph's tables -> TFDV's statistics per table and the graph's own."""
