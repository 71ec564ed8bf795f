"""rl/preemption.py: the first SIGTERM asks the run to stop after its step, a second one ends the
process at once without touching the previous checkpoint. (The trainer end to end, one process and
two: tests/launch/test_train_preemption.py.)"""

import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np

from grounding_jax import checkpoints
from grounding_jax.rl import preemption

_WORKER = pathlib.Path(__file__).with_name("preempt_write_worker.py")


def test_the_first_sigterm_asks_to_stop_and_resets_the_handler(tmp_path, caplog):
  before = signal.getsignal(signal.SIGTERM)
  guard = preemption.Guard()
  try:
    assert not guard.agreed(hosts=None)
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while not guard.requested and time.monotonic() < deadline:
      time.sleep(0.01)
    assert guard.agreed(hosts=None)  # one process: its own flag
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the next one ends the process
    assert "SIGTERM: finishing the current step" in caplog.text
  finally:
    guard.close()
  assert signal.getsignal(signal.SIGTERM) is before
  ck = checkpoints.Checkpointer(tmp_path / "ck")
  ck.save(2, {"w": np.ones(3, np.float32)})
  e = guard.preempted(2, ck)
  assert (e.step, e.checkpoint) == (2, str(tmp_path / "ck" / "2"))
  assert str(e) == (f"preempted (SIGTERM): stopped after step 2, checkpoint {tmp_path / 'ck' / '2'}; "
                    "exiting with 75, re-run with the same workdir to resume")


def test_a_second_sigterm_during_a_checkpoint_write_exits_at_once_and_keeps_the_previous_one(
    tmp_path):
  proc = subprocess.run([sys.executable, str(_WORKER), str(tmp_path / "ck")], capture_output=True,
                        text=True, timeout=120)
  assert proc.returncode == -signal.SIGTERM, (proc.returncode, proc.stdout, proc.stderr[-3000:])
  assert list((tmp_path / "ck").glob("2.orbax-checkpoint-tmp*"))  # cut before its rename
  ck = checkpoints.Checkpointer(tmp_path / "ck")
  assert ck.all_steps() == [1]
  state, meta = ck.restore({"w": np.zeros(1000, np.float32)})
  assert meta["step"] == 1
  np.testing.assert_array_equal(state["w"], np.arange(1000, dtype=np.float32))
