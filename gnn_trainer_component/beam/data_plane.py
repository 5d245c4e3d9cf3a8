"""A fix for a race in Beam's data plane that silently drops a stage's input.

Beam's portable DirectRunner (the FnApiRunner behind ``--direct_running_mode=
multi_processing`` and ``multi_threading``) sends each bundle's input to a
worker through a ``data_plane.TimeBasedBufferingClosableOutputStream``: the
runner's data server is built with ``worker_handlers.DATA_BUFFER_TIME_LIMIT_MS``
(1,000 ms), so a timer thread flushes the stream every second. ``flush()`` takes
the buffer (``get()``), hands it to the gRPC send queue and then ``_clear()``s
it, under a lock that ``write()`` does not take. The runner thread writes a
materialized input chunk by chunk (``BundleManager._send_input_to_worker``),
so a chunk written while a flush is between ``get()`` and ``_clear()`` is
cleared without having been sent: the worker never sees those elements, and no
error is raised. It takes a stage input that is written for longer than the
flush period: on 2 cores, the ~1.8 GB inputs of TF-GNN's sampler on a
10M-edge graph (benchmarks/README.md, "GraphSampler at scale"), where about
half of the runs then failed in a later join (or would have written examples
with elements missing). Seen in Beam 2.61 and 2.73 (the two stacks).

:func:`writes_locked_against_periodic_flush` makes ``write()`` take the same
lock as ``flush()``, so a flush sends everything written before it and a write
waits for a running flush. The GraphSampler and LinkSampler executors run their
Beam pipeline inside it; it installs the fix on that class when the first run
enters and restores Beam's own ``write`` when the last run leaves, so Beam
pipelines run from the process outside a sampler are left as Beam made them.

Not covered: SDK workers started with the ``data_buffer_time_limit_ms``
experiment write their outputs through Beam's compiled coders, which bypass
the Python-level ``write``; that experiment is off by default.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from absl import logging
from apache_beam.coders import stream
from apache_beam.runners.worker import data_plane

_STREAM = data_plane.TimeBasedBufferingClosableOutputStream

#: Guards the class attribute and the count of runs inside the context.
_STATE_LOCK = threading.Lock()
_state = {"runs": 0, "installed": False, "saved": None}


def locked_write(self: data_plane.TimeBasedBufferingClosableOutputStream, b: bytes,
                 nested: bool = False) -> None:
  """``OutputStream.write`` under the stream's flush lock (what the patch installs)."""
  with self._flush_lock:  # Beam's private lock: the one its own flush takes.
    stream.OutputStream.write(self, b, nested)


def _install() -> bool:
  """Installs :func:`locked_write` on Beam's class unless Beam overrides ``write`` itself."""
  if _STREAM.write is not stream.OutputStream.write:
    return False
  _state["saved"] = _STREAM.__dict__.get("write")  # None: inherited from OutputStream
  _STREAM.write = locked_write
  return True


def _restore() -> None:
  """Puts back what :func:`_install` replaced."""
  if _state["saved"] is None:
    del _STREAM.write
  else:
    _STREAM.write = _state["saved"]
  _state["installed"], _state["saved"] = False, None


@contextlib.contextmanager
def writes_locked_against_periodic_flush(who: str) -> Iterator[bool]:
  """Makes Beam's time-flushed data-plane streams write under their flush lock, for a while.

  Re-entrant and thread-safe: the fix is installed when the first caller
  enters and Beam's own ``write`` is restored when the last one leaves.
  Installs nothing when Beam's class already overrides ``write`` (a future
  Beam that fixes the race itself). Logs one line per call.

  Args:
    who: The component whose pipeline runs inside (named in the log).

  Yields:
    Whether the locked ``write`` is in place for the body.
  """
  with _STATE_LOCK:
    if _state["runs"] == 0:
      _state["installed"] = _install()
    _state["runs"] += 1
    installed = _state["installed"]
  if installed:
    logging.info("%s: Beam data plane: %s.write holds the flush lock while the pipeline "
                 "runs (%s).", who, _STREAM.__name__, __name__)
  else:
    logging.info("%s: Beam's %s overrides write(); not patching it.", who, _STREAM.__name__)
  try:
    yield installed
  finally:
    with _STATE_LOCK:
      _state["runs"] -= 1
      if _state["runs"] == 0 and _state["installed"]:
        _restore()
