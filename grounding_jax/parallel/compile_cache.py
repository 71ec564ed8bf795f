"""JAX's persistent compilation cache: compiled XLA programs kept on disk and reused across processes.

  compile_cache.enable(config.compile_cache_dir)    # before the first jitted call (launch/train.py)

A second run of the same config, a resumed run, or a test that starts a subprocess then reads each
program (sampler prefill/decode, gradient and optimizer programs) from disk instead of compiling it
again: a program's cache key is its HLO, compile options, devices and jax/XLA versions, not the
Python source lines, so two checkouts of the same code share entries.

Where: `DEFAULT_DIR` (one per user: the cache is trusted code, jax warns against sharing it with
other users), overridden by the environment variable `GROUNDING_JAX_COMPILE_CACHE` (a path, or
"off"), then by the argument. On a multi-host pod only process 0 writes entries (jax's rule): give
every host the same shared path (e.g. a gs:// bucket) so that they all read what process 0 wrote.
"""

from __future__ import annotations

import os
import pathlib

import jax
from jax.experimental.compilation_cache import compilation_cache as jax_cache

DEFAULT_DIR = "~/.cache/grounding_jax/xla"
ENV_VAR = "GROUNDING_JAX_COMPILE_CACHE"
_OFF = ("", "off", "none", "0", "false")

# Keep every program, however quick to compile. jax's default (1 s) skips the tens of small programs
# a training step also compiles (optimizer apply, masks, gathers, layer slices, eager ops), which a
# resumed run would otherwise compile again (docs/benchmarks.md, "Smaller figures"). An entry is a
# few KB.
MIN_COMPILE_SECONDS = 0.0
# No minimum entry size (0 lets jax apply the threshold its file system prefers).
MIN_ENTRY_BYTES = 0
# Least recently used entries are deleted past this size (jax's LRU eviction, needs `filelock`).
MAX_BYTES = 8 * 1024**3


# `enable`'s thresholds: jax's config name (its environment variable is the name in capitals), the
# module's default and the value's type.
_THRESHOLDS = {"jax_persistent_cache_min_compile_time_secs": (MIN_COMPILE_SECONDS, float),
               "jax_persistent_cache_min_entry_size_bytes": (MIN_ENTRY_BYTES, int),
               "jax_compilation_cache_max_size": (MAX_BYTES, int)}


def resolve(directory: str | os.PathLike | None = None) -> str | None:
  """The cache location `enable` would use: `GROUNDING_JAX_COMPILE_CACHE` if set, else
  `directory`, else DEFAULT_DIR; None when the chosen value is "off" (or "", "none", "0").

  Local paths are expanded (~) and made absolute; URLs (gs://...) are kept as given.
  """
  value = os.environ.get(ENV_VAR)
  if value is None:
    value = DEFAULT_DIR if directory is None else str(directory)
  if value.strip().lower() in _OFF:
    return None
  if "://" in value:
    return value
  return str(pathlib.Path(value).expanduser().absolute())


def enable(directory: str | os.PathLike | None = None, *, min_compile_seconds: float | None = None,
           min_entry_bytes: int | None = None, max_bytes: int | None = None) -> str | None:
  """Turns on JAX's persistent compilation cache in `resolve(directory)`; returns that path, or
  None (the cache is then off, also for programs compiled earlier in this process).

  Call it before the first jitted call; a later call switches the cache from then on.

  Args:
    directory: where entries go (created if missing); see `resolve` for the environment override.
    min_compile_seconds: programs that compiled faster are not written.
    min_entry_bytes: smaller serialised programs are not written (0 = jax's choice, -1 = none).
    max_bytes: the cache's size limit (least recently used entries go first); -1 = unbounded.
      jax's eviction lists and stats the whole folder on every write, so a folder that takes
      thousands of entries in one session (the test suite's) is faster unbounded.
    Each of the three left as None is read from jax's own environment variable where it is set
    (`JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`, `JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES`,
    `JAX_COMPILATION_CACHE_MAX_SIZE`: what `environment` hands a child process), else it is
    MIN_COMPILE_SECONDS, MIN_ENTRY_BYTES, MAX_BYTES.
  """
  thresholds = {name: _threshold(name, value) for name, value in
                zip(_THRESHOLDS, (min_compile_seconds, min_entry_bytes, max_bytes))}
  path = resolve(directory)
  if path is not None and "://" not in path:
    pathlib.Path(path).mkdir(parents=True, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", path)
  for name, value in thresholds.items():
    jax.config.update(name, value)
  # jax decides once per process whether the cache is in use (at the first compile) and opens
  # its directory once; resetting makes this call take effect whatever was compiled before.
  jax_cache.reset_cache()
  return path


def _threshold(name, value):
  """`value`, else jax's environment variable for `name` where it is set, else the default."""
  default, kind = _THRESHOLDS[name]
  if value is not None:
    return kind(value)
  text = os.environ.get(name.upper(), "").strip()
  try:
    return kind(text) if text else default
  except ValueError as e:
    raise ValueError(f"{name.upper()}={text!r}: expected "
                     f"{'a number' if kind is float else 'an integer'}") from e


def environment(path: str | None) -> dict[str, str]:
  """Environment variables that give a child process the cache `enable` set up (path from its
  return value), whether or not the child calls `enable` itself: jax reads its JAX_* settings
  from the environment at start-up."""
  if path is None:
    return {ENV_VAR: "off", "JAX_COMPILATION_CACHE_DIR": ""}
  return {ENV_VAR: path, "JAX_COMPILATION_CACHE_DIR": path,
          **{name.upper(): str(getattr(jax.config, name)) for name in _THRESHOLDS}}
