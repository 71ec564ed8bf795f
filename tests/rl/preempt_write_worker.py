"""A process that gets two SIGTERMs while it writes checkpoint 2, for test_preemption.py; not a test.

usage: python preempt_write_worker.py CHECKPOINT_DIR
Saves step 1, installs the trainer's preemption Guard, then saves step 2 with orbax's final rename
(temporary folder -> <step>) replaced by: SIGTERM, wait until the Guard has handled it, SIGTERM
again. The second one must end the process there, before the rename.
"""

import os
import signal
import sys
import time

import numpy as np
from orbax.checkpoint._src.path import async_path

from grounding_jax import checkpoints
from grounding_jax.rl import preemption

_RENAME = async_path.rename


async def _rename_after_two_sigterms(src, dst):
  os.kill(os.getpid(), signal.SIGTERM)
  deadline = time.monotonic() + 30
  while signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL and time.monotonic() < deadline:
    time.sleep(0.01)  # the Guard's handler runs in the main thread
  os.kill(os.getpid(), signal.SIGTERM)
  time.sleep(30)  # not reached: the second SIGTERM has its default action
  return await _RENAME(src, dst)


if __name__ == "__main__":
  ck = checkpoints.Checkpointer(sys.argv[1])
  ck.save(1, {"w": np.arange(1000, dtype=np.float32)})
  guard = preemption.Guard()
  async_path.rename = _rename_after_two_sigterms
  ck.save(2, {"w": np.ones(1000, np.float32)})
  print("the second SIGTERM did not end the process", flush=True)
