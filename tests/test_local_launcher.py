"""Fast tests of the pure parts of the container run (issue 16): DAG order, the
launcher's refusals, podman's private configuration. The real run is
tests/test_containers.py."""

import os

import pytest

from devtools import containers
from devtools import local_launcher


def _spec(tasks: dict) -> dict:
  """A PipelineSpec skeleton: task -> (dependentTasks, artifact producers)."""
  out = {"root": {"dag": {"tasks": {}}}, "components": {}, "deploymentSpec": {"executors": {}}}
  for name, (deps, producers) in tasks.items():
    body = {"componentRef": {"name": f"comp-{name}"}}
    if deps:
      body["dependentTasks"] = deps
    if producers:
      body["inputs"] = {"artifacts": {
          f"in{i}": {"taskOutputArtifact": {"producerTask": p, "outputArtifactKey": "out"}}
          for i, p in enumerate(producers)}}
    out["root"]["dag"]["tasks"][name] = body
    out["components"][f"comp-{name}"] = {"executorLabel": f"exec-{name}"}
  return out


def test_task_order_puts_producers_first_and_is_stable():
  spec = _spec({"Pusher": (["Evaluator"], ["Trainer"]), "Evaluator": ([], ["Trainer", "Gen"]),
                "Trainer": ([], ["Gen", "importer"]), "Gen": ([], []), "importer": ([], [])})
  assert local_launcher.task_order(spec) == ["Gen", "importer", "Trainer", "Evaluator", "Pusher"]


def test_task_order_rejects_cycles_and_unknown_producers():
  with pytest.raises(local_launcher.LauncherError, match=r"cycle among \['A', 'B'\]"):
    local_launcher.task_order(_spec({"A": (["B"], []), "B": ([], ["A"]), "C": ([], [])}))
  with pytest.raises(local_launcher.LauncherError, match=r"'A' depends on \['Ghost'\]"):
    local_launcher.task_order(_spec({"A": ([], ["Ghost"])}))


def test_launcher_refuses_what_it_cannot_run(tmp_path):
  spec = _spec({"A": ([], [])})
  spec["deploymentSpec"]["executors"]["exec-A"] = {"resolver": {}}
  job = {"pipelineSpec": spec, "runtimeConfig": {"gcsOutputDirectory": str(tmp_path)}}
  never = lambda *a: pytest.fail("no container may run")  # pylint: disable=unnecessary-lambda-assignment
  launcher = local_launcher.LocalLauncher(job, never, job_id="j", log_dir=str(tmp_path / "logs"))
  with pytest.raises(local_launcher.LauncherError, match=r"'A': executor kind \['resolver'\]"):
    launcher.run()
  with pytest.raises(local_launcher.LauncherError, match="no runtimeConfig.gcsOutputDirectory"):
    local_launcher.LocalLauncher({"pipelineSpec": spec}, never, job_id="j", log_dir="x")
  with pytest.raises(local_launcher.LauncherError, match=r"placeholder in .* \(only \{\{\$\}\}\)"):
    local_launcher._fill("{{$.inputs.parameters['x']}}", {}, "A")  # pylint: disable=protected-access


def test_podman_config_is_private_and_uses_runc(tmp_path):
  podman = containers.Podman(str(tmp_path / "w"))
  podman.write_config()
  conf = (tmp_path / "w" / "containers.conf").read_text()
  assert 'runtime = "runc"' in conf and 'cgroup_manager = "cgroupfs"' in conf
  assert "nofile=" in conf and "nproc=" in conf
  storage = (tmp_path / "w" / "storage.conf").read_text()
  assert f'graphroot = "{tmp_path}/w/storage"' in storage
  for key in ("CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF"):
    assert podman.env[key].startswith(str(tmp_path / "w") + os.sep)
  podman.clean()
  assert not (tmp_path / "w").exists()
