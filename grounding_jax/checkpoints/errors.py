"""What can go wrong with a checkpoint, as exceptions whose messages are one line, and the helpers
that keep them short and name the fix: `one_line` (the innermost cause's first line), `out_of_space`
(ENOSPC anywhere in the cause chain), `layer_layout_hint` (scanned layers restored into an unrolled
model, or the reverse)."""

from __future__ import annotations

import errno
import re


class CheckpointError(ValueError):
  """A checkpoint on disk is corrupt or incomplete (the message is one line naming its path)."""


class CheckpointWriteError(OSError):
  """Writing a checkpoint failed part-way (orbax's temporary directory is left, never a half step)."""


class CheckpointSpaceError(CheckpointWriteError):
  """The checkpoint's file system ran out of space during a write (the message says how much is needed)."""


class NonFiniteStateError(ValueError):
  """`save` was given a state with NaN or inf values; nothing was written."""


def one_line(e: BaseException, limit: int = 240) -> str:
  """The innermost cause's first line (TensorStore puts a ~60-line spec in its outer messages)."""
  while e.__cause__ is not None or (e.__context__ is not None and not e.__suppress_context__):
    e = e.__cause__ or e.__context__
  lines = str(e).strip().splitlines() or [type(e).__name__]
  text = lines[0]
  return text if len(text) <= limit else text[:limit - 1] + "…"


def out_of_space(e: BaseException) -> bool:
  """Whether `e` or an exception it came from is ENOSPC (Python's OSError, or TensorStore's text)."""
  while e is not None:
    if getattr(e, "errno", None) == errno.ENOSPC or "No space left on device" in str(e):
      return True
    e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
  return False


_PER_LAYER = re.compile(r"\['layers'\]\[\d+\]")  # a list of layers; stacked ones have no index


def layer_layout_hint(saved: list[str], expected: list[str]) -> str:
  """A fix when the two trees differ in how they hold a transformer's layers (model.scan_layers)."""
  layout = lambda paths: ("unrolled" if any(_PER_LAYER.search(p) for p in paths) else
                          "scanned" if any("['layers']" in p for p in paths) else None)
  was, now = layout(saved), layout(expected)
  if None in (was, now) or was == now:
    return ""
  return (f" The checkpoint's layers are {was} and the model's {now}: set model.scan_layers="
          f"{was == 'scanned'} to restore it (HF folders load into either layout).")
