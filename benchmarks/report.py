"""How every benchmark reports: one JSON object on stdout, the same written to ``--output``."""

from __future__ import annotations

import json
import os
import resource
import statistics
import time
from typing import Any, Callable, Mapping, Optional

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


def peak_rss_bytes() -> int:
  """This process's own peak resident memory: its ``VmHWM``.

  Not ``ru_maxrss`` (the fallback where ``/proc`` is missing): Linux carries the parent's
  peak over fork and exec into it, so a child started by a process holding TensorFlow
  reports at least that process's peak. Standard library only: the peers' scripts
  (``pyg_gcn.py``, ``dgl_sage.py``), run in their own venvs, import it too.
  """
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def alternate(variants: Mapping[str, Callable[[], Any]], rounds: int
              ) -> tuple[dict[str, list[float]], dict[str, float], dict[str, Any]]:
  """Each variant called in turn, ``rounds`` times, in this process.

  Returns:
    (each variant's seconds per round, their medians, each variant's last result).
  """
  seconds: dict[str, list[float]] = {name: [] for name in variants}
  results: dict[str, Any] = {}
  for _ in range(rounds):
    for name, call in variants.items():
      start = time.perf_counter()
      results[name] = call()
      seconds[name].append(round(time.perf_counter() - start, 3))
  return seconds, {name: statistics.median(s) for name, s in seconds.items()}, results
