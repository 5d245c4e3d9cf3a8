"""GraphValidator: a graph's statistics held to bounds and to the last snapshot -> anomalies."""
