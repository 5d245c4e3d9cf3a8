"""GnnTrainer: component and executor (TFX glue) and the pure modules they use.

``config`` (custom_config keys -> TrainerConfig), ``module_contract`` (the user
module), ``splits`` and ``validation`` (input files), ``transform`` (Transform
output), ``strategy`` (distribution), ``training`` (``runner.run``) and
``export`` (serving signature, parity check, run files, atomic publish).
"""
