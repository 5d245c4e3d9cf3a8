"""The quickstart (docs/quickstart.md): a CSV graph through GraphSampler, GnnTrainer, Evaluator,
BulkInferrer and Pusher, then one request served (``python -m pipelines.quickstart``)."""
