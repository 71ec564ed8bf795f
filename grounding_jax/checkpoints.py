"""Orbax checkpoints of a training state: arrays (params, optimizer state, PRNG key) plus JSON metadata.

A checkpoint is `<dir>/<step>/` written by an orbax CheckpointManager with two items:
  arrays  — every leaf of the state pytree, flattened to {"000000": leaf, ...} so that any pytree
            (nnx.State, optax states, key data) round-trips; restored into the caller's target structure
            with the target's shardings.
  meta    — JSON: step, stage, data-iterator position, the flattened leaf paths (to validate structure),
            and anything else the trainer records.
Resuming restores all of it, so the run continues exactly where it stopped.
"""

from __future__ import annotations

import os
import pathlib
import re
from typing import Any, Mapping, Optional

import jax
import numpy as np
import orbax.checkpoint as ocp


def _flatten(tree) -> tuple[dict[str, Any], list[str]]:
  leaves_with_paths, _ = jax.tree_util.tree_flatten_with_path(tree)
  arrays = {f"{i:06d}": leaf for i, (_, leaf) in enumerate(leaves_with_paths)}
  paths = [jax.tree_util.keystr(p) for p, _ in leaves_with_paths]
  return arrays, paths


def _uncommitted(x) -> bool:
  """A jax.Array on the default device that jax may move (not placed by a sharding or device)."""
  return isinstance(x, jax.Array) and not x.committed


_PER_LAYER = re.compile(r"\['layers'\]\[\d+\]")  # a list of layers; stacked ones have no index


def _layer_layout_hint(saved: list[str], expected: list[str]) -> str:
  """A fix when the two trees differ in how they hold a transformer's layers (model.scan_layers)."""
  layout = lambda paths: ("unrolled" if any(_PER_LAYER.search(p) for p in paths) else
                          "scanned" if any("['layers']" in p for p in paths) else None)
  was, now = layout(saved), layout(expected)
  if None in (was, now) or was == now:
    return ""
  return (f" The checkpoint's layers are {was} and the model's {now}: set model.scan_layers="
          f"{was == 'scanned'} to restore it (HF folders load into either layout).")


class Checkpointer:
  """Saves and restores training states under one directory.

  Args:
    directory: checkpoint root (created on first save).
    max_to_keep: keep only the newest this many checkpoints (None = all).
  """

  def __init__(self, directory: str | os.PathLike, *, max_to_keep: Optional[int] = 3):
    self.directory = pathlib.Path(directory).absolute()
    self._manager = ocp.CheckpointManager(
        self.directory, item_names=("arrays", "meta"),
        options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True))

  def latest_step(self) -> Optional[int]:
    """The newest complete checkpoint's step, or None if there is none."""
    self._manager.reload()
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    self._manager.reload()
    return sorted(self._manager.all_steps())

  def save(self, step: int, state: Any, meta: Optional[Mapping[str, Any]] = None, *,
           wait: bool = True) -> None:
    """Writes `state` (a pytree of arrays) and `meta` (JSON-serialisable) as checkpoint `step`."""
    arrays, paths = _flatten(state)
    meta = dict(meta or {})
    meta.update(step=int(step), leaf_paths=paths)
    self._manager.save(int(step), args=ocp.args.Composite(
        arrays=ocp.args.StandardSave(arrays), meta=ocp.args.JsonSave(meta)), force=True)
    if wait:
      self._manager.wait_until_finished()

  def read_meta(self, step: Optional[int] = None) -> dict:
    """The JSON metadata of checkpoint `step` (default: latest), e.g. to build a matching target."""
    self._manager.reload()
    steps = self._manager.all_steps()
    step = self._manager.latest_step() if step is None else step
    if step is None or step not in steps:
      raise FileNotFoundError(f"no checkpoint {'' if step is None else f'for step {step} '}under "
                              f"{self.directory} (found steps {sorted(steps)})")
    try:
      return self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
    except Exception as e:  # pylint: disable=broad-except
      raise ValueError(f"checkpoint {self.directory / str(step)} is corrupt or incomplete (metadata "
                       f"unreadable: {e}); delete it to fall back to an earlier step") from e

  def restore(self, target: Any, step: Optional[int] = None) -> tuple[Any, dict]:
    """Restores checkpoint `step` (default: latest) into the structure, dtypes and shardings of `target`.

    Args:
      target: a pytree like the saved state (concrete arrays or jax.ShapeDtypeStruct with .sharding).
      step: which checkpoint; None = the latest.
    Returns:
      (state, meta).
    Raises:
      FileNotFoundError: no checkpoint (or not that step) under the directory.
      ValueError: the checkpoint is unreadable or does not match `target`'s structure.
    """
    self._manager.reload()
    steps = self._manager.all_steps()
    if step is None:
      step = self._manager.latest_step()
    if step is None or step not in steps:
      raise FileNotFoundError(
          f"no checkpoint {'' if step is None else f'for step {step} '}under {self.directory} "
          f"(found steps {sorted(steps)}); check the path, or start without resuming")
    where = self.directory / str(step)
    try:
      meta = self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
    except Exception as e:  # orbax raises many types for truncated/garbled files
      raise ValueError(f"checkpoint {where} is corrupt or incomplete (metadata unreadable: {e}); "
                       f"delete it to fall back to an earlier step") from e
    leaves, treedef = jax.tree_util.tree_flatten(target)
    _, paths = _flatten(target)
    if meta.get("leaf_paths") != paths:
      saved = meta.get("leaf_paths") or []
      diff = sorted(set(saved) ^ set(paths))[:5]
      raise ValueError(f"checkpoint {where} holds {len(saved)} arrays but the model/optimizer expects "
                       f"{len(paths)}; differing leaves e.g. {diff}. Was it written by another config?"
                       + _layer_layout_hint(saved, paths))

    def abstract(x):
      if _uncommitted(x):  # read to the host, then placed as the target was (see below)
        return np.empty(np.shape(x), x.dtype)
      sharding = getattr(x, "sharding", None)
      return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)

    abstract_arrays = {f"{i:06d}": abstract(x) for i, x in enumerate(leaves)}
    try:
      restored = self._manager.restore(step, args=ocp.args.Composite(
          arrays=ocp.args.StandardRestore(abstract_arrays)))["arrays"]
    except Exception as e:
      raise ValueError(f"checkpoint {where} is corrupt or incomplete (arrays unreadable: {e}); "
                       f"delete it to fall back to an earlier step") from e
    # An uncommitted target (one device, no mesh: what a fresh run holds) gets an uncommitted
    # array back. A committed one would lower every jitted program with sharding annotations the
    # fresh run's programs lack, so a resumed run would compile them all again, and miss the
    # persistent compilation cache (parallel/compile_cache.py).
    values = [jax.device_put(restored[f"{i:06d}"]) if _uncommitted(x) else restored[f"{i:06d}"]
              for i, x in enumerate(leaves)]
    state = jax.tree_util.tree_unflatten(treedef, values)
    return state, meta

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()
