"""The user docs agree with the code.

Every page (README.md, docs/*.md, kubeflow/README.md) is checked for what a reader would copy:
links and their anchors, repository paths, `make` targets, `python -m` modules, imports, the
parameters given to the components, `custom_config` keys; its Python blocks must parse. User
pages carry no internal notes (machine paths, remarks about the machine the docs were written
on). The checks are plain functions over a page's text, so each is also tested on a page that
breaks it.
"""

from __future__ import annotations

import ast
import glob

import importlib.util
import inspect
import os
import re
import textwrap
from typing import Iterator, NamedTuple


from tests.helpers import REPO_ROOT

#: The user docs: what a user reads. benchmarks/README.md holds measurements (machine facts
#: are its point) and is checked for links and paths only.
USER_PAGES = ("README.md", "docs/*.md", "kubeflow/README.md", "CHANGELOG.md")
ALL_PAGES = USER_PAGES + ("benchmarks/README.md",)

#: Top-level names a repository path starts with.
_REPO_DIRS = ("gnn_trainer_component", "pipelines", "module_files", "benchmarks", "devtools",
              "scripts", "requirements", "kubeflow", "docs", "tests", ".ci")
_PATH = re.compile(r"(?<![\w/.~$-])((?:%s)/[\w./*@-]*)" % "|".join(re.escape(d) for d in _REPO_DIRS))
_MAKE = re.compile(r"(?<![\w,=-])make ([a-z][\w-]*)")
_PYTHON_M = re.compile(r"python3? -m ([\w.]+)")
_CUSTOM_CONFIG_KEY = re.compile(r"""custom_config\[["'](\w+)["']\]""")
#: A fenced block, also indented (inside a list item).
_FENCE = re.compile(r"^ *```(\w*)\n(.*?)^ *```", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
#: Internal notes: remarks about the machine the docs were written on, machine paths.
_INTERNAL = re.compile(r"/work/|/root/|/home/\w|this machine kind|TLS proxy|colleague", re.I)
#: Components whose keyword arguments a code block may show.
_COMPONENTS = ("GnnTrainer", "GnnTuner", "GraphSampler", "LinkSampler", "GraphInferrer",
               "GraphEvaluator")
#: Repository packages a `python -m` or an import may name.
_REPO_PACKAGES = ("gnn_trainer_component", "pipelines", "benchmarks", "devtools", "module_files")


class Problem(NamedTuple):
  page: str
  what: str

  def __str__(self) -> str:
    return f"{self.page}: {self.what}"


def pages(patterns=ALL_PAGES, root: str = REPO_ROOT) -> list[str]:
  """Paths of the pages, relative to ``root``."""
  out = []
  for pattern in patterns:
    out += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pattern)))
  return out


def code_blocks(text: str) -> list[tuple[str, str]]:
  """``(language, code)`` of each fenced block, an indented one dedented."""
  return [(m.group(1), textwrap.dedent(m.group(2))) for m in _FENCE.finditer(text)]


def code_text(text: str) -> str:
  """Everything a reader may copy: fenced blocks and inline code spans."""
  prose = _FENCE.sub("", text)
  return "\n".join([code for _, code in code_blocks(text)] + _INLINE.findall(prose))


def slug(heading: str) -> str:
  """GitHub's anchor of a heading."""
  text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
  return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
  """The anchors of a page's headings (GitHub numbers repeated ones)."""
  seen: dict[str, int] = {}
  out = set()
  for heading in re.findall(r"^#{1,6} (.+)$", _FENCE.sub("", text), re.M):
    base = slug(heading)
    n = seen.get(base, 0)
    seen[base] = n + 1
    out.add(base if n == 0 else f"{base}-{n}")
  return out


def _read(root: str, page: str) -> str:
  with open(os.path.join(root, page), encoding="utf-8") as f:
    return f.read()


def check_links(page: str, text: str, root: str = REPO_ROOT) -> Iterator[Problem]:
  """Relative links point at files that exist, and their anchors at headings there."""
  prose = _INLINE.sub("", _FENCE.sub("", text))
  for target in _LINK.findall(prose):
    if re.match(r"[a-z]+:", target):
      continue
    path, _, anchor = target.partition("#")
    file = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
    if not os.path.exists(os.path.join(root, file)):
      yield Problem(page, f"link to {target!r}: {file} does not exist")
    elif anchor and file.endswith(".md") and anchor not in anchors(_read(root, file)):
      yield Problem(page, f"link to {target!r}: {file} has no heading #{anchor}")


def check_paths(page: str, text: str, root: str = REPO_ROOT) -> Iterator[Problem]:
  """Repository paths named in code exist (a glob must match something)."""
  for path in sorted(set(_PATH.findall(code_text(text)))):
    path = path.rstrip(".")
    if not glob.glob(os.path.join(root, path)):
      yield Problem(page, f"names {path!r}, which does not exist")


def make_targets(root: str = REPO_ROOT) -> set[str]:
  with open(os.path.join(root, "Makefile"), encoding="utf-8") as f:
    return set(re.findall(r"^([a-z][\w-]*):", f.read(), re.M))


def check_make_targets(page: str, text: str, root: str = REPO_ROOT) -> Iterator[Problem]:
  targets = make_targets(root)
  for target in sorted(set(_MAKE.findall(code_text(text)))):
    if target not in targets:
      yield Problem(page, f"`make {target}`: the Makefile has no target {target!r}")


def _repo_module_exists(name: str, root: str) -> bool:
  base = os.path.join(root, *name.split("."))
  return os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__init__.py"))


def check_modules(page: str, text: str, root: str = REPO_ROOT) -> Iterator[Problem]:
  """``python -m`` modules and imported repository modules exist."""
  names = set(_PYTHON_M.findall(code_text(text)))
  for lang, code in code_blocks(text):
    if lang == "python":
      try:
        tree = ast.parse(code)
      except SyntaxError:
        continue  # check_python_blocks reports it
      for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
          names.add(node.module)
        elif isinstance(node, ast.Import):
          names.update(alias.name for alias in node.names)
  for name in sorted(names):
    if name.split(".")[0] in _REPO_PACKAGES:
      if not _repo_module_exists(name, root):
        yield Problem(page, f"module {name!r} does not exist in the repository")
    elif importlib.util.find_spec(name.split(".")[0]) is None:
      yield Problem(page, f"module {name!r} is not installed with the lock")


def check_python_blocks(page: str, text: str) -> Iterator[Problem]:
  for lang, code in code_blocks(text):
    if lang == "python":
      try:
        ast.parse(code)
      except SyntaxError as e:
        yield Problem(page, f"a python block does not parse: {e.msg}, line {e.lineno}: "
                            f"{(e.text or '').strip()!r}")


def _calls(text: str) -> Iterator[ast.Call]:
  for lang, code in code_blocks(text):
    if lang == "python":
      try:
        tree = ast.parse(code)
      except SyntaxError:
        continue
      yield from (n for n in ast.walk(tree) if isinstance(n, ast.Call))


def _call_name(call: ast.Call) -> str:
  func = call.func
  return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def check_custom_config_keys(page: str, text: str, keys) -> Iterator[Problem]:
  """``custom_config`` keys in code (``custom_config={...}`` and ``custom_config["k"]``)."""
  named = set(_CUSTOM_CONFIG_KEY.findall(code_text(text)))
  for call in _calls(text):
    for kw in call.keywords:
      if kw.arg == "custom_config" and isinstance(kw.value, ast.Dict):
        named.update(k.value for k in kw.value.keys
                     if isinstance(k, ast.Constant) and isinstance(k.value, str))
  for key in sorted(named - set(keys)):
    yield Problem(page, f"custom_config key {key!r} does not exist")


def check_component_arguments(page: str, text: str, signatures) -> Iterator[Problem]:
  """Keyword arguments given to the components are their parameters."""
  for call in _calls(text):
    params = signatures.get(_call_name(call))
    if params is None:
      continue
    for kw in call.keywords:
      if kw.arg is not None and kw.arg not in params:
        yield Problem(page, f"{_call_name(call)}() has no parameter {kw.arg!r}")


def check_internal_notes(page: str, text: str) -> Iterator[Problem]:
  for n, line in enumerate(text.splitlines(), 1):
    match = _INTERNAL.search(line)
    if match:
      yield Problem(page, f"line {n}: internal note {match.group(0)!r}: {line.strip()[:100]}")


def _all(check, patterns=ALL_PAGES, *args) -> list[str]:
  return [str(p) for page in pages(patterns)
          for p in check(page, _read(REPO_ROOT, page), *args)]


# ---- the repository's pages ----

def test_the_pages_exist():
  names = set(pages(("docs/*.md",)))
  for topic in ("quickstart", "gnn_trainer", "module_contract", "tasks", "samplers", "transform",
                "tuner", "deployment", "mlmd", "guarantees", "speed", "scaling", "stacks",
                "environment", "in_memory", "inference", "evaluator"):
    assert f"docs/{topic}.md" in names


def test_readme_is_short():
  lines = _read(REPO_ROOT, "README.md").count("\n")
  assert lines <= 200, f"README.md has {lines} lines; move details to a docs/ page"


def test_every_docs_page_is_linked_from_the_index_and_the_readme():
  index, readme = _read(REPO_ROOT, "docs/README.md"), _read(REPO_ROOT, "README.md")
  for page in pages(("docs/*.md",)):
    name = os.path.basename(page)
    if name != "README.md":
      assert f"]({name})" in index, f"docs/README.md does not link {page}"
      if name != "development.md":
        assert f"](docs/{name})" in readme, f"README.md does not link {page}"


def test_links_resolve():
  assert _all(check_links) == []


def test_repository_paths_exist():
  assert _all(check_paths) == []


def test_make_targets_exist():
  assert _all(check_make_targets) == []


def test_python_blocks_parse():
  assert _all(check_python_blocks) == []


def test_no_internal_notes_in_user_pages():
  assert _all(check_internal_notes, USER_PAGES) == []


def test_modules_keys_and_component_arguments_exist():
  # One subprocess-free check that imports the library (TFX) once.
  from gnn_trainer_component.trainer import custom_config
  import gnn_trainer_component
  signatures = {name: set(inspect.signature(getattr(gnn_trainer_component, name)).parameters)
                for name in _COMPONENTS}
  problems = (_all(check_modules) + _all(check_custom_config_keys, ALL_PAGES,
                                         custom_config.CUSTOM_CONFIG_KEYS)
              + _all(check_component_arguments, ALL_PAGES, signatures))
  assert problems == []


# ---- each check catches what it is for ----

_BAD_PAGE = """# A page

See [the other page](missing.md), [this part](#no-such-part) and [ok](#a-page).

```bash
make demo && make no-such-target
python -m pipelines.no_such_module
cat module_files/no_such_module.py module_files/planetoid_gcn.py
```

```python
from gnn_trainer_component import GnnTrainer
trainer = GnnTrainer(examples=x, no_such_argument=1,
                     custom_config={"epochs": 3, "no_such_key": 1})
```

The option `custom_config["also_no_such_key"]` on /work/main on this machine kind.

```python
GnnTrainer(examples=x, ...,)
```

1. A step in a list:

   ```bash
   make indented-no-such-target
   ```
"""


def test_each_check_reports_a_broken_page(tmp_path):
  from gnn_trainer_component.trainer import custom_config
  page = "docs/bad.md"
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs" / "bad.md").write_text(_BAD_PAGE)
  (tmp_path / "gnn_trainer_component").mkdir()
  (tmp_path / "gnn_trainer_component" / "__init__.py").write_text("")
  (tmp_path / "module_files").mkdir()
  (tmp_path / "module_files" / "planetoid_gcn.py").write_text("")
  (tmp_path / "Makefile").write_text("demo: setup\n\techo\n")
  root = str(tmp_path)

  def run(check, *args):
    return [p.what for p in check(page, _BAD_PAGE, *args)]

  assert run(check_links, root) == [
      "link to 'missing.md': docs/missing.md does not exist",
      "link to '#no-such-part': docs/bad.md has no heading #no-such-part"]
  assert run(check_paths, root) == ["names 'module_files/no_such_module.py', which does not exist"]
  assert run(check_make_targets, root) == [
      "`make indented-no-such-target`: the Makefile has no target 'indented-no-such-target'",
      "`make no-such-target`: the Makefile has no target 'no-such-target'"]
  assert code_blocks(_BAD_PAGE)[-1] == ("bash", "make indented-no-such-target\n")
  assert run(check_modules, root) == [
      "module 'pipelines.no_such_module' does not exist in the repository"]
  assert [p.split(":")[0] for p in run(check_python_blocks)] == ["a python block does not parse"]
  assert run(check_custom_config_keys, custom_config.CUSTOM_CONFIG_KEYS) == [
      "custom_config key 'also_no_such_key' does not exist",
      "custom_config key 'no_such_key' does not exist"]
  assert run(check_component_arguments, {"GnnTrainer": {"examples", "custom_config"}}) == [
      "GnnTrainer() has no parameter 'no_such_argument'"]
  assert [p.split(":")[1].strip() for p in run(check_internal_notes)] == [
      "internal note '/work/'"]


def test_slugs_follow_github():
  assert slug("ML Metadata on a MySQL / MariaDB server") == "ml-metadata-on-a-mysql--mariadb-server"
  assert slug("`custom_config`") == "custom_config"
  assert slug("Speed: parse once, cheap epochs") == "speed-parse-once-cheap-epochs"
  assert anchors("# A\n## B\n## B\n```\n# not a heading\n```\n") == {"a", "b", "b-1"}
