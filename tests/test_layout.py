"""docs/development.md's layout table matches the tree: every module is named in its folder's row,
and every name in the table exists."""

import os
import re

from tests.helpers import REPO_ROOT

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
