"""The package's layout holds, read from the source (``ast``; nothing of the package is imported).

* docs/development.md's layout table matches the tree: every module is named in its folder's
  row, and every name in the table exists.
* Import floors (IMPORT_FLOORS): the graph core, the model contract, the two engines, the
  samplers and the lowest top-level modules import nothing of the package above them; no
  component imports another (COMPONENT_IMPORTS_ALLOWED: the tuner runs the trainer's code).
* ``tfx.v1`` (which imports every stock component and the Vertex AI client library) is imported
  only where pipelines are declared (TFX_V1_FILES), so an executor's process does not pay it.
* No function is longer than MAX_FUNCTION_LINES lines, but those in LONG_FUNCTIONS (which only
  shrinks).
* An ``__init__.py`` whose docstring lists its package's modules names every one of them, and
  names no module that is not there (DOCSTRING_WORDS, DOCSTRING_EXEMPT).
"""

import ast
import functools
import os
import re
from typing import NamedTuple, Optional

import pytest

from tests.helpers import REPO_ROOT


class Floor(NamedTuple):
  """What the files of one rule may import of the package.

  Paths and module names are relative to the package: ``"graph/"`` is every file under
  gnn_trainer_component/graph/, ``"errors.py"`` one file; ``"graph"`` is the module
  gnn_trainer_component.graph and every module below it. SUBPACKAGES is every module in any
  subpackage.

  Attributes:
    files: the files the rule holds for.
    only: when set, the package modules they may import; they import nothing else of it.
    never: package modules they must not import.
  """
  files: tuple[str, ...]
  only: Optional[tuple[str, ...]] = None
  never: tuple[str, ...] = ()


#: In a Floor: every subpackage of gnn_trainer_component and everything in it.
SUBPACKAGES = "<any subpackage>"

#: The components, one folder each (GnnTrainer, GnnTuner, GraphInferrer, GraphEvaluator, the
#: two samplers).
COMPONENTS = ("trainer", "tuner", "inferrer", "evaluator", "sampler")

#: The one import of a component by another, as TFX's own tuner runs its trainer's code.
COMPONENT_IMPORTS_ALLOWED = {"tuner": ("trainer",)}

#: The import floors: rule -> its files and what they may (only) or must not (never) import.
IMPORT_FLOORS: dict[str, Floor] = {
    # The graph core: one definition of tables, sampling and link rules under every engine.
    "graph_core_imports_only_graph_and_base_modules": Floor(
        files=("graph/",),
        only=("graph", "errors", "graph_schema", "process", "config_dicts", "keys")),
    # The model contract (what an export is) stands on the graph core, beside the engines.
    "model_imports_no_engine_nor_component": Floor(
        files=("model/",),
        never=("in_memory", "beam", "distributed", "deploy") + COMPONENTS),
    "in_memory_imports_no_component": Floor(
        files=("in_memory/",),
        never=("beam", "deploy") + COMPONENTS),
    "beam_engine_imports_no_in_memory_engine_model_nor_component": Floor(
        files=("beam/",),
        never=("in_memory", "model", "deploy") + COMPONENTS),
    "sampler_imports_no_in_memory_engine_nor_other_component": Floor(
        files=("sampler/",),
        never=("in_memory", "deploy") + tuple(c for c in COMPONENTS if c != "sampler")),
    "base_modules_import_no_subpackage": Floor(
        files=("errors.py", "process.py", "keys.py", "graph_schema.py", "outputs.py",
               "training_data.py", "config_dicts.py"),
        never=(SUBPACKAGES,)),
    # Components stand on the core, the engines and the model contract, never on each other
    # (COMPONENT_IMPORTS_ALLOWED aside), as TFX's components import only tfx/components/util.
    **{f"{component}_imports_no_other_component": Floor(
        files=(f"{component}/",),
        never=tuple(c for c in COMPONENTS if c != component
                    and c not in COMPONENT_IMPORTS_ALLOWED.get(component, ())))
       for component in COMPONENTS if component != "sampler"},
}

#: The longest a function or method may be: from its ``def`` line (decorators excluded) to its
#: last line, both included.
MAX_FUNCTION_LINES = 80

#: Functions longer than MAX_FUNCTION_LINES today: "file:Qualified.name" -> their length today.
#: This list only shrinks: a function here may get shorter (lower its number, or drop it once it
#: is within the limit), never longer, and no function joins it.
LONG_FUNCTIONS: dict[str, int] = {}

#: Packages whose __init__.py docstring lists their modules -> the double-backticked lowercase
#: words it holds that name no module of the package (config keys, structure names, ...).
DOCSTRING_WORDS: dict[str, tuple[str, ...]] = {
    "gnn_trainer_component/deploy": ("demo", "kubeflow"),  # --pipeline demo; kubeflow/ folder
    "gnn_trainer_component/graph": ("_readout",),  # readout names
    "gnn_trainer_component/beam": (),
    "gnn_trainer_component/in_memory": ("graph_mode",),  # a GnnTrainer config key
    "gnn_trainer_component/model": ("serving_default", "full_graph"),  # a signature; a mode
    "gnn_trainer_component/sampler": (),
    "gnn_trainer_component/trainer": (),
}

#: Why a package in DOCSTRING_EXEMPT is: its docstring is one line (tested: it stays one line).
ONE_LINE = "a one-line docstring, no module list"

#: Packages whose __init__.py docstring does not list their modules -> why.
DOCSTRING_EXEMPT: dict[str, str] = {
    "gnn_trainer_component": "lists the public components; docs/development.md's layout table "
                             "names every module (tested above)",
    "gnn_trainer_component/distributed": ONE_LINE,
    "gnn_trainer_component/evaluator": ONE_LINE,
    "gnn_trainer_component/index": ONE_LINE,
    "gnn_trainer_component/inferrer": ONE_LINE,
    "gnn_trainer_component/sampler/graph": ONE_LINE,
    "gnn_trainer_component/sampler/link": ONE_LINE,
    "gnn_trainer_component/statistics_gen": ONE_LINE,
    "gnn_trainer_component/tuner": ONE_LINE,
    "gnn_trainer_component/validator": ONE_LINE,
}

PACKAGE = "gnn_trainer_component"

#: Top-level folders .gitignore ignores.
_IGNORED = ("build", "dist", "demo_output", "quickstart_output", "tmp", "__pycache__")

#: Folders whose every module the table names (their own row; subpackages have theirs).
_NAMED_FOLDERS = ("gnn_trainer_component", "pipelines", "pipelines/runtime", "devtools")


def _layout_rows() -> dict[str, str]:
  """``{folder: what}`` from docs/development.md's "## Layout" table (one row may name several)."""
  with open(os.path.join(REPO_ROOT, "docs", "development.md"), encoding="utf-8") as f:
    text = f.read()
  section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
  rows = {}
  for line in section.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 2 or not cells[0].startswith("`"):
      continue
    for path in re.findall(r"`([^`]+)`", cells[0]):
      rows[path.rstrip("/")] = cells[1]
  return rows


def _packages() -> list[str]:
  out = []
  for folder, dirs, files in os.walk(os.path.join(REPO_ROOT, "gnn_trainer_component")):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    if "__init__.py" in files:
      out.append(os.path.relpath(folder, REPO_ROOT))
  return sorted(out)


def test_every_package_and_top_level_folder_has_a_row():
  rows = _layout_rows()
  # The checkout's folders (git may be missing, e.g. in the CI chroot): hidden ones and
  # what .gitignore ignores (venvs, build output, caches) are not part of the tree.
  top = {d for d in os.listdir(REPO_ROOT)
         if os.path.isdir(os.path.join(REPO_ROOT, d)) and not d.startswith(".")
         and d not in _IGNORED and not d.endswith(".egg-info")} | {".ci"}
  assert sorted(top - set(rows)) == []
  assert sorted(set(_packages()) - set(rows)) == []
  assert sorted(p for p in rows if not os.path.exists(os.path.join(REPO_ROOT, p))) == []


def test_every_module_is_named_in_its_row_and_every_named_module_exists():
  rows = _layout_rows()
  for folder in sorted(set(_packages()) | set(_NAMED_FOLDERS)):
    named = set(re.findall(r"`([\w.]+\.py)`", rows[folder]))
    path = os.path.join(REPO_ROOT, folder)
    modules = {f for f in os.listdir(path) if f.endswith(".py") and f != "__init__.py"}
    assert sorted(modules - named) == [], f"{folder}: modules missing from its layout row"
    here = {f for _, _, files in os.walk(path) for f in files}
    assert sorted(named - here) == [], f"{folder}: the layout row names files not there"


# --- Reading the package's source -------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _source_files() -> tuple[str, ...]:
  """Every ``.py`` file of the package, relative to the repository: "gnn_trainer_component/..."."""
  out = []
  for folder, dirs, files in os.walk(os.path.join(REPO_ROOT, PACKAGE)):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    out += [os.path.relpath(os.path.join(folder, f), REPO_ROOT)
            for f in files if f.endswith(".py")]
  return tuple(sorted(out))


@functools.lru_cache(maxsize=None)
def _parse(path: str) -> ast.Module:
  """The syntax tree of a file of the repository (read once per test session)."""
  with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as f:
    return ast.parse(f.read(), path)


def _module_name(path: str) -> str:
  """"gnn_trainer_component/graph/tables.py" -> "gnn_trainer_component.graph.tables"."""
  parts = path[:-len(".py")].split("/")
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> set[str]:
  """The dotted names of every module and package of the package."""
  return {_module_name(path) for path in _source_files()}


def _resolve(name: str, modules: set[str]) -> str:
  """``name`` when it is a module or package of the tree, else the longest prefix that is."""
  parts = name.split(".")
  while len(parts) > 1 and ".".join(parts) not in modules:
    parts.pop()
  return ".".join(parts)


def _package_imports(path: str, modules: set[str]) -> set[str]:
  """The modules of the package the file imports (anywhere in it, functions included).

  ``from a.b import c`` imports ``a.b.c`` when that is a module or package of the tree, else
  ``a.b`` (c is a name in it); relative imports are resolved against the file's package.
  """
  here = _module_name(path).split(".")
  package = here if path.endswith("/__init__.py") else here[:-1]
  out = set()
  for node in ast.walk(_parse(path)):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
      names = [f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names]
    else:
      continue
    out |= {_resolve(n, modules) for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}
  return out


def _matches(module: str, entry: str) -> bool:
  """Whether ``module`` is the package-relative ``entry`` or below it (SUBPACKAGES: any)."""
  if entry == SUBPACKAGES:
    parts = module.split(".")
    return len(parts) > 1 and os.path.isfile(
        os.path.join(REPO_ROOT, PACKAGE, parts[1], "__init__.py"))
  full = f"{PACKAGE}.{entry}"
  return module == full or module.startswith(full + ".")


def _files_of(entry: str) -> list[str]:
  """The package's files a Floor's ``files`` entry stands for, relative to the repository."""
  prefix = f"{PACKAGE}/{entry}"
  return [path for path in _source_files()
          if path == prefix or (prefix.endswith("/") and path.startswith(prefix))]


# --- Import floors ----------------------------------------------------------------------------


@pytest.mark.parametrize("rule", sorted(IMPORT_FLOORS))
def test_import_floor(rule: str):
  """The rule's files import, of the package, only what IMPORT_FLOORS lets them."""
  floor = IMPORT_FLOORS[rule]
  modules = _modules()
  # A rule whose files or modules are gone would hold for nothing: the table follows the tree.
  gone = [entry for entry in floor.files if not _files_of(entry)]
  assert not gone, f"{rule}: files not in the tree: {gone}"
  files = sorted({path for entry in floor.files for path in _files_of(entry)})
  named = [e for e in (floor.only or ()) + floor.never if e != SUBPACKAGES]
  missing = sorted(e for e in named if f"{PACKAGE}.{e}" not in modules)
  assert not missing, f"{rule}: names modules not in the tree: {missing}"
  offending = []
  for path in files:
    for module in sorted(_package_imports(path, modules)):
      allowed = (floor.only is None or any(_matches(module, e) for e in floor.only))
      if not allowed or any(_matches(module, e) for e in floor.never):
        offending.append(f"{path} -> {module}")
  assert not offending, f"{rule}: imports the rule forbids:\n  " + "\n  ".join(offending)


#: The files that may import ``tfx.v1``: the DSL side (components, pipeline compilation).
#: Executors, launchers and everything they import use the modules ``tfx.v1`` re-exports
#: (``tfx.types.artifact``, ``tfx.types.system_executions``, ...): ``tfx.v1.extensions`` imports
#: google.cloud.aiplatform, 6-7 s of CPU in every step's process.
TFX_V1_FILES = ("*/component.py", "deploy/compile.py")


def _imports_tfx_v1(path: str) -> bool:
  for node in ast.walk(_parse(path)):
    if isinstance(node, ast.Import):
      if any(a.name == "tfx.v1" or a.name.startswith("tfx.v1.") for a in node.names):
        return True
    elif isinstance(node, ast.ImportFrom) and not node.level:
      module = node.module or ""
      if (module == "tfx.v1" or module.startswith("tfx.v1.")
          or (module == "tfx" and any(a.name == "v1" for a in node.names))):
        return True
  return False


def test_tfx_v1_only_where_pipelines_are_declared():
  """An executor's imports stay off ``tfx.v1`` (see TFX_V1_FILES)."""
  import fnmatch
  allowed = [f"{PACKAGE}/{pattern}" for pattern in TFX_V1_FILES]
  offending = [path for path in _source_files() if _imports_tfx_v1(path)
               and not any(fnmatch.fnmatch(path, pattern) for pattern in allowed)]
  assert not offending, ("import tfx.v1 only in " + ", ".join(TFX_V1_FILES) + "; use the "
                         "module it re-exports from instead, in:\n  " + "\n  ".join(offending))
  assert any(_imports_tfx_v1(path) for path in _source_files())  # the check sees imports


# --- Function length --------------------------------------------------------------------------


def _function_lengths() -> dict[str, int]:
  """``{"file:Qualified.name": lines}`` for every function and method of the package.

  Nested functions are named through what encloses them ("Class.method.inner"); of functions
  defined twice under one name (e.g. in the branches of an ``if``) the longest counts.
  """
  lengths: dict[str, int] = {}

  def visit(node: ast.AST, path: str, scope: tuple[str, ...]) -> None:
    for child in ast.iter_child_nodes(node):
      if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        name = scope + (child.name,)
        if not isinstance(child, ast.ClassDef):
          key = f"{path}:{'.'.join(name)}"
          lines = child.end_lineno - child.lineno + 1  # lineno: the def line, not a decorator
          lengths[key] = max(lines, lengths.get(key, 0))
        visit(child, path, name)
      else:
        visit(child, path, scope)

  for path in _source_files():
    visit(_parse(path), path, ())
  return lengths


def test_no_function_is_longer_than_the_limit():
  """Functions stay within MAX_FUNCTION_LINES; LONG_FUNCTIONS' do not grow and is trimmed."""
  lengths = _function_lengths()
  too_long = [f"{name}: {lines} lines" for name, lines in sorted(lengths.items())
              if lines > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS]
  grew = [f"{name}: {lengths[name]} lines, listed at {listed}"
          for name, listed in sorted(LONG_FUNCTIONS.items())
          if lengths.get(name, 0) > listed]
  trim = [f"{name}: " + (f"{lengths[name]} lines" if name in lengths else "gone")
          for name in sorted(LONG_FUNCTIONS)
          if lengths.get(name, 0) <= MAX_FUNCTION_LINES]
  problems = []
  if too_long:
    problems.append(f"longer than {MAX_FUNCTION_LINES} lines (split them; LONG_FUNCTIONS "
                    "only shrinks):\n  " + "\n  ".join(too_long))
  if grew:
    problems.append("in LONG_FUNCTIONS and grew:\n  " + "\n  ".join(grew))
  if trim:
    problems.append(f"in LONG_FUNCTIONS but gone or within {MAX_FUNCTION_LINES} lines (remove "
                    "them from the list):\n  " + "\n  ".join(trim))
  assert not problems, "\n".join(problems)


# --- __init__.py docstrings -------------------------------------------------------------------


def _docstring(package: str) -> str:
  """The docstring of the package's ``__init__.py`` ("" when it has none)."""
  return ast.get_docstring(_parse(f"{package}/__init__.py"), clean=False) or ""


def _children(package: str) -> tuple[set[str], set[str]]:
  """The package's modules ("tables" for tables.py, no __init__) and its subpackages."""
  path = os.path.join(REPO_ROOT, package)
  modules, subpackages = set(), set()
  for entry in os.listdir(path):
    if entry.endswith(".py") and entry != "__init__.py":
      modules.add(entry[:-len(".py")])
    elif os.path.isfile(os.path.join(path, entry, "__init__.py")):
      subpackages.add(entry)
  return modules, subpackages


def _names_below(package: str) -> set[str]:
  """The names of every module ("tables") and subpackage ("link") anywhere below the package."""
  names = set()
  for path in _source_files():
    if path.startswith(package + "/") and path != f"{package}/__init__.py":
      name = os.path.basename(path)[:-len(".py")]
      names.add(os.path.basename(os.path.dirname(path)) if name == "__init__" else name)
  return names


def _backticked_words(doc: str) -> set[str]:
  """The lowercase identifiers the docstring quotes alone: ``tables``, ``link/`` (as "link")."""
  quoted = re.findall(r"``(.+?)``", doc, re.DOTALL)
  return {q.rstrip("/") for q in quoted if re.fullmatch(r"_?[a-z][a-z0-9_]*/?", q)}


def test_every_package_docstring_is_checked_or_exempt():
  """Every package is in DOCSTRING_WORDS or DOCSTRING_EXEMPT; a one-line exempt one stays so."""
  packages = set(_packages())
  assert sorted(packages - set(DOCSTRING_WORDS) - set(DOCSTRING_EXEMPT)) == [], (
      "packages neither in DOCSTRING_WORDS nor in DOCSTRING_EXEMPT")
  assert sorted(set(DOCSTRING_WORDS) & set(DOCSTRING_EXEMPT)) == [], "in both lists"
  assert sorted((set(DOCSTRING_WORDS) | set(DOCSTRING_EXEMPT)) - packages) == [], (
      "listed packages not in the tree")
  grown = [p for p, why in sorted(DOCSTRING_EXEMPT.items())
           if why == ONE_LINE and len(_docstring(p).strip().splitlines()) > 1]
  assert not grown, (f"exempt as one-line docstrings, now longer: {grown} (if they list their "
                     "modules, move them to DOCSTRING_WORDS)")


@pytest.mark.parametrize("package", sorted(DOCSTRING_WORDS))
def test_package_docstring_names_its_modules(package: str):
  """The docstring names each module and subpackage, and quotes no word that is neither."""
  doc = _docstring(package)
  init = f"{package}/__init__.py"
  modules, subpackages = _children(package)
  # ``x``, ``x/`` and (Sphinx) :mod:`gnn_trainer_component.pkg.x` name a module or package.
  words = _backticked_words(doc)
  dotted = package.replace("/", ".")
  references = set(re.findall(rf":mod:`{re.escape(dotted)}\.(\w+)`", doc))
  named = words | references
  problems = [f"{init} does not name module {m}.py" for m in sorted(modules - named)]
  problems += [f"{init} does not name subpackage {s}/" for s in sorted(subpackages - named)]
  # Modules further down (sampler/'s ``component`` is sampler/graph/component.py) are modules.
  below = _names_below(package)
  allowed = set(DOCSTRING_WORDS[package])
  problems += [f"{init} names ``{w}``, not a module of {package}/ nor in DOCSTRING_WORDS"
               for w in sorted(words - below - allowed)]
  problems += [f"{init} names :mod:`{dotted}.{r}`, not a module of {package}/"
               for r in sorted(references - modules - subpackages)]
  problems += [f"DOCSTRING_WORDS[{package!r}] lists {w!r}: "
               + ("now a module, drop it" if w in below else "not in the docstring, drop it")
               for w in sorted(allowed) if w in below or w not in words]
  assert not problems, "\n".join(problems)
