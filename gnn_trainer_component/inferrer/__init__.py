"""GraphInferrer: a trained model over every node of a node set, written as an Embeddings table."""
