"""Subprocess for the kill-and-resume test: trains (or resumes) the toy task's two stages and dies by
SIGKILL at a chosen point of a chosen step's checkpoint write.

Usage: python resume_worker.py <tiny checkpoint dir> <workdir> <phase>:<step>
  before_save  the step's metrics row is written, its checkpoint is not started (the step
               before's background write, checkpoint.background_write, has finished)
  in_save      inside the step's write (in Checkpointer.save, or its background thread): orbax has
               written the step's arrays and metadata into its temporary directory, which is not
               yet finalized (renamed into place)
  after_save   the step's checkpoint is complete
Exits 0 without being killed only if the step never saves (a test failure).
"""

import os
import signal
import sys

import orbax.checkpoint as ocp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import toy_task  # noqa: E402
from grounding_jax import checkpoints  # noqa: E402

PHASES = ("before_save", "in_save", "after_save")


def die(*_):
  os.kill(os.getpid(), signal.SIGKILL)  # no clean shutdown: writers and pools are left open


def arm(phase: str, step: int) -> None:
  """Wraps Checkpointer.save (and, for in_save, orbax's array handler) to die at `phase` of `step`."""
  assert phase in PHASES, phase
  save = checkpoints.Checkpointer.save

  def dying_save(self, at, state, meta=None, **kwargs):
    if at == step and phase == "before_save":
      self.wait()  # the earlier step's background write has finished
      die()
    if at == step and phase == "in_save":
      ocp.PyTreeCheckpointHandler.finalize = die  # arrays written; the step is not finalized
    save(self, at, state, meta, **kwargs)
    if at == step and phase == "after_save":
      self.wait()  # a background write (checkpoint.background_write) finishes first
      die()

  checkpoints.Checkpointer.save = dying_save


def main():
  ckpt, workdir, kill_at = sys.argv[1], sys.argv[2], sys.argv[3]
  phase, step = kill_at.split(":")
  arm(phase, int(step))
  toy_task.make_trainer(ckpt, workdir).train()


if __name__ == "__main__":
  main()
