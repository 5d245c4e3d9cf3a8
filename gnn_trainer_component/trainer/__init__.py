"""GnnTrainer: component and executor (TFX glue) and the modules they use.

``component`` and ``executor`` (a TFX ``GenericExecutor``), ``launcher`` (a
job of replicas on Vertex AI or locally); ``inputs`` (artifacts -> one
``TrainingInputs`` and TFX's ``FnArgs``), ``examples`` (examples on disk as
the TrainingData), ``custom_config`` (every custom_config key), ``config``
(execution properties -> TrainerConfig), ``module_contract`` (the user
module), ``splits`` and ``validation`` (input files), ``transform`` (Transform output); ``training``
(``runner.run``), ``keras_trainer`` (TF-GNN's Keras trainer with the batch
cache and XLA), ``callbacks``, ``input_data`` (the input pipelines),
``publish`` (parity check, run files, atomic publish of the export that
``gnn_trainer_component.model`` defines) and ``curves`` (training curves).
"""
