"""What a person sees while a local pipeline runs: one line per component, one per epoch.

A LocalDagRunner run prints thousands of lines of TFX/absl/Beam/TensorFlow logs.
``pipeline_console(log_path)`` sends all of them to ``log_path`` and shows on
the terminal only:

* one line per component: ``[4/8] Transform ... ran in 41.2 s`` (``cached``,
  ``imported``, ``skipped``, ``FAILED``), from TFX's own log records
  (``Component %s is running.`` / ``is finished.`` of LocalDagRunner,
  ``A cached execution %d is used.`` / ``Going to run a new execution %d`` of
  the portable Launcher; the same texts in TFX 1.16 and 1.21);
* one line per training epoch, from Keras' ``verbose=2`` output
  (``Epoch 3/5`` then ``30/30 - 2s - loss: ... - val_loss: ...``), or from an
  absl line ``GnnTrainer epoch 3/5: loss=0.1234 val_loss=...`` if the trainer
  logs one (then that one is shown and Keras' is not);
* whatever the caller ``echo()``-es (the end summary).

How: file descriptors 1 and 2 point to the log file for the duration (so
TensorFlow's C++ logs, warnings and child processes such as the user-module
wheel build land there too); ``sys.stdout`` is wrapped to read Keras' epoch
lines on their way into the file; a logging handler on the root logger reads
the TFX records. On an error the last lines of the log are shown.

``--verbose`` or ``GNN_VERBOSE=1`` (``verbose_requested``) turns all of this off:
everything is printed as before and no log file is written.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import threading
import time
from typing import Any, Callable, Iterator, Optional, TextIO

#: Environment variable that restores the full output (``1``, ``true``, ``yes``, ``on``).
VERBOSE_ENV = "GNN_VERBOSE"
#: Lines of the log file shown when the run fails.
TAIL_LINES_ON_ERROR = 25

# TFX's messages (tfx/orchestration/local/local_dag_runner.py and
# tfx/orchestration/portable/launcher.py, identical in TFX 1.16 and 1.21),
# matched on the formatted message, tolerant of punctuation and spacing.
_RUNNING = re.compile(r"^Component\s+(?P<id>\S+?)\s+is\s+running\.?\s*$")
_FINISHED = re.compile(r"^Component\s+(?P<id>\S+?)\s+is\s+finished\.?\s*$")
_SKIPPED = re.compile(r"^Skipping\s+component\s+(?P<id>\S+?)\.?\s*$")
_CACHED = re.compile(r"^A\s+cached\s+execution\s+(?P<exec>\d+)\s+is\s+used", re.I)
_NEW_EXECUTION = re.compile(r"^Going\s+to\s+run\s+a\s+new\s+execution\s+(?P<exec>\d+)\s*$")
_ALREADY_SUCCEEDED = re.compile(r"^This\s+execution\s+has\s+already\s+succeeded", re.I)
_IMPORTER = re.compile(r"^Running\s+as\s+an\s+importer\s+node", re.I)
_RESOLVER = re.compile(r"^Running\s+as\s+an?\s+resolver\s+node", re.I)
_SKIPPED_EXECUTION = re.compile(r"^Skipping\s+execution\s+for\s+(?P<id>\S+)")
_EXECUTION_FAILED = re.compile(r"^Execution\s+(?P<exec>\d+)\s+failed\.?\s*$")
#: The trainer's own per-epoch line: ``GnnTrainer epoch %d/%d: %s``.
_TRAINER_EPOCH = re.compile(
    r"^GnnTrainer\s+epoch\s+(?P<epoch>\d+)/(?P<total>\d+|\?):\s*(?P<metrics>.*?)\s*$")
#: The trainer's resume notice (gnn_trainer_component/trainer/callbacks.py).
_TRAINER_RESUMED = re.compile(r"^Resuming\s+from\s+checkpoint\s+at\s+step\s+(?P<step>\d+)")
# Keras (tf_keras 2.16 .. 2.21) ProgbarLogger, verbose=2: "Epoch 3/5", then at
# the end of the epoch "30/30 - 2s - loss: 0.4605 - val_loss: 0.2766 - 2s/epoch - 58ms/step".
_KERAS_EPOCH = re.compile(r"^Epoch\s+(?P<epoch>\d+)/(?P<total>\d+)\s*$")
_KERAS_SUMMARY = re.compile(r"^\s*(?:\d+/(?:\d+|Unknown)\s+)?-\s+(?P<secs>\d+)s\s+-\s+(?P<rest>.*)$")
_KERAS_METRIC = re.compile(
    r"(?:^|\s-\s)(?P<name>[A-Za-z_][\w./-]*):\s+(?P<value>[-+]?(?:nan|inf|\d+(?:\.\d*)?(?:e[-+]?\d+)?))"
    r"(?=\s+-\s|\s*$)", re.I)


def verbose_requested(flag: Optional[bool] = None) -> bool:
  """True if the full output was asked for: ``flag``, else ``$GNN_VERBOSE``."""
  if flag:
    return True
  return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def parse_keras_summary(line: str) -> Optional[tuple[dict[str, str], Optional[int]]]:
  """Keras' verbose=2 end-of-epoch line -> ({metric: value text}, seconds), or None."""
  m = _KERAS_SUMMARY.match(line)
  if not m:
    return None
  metrics = {mm.group("name"): mm.group("value")
             for mm in _KERAS_METRIC.finditer(" - " + m.group("rest"))}
  if not metrics:
    return None
  return metrics, int(m.group("secs"))


def _format_metrics(metrics: dict[str, str]) -> str:
  """Training metrics first, then the validation ones, as ``key=value``."""
  train = [k for k in metrics if not k.startswith("val_")]
  val = [k for k in metrics if k.startswith("val_")]
  return " ".join(f"{k}={metrics[k]}" for k in train + val)


class Progress:
  """Turns log records and stdout lines into console lines (no I/O of its own).

  ``write`` receives text to show; it may lack a final newline (a component's
  line is begun when it starts and completed when it finishes).
  """

  def __init__(self, write: Callable[[str], None], *, total: Optional[int] = None,
               clock: Callable[[], float] = time.monotonic):
    self._write = write
    self._clock = clock
    self._lock = threading.RLock()
    self.total = total
    self.index = 0
    self._line_open = False
    # The running component.
    self.component: Optional[str] = None
    self._prefix = ""
    self._started = 0.0
    self._status: Optional[str] = None
    self._execution: Optional[str] = None
    # Epoch lines: from "keras" or "trainer" (the trainer's line wins).
    self._epoch_source: Optional[str] = None
    self._keras_epoch: Optional[tuple[int, int]] = None
    self._keras_epoch_began = 0.0
    self._last_epoch: Optional[tuple[int, Any]] = None
    #: (component id, status, seconds) of every finished component, in order.
    self.finished: list[tuple[str, str, float]] = []

  # Output.
  def _emit_line(self, text: str) -> None:
    if self._line_open:
      self._write("\n")
      self._line_open = False
    self._write(text + "\n")

  def _emit_partial(self, text: str) -> None:
    if self._line_open:
      self._write("\n")
    self._write(text)
    self._line_open = True

  def echo(self, text: str = "") -> None:
    """Shows ``text`` as its own line(s)."""
    with self._lock:
      self._emit_line(text)

  @contextlib.contextmanager
  def step(self, label: str) -> Iterator[None]:
    """A phase outside TFX (``label ... done in 1.2 s``)."""
    with self._lock:
      self._emit_partial(f"{label} ...")
    start = self._clock()
    try:
      yield
    except BaseException:
      with self._lock:
        self._finish_line(f"{label}", f"FAILED after {self._clock() - start:.1f} s")
      raise
    with self._lock:
      self._finish_line(label, f"done in {self._clock() - start:.1f} s")

  def _finish_line(self, prefix: str, outcome: str) -> None:
    if self._line_open:
      self._write(f" {outcome}\n")
      self._line_open = False
    else:
      self._write(f"{prefix} ... {outcome}\n")

  # Inputs.
  def handle_record(self, record: logging.LogRecord) -> None:
    try:
      message = record.getMessage()
    except Exception:  # pylint: disable=broad-except
      return
    self.handle_message(message)

  def handle_message(self, message: str) -> None:
    """One formatted log message (TFX's or the trainer's)."""
    message = message.strip()
    with self._lock:
      m = _RUNNING.match(message)
      if m:
        self._start(m.group("id"))
        return
      m = _FINISHED.match(message)
      if m:
        self._finish(m.group("id"))
        return
      m = _SKIPPED.match(message)
      if m:
        self.index += 1
        self._emit_line(f"{self._counter()} {m.group('id')} ... skipped")
        self.finished.append((m.group("id"), "skipped", 0.0))
        return
      m = _TRAINER_EPOCH.match(message)
      if m:
        self._trainer_epoch(int(m.group("epoch")), m.group("total"), m.group("metrics"))
        return
      m = _TRAINER_RESUMED.match(message)
      if m:
        self._emit_line(f"      resuming from the checkpoint at step {m.group('step')}")
        return
      if self.component is None:
        # Keras' lines arrive through absl when interactive logging is off.
        self.handle_stdout_line(message)
        return
      if _CACHED.match(message):
        self._status = "cached"
        self._execution = _CACHED.match(message).group("exec")
      elif _NEW_EXECUTION.match(message):
        self._status = "ran"
        self._execution = _NEW_EXECUTION.match(message).group("exec")
      elif _ALREADY_SUCCEEDED.match(message):
        self._status = "already done (earlier attempt of this run)"
      elif _IMPORTER.match(message):
        self._status = "imported"
      elif _RESOLVER.match(message):
        self._status = "resolved"
      elif _SKIPPED_EXECUTION.match(message):
        self._status = "skipped (inputs not ready)"
      elif _EXECUTION_FAILED.match(message):
        self._status = "FAILED"
      else:
        self.handle_stdout_line(message)

  def handle_stdout_line(self, line: str) -> None:
    """One line written to stdout (Keras' progress output)."""
    line = line.strip()
    if not line:
      return
    with self._lock:
      m = _KERAS_EPOCH.match(line)
      if m:
        self._keras_epoch = (int(m.group("epoch")), int(m.group("total")))
        self._keras_epoch_began = self._clock()
        return
      parsed = parse_keras_summary(line)
      if parsed is None or self._epoch_source == "trainer":
        return
      metrics, secs = parsed
      self._epoch_source = "keras"
      self._last_epoch = self._keras_epoch
      self._emit_line(self._epoch_text(self._keras_epoch, _format_metrics(metrics), secs))

  def _trainer_epoch(self, epoch: int, total: str, metrics: str) -> None:
    keras = self._keras_epoch if self._keras_epoch and self._keras_epoch[0] == epoch else None
    if total == "?" and keras:
      total = str(keras[1])
    shown_by_keras = (self._epoch_source == "keras" and self._last_epoch is not None
                      and self._last_epoch[0] == epoch)
    self._epoch_source = "trainer"
    self._last_epoch = (epoch, total)
    if not shown_by_keras:
      # Keras' "Epoch n/N" is printed as the epoch begins: its duration from there.
      secs = self._clock() - self._keras_epoch_began if keras else None
      self._emit_line(self._epoch_text((epoch, total), metrics, secs))

  @staticmethod
  def _epoch_text(epoch: Optional[tuple[int, Any]], metrics: str,
                  secs: Optional[float]) -> str:
    where = f"epoch {epoch[0]}/{epoch[1]}" if epoch else "epoch"
    took = ("" if secs is None else f" ({secs} s)" if isinstance(secs, int)
            else f" ({secs:.1f} s)")
    return f"      {where}: {metrics}{took}"

  # Components.
  def _counter(self) -> str:
    return f"[{self.index}/{self.total}]" if self.total else f"[{self.index}]"

  def _start(self, component: str) -> None:
    if self.component is not None:  # A "finished" line was missed.
      self._finish(self.component)
    self.index += 1
    self.component = component
    self._prefix = f"{self._counter()} {component}"
    self._started = self._clock()
    self._status = None
    self._execution = None
    self._epoch_source = None
    self._keras_epoch = None
    self._last_epoch = None
    self._emit_partial(f"{self._prefix} ...")

  def _finish(self, component: str) -> None:
    if self.component != component:
      self._emit_line(f"[?] {component} finished")
      return
    seconds = self._clock() - self._started
    status = self._status or "done"
    outcome = f"{status} in {seconds:.1f} s"
    if self._execution and status in ("ran", "cached"):
      outcome = f"{status} (execution {self._execution}) in {seconds:.1f} s"
    self._finish_line(self._prefix, outcome)
    self.finished.append((component, status, seconds))
    self.component = None

  def fail(self) -> None:
    """Marks the running component (if any) as failed."""
    with self._lock:
      if self.component is not None:
        seconds = self._clock() - self._started
        self._finish_line(self._prefix, f"FAILED after {seconds:.1f} s")
        self.finished.append((self.component, "FAILED", seconds))
        self.component = None
      elif self._line_open:
        self._write("\n")
        self._line_open = False


class _RecordHandler(logging.Handler):
  """Feeds every log record to a ``Progress``."""

  def __init__(self, progress: Progress):
    super().__init__(level=logging.INFO)
    self._progress = progress

  def emit(self, record: logging.LogRecord) -> None:
    try:
      self._progress.handle_record(record)
    except Exception:  # pylint: disable=broad-except
      self.handleError(record)


class _StdoutTap(io.TextIOBase):
  """``sys.stdout`` stand-in: writes through to ``target`` and reports whole lines."""

  def __init__(self, target: TextIO, on_line: Callable[[str], None]):
    super().__init__()
    self._target = target
    self._on_line = on_line
    self._buffer = ""
    self._lock = threading.Lock()

  def write(self, s: str) -> int:
    n = self._target.write(s)
    lines = []
    with self._lock:
      self._buffer += s
      if "\n" in self._buffer:
        *lines, self._buffer = self._buffer.split("\n")
    for line in lines:
      self._on_line(line)
    return len(s) if n is None else n

  def flush(self) -> None:
    self._target.flush()

  def fileno(self) -> int:
    return self._target.fileno()

  def isatty(self) -> bool:
    return False

  def writable(self) -> bool:
    return True

  @property
  def encoding(self):  # pytype: disable=signature-mismatch
    return getattr(self._target, "encoding", "utf-8")

  def __getattr__(self, name):
    return getattr(self._target, name)


class Console:
  """What ``pipeline_console`` yields: ``echo``, ``step`` and the facts of the run."""

  def __init__(self, *, verbose: bool, log_path: Optional[str],
               progress: Optional[Progress], out: TextIO):
    self.verbose = verbose
    self.log_path = log_path
    self.progress = progress
    self._out = out

  def echo(self, text: str = "") -> None:
    """Shows ``text`` on the terminal (and writes it to the log file)."""
    if self.progress is None:
      print(text, file=self._out, flush=True)
      return
    self.progress.echo(text)
    print(text, file=sys.stderr, flush=True)  # fd 2 is the log file here.

  @contextlib.contextmanager
  def step(self, label: str) -> Iterator[None]:
    """A phase outside TFX, shown as ``label ... done in 1.2 s`` (quiet mode)."""
    if self.progress is None:
      yield
      return
    with self.progress.step(label):
      yield

  def set_total(self, total: int) -> None:
    """Number of components, for ``[i/total]``."""
    if self.progress is not None:
      self.progress.total = total


def _tail(path: str, n: int) -> list[str]:
  try:
    with open(path, "rb") as f:
      f.seek(0, os.SEEK_END)
      size = f.tell()
      f.seek(max(0, size - 256 * 1024))
      data = f.read().decode("utf-8", errors="replace")
  except OSError:
    return []
  return data.splitlines()[-n:]


@contextlib.contextmanager
def pipeline_console(log_path: str, *, verbose: Optional[bool] = None,
                     total: Optional[int] = None, stream: str = "stdout") -> Iterator[Console]:
  """Quiet console for a local pipeline run; the full output goes to ``log_path``.

  Args:
    log_path: The log file (its folder is created; an earlier one is replaced).
    verbose: True: today's full output on the terminal, no log file. None:
      ``$GNN_VERBOSE`` decides (see ``verbose_requested``).
    total: Number of pipeline components, if known (``[i/total]``).
    stream: Where the progress lines go: the terminal's "stdout" or "stderr"
      (keeps stdout free for a result a script reads).

  Yields:
    A ``Console``. Use ``echo`` for what the person should read: ``print`` goes
    to the log file while the console is active.
  """
  if stream not in ("stdout", "stderr"):
    raise ValueError(f"stream must be 'stdout' or 'stderr', got {stream!r}")
  if verbose_requested(verbose):
    yield Console(verbose=True, log_path=None, progress=None,
                  out=sys.stdout if stream == "stdout" else sys.stderr)
    return

  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top

  log_path = os.path.abspath(log_path)
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
  sys.stdout.flush()
  sys.stderr.flush()
  saved = {1: os.dup(1), 2: os.dup(2)}
  terminal = os.fdopen(os.dup(saved[1] if stream == "stdout" else saved[2]), "w",
                       buffering=1, encoding="utf-8", errors="replace")

  def write(text: str) -> None:
    terminal.write(text)
    terminal.flush()

  progress = Progress(write, total=total)
  real_stdout = sys.stdout
  root = logging.getLogger()
  added_handlers: list[logging.Handler] = []
  old_absl_verbosity = absl_logging.get_verbosity()
  try:
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    sys.stdout = _StdoutTap(real_stdout, progress.handle_stdout_line)
    if not root.handlers:
      # What absl would otherwise set up on first use (logging.basicConfig(),
      # to stderr), in absl's format; stderr is the log file now.
      file_handler = logging.StreamHandler(sys.stderr)
      file_handler.setFormatter(absl_logging.PythonFormatter())
      added_handlers.append(file_handler)
    added_handlers.append(_RecordHandler(progress))
    for handler in added_handlers:
      root.addHandler(handler)
    if old_absl_verbosity < absl_logging.INFO:
      absl_logging.set_verbosity(absl_logging.INFO)  # TFX's progress records are INFO.
    yield Console(verbose=False, log_path=log_path, progress=progress, out=terminal)
  except BaseException:
    progress.fail()
    with contextlib.suppress(Exception):
      sys.stdout.flush()
      sys.stderr.flush()
    lines = _tail(log_path, TAIL_LINES_ON_ERROR)
    if lines:
      write(f"--- last {len(lines)} lines of {log_path} ---\n")
      write("\n".join(lines) + "\n---\n")
    write(f"Full log: {log_path}\n")
    raise
  finally:
    for handler in added_handlers:
      root.removeHandler(handler)
    if absl_logging.get_verbosity() != old_absl_verbosity:
      absl_logging.set_verbosity(old_absl_verbosity)
    with contextlib.suppress(Exception):
      sys.stdout.flush()
    sys.stdout = real_stdout
    with contextlib.suppress(Exception):
      real_stdout.flush()
      sys.stderr.flush()
    os.dup2(saved[1], 1)
    os.dup2(saved[2], 2)
    for fd in (saved[1], saved[2], log_fd):
      os.close(fd)
    terminal.close()
