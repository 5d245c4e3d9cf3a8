"""How every benchmark reports: one JSON object on stdout, the same written to ``--output``."""

from __future__ import annotations

import json
import os
from typing import Optional

#: The repository root (this folder's parent), for every benchmark.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def print_result(result: dict, output: Optional[str], indent: Optional[int] = None) -> None:
  """Prints ``result`` as JSON (the last thing on stdout) and writes it to ``output``.

  Args:
    result: The benchmark's result object.
    output: A file path, or None; its folder is created if missing.
    indent: ``json.dumps`` indent; None prints one line.
  """
  text = json.dumps(result, indent=indent)
  print(text)
  if output:
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output, "w") as f:
      f.write(text + "\n")
