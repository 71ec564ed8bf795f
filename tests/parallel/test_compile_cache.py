"""The persistent compilation cache: a second identical run and a resumed training run read their
programs from disk instead of compiling them (counted from jax's cache lookups, not timed)."""

import json
import os
import pathlib
import subprocess
import sys

import jax
import pytest

from grounding_jax.parallel import compile_cache

_WORKER = pathlib.Path(__file__).with_name("compile_cache_worker.py")


def _run(*args) -> dict:
  """The worker's {"hits": [[program, key]], "misses": [...]} (it enables the cache itself)."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
  proc = subprocess.run([sys.executable, str(_WORKER), *map(str, args)], capture_output=True,
                        text=True, timeout=900, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_identical_run_compiles_nothing(tmp_path):
  first = _run("jit", tmp_path / "cache")
  assert first["misses"] and not first["hits"]  # a fresh cache: every program compiled, and kept
  assert len(list((tmp_path / "cache").iterdir())) >= len(first["misses"])
  second = _run("jit", tmp_path / "cache")
  assert not second["misses"]
  assert sorted(second["hits"]) == sorted(first["misses"])


def test_resumed_run_reads_the_programs_of_the_first(tiny_checkpoint, tmp_path):
  """A run trains one GRPO step (and checkpoints it); a new process resumes it for one more step.
  The resumed process reads the sampler's and the optimizer's programs from the cache, and it
  compiles only programs the first run never built (e.g. another packed width)."""
  cache, workdir = tmp_path / "cache", tmp_path / "run"
  first = _run("train", cache, tiny_checkpoint("llama"), workdir, 1)
  resumed = _run("train", cache, tiny_checkpoint("llama"), workdir, 1)
  assert (workdir / "checkpoints" / "2").is_dir()  # it did resume and train step 2
  built_first = {key for _, key in first["misses"]}
  assert not [name for name, key in resumed["misses"] if key in built_first]
  hit_names = {name for name, _ in resumed["hits"]}
  assert {"jit__prefill", "jit__decode", "jit_apply"} <= hit_names, sorted(hit_names)
  assert any(name.startswith("jit_accumulate") for name in hit_names), sorted(hit_names)


def test_resolve_and_environment(monkeypatch, tmp_path):
  monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
  assert compile_cache.resolve() == str(pathlib.Path(compile_cache.DEFAULT_DIR).expanduser())
  assert compile_cache.resolve("off") is None
  assert compile_cache.resolve("gs://bucket/xla") == "gs://bucket/xla"
  monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path))
  assert compile_cache.resolve("/elsewhere") == str(tmp_path)  # the environment wins
  env = compile_cache.environment(str(tmp_path))
  assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path) == env[compile_cache.ENV_VAR]
  assert float(env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]) == (
      jax.config.jax_persistent_cache_min_compile_time_secs)


def test_enable_reads_jax_settings_from_the_environment_unless_given(monkeypatch, tmp_path):
  """A child process started with `environment(...)` keeps its parent's thresholds even when it calls
  `enable` itself (launch/train.py does); an argument wins over the environment, and the module's
  defaults hold where neither is set."""
  keys = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
          "jax_persistent_cache_min_entry_size_bytes", "jax_compilation_cache_max_size")
  before = {k: getattr(jax.config, k) for k in keys}
  monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path))
  try:
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_MAX_SIZE", "-1")
    monkeypatch.delenv("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", raising=False)
    assert compile_cache.enable() == str(tmp_path)
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.5
    assert jax.config.jax_compilation_cache_max_size == -1
    assert jax.config.jax_persistent_cache_min_entry_size_bytes == compile_cache.MIN_ENTRY_BYTES
    compile_cache.enable(min_compile_seconds=2, max_bytes=1024)
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 2.0
    assert jax.config.jax_compilation_cache_max_size == 1024
    monkeypatch.delenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")
    monkeypatch.delenv("JAX_COMPILATION_CACHE_MAX_SIZE")
    compile_cache.enable()
    assert jax.config.jax_persistent_cache_min_compile_time_secs == compile_cache.MIN_COMPILE_SECONDS
    assert jax.config.jax_compilation_cache_max_size == compile_cache.MAX_BYTES
    monkeypatch.setenv("JAX_COMPILATION_CACHE_MAX_SIZE", "8GB")
    with pytest.raises(ValueError, match=r"JAX_COMPILATION_CACHE_MAX_SIZE='8GB': expected an integer"):
      compile_cache.enable()
  finally:  # the session's cache as conftest set it up
    for k, v in before.items():
      jax.config.update(k, v)
    from jax.experimental.compilation_cache import compilation_cache as jax_cache
    jax_cache.reset_cache()
