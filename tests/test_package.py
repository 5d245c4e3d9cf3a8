"""The installable package: the wheel built from pyproject.toml, and that wheel alone in a fresh
venv (no checkout on the path) importing every module of gnn_trainer_component.

The fresh venv does not install the lock again (minutes for TensorFlow and the rest): a .pth
file there names this stack's site-packages folder as a plain path entry, so the locked
packages resolve but that folder's own .pth files, among them the editable install of this
checkout, are not processed. The wheel itself is installed into the fresh venv with pip.
"""

import ast
import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import REPO_ROOT

try:
  import tomllib
except ModuleNotFoundError:  # Python 3.10: the lock pins tomli
  import tomli as tomllib

PACKAGE = "gnn_trainer_component"
PACKAGE_DIR = os.path.join(REPO_ROOT, PACKAGE)
#: The lock of each stack and the Python it is for (docs/stacks.md).
LOCKS = {"requirements/lock-tfx116-py310.txt": "3.10", "requirements/lock-tfx121-py313.txt": "3.13"}
#: Top-level modules the package imports that no distribution provides, and why that is fine.
NOT_INSTALLED_IMPORTS = {
    "pipelines": "the checkout's demo pipeline: deploy/compile.py imports it only for "
                 "--pipeline demo and says how to get it when the import fails",
}
#: Modules with a ``__main__`` block that are not commands for users (no console script).
NOT_COMMANDS = {
    f"{PACKAGE}.trainer.custom_config": "prints the README's custom_config table (a "
                                        "maintainer's generator)",
}

#: Runs in the fresh venv (python -I: no PYTHONPATH, no current folder on sys.path).
#: argv: request JSON, result JSON.
_PROBE = r'''
import importlib, importlib.metadata as md, importlib.util, json, os, pkgutil, sys, traceback

with open(sys.argv[1]) as f:
  request = json.load(f)
result = {"sys_path": sys.path, "errors": {}, "modules": {}, "scripts": {}}
dist = md.distribution(request["distribution"])
result["dist_dir"] = os.path.normpath(str(dist.locate_file("")))
result["dist_version"] = dist.version
for ep in dist.entry_points:
  if ep.group == "console_scripts":
    try:
      loads = callable(ep.load())
    except Exception:
      result["errors"][ep.value] = traceback.format_exc(limit=-3)
      loads = False
    result["scripts"][ep.name] = {
        "value": ep.value, "callable": loads,
        "file": os.path.isfile(os.path.join(sys.prefix, "bin", ep.name))}

package = importlib.import_module(request["package"])
result["version"] = package.__version__
def onerror(name):
  result["errors"][name] = traceback.format_exc(limit=-3)
names = [package.__name__] + [m.name for m in pkgutil.walk_packages(
    package.__path__, package.__name__ + ".", onerror=onerror)]
for name in names:
  try:
    result["modules"][name] = importlib.import_module(name).__file__
  except Exception:  # every failing module is reported, not just the first
    result["errors"][name] = traceback.format_exc(limit=-3)

def origin(candidates):
  for name in candidates:
    try:
      spec = importlib.util.find_spec(name)
    except Exception:  # a parent that is a module, not a package: try the next candidate
      continue
    if spec is not None and spec.has_location and spec.origin:
      return os.path.normpath(spec.origin)
  return None

origins = [origin(candidates) for candidates in request["imports"]]
tops = {c[-1].split(".")[0] for c in request["imports"]}
owners = {}
for d in md.distributions():
  files = [f for f in d.files or () if f.parts and f.parts[0].split(".")[0] in tops]
  if files:
    name = d.metadata["Name"]
    for f in files:
      owners.setdefault(os.path.normpath(str(d.locate_file(f))), []).append(name)
result["imports"] = [{"origin": o, "owners": sorted(set(owners.get(o, [])))} for o in origins]
with open(sys.argv[2], "w") as f:
  json.dump(result, f)
'''


def _pyproject() -> dict:
  with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)


def _source_files() -> list[str]:
  """``gnn_trainer_component/**/*.py``, relative to the repository root."""
  out = []
  for folder, dirs, files in os.walk(PACKAGE_DIR):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    out += [os.path.relpath(os.path.join(folder, f), REPO_ROOT) for f in files if f.endswith(".py")]
  return sorted(out)


def _module_name(path: str) -> str:
  parts = path[:-len(".py")].split(os.sep)
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _declared() -> dict[str, list[Requirement]]:
  """pyproject's requirements by group: "" for ``dependencies``, else the extra's name."""
  project = _pyproject()["project"]
  groups = {"": project["dependencies"], **project["optional-dependencies"]}
  return {group: [Requirement(r) for r in reqs] for group, reqs in groups.items()}


def _requirement_key(req: Requirement, group: str) -> tuple:
  """What must match between pyproject and METADATA: name, extras, versions, group, and where
  the marker holds on the two stacks' Pythons."""
  holds = tuple(req.marker is None or req.marker.evaluate({"python_version": v, "extra": group})
                for v in sorted(set(LOCKS.values())))
  return (canonicalize_name(req.name), tuple(sorted(req.extras)), str(req.specifier), group, holds)


def _third_party_imports() -> list[tuple[list[str], str]]:
  """Every absolute import of a non-stdlib module outside the package, in every source file
  (lazy imports inside functions included): ``(names to resolve, most specific first; file)``.
  """
  out = []
  for path in _source_files():
    with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        found = [[alias.name] for alias in node.names]
      elif isinstance(node, ast.ImportFrom) and node.level == 0:
        # `from a.b import c`: c may be a module (a.b.c) or a name defined in a.b.
        found = [[f"{node.module}.{alias.name}", node.module] for alias in node.names]
      else:
        continue
      for names in found:
        top = names[-1].split(".")[0]
        if top != PACKAGE and top not in sys.stdlib_module_names:
          out.append((names, path))
  return out


def _clean_env() -> dict:
  """This environment without anything that puts other code on the path or configures pip."""
  env = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE")
         and not k.startswith("PIP_")}
  env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
             PYTHONNOUSERSITE="1", TF_USE_LEGACY_KERAS="1",
             TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> str:
  """The wheel pip builds, without build isolation or an index, from a copy of what the build
  reads (pyproject.toml, the readme, the license files, the package; the image build context),
  so nothing else in the checkout (build/, egg-info, caches) can reach it."""
  work = tmp_path_factory.mktemp("package")
  context = work / "context"
  project = _pyproject()["project"]
  for name in ["pyproject.toml", project["readme"], *project["license-files"]]:
    os.makedirs(context / os.path.dirname(name), exist_ok=True)
    shutil.copy(os.path.join(REPO_ROOT, name), context / name)
  shutil.copytree(PACKAGE_DIR, context / PACKAGE,
                  ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
  env = _clean_env()
  proc = subprocess.run(
      [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
       "-w", str(work / "dist"), str(context)],
      cwd=work, env=env, capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  wheels = os.listdir(work / "dist")
  assert len(wheels) == 1 and wheels[0].endswith("-py3-none-any.whl"), wheels
  return str(work / "dist" / wheels[0])


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory) -> dict:
  """The wheel installed into a new venv that sees this stack's packages; what the probe found
  there, with ``site`` (the venv's site-packages) and ``imports`` paired with their sources."""
  work = tmp_path_factory.mktemp("fresh")
  venv = work / "venv"
  env = _clean_env()
  subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=env)
  python = str(venv / "bin" / "python")
  site = subprocess.run(
      [python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
      check=True, env=env, capture_output=True, text=True).stdout.strip()
  # Installed before the .pth exists: pip sees an empty venv (this stack's editable install of
  # the checkout would otherwise count as installed already).
  proc = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                         "--no-index", wheel], cwd=work, env=env, capture_output=True, text=True,
                        check=False)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  stack_sites = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
  with open(os.path.join(site, "_stack_site_packages.pth"), "w", encoding="utf-8") as f:
    f.write("".join(f"{p}\n" for p in stack_sites))
  imports = _third_party_imports()
  request, result = work / "request.json", work / "result.json"
  request.write_text(json.dumps({"distribution": _pyproject()["project"]["name"],
                                 "package": PACKAGE, "imports": [n for n, _ in imports]}))
  (work / "probe.py").write_text(_PROBE)
  proc = subprocess.run([python, "-I", str(work / "probe.py"), str(request), str(result)],
                        cwd=work, env=env, capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stderr[-5000:]
  out = json.loads(result.read_text())
  out["site"] = os.path.normpath(site)
  out["imports"] = [(names, path, found) for (names, path), found in zip(imports, out["imports"])]
  return out


def test_wheel_holds_the_package_license_and_type_marker_only(wheel):
  with zipfile.ZipFile(wheel) as z:
    names = set(z.namelist())
    dist_info = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
    assert len(dist_info) == 1, dist_info
    dist_info = dist_info.pop()
    with open(os.path.join(REPO_ROOT, "LICENSE"), "rb") as f:
      assert z.read(f"{dist_info}/licenses/LICENSE") == f.read()
  assert {n.split("/")[0] for n in names} == {PACKAGE, dist_info}  # no tests/, pipelines/, ...
  assert f"{PACKAGE}/py.typed" in names
  assert sorted(n for n in names if n.endswith(".py")) == [
      p.replace(os.sep, "/") for p in _source_files()]
  assert sorted(n for n in names if not n.startswith(dist_info)
                and not n.endswith(".py")) == [f"{PACKAGE}/py.typed"]


def test_wheel_metadata_has_the_license_expression_and_every_declared_requirement(wheel):
  with zipfile.ZipFile(wheel) as z:
    dist_info = next(n.split("/")[0] for n in z.namelist() if ".dist-info/" in n)
    meta = email.parser.Parser().parsestr(z.read(f"{dist_info}/METADATA").decode())
  project = _pyproject()["project"]
  assert meta["Name"] == project["name"] and meta["Version"] == project["version"]
  assert meta["License-Expression"] == "Apache-2.0"
  assert meta.get_all("License-File") == ["LICENSE"]
  assert not [c for c in meta.get_all("Classifier") if c.startswith("License ::")]
  assert {"Programming Language :: Python :: 3.10", "Programming Language :: Python :: 3.13",
          "Operating System :: POSIX :: Linux"} <= set(meta.get_all("Classifier"))
  in_metadata = set()
  for line in meta.get_all("Requires-Dist"):
    group = re.search(r'extra == "([^"]+)"', line)
    in_metadata.add(_requirement_key(Requirement(line), group.group(1) if group else ""))
  declared = {_requirement_key(r, g) for g, reqs in _declared().items() for r in reqs}
  assert sorted(in_metadata) == sorted(declared)


def test_declared_ranges_admit_both_locks_pins():
  for lock, python in LOCKS.items():
    with open(os.path.join(REPO_ROOT, lock), encoding="utf-8") as f:
      pins = {canonicalize_name(m.group(1)): m.group(2)
              for m in re.finditer(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;]+)", f.read(),
                                   re.MULTILINE)}
    for group, reqs in _declared().items():
      for req in reqs:
        if req.marker and not req.marker.evaluate({"python_version": python, "extra": group}):
          continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} ({group or 'dependencies'}) is not pinned in {lock}"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{req} ({group or 'dependencies'}) excludes {name}=={pins[name]} of {lock}")


@pytest.mark.compat  # every module imports on the legacy stack's Python and packages too
def test_the_fresh_venv_imports_every_module_from_the_wheel(fresh):
  assert fresh["errors"] == {}
  assert sorted(fresh["modules"]) == sorted(_module_name(p) for p in _source_files())
  outside = {name: path for name, path in fresh["modules"].items()
             if os.path.commonpath([os.path.normpath(path), fresh["site"]]) != fresh["site"]}
  assert outside == {}, f"modules not loaded from the fresh venv {fresh['site']}"
  assert fresh["dist_dir"] == fresh["site"]
  repo = os.path.realpath(REPO_ROOT)
  assert [p for p in fresh["sys_path"] if p and os.path.realpath(p) == repo] == []
  assert fresh["version"] == fresh["dist_version"] == _pyproject()["project"]["version"]


def test_version_falls_back_to_pyproject_in_a_checkout_that_is_not_installed(monkeypatch):
  import gnn_trainer_component  # pylint: disable=g-import-not-at-top
  from importlib import metadata  # pylint: disable=g-import-not-at-top

  def not_installed(name):
    raise metadata.PackageNotFoundError(name)

  monkeypatch.setattr(metadata, "version", not_installed)
  version = gnn_trainer_component._version()  # pylint: disable=protected-access
  assert version == _pyproject()["project"]["version"]


def test_every_console_script_is_installed_and_loads(fresh):
  scripts = _pyproject()["project"]["scripts"]
  assert {name: s["value"] for name, s in fresh["scripts"].items()} == scripts
  assert [name for name, s in fresh["scripts"].items() if not (s["callable"] and s["file"])] == []


def test_every_third_party_import_is_a_declared_distribution(fresh):
  declared = {canonicalize_name(r.name) for reqs in _declared().values() for r in reqs}
  problems, local = [], set()
  for names, path, found in fresh["imports"]:
    if names[-1].split(".")[0] in NOT_INSTALLED_IMPORTS:
      local.add((names[-1], path, found["origin"]))
    elif not found["owners"]:
      problems.append(f"{names[-1]} (imported by {path}) is not installed by any distribution "
                      f"in the fresh venv (found: {found['origin']})")
    elif not declared & {canonicalize_name(o) for o in found["owners"]}:
      problems.append(f"{names[-1]} (imported by {path}) comes from {found['owners']}, which "
                      "pyproject.toml does not declare")
  assert problems == []
  # The checkout's own modules are not in the fresh venv, and only where the table says.
  assert local == {("pipelines.demo", os.path.join(PACKAGE, "deploy", "compile.py"), None)}


def test_every_command_line_module_has_a_console_script():
  targets = set(_pyproject()["project"]["scripts"].values())
  commands = set()
  for path in _source_files():
    with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    has_main = any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)
    has_guard = any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)
    if has_main or has_guard:
      commands.add(_module_name(path))
  assert sorted(commands - set(NOT_COMMANDS)) == sorted(t.split(":")[0] for t in targets)
  assert sorted(f"{m}:main" for m in commands - set(NOT_COMMANDS)) == sorted(targets)
  assert set(NOT_COMMANDS) <= commands, "NOT_COMMANDS names a module without a __main__ block"


def test_the_image_build_context_has_every_file_the_build_reads():
  project = _pyproject()["project"]
  needed = ["pyproject.toml", project["readme"], *project["license-files"]]
  ignores = sorted(n for n in os.listdir(os.path.join(REPO_ROOT, "kubeflow"))
                   if n.endswith(".dockerignore"))
  assert ignores == ["Dockerfile.dockerignore", "Dockerfile.gpu.dockerignore",
                     "Dockerfile.tfx116.dockerignore"]
  for name in ignores:
    with open(os.path.join(REPO_ROOT, "kubeflow", name), encoding="utf-8") as f:
      admitted = {line.strip()[1:] for line in f if line.startswith("!")}
    assert [n for n in needed if n not in admitted] == [], f"kubeflow/{name} leaves them out"
