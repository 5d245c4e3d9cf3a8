"""GnnTuner: hyperparameter search on GnnTrainer's training path (keras-tuner's algorithms)."""
