"""Planetoid pipeline: tables -> GraphSampler -> StatisticsGen/SchemaGen -> GnnTrainer."""
