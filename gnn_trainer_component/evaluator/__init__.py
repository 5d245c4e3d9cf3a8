"""GraphEvaluator: evaluates and blesses a graph model on held-out nodes against baselines."""
