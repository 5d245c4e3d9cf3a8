"""Process setup and the package's error classes."""

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys

import gnn_trainer_component
from gnn_trainer_component import errors
from tests.helpers import REPO_ROOT


def _python(code: str, **env_vars: str) -> subprocess.CompletedProcess:
  env = {k: v for k, v in os.environ.items()
         if k not in ("TF_USE_LEGACY_KERAS", "MALLOC_ARENA_MAX")}
  env.update(TF_CPP_MIN_LOG_LEVEL="3", **env_vars)
  return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env,
                        capture_output=True, text=True, timeout=300)


def test_importing_the_package_changes_nothing_and_setup_process_chooses_keras_2():
  proc = _python(
      "import os, gnn_trainer_component\n"
      "assert 'TF_USE_LEGACY_KERAS' not in os.environ\n"
      "gnn_trainer_component.setup_process()\n"
      "import tensorflow as tf\n"
      "print(os.environ['TF_USE_LEGACY_KERAS'], tf.keras.__name__)\n")
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.split() == ["1", "tf_keras.api._v2.keras"]


#: Eight threads allocate at once (64 KiB each: glibc's heap, not mmap), then glibc prints its
#: arenas ("Arena N:") to stderr; stdout holds MALLOC_ARENA_MAX as the process sees it.
_ARENAS = """
import ctypes, os, threading
import gnn_trainer_component
gnn_trainer_component.setup_process()
barrier = threading.Barrier(8)
def allocate():
  barrier.wait()
  kept = [bytearray(65536) for _ in range(16)]
  barrier.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(os.environ["MALLOC_ARENA_MAX"])
ctypes.CDLL(None).malloc_stats()
"""


def _arenas(proc: subprocess.CompletedProcess) -> tuple[str, int]:
  assert proc.returncode == 0, proc.stderr[-2000:]
  return proc.stdout.strip(), sum(line.startswith("Arena ") for line in proc.stderr.splitlines())


def test_setup_process_caps_mallocs_arenas_at_the_cores_unless_the_variable_is_set():
  cores = len(os.sched_getaffinity(0))
  limit, arenas = _arenas(_python(_ARENAS))
  assert limit == str(max(2, cores)) and arenas <= max(2, cores), (limit, arenas)
  # The user's value wins (glibc read it at start): eight threads get arenas of their own.
  limit, arenas = _arenas(_python(_ARENAS, MALLOC_ARENA_MAX="64"))
  assert limit == "64" and arenas == 9, (limit, arenas)


def test_keras_3_loaded_first_is_named_with_the_fix():
  proc = _python(
      "import tensorflow as tf, gnn_trainer_component\n"
      "tf.keras.layers.Dense(1)  # tf.keras is loaded (as Keras 3) on first use\n"
      "from gnn_trainer_component import process\n"
      "try:\n"
      "  gnn_trainer_component.setup_process()\n"
      "except process.KerasVersionError as e:\n"
      "  print(e)\n")
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "tf.keras is Keras 3" in proc.stdout
  assert "gnn_trainer_component.setup_process() at the top of the script" in proc.stdout


def test_every_error_class_of_the_package_derives_from_gnn_error():
  found = []
  for info in pkgutil.walk_packages(gnn_trainer_component.__path__, "gnn_trainer_component."):
    module = importlib.import_module(info.name)
    for _, cls in inspect.getmembers(module, inspect.isclass):
      if issubclass(cls, BaseException) and cls.__module__ == info.name:
        found.append(cls)
  assert len(found) >= 20
  assert sorted(c.__qualname__ for c in found if not issubclass(c, errors.GnnError)) == []
