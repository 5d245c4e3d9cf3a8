"""docs/environment.md names every environment variable the code reads, and nothing more.

A scanner walks the repository's own code (no git: the Debian 13 chroot may have none) and
finds the reads of environment variables in Python, shell scripts, the Makefile and the
Dockerfiles. The tests fail on a read the page does not document (naming file:line) and on
a documented variable that no code reads any more; two tests on a tiny synthetic tree prove
that a new read, in Python or in shell form, is caught.

What counts as a read (docs/environment.md says the same):

* Python: ``os.environ.get(X)``, ``os.environ[X]`` (not an assignment), ``os.getenv(X)``,
  ``os.environ.setdefault(X, ...)`` (the user's value wins), ``"X" in os.environ``, and the
  same on a copy of the environment (``env = dict(os.environ)``; ``env.get(X)``). ``X`` may
  be a string, a constant (``PASSWORD_ENV = "GNN_MLMD_PASSWORD"``, also ``module.CONST``) or
  a loop variable over a tuple of strings; a key the scanner cannot resolve fails the test
  unless ``_DYNAMIC`` says which variables it stands for.
* Shell: ``${X:-default}`` and the other default forms (but for a lower-case name the script
  assigns: a local); ``$X`` / ``${X}`` for an upper-case name the script never assigns and
  bash does not set; ``${!v}`` in ``for v in A B; do``. Comments and single-quoted text
  (awk programs, ``bash -c '...'``) are not code of the script.
* Makefile: ``X ?= ...``, ``ifdef X`` / ``ifndef X``, ``$(X)`` of a variable the Makefile
  never assigns, and ``$$X`` in a recipe as in shell.
* Dockerfile: ``$X`` / ``${X}`` of a name no ``ARG`` or ``ENV`` of the file declares.

A variable the code only sets for a child process (``dict(os.environ, X="1")``) is no read:
the user cannot change it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import re
from typing import Iterable, Mapping, Optional

from tests.helpers import HOST_TESTS, REPO_ROOT

DOC = os.path.join("docs", "environment.md")
_SELF = "tests/test_environment_doc.py"

#: Reads whose key is an expression the scanner cannot resolve: (file, expression) -> the
#: variables it stands for.
_DYNAMIC: dict[tuple[str, str], tuple[str, ...]] = {
    # host_test_skip_reason: environ.get(env) for env, _ in HOST_TESTS.values().
    ("tests/helpers.py", "env"): tuple(env for env, _ in HOST_TESTS.values()),
}
#: Variables a test sets for the child process it starts and that only that child reads:
#: (file, name) -> why the page leaves them out.
_TEST_INTERNAL: dict[tuple[str, str], str] = {
    ("tests/test_console.py", "FAIL"): "the test's child script fails when the test sets it",
}

# ------------------------------------------------------------------------------ the scanner

#: Folder names never scanned (anywhere in the tree): outputs, caches, virtual environments
#: (``.venv*`` and every other hidden folder but ``.ci``: the rules below).
_SKIP_DIRS = frozenset({"build", "dist", "demo_output", "quickstart_output", "__pycache__", "node_modules"})
#: Skipped at the top level only (.gitignore's /tmp/).
_SKIP_TOP_DIRS = frozenset({"tmp"})
_KEEP_HIDDEN_DIRS = frozenset({".ci"})

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_VALID_NAME = re.compile(rf"^{_NAME}$")


@dataclasses.dataclass(frozen=True)
class Read:
  """One read of an environment variable: ``name`` at ``path``:``line`` (path relative, /)."""
  name: str
  path: str
  line: int

  def where(self) -> str:
    return f"{self.path}:{self.line}"


@dataclasses.dataclass
class ScanResult:
  """What :func:`scan` found: the reads, and the reads whose variable it cannot tell."""
  reads: list[Read] = dataclasses.field(default_factory=list)
  unresolved: list[str] = dataclasses.field(default_factory=list)

  def names(self) -> set[str]:
    return {r.name for r in self.reads}


def _line_of(text: str, offset: int) -> int:
  return text.count("\n", 0, offset) + 1


def _file_kind(path: str, name: str) -> Optional[str]:
  """'python', 'shell', 'make', 'docker' or None (not code this scanner reads)."""
  if name.endswith(".py"):
    return "python"
  if name.endswith((".sh", ".bash")):
    return "shell"
  if name in ("Makefile", "GNUmakefile", "makefile") or name.endswith(".mk"):
    return "make"
  if name == "Dockerfile" or (name.startswith("Dockerfile.")
                              and not name.endswith((".dockerignore", ".md"))):
    return "docker"
  if "." in name:
    return None
  try:
    with open(path, "rb") as f:
      first = f.readline(200)
  except OSError:
    return None
  if first.startswith(b"#!"):
    if b"python" in first:
      return "python"
    if re.search(rb"\b(?:ba|da|z|k)?sh\b", first):
      return "shell"
  return None


def code_files(root: str) -> list[tuple[str, str]]:
  """``[(path relative to root with /, kind)]`` of the code files under ``root``, sorted."""
  out = []
  for folder, dirs, files in os.walk(root):
    top = os.path.abspath(folder) == os.path.abspath(root)
    dirs[:] = sorted(
        d for d in dirs
        if d not in _SKIP_DIRS and not (top and d in _SKIP_TOP_DIRS)
        and not d.endswith(".egg-info")
        and (not d.startswith(".") or d in _KEEP_HIDDEN_DIRS))
    for name in sorted(files):
      path = os.path.join(folder, name)
      kind = _file_kind(path, name)
      if kind:
        out.append((os.path.relpath(path, root).replace(os.sep, "/"), kind))
  return out


# --- Python

_ARG = r"""(?P<arg>"[^"\n]*"|'[^'\n]*'|[A-Za-z_][\w.]*)"""
#: The membership form takes a string or an UPPER_CASE constant (not a loop variable).
_MEMBER_ARG = r"""(?<![\w.])(?P<arg>"[^"\n]*"|'[^'\n]*'|(?:[A-Za-z_]\w*\.)*[A-Z_][A-Z0-9_]*)"""
#: ``os.environ``, ``_os.environ``, ``environ``.
_ENVIRON = r"(?<![\w.])(?:[A-Za-z_]\w*\.)*environ\b"
#: After ``X[key]``: not an assignment (``=``, ``+=``, ...; ``==`` is a read).
_NOT_ASSIGNED = r"(?![ \t]*(?:[-+*/|&]?=(?!=)))"
#: ``del os.environ[X]`` (ends right before the match): no read.
_DEL = re.compile(r"\bdel[ \t]+(?:[A-Za-z_]\w*\.)*\Z")


def _python_read_patterns(obj: str, whole_obj: Optional[str] = None) -> list[re.Pattern]:
  """Patterns of a read of a mapping like ``os.environ``.

  Args:
    obj: A regex of the mapping's last name, where a read's match starts (``environ``).
    whole_obj: A regex of its whole expression (``os.environ``); default ``obj``.
  """
  whole_obj = whole_obj or obj
  return [
      re.compile(rf"{obj}\s*\.\s*(?:get|setdefault)\s*\(\s*{_ARG}"),
      re.compile(rf"{obj}\s*\[\s*{_ARG}\s*\]{_NOT_ASSIGNED}"),
      re.compile(rf"{_MEMBER_ARG}\s+(?:not\s+)?in\s+{whole_obj}(?![\w.(])"),
  ]


_PY_READS = _python_read_patterns(r"\benviron\b", _ENVIRON) + [
    re.compile(rf"\bgetenv\s*\(\s*{_ARG}"),
]
#: ``name = dict(os.environ...)``, ``os.environ.copy()``, ``{k: v for k, v in os.environ.items()}``.
_PY_COPY = re.compile(
    rf"^[ \t]*(?P<name>[A-Za-z_][\w.]*)[ \t]*=[ \t]*(?:dict\(\s*{_ENVIRON}"
    rf"|{_ENVIRON}\s*\.\s*copy\s*\(|\{{[^}}\n]*\bin\s+{_ENVIRON}\s*\.\s*items\s*\()", re.M)
_PY_STR_CONST = re.compile(
    rf"""^[ \t]*(?P<name>{_NAME})[ \t]*(?::[^=\n]+)?=[ \t]*(?P<q>["'])(?P<value>{_NAME})(?P=q)"""
    r"[ \t]*(?:#.*)?$", re.M)
_PY_SEQ_CONST = re.compile(
    rf"""^[ \t]*(?P<name>{_NAME})[ \t]*(?::[^=\n]+)?=[ \t]*[(\[]"""
    rf"""(?P<items>(?:\s*["']{_NAME}["']\s*,?)+)\s*[)\]]""", re.M)
_PY_STRINGS = re.compile(rf"""["']({_NAME})["']""")


def _in_python_comment(code: str, offset: int) -> bool:
  """Whether ``offset`` is in a comment: after a ``#`` outside quotes on its line."""
  quote = None
  i = code.rfind("\n", 0, offset) + 1
  while i < offset:
    c = code[i]
    if c == "\\":
      i += 1
    elif quote:
      quote = None if c == quote else quote
    elif c in "\"'":
      quote = c
    elif c == "#":
      return True
    i += 1
  return False


class _PythonConstants:
  """String and tuple-of-strings constants of every Python file, to resolve a read's key."""

  def __init__(self, sources: Mapping[str, str]):
    self.strings: dict[str, dict[str, str]] = {}  # path -> {name: value}
    self.seqs: dict[str, dict[str, tuple[str, ...]]] = {}
    for path, text in sources.items():
      self.strings[path] = {m["name"]: m["value"] for m in _PY_STR_CONST.finditer(text)}
      self.seqs[path] = {m["name"]: tuple(_PY_STRINGS.findall(m["items"]))
                         for m in _PY_SEQ_CONST.finditer(text)}

  def _lookup(self, table: Mapping[str, Mapping], path: str, name: str):
    if name in table.get(path, {}):
      return table[path][name]
    values = {repr(t[name]): t[name] for t in table.values() if name in t}
    return next(iter(values.values())) if len(values) == 1 else None

  def string(self, path: str, name: str) -> Optional[str]:
    return self._lookup(self.strings, path, name.rsplit(".", 1)[-1])

  def seq(self, path: str, name: str) -> Optional[tuple[str, ...]]:
    return self._lookup(self.seqs, path, name.rsplit(".", 1)[-1])


def _resolve_python_key(arg: str, path: str, code: str, consts: _PythonConstants,
                        dynamic: Mapping[tuple[str, str], Iterable[str]]
                        ) -> Optional[tuple[str, ...]]:
  """The variable names a read's key stands for, or None."""
  if arg[0] in "\"'":
    name = arg[1:-1]
    return (name,) if _VALID_NAME.match(name) else None
  if (path, arg) in dynamic:
    return tuple(dynamic[(path, arg)])
  value = consts.string(path, arg)
  if value is not None:
    return (value,)
  # A loop variable: ``for k in CONST`` or ``for k in ("A", "B")`` in the same file.
  if "." not in arg:
    loop = re.search(rf"\bfor\s+(?:[\w\s,()]*[\s,(])?{re.escape(arg)}\b[\w\s,()]*?\s+in\s+"
                     r"(?P<seq>[A-Za-z_][\w.]*|[(\[][^)\]\n]*[)\]])", code)
    if loop:
      seq = loop["seq"]
      names = (tuple(_PY_STRINGS.findall(seq)) if seq[0] in "([" else consts.seq(path, seq))
      if names:
        return names
  return None


def _scan_python(path: str, code: str, consts: _PythonConstants,
                 dynamic: Mapping[tuple[str, str], Iterable[str]], result: ScanResult) -> None:
  patterns = list(_PY_READS)
  for copy in sorted({m["name"] for m in _PY_COPY.finditer(code)}):
    patterns += _python_read_patterns(rf"(?<![\w.]){re.escape(copy)}(?![\w])")
  seen = set()
  for pattern in patterns:
    for m in pattern.finditer(code):
      if (_in_python_comment(code, m.start())
          or _DEL.search(code, code.rfind("\n", 0, m.start()) + 1, m.start())):
        continue
      line = _line_of(code, m.start("arg"))
      names = _resolve_python_key(m["arg"], path, code, consts, dynamic)
      if names is None:
        result.unresolved.append(f"{path}:{line}: cannot tell which variable {m['arg']!r} is "
                                 f"(in {m.group(0).strip()!r}); add it to _DYNAMIC")
        continue
      for name in names:
        if (name, line) not in seen:
          seen.add((name, line))
          result.reads.append(Read(name, path, line))


# --- shell

#: Variables bash itself sets (never a user's setting).
_SHELL_SPECIAL = frozenset({
    "EUID", "UID", "PPID", "PWD", "OLDPWD", "RANDOM", "SRANDOM", "LINENO", "SECONDS",
    "EPOCHSECONDS", "EPOCHREALTIME", "FUNCNAME", "PIPESTATUS", "IFS", "OPTARG", "OPTIND",
    "REPLY", "HOSTNAME", "HOSTTYPE", "OSTYPE", "MACHTYPE", "SHLVL", "SHELLOPTS", "GROUPS",
    "DIRSTACK", "COLUMNS", "LINES"})
_SHELL_EXPANSION = re.compile(
    rf"(?<!\\)\$(?:\{{(?P<ind>!)?#?(?P<braced>{_NAME})(?P<default>:?[-=+?])?|(?P<plain>{_NAME}))")
#: Statement-level assignments: ``X=``, ``export X=``, after ; && || ( { then do else.
_SHELL_ASSIGN = re.compile(
    rf"(?:^|[;&|(){{}}]|\b(?:then|do|else)\b)[ \t]*(?P<name>{_NAME})(?:\[[^\]\n]*\])?\+?=", re.M)
_SHELL_DECLARE = re.compile(
    r"(?:^|[;&|(){}]|\b(?:then|do|else)\b)[ \t]*(?:export|local|declare|typeset|readonly)"
    r"(?P<rest>[^;&|\n]*)", re.M)
_SHELL_FOR = re.compile(
    rf"\b(?:for|select)[ \t]+(?P<name>{_NAME})[ \t]+in\b(?P<words>(?:[^;\n\\]|\\\n)*)", re.M)
_SHELL_READ = re.compile(
    r"(?:^|[;&|(){}]|\b(?:then|do|else|while|until|if)\b)[ \t]*read\b(?P<rest>[^;&|\n]*)", re.M)


def _shell_code(text: str) -> str:
  """``text`` with comments and single-quoted text blanked (line numbers kept).

  Heredocs: the body of ``<<'EOF'`` is blanked; the body of ``<<EOF`` is kept as text the
  shell expands (its quotes are not code).
  """
  out = []
  quote = None
  heredoc: Optional[tuple[str, bool]] = None  # (terminator, expands)
  pending: list[tuple[str, bool]] = []
  for line in text.split("\n"):
    if heredoc:
      if line.strip() == heredoc[0]:
        heredoc = pending.pop(0) if pending else None
        out.append("")
      else:
        out.append(line if heredoc[1] else "")
      continue
    chars = []
    i = 0
    while i < len(line):
      c = line[i]
      if quote == "'":
        if c == "'":
          quote = None
        chars.append(" ")
      elif c == "\\":
        chars.append(line[i:i + 2])
        i += 1
      elif quote == '"':
        if c == '"':
          quote = None
        chars.append(c)
      elif c == "'":
        quote = "'"
        chars.append(" ")
      elif c == '"':
        quote = '"'
        chars.append(c)
      elif c == "#" and (i == 0 or line[i - 1] in " \t;&|("):
        break
      else:
        m = re.match(r"<<-?[ \t]*(['\"]?)([A-Za-z_]\w*)\1", line[i:]) if c == "<" else None
        if m and not line[i + 2:i + 3] == "<":
          pending.append((m.group(2), not m.group(1)))
          chars.append(m.group(0).replace("'", " ").replace('"', " "))
          i += len(m.group(0))
          continue
        chars.append(c)
      i += 1
    out.append("".join(chars))
    if pending and quote is None:
      heredoc = pending.pop(0)
  return "\n".join(out)


def _shell_assigned(code: str) -> set[str]:
  names = {m["name"] for m in _SHELL_ASSIGN.finditer(code)}
  names |= {m["name"] for m in _SHELL_FOR.finditer(code)}
  for m in list(_SHELL_DECLARE.finditer(code)) + list(_SHELL_READ.finditer(code)):
    names |= set(re.findall(rf"(?:^|\s)({_NAME})(?=[=\s]|$)", m["rest"]))
  return names


def _scan_shell_code(path: str, code: str, result: ScanResult,
                     assigned: Optional[set[str]] = None) -> None:
  """Reads in shell ``code`` (already through :func:`_shell_code`)."""
  assigned = _shell_assigned(code) if assigned is None else assigned
  loops = {m["name"]: m for m in _SHELL_FOR.finditer(code)}
  for m in _SHELL_EXPANSION.finditer(code):
    line = _line_of(code, m.start())
    if m["ind"]:
      loop = loops.get(m["braced"])
      if not loop:
        result.unresolved.append(f"{path}:{line}: cannot tell which variables ${{!{m['braced']}}} "
                                 "reads (no `for ... in` list for it)")
        continue
      for w in re.finditer(r"\S+", loop["words"]):
        word = w.group(0)
        if word == "\\":
          continue
        if not _VALID_NAME.match(word):
          result.unresolved.append(f"{path}:{line}: ${{!{m['braced']}}} over {word!r}")
          continue
        result.reads.append(Read(word, path, _line_of(code, loop.start("words") + w.start())))
      continue
    name = m["braced"] or m["plain"]
    upper = name == name.upper()
    if m["default"] and (upper or name not in assigned) or (
        upper and name not in assigned and name not in _SHELL_SPECIAL
        and not name.startswith("BASH")):
      result.reads.append(Read(name, path, line))


# --- Makefile

_MAKE_BUILTINS = frozenset({"MAKE", "MAKEFLAGS", "MFLAGS", "MAKECMDGOALS", "MAKEFILE_LIST",
                            "MAKELEVEL", "CURDIR", "SHELL", "MAKEOVERRIDES", "VPATH"})
_MAKE_DEFAULT = re.compile(rf"^[ \t]*(?:(?:export|override)[ \t]+)*(?P<name>{_NAME})[ \t]*\?=",
                           re.M)
_MAKE_IFDEF = re.compile(rf"^[ \t]*ifn?def[ \t]+(?P<name>{_NAME})", re.M)
_MAKE_ORIGIN = re.compile(rf"\$[({{](?:origin|flavor|value)[ \t]+(?P<name>{_NAME})[)}}]")
_MAKE_ASSIGN = re.compile(
    rf"^[ \t]*(?:(?:export|override)[ \t]+)*(?P<name>{_NAME})[ \t]*(?::{{1,3}}|\+|!)?=", re.M)
_MAKE_REF = re.compile(rf"(?<!\$)\$[({{](?P<name>{_NAME})[)}}]")


def _scan_make(path: str, text: str, result: ScanResult) -> None:
  lines = text.split("\n")
  is_recipe = [line.startswith("\t") for line in lines]
  # Make's own lines (comments and recipes blanked), and those plus the recipes (which make
  # expands too).
  make = "\n".join("" if r else re.sub(r"(?<!\\)#.*", "", line)
                   for line, r in zip(lines, is_recipe))
  expanded = "\n".join(line[1:] if r else m for line, r, m in zip(lines, is_recipe,
                                                                 make.split("\n")))
  assigned = {m["name"] for m in _MAKE_ASSIGN.finditer(make)}
  found = [(m["name"], _line_of(make, m.start()))
           for p in (_MAKE_DEFAULT, _MAKE_IFDEF) for m in p.finditer(make)]
  found += [(m["name"], _line_of(expanded, m.start())) for m in _MAKE_ORIGIN.finditer(expanded)]
  found += [(m["name"], _line_of(expanded, m.start())) for m in _MAKE_REF.finditer(expanded)
            if m["name"] not in assigned and m["name"] not in _MAKE_BUILTINS]
  for name, line in found:
    result.reads.append(Read(name, path, line))
  # The recipes as the shell sees them: $$ -> $, make's own references blanked.
  shell = "\n".join(re.sub(r"\$\$|\$[({][^)}]*[)}]|\$.",
                           lambda m: "$" if m.group(0) == "$$" else " " * len(m.group(0)),
                           line[1:]) if r else ""
                    for line, r in zip(lines, is_recipe))
  _scan_shell_code(path, _shell_code(shell), result)


# --- Dockerfile

def _scan_docker(path: str, text: str, result: ScanResult) -> None:
  code = _shell_code(text)
  declared = set(re.findall(rf"^[ \t]*ARG[ \t]+({_NAME})", code, re.M | re.I))
  for m in re.finditer(r"^[ \t]*ENV[ \t]+((?:[^\n\\]|\\\n)*)", code, re.M | re.I):
    body = m.group(1)
    names = re.findall(rf"(?:^|\s)({_NAME})=", body)
    declared |= set(names) if names else set(re.findall(rf"^\s*({_NAME})", body))
  _scan_shell_code(path, code, result, assigned=declared)


def scan(root: str, dynamic: Optional[Mapping[tuple[str, str], Iterable[str]]] = None,
         exclude: Iterable[str] = ()) -> ScanResult:
  """Every read of an environment variable in the code under ``root``.

  Args:
    root: The tree to walk (the repository, or a test's synthetic tree).
    dynamic: (file, expression) -> the variables a Python read with that key stands for,
      where the key is neither a string nor a constant (``_DYNAMIC``).
    exclude: Files (relative, with /) not to scan.

  Returns:
    The reads (name, file, line) and the reads whose variable cannot be told.
  """
  dynamic = dynamic or {}
  result = ScanResult()
  python: dict[str, str] = {}
  exclude = set(exclude)
  for rel, kind in code_files(root):
    if rel in exclude:
      continue
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
      text = f.read()
    if kind == "python":
      python[rel] = text
    elif kind == "shell":
      _scan_shell_code(rel, _shell_code(text), result)
    elif kind == "make":
      _scan_make(rel, text, result)
    else:
      _scan_docker(rel, text, result)
  consts = _PythonConstants(python)
  for rel, code in python.items():
    if "environ" in code or "getenv" in code:
      _scan_python(rel, code, consts, dynamic, result)
  result.reads = sorted(set(result.reads), key=lambda r: (r.name, r.path, r.line))
  return result


# --------------------------------------------------------------------------- the page

#: A documented variable: a list item that starts with its name(s) in backquotes, then " — ".
_DOC_ENTRY = re.compile(
    rf"^[-*][ \t]+(?P<names>`{_NAME}`(?:[ \t]*(?:,|/|or)[ \t]*`{_NAME}`)*)[ \t]+—", re.M)


def documented(doc_text: str) -> dict[str, list[int]]:
  """``{name: [line of its entry, ...]}`` of the variables a page documents."""
  out: dict[str, list[int]] = {}
  for m in _DOC_ENTRY.finditer(doc_text):
    for name in re.findall(r"`(\w+)`", m["names"]):
      out.setdefault(name, []).append(_line_of(doc_text, m.start()))
  return out


def undocumented(result: ScanResult, doc_names: Iterable[str],
                 internal: Iterable[tuple[str, str]] = ()) -> list[str]:
  """One line per variable the code reads and the page lacks, with every file:line."""
  doc_names, internal = set(doc_names), set(internal)
  missing: dict[str, list[str]] = {}
  for r in result.reads:
    if r.name not in doc_names and (r.path, r.name) not in internal:
      missing.setdefault(r.name, []).append(r.where())
  return [f"{name}: read at {', '.join(wheres)}" for name, wheres in sorted(missing.items())]


def stale(result: ScanResult, doc: Mapping[str, list[int]], doc_path: str = DOC) -> list[str]:
  """One line per variable the page documents and no code reads."""
  read = result.names()
  return [f"{name}: {doc_path}:{lines[0]} documents it, no code reads it"
          for name, lines in sorted(doc.items()) if name not in read]


# --------------------------------------------------------------------------- the tests


@functools.lru_cache(maxsize=None)
def _repo_scan() -> ScanResult:
  # This file is left out: its docstrings and synthetic sources spell the forms it finds.
  return scan(REPO_ROOT, _DYNAMIC, exclude=[_SELF])


def _doc() -> dict[str, list[int]]:
  with open(os.path.join(REPO_ROOT, DOC), encoding="utf-8") as f:
    return documented(f.read())


def test_every_variable_the_code_reads_is_documented():
  result = _repo_scan()
  assert not result.unresolved, "\n".join(result.unresolved)
  missing = undocumented(result, _doc(), _TEST_INTERNAL)
  assert not missing, (f"environment variables read by the code but missing from {DOC} "
                       "(add a line: `NAME` — what it does, default, who reads it):\n"
                       + "\n".join(missing))


def test_every_documented_variable_is_read_by_the_code():
  problems = stale(_repo_scan(), _doc())
  assert not problems, "stale lines in the page (remove them):\n" + "\n".join(problems)


def test_each_variable_has_one_line():
  twice = {name: lines for name, lines in _doc().items() if len(lines) > 1}
  assert not twice, f"documented more than once in {DOC}: {twice}"


def test_the_exceptions_are_still_needed():
  result = _repo_scan()
  reads = {(r.path, r.name) for r in result.reads}
  assert set(_TEST_INTERNAL) <= reads, set(_TEST_INTERNAL) - reads
  for (path, expr), names in _DYNAMIC.items():
    assert names, (path, expr)
    assert {(path, n) for n in names} <= reads, (path, expr)


def test_the_scanner_finds_the_reads_it_must():
  """Spot checks on the real tree: every form the code uses is found."""
  wheres = {(r.name, r.path) for r in _repo_scan().reads}
  for name, path in [
      ("DEMO_OUTPUT_DIR", "pipelines/demo/run_local.py"),            # os.environ.get("...")
      ("PLANETOID_DATA_DIR", "pipelines/planetoid/__init__.py"),     # over two lines
      ("CLUSTER_SPEC", "gnn_trainer_component/distributed/strategy.py"),  # os.environ[...]
      ("GNN_MLMD_PASSWORD", "pipelines/runtime/mlmd_connection.py"),  # environ[CONSTANT]
      ("GNN_TRAINER_PIPELINE_RUN_ID", "gnn_trainer_component/trainer/executor.py"),  # mod.CONST
      ("TF_USE_LEGACY_KERAS", "gnn_trainer_component/process.py"),   # setdefault(CONSTANT)
      ("TF_CONFIG", "tests/conftest.py"),                            # for k in CONSTANT
      ("GNN_REQUIRE_MARIADB", "tests/helpers.py"),                   # _DYNAMIC
      ("GNN_CHROOT_SUITE", "scripts/chroot_ci.sh"),                  # ${X:-default}
      ("PIP_CERT", "scripts/chroot_ci.sh"),                          # nested default
      ("http_proxy", "scripts/chroot_ci.sh"),                        # ${!v} over a for list
      ("HOME", "scripts/stack.sh"),                                  # plain $X, never assigned
      ("PLANETOID_DATA_DIR", ".ci/run"),                             # a script without .sh
      ("PYTHON", "kubeflow/run.sh"),
      ("GNN_STACK", "Makefile"),                                     # ifndef
      ("TEST_WORKERS", "Makefile"),                                  # ?=
  ]:
    assert (name, path) in wheres, (name, path)
  names = {n for n, _ in wheres}
  # Assigned by the scripts (locals), only set for a child, bash's own, or make's own.
  for local in ("STACK", "ROOT", "INNER", "MOUNTED", "PY", "SHELL", "MAKE", "v", "want",
                "DEBIAN_FRONTEND", "PIP_NO_CACHE_DIR", "LOCK", "TFX_IMAGE"):
    assert local not in names, local


# --- the scanner on a synthetic tree

# Spelled so that even this file's own text holds no read (it is left out of the real scan).
_ENV = "os.environ"
_SYNTHETIC_PY = f'''import os
NEW_ENV = "GNN_NEW_CONSTANT"
KEYS = ("GNN_NEW_A", "GNN_NEW_B")
# {_ENV}.get("GNN_IN_A_COMMENT")
value = {_ENV}.get("GNN_NEW_THING")
other = {_ENV}[NEW_ENV]
{_ENV}["GNN_ONLY_WRITTEN"] = "1"; del {_ENV}["GNN_DELETED"]
child = dict({_ENV}, GNN_ONLY_FOR_THE_CHILD="1")
seen = {{k: {_ENV}.get(k) for k in KEYS}}
flag = "GNN_NEW_MEMBER" in {_ENV}
env = dict({_ENV})
copied = env.get("GNN_NEW_FROM_A_COPY")
documented = os.getenv("GNN_DOCUMENTED")
'''
_SYNTHETIC_SH = '''#!/usr/bin/env bash
# $GNN_IN_A_SHELL_COMMENT
set -euo pipefail
LOCAL_DIR=${GNN_NEW_SHELL:-/tmp}
echo "$LOCAL_DIR $GNN_NEW_PLAIN" | awk '{print $NF}'
export GNN_EXPORTED_ONLY=1
for v in GNN_NEW_PASSED other_var; do echo "${!v:-}"; done
'''
_SYNTHETIC_MAKE = '''PY := python
NEW_MAKE_ARGS ?=
all:
\t$(PY) -m x $(NEW_MAKE_ARGS) $(NEW_UNDEFINED) && echo $$NEW_RECIPE $$local
'''
_SYNTHETIC_DOCKER = '''ARG BASE=debian
FROM ${BASE}
ENV GNN_IMAGE_SET=1 \\
    OTHER=2
RUN echo "$GNN_NEW_BUILD $OTHER"
'''
_NEW = {  # what the synthetic tree reads: name -> file:line
    "GNN_NEW_THING": "pkg/mod.py:5", "GNN_NEW_CONSTANT": "pkg/mod.py:6",
    "GNN_NEW_A": "pkg/mod.py:9", "GNN_NEW_B": "pkg/mod.py:9", "GNN_NEW_MEMBER": "pkg/mod.py:10",
    "GNN_NEW_FROM_A_COPY": "pkg/mod.py:12",
    "GNN_NEW_SHELL": "scripts/run.sh:4", "GNN_NEW_PLAIN": "scripts/run.sh:5",
    "GNN_NEW_PASSED": "scripts/run.sh:7", "other_var": "scripts/run.sh:7",
    "NEW_MAKE_ARGS": "Makefile:2", "NEW_UNDEFINED": "Makefile:4", "NEW_RECIPE": "Makefile:4",
    "GNN_NEW_BUILD": "kubeflow/Dockerfile:5",
}


def _write(root: pathlib.Path, rel: str, text: str) -> None:
  path = root / rel
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text)


def _synthetic_tree(root: pathlib.Path) -> None:
  _write(root, "pkg/mod.py", _SYNTHETIC_PY)
  _write(root, "scripts/run.sh", _SYNTHETIC_SH)
  _write(root, "Makefile", _SYNTHETIC_MAKE)
  _write(root, "kubeflow/Dockerfile", _SYNTHETIC_DOCKER)
  # Not scanned: a venv, build output, a hidden folder, caches, data files.
  for skipped in (".venv/lib/site.py", ".venv-tfx121/x.py", "build/lib/x.py", ".git/hooks/x.py",
                  "pkg/__pycache__/x.py", "pkg.egg-info/x.py", "demo_output/x.py"):
    _write(root, skipped, f'import os\n{_ENV}.get("GNN_SKIPPED")\n')
  _write(root, "data.txt", '${GNN_NOT_CODE}\n')
  # Scanned: .ci, and a script without .sh.
  _write(root, ".ci/run", '#!/usr/bin/env bash\necho "${GNN_CI_ONLY:-}"\n')


def test_a_new_read_in_python_or_shell_fails_with_its_file_and_line(tmp_path):
  _synthetic_tree(tmp_path)
  result = scan(str(tmp_path))
  assert not result.unresolved, result.unresolved
  found = {(r.name, r.where()) for r in result.reads}
  for name, where in _NEW.items():
    assert (name, where) in found, (name, where, sorted(found))
  assert ("GNN_CI_ONLY", ".ci/run:2") in found
  names = result.names()
  for not_read in ("GNN_IN_A_COMMENT", "GNN_ONLY_WRITTEN", "GNN_DELETED", "GNN_ONLY_FOR_THE_CHILD",
                   "GNN_IN_A_SHELL_COMMENT", "LOCAL_DIR", "NF", "GNN_EXPORTED_ONLY", "v",
                   "PY", "local", "BASE", "GNN_IMAGE_SET", "OTHER", "GNN_SKIPPED",
                   "GNN_NOT_CODE"):
    assert not_read not in names, not_read
  assert names == set(_NEW) | {"GNN_CI_ONLY", "GNN_DOCUMENTED"}

  doc = documented("# Environment variables\n\n"
                   "- `GNN_DOCUMENTED` — documented, read.\n"
                   "- `GNN_GONE` — documented, no longer read.\n")
  missing = undocumented(result, doc)
  for name, where in _NEW.items():
    assert any(line.startswith(f"{name}: ") and where in line for line in missing), name
  assert not any(line.startswith("GNN_DOCUMENTED:") for line in missing)
  assert stale(result, doc) == [f"GNN_GONE: {DOC}:4 documents it, no code reads it"]


def test_an_unresolvable_key_fails_unless_declared(tmp_path):
  _write(tmp_path, "mod.py", f"import os\nname = input()\nvalue = {_ENV}.get(name)\n")
  _write(tmp_path, "run.sh", 'for v in $(cat list); do echo "${!w}"; done\n')
  result = scan(str(tmp_path))
  assert len(result.unresolved) == 2, result.unresolved
  assert result.unresolved[0].startswith("run.sh:1:")
  assert result.unresolved[1].startswith("mod.py:3:")
  result = scan(str(tmp_path), {("mod.py", "name"): ("GNN_FROM_INPUT",)})
  assert [r.where() for r in result.reads] == ["mod.py:3"]


def test_the_page_format_is_parsed():
  doc = documented("- `A_B` — one.\n* `C` / `D` — two names, one line.\n"
                   "text `E` — not an entry\n- `F`: no dash, not an entry\n")
  assert doc == {"A_B": [1], "C": [2], "D": [2]}
