"""Two CPU processes on localhost form one 8-device mesh through jax.distributed and run a sharded
forward that equals the single-process one."""

import pathlib
import subprocess
import sys
import time

import jax
from flax import nnx
import numpy as np

from grounding_jax.models import load_pretrained

_WORKER = pathlib.Path(__file__).with_name("multiprocess_worker.py")
_TIMEOUT_S = 240  # generous for a loaded 2-core machine; a hang fails instead of blocking CI


def _padded_batch(vocab):
  sys.path.insert(0, str(_WORKER.parent))
  try:
    import multiprocess_worker  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.pop(0)
  return multiprocess_worker.padded_batch(vocab)


def test_two_processes_match_one(tiny_checkpoint, tmp_path, distributed_launch):
  checkpoint = tiny_checkpoint("llama")
  out = tmp_path / "logits.npy"
  address, env = distributed_launch
  procs = [subprocess.Popen([sys.executable, str(_WORKER), address, "2", str(i), str(checkpoint), str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
           for i in range(2)]
  deadline = time.monotonic() + _TIMEOUT_S
  logs = []
  try:
    for p in procs:
      try:
        log = p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
      except subprocess.TimeoutExpired:
        for q in procs:  # a hung peer would block the other forever; stop both
          q.kill()
        log = p.communicate()[0] + f"\n[killed after {_TIMEOUT_S} s]"
      logs.append(log)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
  report = "\n".join(f"--- process {i} (exit {p.returncode}) ---\n{log[-3000:]}"
                     for i, (p, log) in enumerate(zip(procs, logs)))
  assert all(p.returncode == 0 for p in procs), report
  assert "local rows [0, 1, 2, 3]" in logs[0] and "local rows [4, 5, 6, 7]" in logs[1], report

  model = load_pretrained(checkpoint)
  ids, mask = _padded_batch(model.config.vocab_size)
  graphdef, state = nnx.split(model)
  reference = np.asarray(jax.jit(lambda s, i, m: nnx.merge(graphdef, s)(i, m))(state, ids, mask))
  got = np.load(out)
  assert got.shape == reference.shape
  np.testing.assert_allclose(got[mask], reference[mask], rtol=1e-5, atol=1e-5)
