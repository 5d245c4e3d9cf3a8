"""Process facts and setup: Keras 2 for TF-GNN, chosen before TensorFlow is imported; memory.

TensorFlow >= 2.16 binds ``tf.keras`` to Keras 3 unless ``TF_USE_LEGACY_KERAS=1``
is in the environment when ``tf.keras`` is first used; TF-GNN works with Keras
2 only. Nothing in this package changes the environment on import: each entry
point (a pipeline script, the compile tool, a benchmark, the test suite) calls
:func:`setup_process` first, container images set the variable, and the
executors call :func:`check_keras_2`, which fails with what to do instead of an
obscure error deep in a Keras layer.

:func:`setup_process` also caps glibc's malloc arenas (``MALLOC_ARENA_MAX``) at the
cores this process may use, unless the variable is set: TensorFlow's thread pools
otherwise get an arena each (8 per core), and a trainer's resident memory
grows with the freed but unreturned memory of each arena until it is about
double (measured in ``benchmarks/README.md``, "Memory: malloc arenas").

:func:`memory_bytes` is the memory this process may use: what the in-memory
engines check a graph against before loading it. :func:`trace_unconverted`
traces a function without AutoGraph where it allows it (exports and saved
sampling stages).
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import sys
from typing import Any, Callable, Optional

from absl import logging

from gnn_trainer_component import errors

LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"
#: glibc's variable for the most malloc arenas (its default: 8 per core).
MALLOC_ARENA_ENV = "MALLOC_ARENA_MAX"
#: ``mallopt``'s parameter number of ``M_ARENA_MAX`` (glibc's malloc.h).
_M_ARENA_MAX = -8


class KerasVersionError(errors.GnnError, RuntimeError):
  """TensorFlow in this process uses Keras 3; TF-GNN needs Keras 2."""


def _fix(who: str) -> str:
  return (f"{who} needs Keras 2 (tf-keras), but tf.keras is Keras 3 in this process: "
          f"{LEGACY_KERAS_ENV}=1 must be set before TensorFlow is imported. Call "
          "gnn_trainer_component.setup_process() at the top of the script, before importing "
          f"tfx or tensorflow, or run it with `{LEGACY_KERAS_ENV}=1 python ...`.")


def check_keras_2(who: str = "GnnTrainer") -> None:
  """Raises KerasVersionError unless ``tf.keras`` is Keras 2 (imports TensorFlow).

  Args:
    who: What needs it, for the message (e.g. "GnnTrainer's executor").
  """
  import tensorflow as tf  # Imported here: setup_process() must be able to run first.
  if not tf.keras.__name__.startswith("tf_keras"):
    raise KerasVersionError(_fix(who))


def setup_process() -> None:
  """Sets up this process for TF-GNN: Keras 2 for ``tf.keras``; call it first.

  Sets ``TF_USE_LEGACY_KERAS=1`` (also for the processes this one starts:
  Beam workers, replicas of a local job) unless it is already set. When
  TensorFlow was already imported, checks that ``tf.keras`` is Keras 2 (it is
  bound on first use, so importing TensorFlow before this call is fine).
  Unless ``MALLOC_ARENA_MAX`` is set, caps glibc's malloc arenas at the cores
  this process may use (at least 2), for it and the processes it starts: see
  :func:`cap_malloc_arenas`.

  Raises:
    KerasVersionError: ``tf.keras`` was used before, as Keras 3.
  """
  os.environ.setdefault(LEGACY_KERAS_ENV, "1")
  if MALLOC_ARENA_ENV not in os.environ:
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count() or 1)
    arenas = max(2, cores)
    if cap_malloc_arenas(arenas):
      os.environ[MALLOC_ARENA_ENV] = str(arenas)
  if "tensorflow" in sys.modules:
    check_keras_2("gnn_trainer_component")


def cap_malloc_arenas(arenas: int) -> bool:
  """Caps this process's glibc malloc arenas at ``arenas`` (``mallopt(M_ARENA_MAX)``).

  glibc gives each thread that allocates an arena of its own, up to 8 per
  core; memory freed in an arena stays mapped for it. TensorFlow's thread pools
  reach that many, and a process that trains holds about twice the memory it
  would with one arena per core (``MALLOC_ARENA_MAX``, which glibc reads at
  start; this sets the same limit later, for arenas not made yet).

  Args:
    arenas: The most arenas (>= 1).

  Returns:
    Whether it was set: False where the C library is not glibc.
  """
  try:
    if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
      return False
    mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
  except (ValueError, OSError, AttributeError):  # not glibc (musl, macOS, Windows)
    return False
  return mallopt(_M_ARENA_MAX, arenas) == 1


def memory_bytes() -> int:
  """The memory this process may use: RAM, or a lower cgroup (container) or address-space limit.

  The address-space limit is ``RLIMIT_AS`` (``ulimit -v``, set by some
  containers and batch systems); a process over it gets a bare MemoryError. What
  counts is what is left of it: the limit minus the address space already mapped
  (TensorFlow alone maps gigabytes).
  """
  total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    try:
      with open(path, encoding="utf-8") as f:
        limit = f.read().strip()
    except OSError:
      continue
    if limit.isdigit():
      total = min(total, int(limit))
  soft, _ = resource.getrlimit(resource.RLIMIT_AS)
  if soft != resource.RLIM_INFINITY:
    total = min(total, max(soft - _address_space_used(), 0))
  return total


def _address_space_used() -> int:
  """Bytes of address space this process maps already (``VmSize``; 0 where unknown)."""
  try:
    with open("/proc/self/status", encoding="utf-8") as f:
      for line in f:
        if line.startswith("VmSize:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return 0


def trace_unconverted(python_function: Callable[..., Any], input_signature: Any,
                      what: str) -> Optional[Any]:
  """``python_function`` as a ``tf.function`` traced without AutoGraph, or None if it needs it.

  Tracing with AutoGraph first transpiles every function the trace reaches (every TF-GNN
  layer, recursively), which takes most of the time of an export or of saving sampling
  stages, although that code branches and loops on Python values only. Code that puts a
  tensor in a Python condition raises TypeError unconverted: then this logs that ``what``
  needs AutoGraph and returns None, and the caller traces it converted.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  # importing this module loads no TF
  plain = tf.function(python_function, input_signature=input_signature, autograph=False)
  try:
    plain.get_concrete_function()
  except TypeError as e:
    logging.info("%s needs AutoGraph (%s); tracing it converted", what, e)
    return None
  return plain


def trace(python_function: Callable[..., Any], input_signature: Any, what: str) -> Any:
  """``python_function`` as a traced ``tf.function``, without AutoGraph where it can be.

  :func:`trace_unconverted` first; a function that needs AutoGraph is traced converted.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  # importing this module loads no TF
  plain = trace_unconverted(python_function, input_signature, what)
  if plain is not None:
    return plain
  converted = tf.function(python_function, input_signature=input_signature)
  converted.get_concrete_function()
  return converted


def variable_name(*parts: str) -> str:
  """A TensorFlow variable's name from ``parts`` joined by ``_``.

  A character TensorFlow's name scopes refuse (``/`` in a feature name, ``#`` in ``#id``)
  becomes ``_``.
  """
  return re.sub(r"[^A-Za-z0-9_.\->]", "_", "_".join(parts))
