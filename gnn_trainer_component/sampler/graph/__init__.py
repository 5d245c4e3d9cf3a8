"""GraphSampler: component, executor and its Beam pipeline (every split at once)."""
