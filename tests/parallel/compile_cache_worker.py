"""Subprocess for the compilation-cache tests: runs some jitted work with the cache on and prints,
as its last line, the JSON {"hits": [[program, key], ...], "misses": [...]} of this process.

Usage:
  python compile_cache_worker.py jit <cache dir>
  python compile_cache_worker.py train <cache dir> <tiny checkpoint> <workdir> <steps>
      (the toy GRPO task, resuming from <workdir>'s checkpoint if it has one)
"""

import json
import logging
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rl"))

_EVENT = re.compile(r"(?:Persistent compilation cache hit|PERSISTENT COMPILATION CACHE MISS) for "
                    r"'([^']*)' with key '([^']*)'")


class _Record(logging.Handler):
  """jax's compiler logs each persistent-cache lookup (hit or miss) with the program's name."""

  def __init__(self):
    super().__init__(logging.DEBUG)
    self.hits, self.misses = [], []

  def emit(self, record):
    message = record.getMessage()
    found = _EVENT.search(message)
    if found:
      (self.hits if "hit" in message else self.misses).append(list(found.groups()))


def main():
  mode, cache_dir = sys.argv[1], sys.argv[2]
  os.environ["GROUNDING_JAX_COMPILE_CACHE"] = cache_dir
  from grounding_jax.parallel import compile_cache  # pylint: disable=g-import-not-at-top
  compile_cache.enable(min_compile_seconds=0)  # every program, however quick to compile
  record = _Record()
  logger = logging.getLogger("jax._src.compiler")
  logger.setLevel(logging.DEBUG)
  logger.propagate = False
  logger.addHandler(record)
  if mode == "jit":
    import jax  # pylint: disable=g-import-not-at-top
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
    x = jnp.linspace(0.0, 1.0, 64 * 64).reshape(64, 64)
    jax.block_until_ready(jax.jit(lambda a: jnp.tanh(a) @ a.T)(x))
  else:
    import toy_task  # pylint: disable=g-import-not-at-top
    ckpt, workdir, steps = sys.argv[3], sys.argv[4], int(sys.argv[5])
    toy_task.make_trainer(ckpt, workdir).train(max_steps=steps)
  print(json.dumps({"hits": record.hits, "misses": record.misses}))


if __name__ == "__main__":
  main()
