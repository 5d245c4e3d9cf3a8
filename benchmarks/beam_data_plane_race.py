"""Beam's data-plane race, measured: bytes lost by the runner's input streams, Beam's write vs locked.

  PYTHONPATH=. .venv/bin/python -m benchmarks.beam_data_plane_race --trials 8 \\
      --output benchmarks/results/beam-data-plane-race-DATE.json

Each trial sends one materialized stage input to 2 workers the way Beam's
FnApiRunner does (``ParallelBundleManager``: one thread per worker, each
``BundleManager._send_input_to_worker`` writing its partition chunk by chunk to a
``TimeBasedBufferingClosableOutputStream`` with the runner's 1,000 ms periodic
flush, then ``close()``), with Beam's own stream class. The flush and close
callbacks build the ``Elements.Data`` message the gRPC channel would send and
count its bytes. Variants, interleaved trial by trial: ``beam`` (Beam's
``write``) and ``locked`` (``write`` under the flush lock, as
``gnn_trainer_component.beam.data_plane`` patches it). No TF-GNN, no
gRPC server: only the stream and its flush thread. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Optional, Sequence

from apache_beam.coders import stream as beam_stream
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.worker import data_plane

from benchmarks import report
from gnn_trainer_component.beam import data_plane as beam_data_plane


class _BeamWrite(data_plane.TimeBasedBufferingClosableOutputStream):
  write = beam_stream.OutputStream.write  # Beam's own, even after the patch


class _LockedWrite(data_plane.TimeBasedBufferingClosableOutputStream):
  write = beam_data_plane.locked_write


_VARIANTS = {"beam": _BeamWrite, "locked": _LockedWrite}


def _send(stream_class, chunks: int, chunk: bytes, result: list) -> None:
  sent = []

  def to_channel(data: bytes) -> None:
    sent.append(len(beam_fn_api_pb2.Elements.Data(
        instruction_id="bundle", transform_id="read", data=data).data))

  out = stream_class(close_callback=to_channel, flush_callback=to_channel,
                     time_flush_threshold_ms=worker_handlers.DATA_BUFFER_TIME_LIMIT_MS)
  for _ in range(chunks):
    out.write(chunk)
  out.close()
  result.append({"messages": len(sent), "received": sum(sent)})


def trial(variant: str, chunks: int, chunk_mb: int, workers: int) -> dict:
  """One stage input sent to ``workers`` streams at once; bytes written vs received."""
  chunk = b"x" * (chunk_mb << 20)
  results = []
  threads = [threading.Thread(target=_send, args=(_VARIANTS[variant], chunks, chunk, results))
             for _ in range(workers)]
  start = time.time()
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  written = chunks * len(chunk)
  return {"variant": variant, "seconds": round(time.time() - start, 2),
          "written_mb_per_stream": written >> 20,
          "lost_mb_per_stream": [(written - r["received"]) >> 20 for r in results],
          "flush_messages_per_stream": [r["messages"] for r in results]}


def main(argv: Optional[Sequence[str]] = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--trials", type=int, default=8, help="Per variant.")
  p.add_argument("--chunks", type=int, default=88,
                 help="Chunks per stream (the 10M-edge sampler's Flatten: 176 over 2 workers).")
  p.add_argument("--chunk-mb", type=int, default=10, help="Beam flushes outputs at 10 MB.")
  p.add_argument("--workers", type=int, default=2)
  p.add_argument("--output", help="Also write the JSON here.")
  args = p.parse_args(argv)
  runs = []
  for i in range(args.trials):
    for variant in (("beam", "locked") if i % 2 == 0 else ("locked", "beam")):
      runs.append(trial(variant, args.chunks, args.chunk_mb, args.workers))
      print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
  summary = {}
  for variant in _VARIANTS:
    mine = [r for r in runs if r["variant"] == variant]
    lost = [mb for r in mine for mb in r["lost_mb_per_stream"]]
    summary[variant] = {"trials": len(mine), "trials_losing_data": sum(
        1 for r in mine if any(r["lost_mb_per_stream"])), "streams": len(lost),
                        "streams_losing_data": sum(1 for mb in lost if mb),
                        "lost_mb_max": max(lost), "lost_mb_total": sum(lost)}
  result = {"command": " ".join(["python -m benchmarks.beam_data_plane_race"]
                                + list(argv if argv is not None else sys.argv[1:])),
            "date": time.strftime("%Y-%m-%d"), "args": vars(args),
            "flush_period_ms": worker_handlers.DATA_BUFFER_TIME_LIMIT_MS,
            "summary": summary, "runs": runs}
  report.print_result(result, args.output, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
