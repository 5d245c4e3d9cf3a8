"""LinkSampler: component, executor, Beam pipeline and pure logic (links)."""
