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
  min_compile_seconds = _setting(min_compile_seconds, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                                 MIN_COMPILE_SECONDS, float)
  min_entry_bytes = _setting(min_entry_bytes, "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
                             MIN_ENTRY_BYTES, int)
  max_bytes = _setting(max_bytes, "JAX_COMPILATION_CACHE_MAX_SIZE", MAX_BYTES, int)
  path = resolve(directory)
  if path is not None and "://" not in path:
    pathlib.Path(path).mkdir(parents=True, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_seconds)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", min_entry_bytes)
  jax.config.update("jax_compilation_cache_max_size", max_bytes)
  # jax decides once per process whether the cache is in use (at the first compile) and opens
  # its directory once; resetting makes this call take effect whatever was compiled before.
  jax_cache.reset_cache()
  return path


def _setting(value, env_var, default, kind):
  if value is not None:
    return kind(value)
  text = os.environ.get(env_var, "").strip()
  try:
    return kind(text) if text else default
  except ValueError as e:
    raise ValueError(f"{env_var}={text!r}: expected {'a number' if kind is float else 'an integer'}"
                     ) from e


def environment(path: str | None) -> dict[str, str]:
  """Environment variables that give a child process the cache `enable` set up (path from its
  return value), whether or not the child calls `enable` itself: jax reads its JAX_* settings
  from the environment at start-up."""
  if path is None:
    return {ENV_VAR: "off", "JAX_COMPILATION_CACHE_DIR": ""}
  return {ENV_VAR: path, "JAX_COMPILATION_CACHE_DIR": path,
          "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": str(
              jax.config.jax_persistent_cache_min_compile_time_secs),
          "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": str(
              jax.config.jax_persistent_cache_min_entry_size_bytes),
          "JAX_COMPILATION_CACHE_MAX_SIZE": str(jax.config.jax_compilation_cache_max_size)}
