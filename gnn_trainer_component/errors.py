"""The one base class of the errors this package raises on bad input, config or environment.

Each room defines its own subclasses next to the code that raises them (e.g.
``trainer.config.ConfigError``, ``sampler``'s ``GraphInputError``), each also
deriving from the built-in exception a caller would expect (``ValueError`` for
bad input, ``RuntimeError`` for a failed run, ``ConnectionError`` for an
unreachable server). ``except GnnError`` catches every one of them.
"""


class GnnError(Exception):
  """Base class of every gnn_trainer_component error."""
