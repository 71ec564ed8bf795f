"""GRPO across two processes (2 x 4 CPU devices, one fsdp 4 x tensor 2 mesh) equals one 8-device process.

Process p takes prompts [p * 2, p * 2 + 2) of each step's 4 (data_stream), samples them as rows
[p * 8, p * 8 + 8) of the global batch (so every row draws from the same key as in the single-process
run), scores its own rows and updates one set of global parameters. Both processes must finish,
print the same parameter checksum, and match the single-process run: the metrics, which hosts
average over all rows, and the updated parameters. The multi-process run also stops after step 1 and
resumes from its orbax checkpoint, so saving and restoring from both processes is part of the check.
Then one DAPO dynamic-sampling step where only process 0 wants more rounds must not hang.
"""

import pathlib
import re
import subprocess
import sys
import time

import jax
import numpy as np

import multihost_worker

_WORKER = pathlib.Path(__file__).with_name("multihost_worker.py")
_TIMEOUT_S = 240  # generous for a loaded 2-core machine; a hang fails instead of blocking CI


def _start(checkpoint, workdir, out, launch) -> list[tuple[subprocess.Popen, pathlib.Path]]:
  address, env = launch
  started = []
  for i in range(2):
    log = pathlib.Path(out).with_name(f"worker{i}.log")  # a file, not a pipe nobody reads meanwhile
    with open(log, "w") as f:
      started.append((subprocess.Popen([sys.executable, str(_WORKER), address, "2", str(i),
                                        str(checkpoint), str(workdir), str(out)],
                                       env=env, stdout=f, stderr=subprocess.STDOUT), log))
  return started


def _wait(started, deadline) -> list[str]:
  procs = [p for p, _ in started]
  try:
    for p in procs:
      try:
        p.wait(timeout=max(1.0, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        break  # a hung peer would block the other forever; stop both below
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
  logs = [log.read_text() for _, log in started]
  report = "\n".join(f"--- process {i} (exit {p.returncode}; -9 = killed after {_TIMEOUT_S} s) "
                     f"---\n{log[-4000:]}"
                     for i, (p, log) in enumerate(zip(procs, logs)))
  assert all(p.returncode == 0 for p in procs), report
  return logs


def test_two_processes_train_like_one(tiny_checkpoint, tmp_path, distributed_launch):
  checkpoint = tiny_checkpoint("llama")
  out = tmp_path / "multi.npz"
  deadline = time.monotonic() + _TIMEOUT_S
  procs = _start(checkpoint, tmp_path / "multi", out, distributed_launch)
  try:  # the single-process reference runs here while the two workers run
    history, params = multihost_worker.run(checkpoint, tmp_path / "single", resume=False)
    initial = multihost_worker.make_trainer(checkpoint, tmp_path / "fresh").params
  finally:
    logs = _wait(procs, deadline)
  sums = [re.search(r"steps \[1, 2\] checksum (\S+)", log) for log in logs]
  assert all(sums), logs
  # One global parameter array: both hosts see the same values.
  assert sums[0].group(1) == sums[1].group(1), [s.group(0) for s in sums]
  # DAPO: process 0's groups never vary, so it wants every extra round; process 1 is satisfied at
  # once. Both must sample all 3 rounds together (else each waits in another collective: a hang).
  dapo = [re.search(r"dapo rounds (\S+) checksum (\S+)", log) for log in logs]
  assert all(dapo), logs
  assert [d.group(1) for d in dapo] == ["3", "3"], [d.group(0) for d in dapo]
  assert dapo[0].group(2) == dapo[1].group(2), [d.group(0) for d in dapo]

  got = np.load(out)
  names = list(got["metric_names"])
  want = np.array([[h[k] for k in names] for h in history])
  # Same rollouts (same key per global row) and rewards: every metric (rewards and lengths averaged
  # over both hosts' rows, loss, KL, grad norm) matches to float32 round-off.
  for i, name in enumerate(names):
    np.testing.assert_allclose(got["metrics"][:, i], want[:, i], rtol=1e-5, atol=1e-6, err_msg=name)
  assert want[:, names.index("reward/std")].max() > 0  # the steps had something to learn from
  # The 16 words of instructions every prompt begins with ran once per micro-batch on both hosts.
  assert (got["metrics"][:, names.index("throughput/common_prefix_tokens")] == 16).all()
  # Parameters: cross-process sums add in another order (float32 round-off ~1e-7 in a gradient).
  # Adam's first steps move a weight by lr * g / (|g| + eps), so where |g| is tiny that round-off is
  # amplified towards lr; atol = 1e-3 * lr (1e-5) bounds it while any real divergence (a different
  # sample, a lost host's rows) moves weights by ~lr = 1e-2.
  lr = 1e-2
  for name, value in params.items():
    np.testing.assert_allclose(got[f"param{name}"], value, rtol=1e-5, atol=1e-3 * lr, err_msg=name)
  start = {jax.tree_util.keystr(p): np.asarray(v)
           for p, v in jax.tree_util.tree_flatten_with_path(initial)[0]}
  assert max(np.abs(start[k] - v).max() for k, v in params.items()) > 0.5 * lr  # it did learn
