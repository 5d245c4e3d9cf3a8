"""EmbeddingIndex: a nearest-neighbour index over GraphInferrer's embeddings, gated and served."""
