"""A real tf.data service (one DispatchServer + one WorkerServer) in a child process.

Usage: python -m tests.data_service  -> prints "DISPATCHER <port>", then every
0.2 s "TASKS <n>": the tasks (jobs' iterations) the worker runs at that moment.
"""

import contextlib
import subprocess
import sys
import time


def main() -> None:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  service = tf.data.experimental.service
  dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
  dispatcher_address = dispatcher.target.split("://")[1]
  worker = service.WorkerServer(service.WorkerConfig(
      dispatcher_address=dispatcher_address, worker_address="127.0.0.1:%port%"))
  print("DISPATCHER", dispatcher_address.rsplit(":", 1)[1], flush=True)
  while True:
    print("TASKS", worker._num_tasks(), flush=True)  # pylint: disable=protected-access
    time.sleep(0.2)


@contextlib.contextmanager
def running(log_path: str):
  """Starts the service; yields (dispatcher port, a function returning the most
  tasks its worker ran at once so far)."""
  with open(log_path, "w") as log:
    proc = subprocess.Popen([sys.executable, "-m", "tests.data_service"],
                            stdout=log, stderr=subprocess.STDOUT, text=True)

  def lines(prefix):
    with open(log_path) as f:
      return [l.split()[1] for l in f if l.startswith(prefix)]

  try:
    deadline = time.time() + 120
    while not lines("DISPATCHER "):
      assert proc.poll() is None and time.time() < deadline, open(log_path).read()[-2000:]
      time.sleep(0.1)
    yield int(lines("DISPATCHER ")[0]), lambda: max(map(int, lines("TASKS ")), default=0)
  finally:
    proc.kill()
    proc.wait()


if __name__ == "__main__":
  main()
