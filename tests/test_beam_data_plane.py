"""Beam's runner-side data-plane stream: a periodic flush must not drop concurrent writes.

The stream is Beam's own (``data_plane.ClosableOutputStream.create`` with a time limit, as
FnApiRunner's data server makes it); the race is forced deterministically: the flush callback
(running in Beam's timer thread, between the buffer's ``get()`` and ``_clear()``) lets another
thread write and waits for it.
"""

import threading

from apache_beam.coders import stream as beam_stream
from apache_beam.runners.worker import data_plane

from gnn_trainer_component.sampler import beam_data_plane


def _write_during_a_flush(stream_class) -> bytes:
  """Writes b"a" * 100, then b"b" * 100 from a thread while a flush is in its callback.

  Returns what the stream handed to its flush and close callbacks, in order.
  """
  sent = []
  in_flush, written = threading.Event(), threading.Event()

  def flushed(data: bytes) -> None:
    sent.append(data)
    if data and not in_flush.is_set():
      in_flush.set()
      written.wait(timeout=1.0)  # unfixed, the other thread's write lands right now

  out = stream_class(close_callback=sent.append, flush_callback=flushed,
                     time_flush_threshold_ms=20)
  out.write(b"a" * 100)
  assert in_flush.wait(timeout=10), "Beam's periodic flush never ran"
  writer = threading.Thread(target=lambda: (out.write(b"b" * 100), written.set()))
  writer.start()
  writer.join(timeout=10)
  assert written.is_set()
  out.close()
  return b"".join(sent)


class _BeamsUnlockedStream(data_plane.TimeBasedBufferingClosableOutputStream):
  write = beam_stream.OutputStream.write  # Beam's write, whatever the patch did to the class


def test_beam_drops_a_write_made_during_a_periodic_flush():
  """The upstream race itself (Beam 2.61 / 2.73): if this fails, Beam fixed it; the patch
  in beam_data_plane can go."""
  assert _write_during_a_flush(_BeamsUnlockedStream) == b"a" * 100


def test_locked_write_waits_for_the_flush_and_nothing_is_dropped():
  beam_data_plane.lock_writes_against_periodic_flush()
  assert not beam_data_plane.lock_writes_against_periodic_flush()  # idempotent
  out = data_plane.ClosableOutputStream.create(lambda _: None, lambda _: None, 1000)
  assert isinstance(out, data_plane.TimeBasedBufferingClosableOutputStream)  # what runners get
  out.close()
  assert _write_during_a_flush(data_plane.TimeBasedBufferingClosableOutputStream) == (
      b"a" * 100 + b"b" * 100)
