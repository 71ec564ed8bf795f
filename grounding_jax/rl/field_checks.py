"""Typed checks of config fields read by dotted name, collecting one problem line per bad value.

    ck = FieldChecker(config)
    group = ck.integer("rollout.group_size", lo=2, why="GRPO's baseline is the group mean")
    ...
    if ck.problems:
      raise ConfigError(ck.problems)

Each check returns the value when it is valid, else None, and records a line naming the field, its
value and what is allowed (`config.rollout.group_size=1: must be an integer >= 2 (...)`), so that
one run reports every bad value at once. What each field must satisfy is rl/config_checks.py's.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Sequence

import ml_collections


class ConfigError(ValueError):
  """One or more config values are invalid; the message has one line per value."""

  def __init__(self, problems: Sequence[str]):
    self.problems = list(problems)
    super().__init__(f"{len(self.problems)} invalid config value(s):\n  " + "\n  ".join(self.problems))


# What `get` returns for a field the config lacks (None is a value some fields allow).
MISSING = object()


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
  def integer(self, field, lo=None, hi=None, why="", root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    ok = isinstance(v, numbers.Integral) and not isinstance(v, bool)
    if ok and (lo is None or v >= lo) and (hi is None or v <= hi):
      return int(v)
    span = (f">= {lo}" if hi is None else f"in [{lo}, {hi}]") if lo is not None else f"<= {hi}"
    self.bad(prefix + field, v, f"must be an integer {span}{f' ({why})' if why else ''}")
    return None

  def number(self, field, lo=None, hi=None, lo_open=False, hi_open=False, none_ok=False, why="",
             root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    if v is None and none_ok:
      return None
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
    if ok and lo is not None:
      ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
      ok = v < hi if hi_open else v <= hi
    if ok:
      return float(v)
    lo_s = "" if lo is None else f"{'(' if lo_open else '['}{lo}"
    hi_s = "" if hi is None else f"{hi}{')' if hi_open else ']'}"
    if lo is not None and hi is not None:
      span = f"in {lo_s}, {hi_s}"
    elif lo is not None:
      span = f"{'>' if lo_open else '>='} {lo}"
    elif hi is not None:
      span = f"{'<' if hi_open else '<='} {hi}"
    else:
      span = "finite"
    self.bad(prefix + field, v, f"must be a finite number {span}{' or None' if none_ok else ''}"
             f"{f' ({why})' if why else ''}")
    return None

  def choice(self, field, allowed, why="", root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    if isinstance(v, str) and v in allowed:
      return v
    self.bad(prefix + field, v, f"must be one of {tuple(allowed)}{f' ({why})' if why else ''}")
    return None

  def boolean(self, field, none_ok=False, root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    if isinstance(v, bool) or (none_ok and v is None):
      return v
    self.bad(prefix + field, v, f"must be True or False{' or None' if none_ok else ''}")
    return None

  def strings(self, field, root=None, prefix=""):
    v = self.value(field, root, prefix)
    if v is MISSING:
      return None
    if isinstance(v, (list, tuple)) and all(isinstance(s, str) and s for s in v):
      return tuple(v)
    self.bad(prefix + field, v, "must be a list of non-empty strings")
    return None
