"""GraphSampler: component, executor, Beam pipeline and pure logic (tables)."""
