"""SIGTERM in the middle of a step of launch/train.py: the step finishes, its checkpoint is written, the
process exits with PREEMPTED_EXIT_CODE within 60 s, and a rerun on the same workdir logs the same
next-step metrics as a run that was never interrupted. Also with two processes joined by
jax.distributed on localhost, where only process 0 is signalled and both must stop after the same step
(resuming from two processes is tests/rl/test_multihost.py's).

Every run is 3 steps of configs/synthetic_smollm2.py on the tiny SmolLM2 stand-in over 2 CPU devices
(one process with 2, or two with 1 each: the same mesh, the same numbers). The interrupted runs go
through preempt_entry.py, which pauses 1 s at the start of each step and says which step started,
so the signal lands inside step 2 (not between steps).
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from grounding_jax.rl import preemption

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENTRY = pathlib.Path(__file__).with_name("preempt_entry.py")
STEPS = 3
_VOLATILE = ("time/", "throughput/", "perf/")


def _flags(model_dir, workdir):
  return [f"--config={ROOT / 'configs' / 'synthetic_smollm2.py'}", f"--workdir={workdir}",
          f"--config.model.path={model_dir}", f"--config.stages[0].num_steps={STEPS}",
          "--config.rollout.max_new_tokens=4", "--config.reward.num_workers=0",
          "--config.checkpoint.every_steps=100", "--config.perf.startup_report=False",
          "--config.mesh.fsdp=2"]


def _env(base, devices):
  flags = f"--xla_force_host_platform_device_count={devices} "
  return {**base, "XLA_FLAGS": flags + base.get("GROUNDING_JAX_TEST_XLA_FLAGS", ""),
          "JAX_PLATFORMS": "cpu"}


def _metrics(workdir) -> dict[int, dict]:
  rows = [json.loads(line) for line in (workdir / "logs" / "metrics.jsonl").read_text().splitlines()]
  return {r["step"]: {k: v for k, v in r.items() if not k.startswith(_VOLATILE)} for r in rows}


def _same(got: dict, want: dict, step: int):
  assert sorted(got) == sorted(want), (step, set(got) ^ set(want))
  for k in want:
    np.testing.assert_allclose(got[k], want[k], rtol=2e-5, atol=1e-7, err_msg=f"step {step} {k}")


def _checkpoint_steps(workdir) -> list[int]:
  return sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())


@pytest.fixture(scope="module")
def reference(tiny_smollm2_dir, tmp_path_factory):
  """Metrics of the uninterrupted 3-step run (one process, 2 devices)."""
  workdir = tmp_path_factory.mktemp("reference")
  proc = subprocess.run([sys.executable, str(ROOT / "launch" / "train.py"),
                         *_flags(tiny_smollm2_dir, workdir)], env=_env(os.environ, 2), cwd=ROOT,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return _metrics(workdir)


def _interrupt(procs, logs, markers):
  """SIGTERM to process 0 once step 2 has started on it; waits (at most 60 s) for every process."""
  deadline = time.monotonic() + 300
  while not (markers / "step_2.p0").exists():
    assert all(p.poll() is None for p in procs) and time.monotonic() < deadline, \
        [log.read_text()[-3000:] for log in logs]
    time.sleep(0.05)
  procs[0].send_signal(signal.SIGTERM)
  try:
    for p in procs:
      p.wait(timeout=60)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
  texts = [log.read_text() for log in logs]
  assert [p.returncode for p in procs] == [preemption.PREEMPTED_EXIT_CODE] * len(procs), \
      [t[-3000:] for t in texts]
  return texts


def _check_stopped(workdir, reference, texts):
  """Every process said it stopped after step 2 in one line; step 2's checkpoint is the only one;
  steps 1 and 2 logged the uninterrupted run's metrics."""
  for text in texts:
    lines = [line for line in text.splitlines() if "preempted (SIGTERM)" in line]
    assert len(lines) == 1 and "stopped after step 2" in lines[0], text[-3000:]
    assert f"checkpoint {workdir / 'checkpoints' / '2'}" in lines[0], lines[0]
  assert _checkpoint_steps(workdir) == [2]
  before = _metrics(workdir)
  assert sorted(before) == [1, 2]
  for step in (1, 2):
    _same(before[step], reference[step], step)


def _check_resume(model_dir, workdir, reference, texts, env):
  _check_stopped(workdir, reference, texts)
  rerun = subprocess.run([sys.executable, str(ROOT / "launch" / "train.py"),
                          *_flags(model_dir, workdir)], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  after = _metrics(workdir)
  assert sorted(after) == [1, 2, 3]
  _same(after[3], reference[3], 3)  # the resumed step 3 is the uninterrupted run's step 3


def test_sigterm_mid_step_checkpoints_that_step_and_the_rerun_resumes_it(tiny_smollm2_dir, reference,
                                                                       tmp_path):
  workdir, markers = tmp_path / "run", tmp_path / "markers"
  markers.mkdir()
  log = tmp_path / "run.log"
  with open(log, "w") as f:
    proc = subprocess.Popen([sys.executable, str(ENTRY), str(markers),
                             *_flags(tiny_smollm2_dir, workdir)], env=_env(os.environ, 2), cwd=ROOT,
                            stdout=f, stderr=subprocess.STDOUT)
  texts = _interrupt([proc], [log], markers)
  _check_resume(tiny_smollm2_dir, workdir, reference, texts, _env(os.environ, 2))


def test_two_processes_stop_after_the_same_step_when_one_is_signalled(
    tiny_smollm2_dir, reference, tmp_path, distributed_launch):
  address, base = distributed_launch
  workdir, markers = tmp_path / "run", tmp_path / "markers"
  markers.mkdir()
  layout = lambda i: [f"--coordinator_address={address}", "--num_processes=2", f"--process_id={i}"]
  env = [_env(base, 1)] * 2
  procs, logs = [], []
  for i in range(2):
    logs.append(tmp_path / f"process{i}.log")
    with open(logs[-1], "w") as f:
      procs.append(subprocess.Popen([sys.executable, str(ENTRY), str(markers),
                                     *_flags(tiny_smollm2_dir, workdir), *layout(i)], env=env[i],
                                    cwd=ROOT, stdout=f, stderr=subprocess.STDOUT))
  # Both stopped after step 2 with its checkpoint written by both; resuming such a checkpoint from two
  # processes is tests/rl/test_multihost.py's (its run stops after step 1 and resumes).
  _check_stopped(workdir, reference, _interrupt(procs, logs, markers))
