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

:func:`lock_writes_against_periodic_flush` makes ``write()`` take the same lock
as ``flush()``, so a flush sends everything written before it and a write
waits for a running flush. The GraphSampler and LinkSampler executors call it
before they run their Beam pipeline; it changes that class for the whole
process (any Beam pipeline run from it afterwards is fixed too).

Not covered: SDK workers started with the ``data_buffer_time_limit_ms``
experiment write their outputs through Beam's compiled coders, which bypass
the Python-level ``write``; that experiment is off by default.
"""

from __future__ import annotations

from absl import logging
from apache_beam.coders import stream
from apache_beam.runners.worker import data_plane

_STREAM = data_plane.TimeBasedBufferingClosableOutputStream


def locked_write(self: data_plane.TimeBasedBufferingClosableOutputStream, b: bytes,
                 nested: bool = False) -> None:
  """``OutputStream.write`` under the stream's flush lock (what the patch installs)."""
  with self._flush_lock:  # pylint: disable=protected-access
    stream.OutputStream.write(self, b, nested)


def lock_writes_against_periodic_flush() -> bool:
  """Makes Beam's time-flushed data-plane streams write under their flush lock.

  Idempotent. Patches nothing when Beam's own class already overrides
  ``write`` (a future Beam that fixes the race itself).

  Returns:
    True if this call patched the class, False if it was patched already or
    Beam's class does not have the racy ``write``.
  """
  if _STREAM.write is locked_write:
    return False
  if _STREAM.write is not stream.OutputStream.write:
    logging.info("Beam's %s overrides write(); not patching it.", _STREAM.__name__)
    return False
  _STREAM.write = locked_write
  logging.info("Beam data plane: %s.write now holds the flush lock (%s).",
               _STREAM.__name__, __name__)
  return True
