"""The one base class of the errors this package raises on bad input, config or environment.

Each room defines its own subclasses next to the code that raises them (e.g.
``trainer.config.ConfigError``, ``sampler``'s ``GraphInputError``), each also
deriving from the built-in exception a caller would expect (``ValueError`` for
bad input, ``RuntimeError`` for a failed run, ``ConnectionError`` for an
unreachable server). ``except GnnError`` catches every one of them.
"""


class GnnError(Exception):
  """Base class of every gnn_trainer_component error."""


def op_error_cause(message: str) -> str:
  """The line of a TensorFlow op error's message that says what went wrong.

  Graph-execution errors carry the Python stack of the op that failed
  ("Detected at node ...", "File ..." lines) and the node (``[[{{node ...}}]]``)
  around their cause; this returns the last line that is neither.
  """
  lines = [line.strip() for line in message.splitlines() if line.strip()]
  return ([line for line in lines if not line.startswith(
      ("Detected at node", "File ", "Graph execution", "[[{{node"))] or lines or [""])[-1]
