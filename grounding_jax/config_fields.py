"""Config fields declared once: path, default, type, allowed values and meaning, in one `Field`.

    FIELDS = (
        Field("rollout.group_size", 8, int, "completions per prompt (G)", lo=2,
              why="GRPO's baseline is the group mean"),
        ...)
    config = build(FIELDS)                   # the default ConfigDict
    ck = FieldChecker(config)
    check(ck, FIELDS)                        # the simple checks, generated from the declarations
    if ck.problems:
      raise ConfigError(ck.problems)

A declaration's type and bounds give its check (an integer range, a finite number in an interval, one
of a set, True / False, a list of strings, a dict) and its error line, which names the field, the bad
value and what is allowed:

    config.rollout.group_size=1: must be an integer >= 2 (GRPO's baseline is the group mean)

Rules between fields (divisibility, one field needing another) are written by hand next to the
declarations that use them (rl/config/checks.py, models/lora.py). `markdown` renders the
declarations as the table of docs/config.md. Below every package: the RL and SFT configs both use it.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import numbers
from typing import Any, Callable, Mapping, Optional, Sequence

import ml_collections


class ConfigError(ValueError):
  """One or more config values are invalid; the message has one line per value."""

  def __init__(self, problems: Sequence[str]):
    self.problems = list(problems)
    super().__init__(f"{len(self.problems)} invalid config value(s):\n  " + "\n  ".join(self.problems))


# What `get` returns for a field the config lacks (None is a value some fields allow).
MISSING = object()


@dataclasses.dataclass(frozen=True)
class Field:
  """One config field.

  Attributes:
    path: dotted path below the section's root ("rollout.group_size").
    default: its default; a callable is called for each config built (lists of sections).
    type: bool, int, float, str, tuple (of strings), dict (a section of free keys), list or object
      (checked by hand, or not at all: `check=False`).
    doc: one line: what the field means.
    lo, hi, lo_open, hi_open: the allowed range of an int / float (closed unless *_open).
    choices: the allowed values.
    none_ok: None is allowed too (a None default becomes a typed FieldReference, so that a
      command-line override of the right type is accepted).
    nonempty: a str or tuple must not be empty.
    optional: a config may lack the field (written before it existed); it is then not checked.
    when: (sibling field, value): checked only while that field of the same section has the value.
    why: the reason for the rule, appended to the error line.
    check: False for fields checked elsewhere (named in `doc`) or free-form.
  """
  path: str
  default: Any
  type: type
  doc: str
  lo: Optional[float] = None
  hi: Optional[float] = None
  lo_open: bool = False
  hi_open: bool = False
  choices: tuple = ()
  none_ok: bool = False
  nonempty: bool = False
  optional: bool = False
  when: Optional[tuple[str, Any]] = None
  why: str = ""
  check: bool = True

  def value(self) -> Any:
    """A fresh default (a typed FieldReference for None or a free-typed object)."""
    v = self.default() if callable(self.default) else copy.deepcopy(self.default)
    if v is None or self.type is object:
      return ml_collections.FieldReference(v, field_type=self.type)
    return v


def build(fields: Sequence[Field],
          values: Optional[Mapping[str, Any]] = None) -> ml_collections.ConfigDict:
  """The ConfigDict of the declared defaults (or of `values`, by path), nested by the dotted paths."""
  values = values or {}
  tree: dict = {}
  for f in fields:
    *parents, name = f.path.split(".")
    node = tree
    for p in parents:
      node = node.setdefault(p, {})
    node[name] = values[f.path] if f.path in values else f.value()
  return _to_config(tree)


def _to_config(tree: dict) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(
      {k: _to_config(v) if isinstance(v, dict) else v for k, v in tree.items()})


class FieldChecker:
  """Reads fields by dotted name and collects one problem line per bad value."""

  def __init__(self, config):
    self.config = config
    self.problems: list[str] = []

  def get(self, field: str, root=None) -> Any:
    node = self.config if root is None else root
    for part in field.split("."):
      if isinstance(node, (Mapping, ml_collections.ConfigDict)) and part in node:
        node = node[part]
      else:
        return MISSING
    return node

  def bad(self, field: str, value: Any, rule: str) -> None:
    self.problems.append(f"config.{field}={value!r}: {rule}")

  def value(self, field: str, root=None, prefix: str = "") -> Any:
    v = self.get(field, root)
    if v is MISSING:
      self.problems.append(f"config.{prefix}{field}: missing (configs start from "
                           "grounding_jax.rl.config.default_config())")
    return v

  # --- typed checks; each returns the value when it is valid, else None
  def integer(self, field, lo=None, hi=None, none_ok=False, why="", root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING or (v is None and none_ok):
      return None
    ok = isinstance(v, numbers.Integral) and not isinstance(v, bool)
    if ok and (lo is None or v >= lo) and (hi is None or v <= hi):
      return int(v)
    span = (f">= {lo}" if hi is None else f"in [{lo}, {hi}]") if lo is not None else f"<= {hi}"
    self.bad(prefix + field, v, f"must be an integer {span}{' or None' if none_ok else ''}"
             f"{_why(why)}")
    return None

  def number(self, field, lo=None, hi=None, lo_open=False, hi_open=False, none_ok=False, why="",
             root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING or (v is None and none_ok):
      return None
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
    if ok and lo is not None:
      ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
      ok = v < hi if hi_open else v <= hi
    if ok:
      return float(v)
    self.bad(prefix + field, v, f"must be a finite number {_span(lo, hi, lo_open, hi_open)}"
             f"{' or None' if none_ok else ''}{_why(why)}")
    return None

  def choice(self, field, allowed, why="", root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    kind = str if all(isinstance(a, str) for a in allowed) else numbers.Number
    if isinstance(v, kind) and not isinstance(v, bool) and v in allowed:
      return v
    self.bad(prefix + field, v, f"must be one of {tuple(allowed)}{_why(why)}")
    return None

  def boolean(self, field, none_ok=False, root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    if isinstance(v, bool) or (none_ok and v is None):
      return v
    self.bad(prefix + field, v, f"must be True or False{' or None' if none_ok else ''}")
    return None

  def string(self, field, nonempty=False, why="", root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    if isinstance(v, str) and (v or not nonempty):
      return v
    self.bad(prefix + field, v, f"must be a {'non-empty ' if nonempty else ''}string{_why(why)}")
    return None

  def strings(self, field, root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    if isinstance(v, (list, tuple)) and all(isinstance(s, str) and s for s in v):
      return tuple(v)
    self.bad(prefix + field, v, "must be a list of non-empty strings")
    return None

  def mapping(self, field, why="", root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    if hasattr(v, "items"):
      return v
    self.bad(prefix + field, v, f"must be a dict{_why(why)}")
    return None


def _why(why: str) -> str:
  return f" ({why})" if why else ""


def _span(lo, hi, lo_open: bool, hi_open: bool) -> str:
  """">= 0", "> 0", "in [0, 1)", ... or "" (any finite number)."""
  if lo is not None and hi is not None:
    return f"in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
  if lo is not None:
    return f"{'>' if lo_open else '>='} {lo}"
  if hi is not None:
    return f"{'<' if hi_open else '<='} {hi}"
  return ""


def check(ck: FieldChecker, fields: Sequence[Field], root=None, prefix: str = "") -> None:
  """Each declared field's own rule (type, range, choices), read below `root` and reported with
  `prefix` ("stages[1].") before its path."""
  for f in fields:
    if not f.check or (f.optional and ck.get(f.path, root) is MISSING):
      continue
    if f.when is not None:
      sibling = f.path.rpartition(".")[0]
      if ck.get(f"{sibling}.{f.when[0]}" if sibling else f.when[0], root) != f.when[1]:
        continue
    kw = dict(root=root, prefix=prefix)
    if f.choices:
      ck.choice(f.path, f.choices, why=f.why, **kw)
    elif f.type is bool:
      ck.boolean(f.path, none_ok=f.none_ok, **kw)
    elif f.type is int:
      ck.integer(f.path, lo=f.lo, hi=f.hi, none_ok=f.none_ok, why=f.why, **kw)
    elif f.type is float:
      ck.number(f.path, lo=f.lo, hi=f.hi, lo_open=f.lo_open, hi_open=f.hi_open, none_ok=f.none_ok,
                why=f.why, **kw)
    elif f.type is str:
      ck.string(f.path, nonempty=f.nonempty, why=f.why, **kw)
    elif f.type is tuple:
      ck.strings(f.path, **kw)
    elif f.type is dict:
      ck.mapping(f.path, why=f.why, **kw)
    else:
      raise TypeError(f"{f.path}: no generated check for type {f.type.__name__}; set check=False "
                      "and check it by hand")


def allowed(f: Field) -> str:
  """What a field accepts, as the docs table shows it."""
  if f.choices:
    s = " \\| ".join(repr(c) for c in f.choices)
  elif f.type is bool:
    s = "True, False"
  elif f.type in (int, float):
    s = " ".join(p for p in ("integer" if f.type is int else "number",
                             _span(f.lo, f.hi, f.lo_open, f.hi_open)) if p)
  elif f.type is str:
    s = "non-empty string" if f.nonempty else "string"
  elif f.type is tuple:
    s = "list of strings"
  else:
    s = {dict: "dict", list: "list"}.get(f.type, "any")
  return s + (", None" if f.none_ok else "")


def markdown(fields: Sequence[Field], prefix: str = "",
             shown: Callable[[Field], str] = lambda f: repr(f.default)) -> list[str]:
  """One table row per field: | path | default | allowed | meaning |."""
  rows = []
  for f in fields:
    default = "(built)" if callable(f.default) else shown(f)
    doc = f.doc.replace("|", "\\|").replace("<", "\\<")
    rows.append(f"| `{prefix}{f.path}` | `{default}` | {allowed(f)} | {doc} |")
  return rows
