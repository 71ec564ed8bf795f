"""How a run's config is made from a config file, named presets and field overrides — one rule for
launch/train.py (`--preset`, `--config.<field>=…`) and launch/sweep.py (a sweep's override dicts).

    config file → field overrides → presets → field overrides again

so a preset (a function `grounding_jax.rl.config.presets.<name>(config)`, e.g. `dapo`) sets its fields on
the overridden config, and a field given explicitly still wins over what the preset sets. An
override dict is {"preset": name or [names], "<dotted.field[0].path>": value, ...}.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

import ml_collections

from grounding_jax.rl.config import presets

PRESET_KEY = "preset"
_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def preset_names(value: str | Iterable[str] | None) -> list[str]:
  """["a", "b"] from "a", "a,b", ["a", "b"] or None (= [])."""
  if value is None:
    return []
  if isinstance(value, str):
    return [v for v in (s.strip() for s in value.split(",")) if v]
  return [str(v) for v in value]


def check_field(config: ml_collections.ConfigDict, path: str) -> None:
  """Raises ValueError unless `path` ("optimizer.learning_rate", "stages[0].num_steps") names an
  existing field (ConfigDict.update_from_flattened_dict would silently add a misspelt one)."""
  node, walked = config, ""
  for name, index in _TOKEN.findall(path):
    if name:
      keys = list(node.keys()) if isinstance(node, (ml_collections.ConfigDict, dict)) else []
      if name not in keys:
        raise ValueError(f"override {path!r}: the config has no field {name!r}"
                         f"{' under ' + walked if walked else ''} (fields there: {sorted(keys)})")
      node = node[name]
      walked += ("." if walked else "") + name
    else:
      if not isinstance(node, (list, tuple)) or int(index) >= len(node):
        raise ValueError(f"override {path!r}: {walked} has no item [{index}]")
      node = node[int(index)]
      walked += f"[{index}]"


def set_fields(config: ml_collections.ConfigDict, fields: Mapping[str, Any]) -> None:
  """Sets each dotted field path to its value, in place; errors name the field and the value."""
  for path, value in fields.items():
    check_field(config, path)
    try:
      with config.unlocked():
        config.update_from_flattened_dict({path: value})
    except (TypeError, ValueError) as e:
      raise ValueError(f"override {path}={value!r}: {e}") from e


def apply_presets(config: ml_collections.ConfigDict, names: str | Iterable[str] | None,
                  fields: Mapping[str, Any] = ()) -> ml_collections.ConfigDict:
  """Applies the named presets to `config` (which already carries `fields`), then `fields` again.

  Args:
    config: the config file's ConfigDict with the field overrides applied (as config_flags leaves
      it, or as `apply` makes it).
    names: preset function names in grounding_jax.rl.config.presets, applied in order.
    fields: the field overrides, re-applied so that they win over the presets.
  Returns:
    The config (presets may modify it in place or return a new one).
  """
  for name in preset_names(names):
    fn = getattr(presets, name, None)
    if name.startswith("_") or not callable(fn):
      public = sorted(n for n, f in vars(presets).items() if not n.startswith("_") and callable(f)
                      and getattr(f, "__module__", "") == presets.__name__)
      raise ValueError(f"preset {name!r}: grounding_jax.rl.config.presets has no function {name}(config) "
                       f"(its functions: {public})")
    with config.unlocked():
      result = fn(config)
    config = config if result is None else result
  set_fields(config, fields)
  return config


def apply(config: ml_collections.ConfigDict, overrides: Mapping[str, Any],
          fixed: Mapping[str, Any] = ()) -> ml_collections.ConfigDict:
  """`config` with an override dict applied (in place where possible): fields, presets, fields.

  Args:
    config: a config file's ConfigDict, already carrying the `fixed` field overrides.
    overrides: {"preset": names, field path: value, ...} of one run.
    fixed: field overrides shared by every run (a sweep's command line); like `overrides`' fields
      they win over the presets, and `overrides` win over them.
  """
  fields = {k: v for k, v in overrides.items() if k != PRESET_KEY}
  set_fields(config, fields)
  return apply_presets(config, overrides.get(PRESET_KEY), {**dict(fixed), **fields})


def flag_value(value: Any) -> str:
  """`value` as ml_collections.config_flags parses it back for a field of the value's type."""
  if isinstance(value, str):
    return value
  if isinstance(value, bool):
    return "true" if value else "false"
  return repr(value)


def to_flags(overrides: Mapping[str, Any]) -> list[str]:
  """The launch/train.py flags that apply `overrides`: --preset=a,b and --config.<field>=<value>."""
  out = []
  names = preset_names(overrides.get(PRESET_KEY))
  if names:
    out.append(f"--preset={','.join(names)}")
  out += [f"--config.{k}={flag_value(v)}" for k, v in overrides.items() if k != PRESET_KEY]
  return out
