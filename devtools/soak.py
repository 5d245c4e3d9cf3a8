"""Crash soak: SIGKILL a GnnTrainer pipeline K times, retry the same run, check.

The demo pipeline (``devtools.pipeline_child``: ExampleGen -> StatisticsGen ->
SchemaGen -> Transform -> GnnTrainer; ``transform=False``: ExampleGen -> GnnTrainer on
the raw examples) runs in a child process under one pipeline run id. A seeded plan
picks K kill moments, one phase each (see ``PHASES``), in pipeline order; every
attempt is killed (SIGKILL to its process group) at its moment and the run is retried
under the same run id, which makes TFX reuse the same GnnTrainer execution and output
URIs. A final attempt runs to completion, then ``check_invariants`` checks the end state.

Kill moments (the executor logs ``GnnTrainer phase: <name>`` at the start of
each phase; the soak tails the child's log):

* validate, train, export, parity, publish: a seeded delay after the marker
  (``DELAYS``), chosen so the kill lands inside the phase most of the time;
* checkpoint: the ``nth`` (seeded, 1..3) new checkpoint in the resume dir
  (``ckpt-N_temp`` or ``ckpt-N.index`` seen) of this attempt, killed at once;
  if training ends first, the kill falls back to the ``export`` marker;
* mlmd: a seeded delay after ``done`` (the executor returned; TFX then
  publishes the outputs to MLMD in one transaction).

Each attempt records where the kill really landed: the last marker in the log,
whether a checkpoint was being written (``*_temp`` / ``.tempstate`` files left
in the resume dir), whether TFX had started and committed the MLMD publish.

Usage (writes the result JSON, prints the attempt table)::

  TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=2 python -m devtools.soak \
      --kills 10 --seed 0 --out benchmarks/soak-k10-seed0.json

The helpers ``child_args``, ``start_child``, ``resume_dir``, ``run_models``,
``check_serves``, ``backup_train_step`` and ``fits_run`` are shared with
tests/test_resume.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

from devtools import REPO_ROOT

PIPELINE = "gnn-soak"
TRAIN_STEPS = 60  # 3 epochs x 20 steps, a backup every 5 steps
EPOCHS = 3
CONFIG = {"global_batch_size": 16, "epochs": EPOCHS, "backup_every_n_steps": 5,
          "summarize_every_n_steps": "never", "parity_check_examples": 8, "seed": 1}

#: Kill phases, in pipeline order.
PHASES = ("validate", "train", "checkpoint", "export", "parity", "publish", "mlmd")
#: Seconds after the phase marker (checkpoint: unused, see ``Kill.nth``). Measured
#: on 2 cores: validate ~0.13 s; train ~27 s (~24 s of setup and tracing, then
#: 60 fast steps); export ~8 s; parity ~0.6 s; publish < 1 ms (rename, Model
#: properties, resume dir removal); ``done`` -> MLMD commit a few ms (a kill
#: 58 ms after ``done`` found the execution COMPLETE).
DELAYS = {"validate": (0.0, 0.1), "train": (0.0, 26.0), "checkpoint": (0.0, 0.0),
          "export": (0.0, 7.0), "parity": (0.0, 0.5), "publish": (0.0, 0.0005),
          "mlmd": (0.0, 0.005)}
PHASE_RE = re.compile(r"GnnTrainer phase: (\w+)")
PUBLISH_LINE = "Publishing output artifacts"
CKPT_RE = re.compile(r"ckpt-(\d+)")
TEMP_RE = re.compile(r"(_temp$|\.tempstate)")
#: Printed by ``devtools.pipeline_child`` at the end of every Keras ``fit`` in the
#: child, followed by JSON {"batches": n, "epochs": [1-based epochs begun]}:
#: what that process really trained, counted by a callback of its own.
FIT_LINE = "pipeline_child: fit ran "


# --------------------------------------------------------------------------
# Shared with tests/test_resume.py
# --------------------------------------------------------------------------

def child_args(root: str, demo_data: dict, run_id: str, *, pipeline_name: str = PIPELINE,
               train_steps: int = TRAIN_STEPS, config: Optional[dict] = None,
               tuning_config: Optional[dict] = None, transform: bool = False) -> str:
  """The JSON argument of ``python -m devtools.pipeline_child`` (with ``tuning_config``: GnnTuner
  too; ``transform``: StatisticsGen, SchemaGen and Transform before them, else the raw examples)."""
  return json.dumps({"pipeline_name": pipeline_name, "root": root, "run_id": run_id,
                     "examples": demo_data["examples"],
                     "graph_schema": demo_data["graph_schema"],
                     "train_steps": train_steps,
                     "custom_config": dict(CONFIG if config is None else config),
                     "tuning_config": tuning_config, "transform": transform})


def start_child(root: str, demo_data: dict, run_id: str, log_path: str,
                **kwargs) -> subprocess.Popen:
  """Starts the demo pipeline under ``run_id`` in its own session (process group),
  stdout and stderr to ``log_path``. kwargs: see ``child_args``."""
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  with open(log_path, "w") as log:
    return subprocess.Popen(
        [sys.executable, "-m", "devtools.pipeline_child",
         child_args(root, demo_data, run_id, **kwargs)],
        cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)


def kill_group(proc: subprocess.Popen) -> int:
  """SIGKILLs the child's process group; returns its exit code."""
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  return proc.wait()


def pipeline_root(root: str) -> str:
  return os.path.join(root, "pipeline_root")


def metadata_path(root: str) -> str:
  return os.path.join(root, "metadata.sqlite")


def resume_dir(root: str, run_id: str) -> str:
  """GnnTrainer's resume dir for a run of the demo pipeline under ``root``."""
  from gnn_trainer_component import outputs  # pylint: disable=g-import-not-at-top
  model_uri = os.path.join(pipeline_root(root), "GnnTrainer", "model", "1")
  return outputs.resume_dir(model_uri, run_id, model_run_uri="")


def _store(root: str):
  from pipelines.runtime import mlmd_utils  # pylint: disable=g-import-not-at-top
  return mlmd_utils.store(metadata_path(root))


def run_models(root: str, run_id: str) -> list:
  """The LIVE Models attributed to this pipeline run."""
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  store = _store(root)
  ctx = store.get_context_by_type_and_name("pipeline_run", run_id)
  if ctx is None:
    return []
  return [a for a in store.get_artifacts_by_context(ctx.id)
          if a.type == "Model" and a.state == metadata_store_pb2.Artifact.LIVE]


def trainer_executions(root: str, run_id: str) -> list:
  """GnnTrainer executions of this pipeline run."""
  store = _store(root)
  ctx = store.get_context_by_type_and_name("pipeline_run", run_id)
  if ctx is None:
    return []
  return [e for e in store.get_executions_by_context(ctx.id) if "GnnTrainer" in e.type]


_SERVE_SCRIPT = r"""
import glob, json, sys
import tensorflow as tf
path, examples, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = sorted(glob.glob(examples))
records = [r.numpy() for r in tf.data.TFRecordDataset(files).take(n)]
sig = tf.saved_model.load(path).signatures["serving_default"]
out = sig(examples=tf.constant(records))
print("SERVE_RESULT " + json.dumps({k: list(v.shape) for k, v in out.items()}))
"""


def fits_run(log_path: str) -> list[dict]:
  """The fits an attempt ran, from its log: [{"batches": n, "epochs": [...]}, ...]."""
  with open(log_path, errors="replace") as f:
    return [json.loads(line[len(FIT_LINE):]) for line in f if line.startswith(FIT_LINE)]


def _backup_checkpoint(root: str, run_id: str) -> Optional[str]:
  """The path of the checkpoint the resume dir's ``checkpoint`` file points at."""
  for state in glob.glob(os.path.join(resume_dir(root, run_id), "**", "checkpoint"),
                         recursive=True):
    try:
      m = re.search(r'model_checkpoint_path: "(.*?ckpt-\d+)"', open(state).read())
    except OSError:
      continue
    if m:
      return os.path.join(os.path.dirname(state), m.group(1))
  return None


def backup_train_step(root: str, run_id: str) -> Optional[int]:
  """The training step (optimizer iterations) saved in the latest backup; None: no backup.

  Read from the checkpoint itself: where a retry of the run must resume.
  """
  path = _backup_checkpoint(root, run_id)
  if path is None:
    return None
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(path)
  keys = [k for k in reader.get_variable_to_shape_map()
          if re.fullmatch(r"model/optimizer/(_iterations|iter)/\.ATTRIBUTES/VARIABLE_VALUE", k)]
  if len(keys) != 1:
    raise ValueError(f"no single optimizer step variable in {path}: {keys}")
  return int(reader.get_tensor(keys[0]))


def check_serves(saved_model_path: str, examples_glob: str, n: int = 5,
                 timeout: float = 300) -> dict:
  """Loads the SavedModel in a fresh process and serves ``n`` records.

  Returns {"ok": logits of shape (n, 3), "outputs": {name: shape}, "error": ...}.
  """
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  try:
    proc = subprocess.run([sys.executable, "-c", _SERVE_SCRIPT, saved_model_path,
                           examples_glob, str(n)], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=REPO_ROOT)
  except subprocess.TimeoutExpired:
    return {"ok": False, "error": f"timed out after {timeout} s"}
  line = next((l for l in proc.stdout.splitlines() if l.startswith("SERVE_RESULT ")), None)
  if proc.returncode != 0 or line is None:
    return {"ok": False, "error": f"exit {proc.returncode}: {proc.stderr[-2000:]}"}
  outputs = json.loads(line[len("SERVE_RESULT "):])
  return {"ok": outputs.get("logits") == [n, 3], "outputs": outputs}


# --------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------

@dataclasses.dataclass
class Kill:
  phase: str
  delay: float = 0.0  # seconds after the phase marker
  nth: Optional[int] = None  # checkpoint: kill at the nth new checkpoint of the attempt


def plan_kills(k: int, seed: int) -> list[Kill]:
  """K kill moments from a seeded RNG, in pipeline order.

  K < len(PHASES): K distinct phases; otherwise every phase once plus
  K - len(PHASES) random ones (so K = 10 covers all seven). ``mlmd`` comes at
  most once: a kill there may land after TFX committed the execution, and
  then no later kill of the run can be delivered.
  """
  rng = random.Random(seed)
  if k < len(PHASES):
    phases = rng.sample(PHASES, k)
  else:
    extra = [p for p in PHASES if p != "mlmd"]
    phases = list(PHASES) + [rng.choice(extra) for _ in range(k - len(PHASES))]
  phases.sort(key=PHASES.index)
  plan = []
  for phase in phases:
    lo, hi = DELAYS[phase]
    kill = Kill(phase=phase, delay=round(rng.uniform(lo, hi), 4))
    if phase == "checkpoint":
      kill.nth = rng.randint(1, 3)
    plan.append(kill)
  return plan


# --------------------------------------------------------------------------
# Watching a child
# --------------------------------------------------------------------------

class LogTail:
  """Incremental reader of a child's log: phase markers (with the time seen)."""

  def __init__(self, path: str):
    self._path, self._offset, self._partial = path, 0, ""
    self.markers: list[tuple[str, float]] = []
    self.publishing_after_done = False

  def poll(self) -> None:
    try:
      with open(self._path, errors="replace") as f:
        f.seek(self._offset)
        chunk = f.read()
        self._offset = f.tell()
    except FileNotFoundError:
      return
    if not chunk:
      return
    lines = (self._partial + chunk).split("\n")
    self._partial = lines.pop()
    now = time.time()
    for line in lines:
      m = PHASE_RE.search(line)
      if m:
        self.markers.append((m.group(1), now))
      elif PUBLISH_LINE in line and self.last == "done":
        self.publishing_after_done = True

  def seen(self, phase: str) -> Optional[float]:
    return next((t for p, t in self.markers if p == phase), None)

  @property
  def last(self) -> Optional[str]:
    return self.markers[-1][0] if self.markers else None


def _scan(directory: str) -> tuple[set, set]:
  """(checkpoint numbers, paths of checkpoint temp files) under a directory."""
  ckpts, temp = set(), set()
  for dirpath, dirnames, filenames in os.walk(directory):
    for name in dirnames + filenames:
      m = CKPT_RE.search(name)
      if m:
        ckpts.add(int(m.group(1)))
      if TEMP_RE.search(name):
        temp.add(os.path.join(dirpath, name))
  return ckpts, temp


def _latest_backup_number(root: str, run_id: str) -> Optional[int]:
  """The number N of the ``ckpt-N`` the resume dir's ``checkpoint`` file points at."""
  path = _backup_checkpoint(root, run_id)
  return int(CKPT_RE.search(os.path.basename(path)).group(1)) if path else None


def _post_mortem(root: str, run_id: str, model_dirs_glob: str, temp_before: set) -> dict:
  """What a killed attempt left behind."""
  out: dict[str, Any] = {}
  res = resume_dir(root, run_id)
  out["resume_dir"] = os.path.isdir(res)
  # Temp files of a checkpoint write this attempt started and did not finish
  # (earlier attempts' leftovers do not count).
  out["ckpt_in_flight"] = bool(_scan(res)[1] - temp_before)
  out["backup_ckpt"] = _latest_backup_number(root, run_id)
  out["recorder"] = os.path.exists(os.path.join(res, "run_recorder.json"))
  model_dirs = glob.glob(model_dirs_glob)
  out["staging"] = any(os.path.exists(os.path.join(d, "_staging_Format-Serving"))
                       for d in model_dirs)
  out["serving"] = any(os.path.exists(os.path.join(d, "Format-Serving")) for d in model_dirs)
  try:
    from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
    execs = trainer_executions(root, run_id)
    out["exec_state"] = ",".join(
        metadata_store_pb2.Execution.State.Name(e.last_known_state) for e in execs) or "-"
  except Exception as e:  # pylint: disable=broad-except  # e.g. a hot SQLite journal
    out["exec_state"] = f"unreadable: {type(e).__name__}"
  return out


def run_attempt(root: str, demo_data: dict, run_id: str, kill: Optional[Kill],
                log_path: str, *, timeout: float = 900, poll: float = 0.005,
                transform: bool = False) -> dict:
  """Runs one attempt; kills it at ``kill`` (None: runs it to completion)."""
  res = resume_dir(root, run_id)
  temp_before = _scan(res)[1]
  t0 = time.time()
  proc = start_child(root, demo_data, run_id, log_path, transform=transform)
  tail = LogTail(log_path)
  row: dict[str, Any] = {"planned": kill.phase if kill else None,
                         "delay_s": kill.delay if kill else None,
                         "nth": kill.nth if kill else None, "log": log_path}
  kill_at: Optional[float] = None
  train_ckpts: Optional[set] = None  # checkpoints in the resume dir at the train marker
  new_ckpts: set = set()
  marker_time: Optional[float] = None
  fallback = False
  while True:
    if proc.poll() is not None:
      break
    now = time.time()
    if now - t0 > timeout:
      row["timeout"] = True
      break
    tail.poll()
    if kill is not None and kill_at is None:
      if kill.phase == "checkpoint":
        if tail.seen("export") is not None:  # training ended before the nth checkpoint
          kill_at, marker_time, fallback = now, tail.seen("export"), True
        elif tail.seen("train") is not None:
          ckpts = _scan(res)[0] if os.path.isdir(res) else set()
          if train_ckpts is None:
            train_ckpts, marker_time = ckpts, tail.seen("train")
          else:
            # Accumulated: the backup keeps only the latest checkpoint.
            new_ckpts |= ckpts - train_ckpts
            if len(new_ckpts) >= kill.nth:
              kill_at = now
      else:
        marker = "done" if kill.phase == "mlmd" else kill.phase
        marker_time = tail.seen(marker)
        if marker_time is not None:
          kill_at = marker_time + kill.delay
    if kill_at is not None and time.time() >= kill_at:
      break
    # Tight polling where windows are short: a checkpoint write takes ~3 ms,
    # publish < 1 ms, done -> MLMD commit a few ms.
    if kill is not None and kill.phase == "checkpoint" and tail.seen("train") is not None:
      time.sleep(0.001)
    elif kill is not None and kill.phase == "publish" and tail.seen("parity"):
      pass  # spin: publish takes < 1 ms (rename, properties, resume dir removal)
    elif kill is not None and kill.phase == "mlmd" and tail.seen("parity"):
      time.sleep(0.0005)
    elif kill_at is not None:
      time.sleep(max(0.0, min(poll, kill_at - time.time())))
    else:
      time.sleep(poll)

  t_kill = time.time()
  code = kill_group(proc) if proc.poll() is None else proc.returncode
  tail.poll()
  row["exit"] = code
  row["t_s"] = round(t_kill - t0, 3)
  row["killed"] = code == -signal.SIGKILL and not row.get("timeout")
  row["finished_on_own"] = not row["killed"]
  row["after_marker_s"] = (round(t_kill - marker_time, 4)
                           if marker_time is not None and row["killed"] else None)
  row["fallback"] = fallback
  row["last_marker"] = tail.last
  row["publishing_seen"] = tail.publishing_after_done
  row.update(_post_mortem(root, run_id, os.path.join(pipeline_root(root), "GnnTrainer",
                                                      "model", "*"), temp_before))
  row["landed"] = (_landed(row) if row["killed"] else
                   "timeout" if row.get("timeout") else "finished")
  return row


def _landed(row: dict) -> str:
  """Where the kill really landed, from the log and the post-mortem."""
  last = row["last_marker"]
  if last is None:
    return "before-validate"
  if last == "train" and row["ckpt_in_flight"]:
    return "checkpoint"
  if last == "done":
    if row["exec_state"].startswith("COMPLETE"):
      return "mlmd-committed"
    return "mlmd" if row["publishing_seen"] else "done"
  return last


# --------------------------------------------------------------------------
# Invariants
# --------------------------------------------------------------------------

def check_invariants(root: str, run_id: str, demo_data: dict, final_exit: int) -> dict:
  """{name: {"ok": bool, "detail": ...}} for the end state of a soaked run.

  What counts as partial: under ``<pipeline_root>/GnnTrainer/model`` and
  ``model_run``, a folder that is not the URI of a LIVE artifact; a LIVE Model
  folder holding anything but ``Format-Serving`` (or a Format-Serving without
  ``saved_model.pb`` and ``variables/``); a LIVE ModelRun folder without
  ``metrics.json`` and the parity files; any checkpoint temp file
  (``*_temp``, ``*.tempstate*``) or ``_staging_*`` anywhere under pipeline_root.
  """
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  inv: dict[str, dict] = {}
  proot = pipeline_root(root)
  inv["final_attempt_exit_0"] = {"ok": final_exit == 0, "detail": final_exit}

  execs = trainer_executions(root, run_id)
  states = [metadata_store_pb2.Execution.State.Name(e.last_known_state) for e in execs]
  inv["one_trainer_execution_complete"] = {
      "ok": states == ["COMPLETE"], "detail": [(e.id, s) for e, s in zip(execs, states)]}

  models = run_models(root, run_id)
  inv["one_live_model"] = {"ok": len(models) == 1,
                           "detail": [(m.id, m.uri) for m in models]}
  if len(models) == 1:
    serving = os.path.join(models[0].uri, "Format-Serving")
    serve = check_serves(serving, os.path.join(demo_data["examples"], "eval", "*"))
    inv["model_serves"] = {"ok": serve["ok"], "detail": serve}
  else:
    inv["model_serves"] = {"ok": False, "detail": "no single LIVE Model"}

  temp = []
  for dirpath, dirnames, filenames in os.walk(proot):
    for name in dirnames + filenames:
      if name.startswith("_staging_") or TEMP_RE.search(name):
        temp.append(os.path.relpath(os.path.join(dirpath, name), proot))
  inv["no_staging_or_temp"] = {"ok": not temp, "detail": temp}

  store = _store(root)
  live = [a for a in store.get_artifacts()
          if a.state == metadata_store_pb2.Artifact.LIVE]
  live_uris = {os.path.normpath(a.uri) for a in live}
  leftovers = []
  for sub in ("model", "model_run"):
    for d in sorted(glob.glob(os.path.join(proot, "GnnTrainer", sub, "*"))):
      if os.path.normpath(d) not in live_uris:
        leftovers.append(os.path.relpath(d, proot) + " (no LIVE artifact)")
  for a in live:
    if a.type == "Model" and "/GnnTrainer/" in a.uri and os.path.isdir(a.uri):
      content = sorted(os.listdir(a.uri))
      fs = os.path.join(a.uri, "Format-Serving")
      if content != ["Format-Serving"] or not (
          os.path.exists(os.path.join(fs, "saved_model.pb"))
          and os.path.isdir(os.path.join(fs, "variables"))):
        leftovers.append(f"{os.path.relpath(a.uri, proot)} holds {content}")
    if a.type == "ModelRun" and "/GnnTrainer/" in a.uri and os.path.isdir(a.uri):
      missing = [f for f in ("metrics.json", "parity/examples.tfrecord",
                             "parity/predictions.json")
                 if not os.path.exists(os.path.join(a.uri, f))]
      if missing:
        leftovers.append(f"{os.path.relpath(a.uri, proot)} lacks {missing}")
  inv["no_leftover_folders"] = {"ok": not leftovers, "detail": leftovers}

  missing = [(a.id, a.type, a.uri) for a in live if not os.path.exists(a.uri)]
  inv["live_artifacts_have_files"] = {"ok": not missing,
                                      "detail": missing or f"{len(live)} LIVE artifacts"}

  res = resume_dir(root, run_id)
  inv["resume_dir_gone"] = {"ok": not os.path.exists(res),
                            "detail": sorted(os.listdir(res)) if os.path.isdir(res) else None}

  if len(models) == 1:
    from pipelines.runtime import mlmd_utils  # pylint: disable=g-import-not-at-top
    props = mlmd_utils.custom_properties(models[0])
    # The published Model describes the whole run, however many attempts it took:
    # all steps and epochs, and the final epoch's eval metrics.
    detail = {k: props.get(k) for k in ("train_steps", "resumed_from_step", "epochs",
                                        "eval_sparse_categorical_accuracy", "eval_loss")}
    inv["model_properties"] = {
        "ok": (props.get("train_steps") == TRAIN_STEPS and props.get("epochs") == EPOCHS
               and "eval_sparse_categorical_accuracy" in props and "eval_loss" in props),
        "detail": detail}
  # Informational (not an invariant): TFX's per-execution scratch dirs left behind.
  system = sorted(os.path.relpath(p, proot) for p in glob.glob(
      os.path.join(proot, "GnnTrainer", ".system", "stateful_working_dir", "*")))
  inv["info_system_leftovers"] = {"ok": True, "detail": system}
  return inv


# --------------------------------------------------------------------------
# The soak
# --------------------------------------------------------------------------

def run_soak(kills: int, seed: int, demo_data: dict, work_dir: str, *,
             run_id: Optional[str] = None, attempt_timeout: float = 900,
             final_timeout: float = 1200, verbose: bool = True,
             transform: bool = False) -> dict:
  """Runs the soak in ``work_dir`` (must be empty or new); returns the result dict.

  ``transform``: the demo with StatisticsGen, SchemaGen and Transform before GnnTrainer
  (the command's default), else GnnTrainer on the raw examples (CI's size).
  """
  os.makedirs(work_dir, exist_ok=True)
  run_id = run_id or f"soak-seed{seed}"
  plan = plan_kills(kills, seed)
  t0 = time.time()
  rows = []
  for i, kill in enumerate(plan):
    row = run_attempt(work_dir, demo_data, run_id, kill,
                      os.path.join(work_dir, f"attempt{i + 1:02d}.log"),
                      timeout=attempt_timeout, transform=transform)
    row["attempt"] = i + 1
    rows.append(row)
    if verbose:
      print(format_row(row), flush=True)
  final = run_attempt(work_dir, demo_data, run_id, None,
                      os.path.join(work_dir, "final.log"), timeout=final_timeout,
                      transform=transform)
  final["attempt"] = "final"
  rows.append(final)
  if verbose:
    print(format_row(final), flush=True)
  inv = check_invariants(work_dir, run_id, demo_data, final["exit"])
  delivered: dict[str, int] = {}
  landed: dict[str, int] = {}
  planned: dict[str, int] = {}
  for r in rows[:-1]:
    planned[r["planned"]] = planned.get(r["planned"], 0) + 1
    if r["killed"]:
      delivered[r["planned"]] = delivered.get(r["planned"], 0) + 1
      landed[r["landed"]] = landed.get(r["landed"], 0) + 1
  return {
      "kills": kills, "seed": seed, "run_id": run_id, "work_dir": work_dir,
      "config": CONFIG, "train_steps": TRAIN_STEPS,
      "plan": [dataclasses.asdict(k) for k in plan],
      "planned_per_phase": planned, "delivered_per_phase": delivered,
      "landed_per_phase": landed,
      "kills_delivered": sum(delivered.values()),
      "attempts": rows, "invariants": inv,
      "ok": all(v["ok"] for v in inv.values()),
      "wall_time_s": round(time.time() - t0, 1),
  }


COLUMNS = ("attempt", "planned", "delay_s", "nth", "landed", "last_marker", "exit", "t_s",
           "after_marker_s", "backup_ckpt", "recorder", "ckpt_in_flight", "staging", "serving",
           "exec_state")


def format_row(row: dict) -> str:
  return " | ".join(str(row.get(c)) for c in COLUMNS)


def format_table(result: dict) -> str:
  """The attempt table and the invariants, as text (for reports and assert messages)."""
  lines = [" | ".join(COLUMNS)]
  lines += [format_row(r) for r in result["attempts"]]
  lines.append("")
  for name, v in result["invariants"].items():
    lines.append(f"{'OK  ' if v['ok'] else 'FAIL'} {name}: {v['detail']}")
  lines.append(f"kills delivered {result['kills_delivered']}/{result['kills']}, "
               f"planned {result['planned_per_phase']}, landed {result['landed_per_phase']}, "
               f"wall {result['wall_time_s']} s")
  return "\n".join(lines)


def main(argv=None) -> int:
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  gnn_trainer_component.setup_process()  # Keras 2 here and in the pipeline children
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--kills", type=int, default=10)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--out", help="write the result JSON here")
  parser.add_argument("--work-dir", help="keep the run here (default: a temp dir, removed)")
  parser.add_argument("--num-nodes", type=int, default=600)
  parser.add_argument("--attempt-timeout", type=float, default=900)
  parser.add_argument("--transform", action=argparse.BooleanOptionalAction, default=True,
                      help="StatisticsGen, SchemaGen and Transform before GnnTrainer "
                           "(--no-transform: GnnTrainer on the raw examples)")
  args = parser.parse_args(argv)

  from pipelines.demo import data as demo_data_lib  # pylint: disable=g-import-not-at-top
  tmp = tempfile.mkdtemp(prefix="gnn-soak-")
  result = None
  try:
    demo_data = demo_data_lib.write_demo_data(os.path.join(tmp, "data"),
                                              num_nodes=args.num_nodes)
    work_dir = args.work_dir or os.path.join(tmp, "run")
    result = run_soak(args.kills, args.seed, demo_data, work_dir,
                      attempt_timeout=args.attempt_timeout, transform=args.transform)
  finally:
    if result is not None and result["ok"]:
      shutil.rmtree(tmp, ignore_errors=True)
    else:
      print(f"Kept {tmp} (logs, pipeline root, MLMD) for diagnosis", file=sys.stderr)
  print(format_table(result))
  if args.out:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
      json.dump(result, f, indent=2, default=str)
  return 0 if result["ok"] else 1


if __name__ == "__main__":
  sys.exit(main())
