"""Preemption: on SIGTERM the run finishes its step, checkpoints it and exits with PREEMPTED_EXIT_CODE.

SIGTERM is the notice a SLURM job step gets before its time limit (`#SBATCH --signal=TERM@<secs>`,
launch/slurm/sbatch.py --requeue) or before a higher-priority job preempts it, what a spot or
preemptible VM's shutdown gives its processes, and what a TPU VM gets before a maintenance event.

    guard = preemption.Guard()                   # in train(): the SIGTERM handler (main thread only)
    if guard.agreed(hosts):                      # after each step, on every process
      save the step's checkpoint; raise guard.preempted(step, checkpointer)
    guard.close()                                # the previous SIGTERM handler back

The first SIGTERM sets a flag (and logs one line); the step under way runs to its end, the
trainer checkpoints it and raises `Preempted`, and launch/train.py prints its one line and exits
with PREEMPTED_EXIT_CODE, on which a batch script requeues the job. The handler also gives SIGTERM
back its default action, so a second SIGTERM ends the process at once (status 143 = 128 + 15),
whatever it is doing, a checkpoint write included: orbax writes a step into
`<step>.orbax-checkpoint-tmp-<n>` and renames it to `<step>` only when it is complete
(checkpoints/), and an unrenamed folder is never taken for a checkpoint, so the previous one is
what a restart resumes from.

Several processes (jax.distributed): a notice may reach one host only (a VM's), or every process
a moment apart (SLURM signals each task); yet they must all stop after the same step, or the
collective checkpoint write waits forever for the ones still stepping. So after every step each
process contributes its flag to one all-process gather (one boolean each: rl/host_batch.py) and
all stop when any was signalled. jax's preemption service (`multihost_utils.
reached_preemption_sync_point`, on by default with jax.distributed.initialize; orbax's
`CheckpointManager.reached_preemption` reads it) is not used: its SIGTERM handler, installed in
C++ by jax.distributed.initialize, only raises a flag that a thread polls, so a second SIGTERM
does nothing, and it agrees on the step after the highest one any process had reached, one step
(minutes, for a large model) later than needed. The Python handler installed here replaces it.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Optional

import jax
from jax.experimental import multihost_utils

from grounding_jax import checkpoints

# EX_TEMPFAIL of sysexits.h ("temporary failure; the user is invited to retry"): distinct from 0
# (finished), 1 (a user error: launch/train.py) and a death by signal (128 + n), so a batch script
# can requeue on it alone (launch/slurm/sbatch.py --requeue).
PREEMPTED_EXIT_CODE = 75


class Preempted(Exception):
  """The run stopped on SIGTERM after checkpointing a finished step; `str()` is the one line to print.

  Attributes:
    step: the last finished step (global).
    checkpoint: the newest checkpoint's path (the step's own, unless its state was non-finite).
  """

  def __init__(self, message: str, step: int, checkpoint: Optional[str]):
    super().__init__(message)
    self.step, self.checkpoint = step, checkpoint


class Guard:
  """Turns SIGTERM into a request to stop at the next step boundary (module docstring).

  Only the main thread can install a signal handler; elsewhere (a trainer run from a worker thread)
  the Guard never asks to stop and SIGTERM keeps its handler.
  """

  def __init__(self):
    self.requested = False
    self._previous = None
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)

  def _on_sigterm(self, signum, frame) -> None:
    del frame
    self.requested = True
    signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    logging.warning("SIGTERM: finishing the current step, then checkpointing it and exiting with %d "
                    "(a second SIGTERM exits at once; the previous checkpoint stays)",
                    PREEMPTED_EXIT_CODE)

  def agreed(self, hosts) -> bool:
    """True on every process when any process was signalled: call it on all of them after each step.

    Args:
      hosts: the run's rl/host_batch.HostBatches (its gather spans all processes).
    """
    if jax.process_count() == 1:
      return self.requested
    return not hosts.all_hosts(not self.requested)

  def preempted(self, step: int, checkpointer: checkpoints.Checkpointer) -> Preempted:
    """The exception to raise once step `step`'s checkpoint is written (on every process)."""
    if jax.process_count() > 1:  # nobody exits while a peer may still finalise the write
      multihost_utils.sync_global_devices("preempted")
    kept = checkpointer.latest_step()
    where = None if kept is None else str(checkpointer.directory / str(kept))
    saved = f"checkpoint {where}" if kept == step else \
        f"step {step} not checkpointed (non-finite state), newest checkpoint {where}"
    return Preempted(f"preempted (SIGTERM): stopped after step {step}, {saved}; exiting with "
                     f"{PREEMPTED_EXIT_CODE}, re-run with the same workdir to resume", step, where)

  def close(self) -> None:
    """Puts back the SIGTERM handler that was there before, where Python can (a handler installed
    in C, e.g. jax's preemption notifier, reads as None and cannot be reinstalled)."""
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
    self._previous = None
