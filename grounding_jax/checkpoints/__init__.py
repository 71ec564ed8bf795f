"""Orbax checkpoints of a training state: arrays (params, optimizer state, PRNG key) plus JSON metadata,
with a checksum of every array (checksums.py), written and verified here.

  checkpointer.py  Checkpointer (save, restore, restore_latest_intact) and latest_step
  subtree.py       restore_subtree: one part of a saved state (the policy parameters alone)
  errors.py        what can go wrong, as exceptions with one-line messages

A checkpoint is `<dir>/<step>/` written by an orbax CheckpointManager with two items:
  arrays  — every leaf of the state pytree, flattened to {"000000": leaf, ...} so that any pytree
            (nnx.State, optax states, key data) round-trips; restored into the caller's target structure
            with the target's shardings.
  meta    — JSON: step, stage, data-iterator position, the flattened leaf paths (to validate structure),
            each leaf's dtype and 64-bit checksum, and anything else the trainer records.
Resuming restores all of it, so the run continues exactly where it stopped. The directory may be a
bucket URI (gs://…): orbax writes through etils.epath (grounding_jax.paths).

What can go wrong, and what happens:
  - non-finite values in the state: `save` refuses to write (NonFiniteStateError) and keeps the earlier
    checkpoints, so rotation (`max_to_keep`) only ever drops older finite checkpoints for a newer
    finite one;
  - bytes changed on disk (neither the plain arrays, checkpoint.compress=False, nor zstd frames
    carry a checksum: 64 flipped bytes restore as different numbers without error) or an
    incomplete array file: `restore` raises CheckpointError in one line;
    `restore_latest_intact` moves such a step aside (`<step>.corrupt`) and falls back to the newest
    intact step, logging which;
  - a full file system (ENOSPC) during a write: `save` raises CheckpointSpaceError naming the step's
    path, the bytes the state needs (its arrays' size before compression) and the bytes free there;
    the unfinished step's temporary folder is removed, and the earlier checkpoints are kept;
  - an unwritable directory: the Checkpointer fails when it is made and before each write, in
    milliseconds, naming the path; orbax writes synchronously, so a failed write leaves no orbax
    background thread waiting (asynchronous orbax blocks process exit for its 300 s barrier timeout);
  - a failed background write (`save(blocking=False)`: our own thread runs orbax's synchronous write
    from a copy of the state, one process only): raised by the next save, `wait` or `close`, with
    the same errors as above.
"""

from grounding_jax.checkpoints.checkpointer import (BACKGROUND_MODES, Checkpointer, latest_step,
                                                    uncommitted, writes_in_background)
from grounding_jax.checkpoints.errors import (CheckpointError, CheckpointSpaceError,
                                              CheckpointWriteError, NonFiniteStateError)
from grounding_jax.checkpoints.subtree import restore_subtree

__all__ = ["BACKGROUND_MODES", "CheckpointError", "CheckpointSpaceError", "CheckpointWriteError",
           "Checkpointer", "NonFiniteStateError", "latest_step", "restore_subtree", "uncommitted",
           "writes_in_background"]
