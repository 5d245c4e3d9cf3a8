"""Beam's runner-side data-plane stream: a periodic flush must not drop concurrent writes.

The stream is Beam's own (``data_plane.ClosableOutputStream.create`` with a time limit, as
FnApiRunner's data server makes it); the race is forced deterministically: the flush callback
(running in Beam's timer thread, between the buffer's ``get()`` and ``_clear()``) lets another
thread write and waits for it.
"""

import threading

import apache_beam as beam
from apache_beam.coders import stream as beam_stream
from apache_beam.runners.worker import data_plane
from apache_beam.testing import util as beam_util
import pytest

from gnn_trainer_component.beam import data_plane as beam_data_plane
from gnn_trainer_component.beam import errors as beam_errors

# Beam's own stream, which differs between the stacks' Beam releases.
pytestmark = pytest.mark.compat

_STREAM = data_plane.TimeBasedBufferingClosableOutputStream


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
  with beam_data_plane.writes_locked_against_periodic_flush("test") as installed:
    assert installed
    with beam_data_plane.writes_locked_against_periodic_flush("nested") as again:
      assert again
    assert _STREAM.write is beam_data_plane.locked_write  # the outer run still holds it
    out = data_plane.ClosableOutputStream.create(lambda _: None, lambda _: None, 1000)
    assert isinstance(out, _STREAM)  # what runners get
    out.close()
    assert _write_during_a_flush(_STREAM) == b"a" * 100 + b"b" * 100


def test_the_fix_is_restored_when_the_run_leaves():
  """Outside a sampler's run the process has Beam's own class (and its race)."""
  with pytest.raises(KeyError):
    with beam_data_plane.writes_locked_against_periodic_flush("test"):
      raise KeyError("the pipeline failed")
  assert "write" not in vars(_STREAM)
  assert _STREAM.write is beam_stream.OutputStream.write
  assert _write_during_a_flush(_STREAM) == b"a" * 100


def _is_locked(_):
  return _STREAM.write is beam_data_plane.locked_write


def test_run_pipeline_holds_the_fix_only_while_the_pipeline_runs():
  pipeline = beam.Pipeline()
  locked = pipeline | beam.Create([0]) | beam.Map(_is_locked)
  beam_util.assert_that(locked, beam_util.equal_to([True]))
  beam_errors.run_pipeline(pipeline, [], "LinkSampler")
  assert _STREAM.write is beam_stream.OutputStream.write
