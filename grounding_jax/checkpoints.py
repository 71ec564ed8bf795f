"""Orbax checkpoints of a training state: arrays (params, optimizer state, PRNG key) plus JSON metadata.

A checkpoint is `<dir>/<step>/` written by an orbax CheckpointManager with two items:
  arrays  — every leaf of the state pytree, flattened to {"000000": leaf, ...} so that any pytree
            (nnx.State, optax states, key data) round-trips; restored into the caller's target structure
            with the target's shardings.
  meta    — JSON: step, stage, data-iterator position, the flattened leaf paths (to validate structure),
            and anything else the trainer records.
Resuming restores all of it, so the run continues exactly where it stopped. The directory may be a
bucket URI (gs://…): orbax writes through etils.epath (grounding_jax.paths).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

import jax
import numpy as np
import orbax.checkpoint as ocp

from grounding_jax import paths

_ITEMS = ("arrays", "meta")


def latest_step(directory: str | os.PathLike) -> Optional[int]:
  """The newest complete checkpoint's step under `directory` (as Checkpointer.latest_step), or None
  when there is none or the directory does not exist; reads only (creates nothing)."""
  path = paths.as_path(directory)
  if not path.exists():
    return None
  steps = ocp.utils.checkpoint_steps(path)  # finalized checkpoints only, like the manager's
  return max(steps) if steps else None


def _flatten(tree) -> tuple[dict[str, Any], list[str]]:
  leaves_with_paths, _ = jax.tree_util.tree_flatten_with_path(tree)
  arrays = {f"{i:06d}": leaf for i, (_, leaf) in enumerate(leaves_with_paths)}
  paths = [jax.tree_util.keystr(p) for p, _ in leaves_with_paths]
  return arrays, paths


class Checkpointer:
  """Saves and restores training states under one directory.

  Args:
    directory: checkpoint root (created on first save); a local path or a bucket URI (gs://…).
    max_to_keep: keep only the newest this many checkpoints (None = all).
  """

  def __init__(self, directory: str | os.PathLike, *, max_to_keep: Optional[int] = 3):
    self.directory = paths.as_path(directory)
    self._manager = ocp.CheckpointManager(
        self.directory, item_names=_ITEMS,
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
                       f"{len(paths)}; differing leaves e.g. {diff}. Was it written by another config?")

    def abstract(x):
      sharding = getattr(x, "sharding", None)
      return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)

    abstract_arrays = {f"{i:06d}": abstract(x) for i, x in enumerate(leaves)}
    try:
      restored = self._manager.restore(step, args=ocp.args.Composite(
          arrays=ocp.args.StandardRestore(abstract_arrays)))["arrays"]
    except Exception as e:
      raise ValueError(f"checkpoint {where} is corrupt or incomplete (arrays unreadable: {e}); "
                       f"delete it to fall back to an earlier step") from e
    state = jax.tree_util.tree_unflatten(treedef, [restored[f"{i:06d}"] for i in range(len(leaves))])
    return state, meta

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


# ------------------------------------------------------------------------------------------------
# One part of a saved state (e.g. the policy parameters alone, to evaluate or export a run)
# ------------------------------------------------------------------------------------------------


def restore_subtree(checkpointer: Checkpointer, target: Any, prefix: str = "['params']",
                    step: Optional[int] = None) -> tuple[Any, dict]:
  """Restores only the saved leaves under `prefix` into the structure, dtypes and shardings of `target`.

  The trainers save {"params", "opt_state", "rng"[, "ref_params"]}; evaluating or exporting a policy
  needs "['params']" alone, without rebuilding the optimizer state that `Checkpointer.restore` needs.
  `save` records every leaf's key path (meta["leaf_paths"]), so the leaves under `prefix` are found by
  path and read from the checkpoint without touching the others.

  Args:
    checkpointer: the run's Checkpointer (its public methods find the step and its metadata).
    target: a pytree like the saved subtree (arrays, or jax.ShapeDtypeStruct with .sharding); saved
      values are cast to its dtypes (e.g. float32 master weights restored as bfloat16).
    prefix: the subtree's key path in the saved state, as jax.tree_util.keystr writes it.
    step: which checkpoint; None = the latest.
  Returns:
    (subtree, meta).
  Raises:
    FileNotFoundError: no checkpoint (or not that step) under the directory; names the steps there are.
    ValueError: the saved leaves under `prefix` differ from `target`'s, or the arrays are unreadable.
  """
  meta = checkpointer.read_meta(step)
  where = checkpointer.directory / str(meta["step"])
  saved = {p[len(prefix):]: i for i, p in enumerate(meta.get("leaf_paths") or [])
           if p.startswith(prefix)}
  leaves, treedef = jax.tree_util.tree_flatten(target)
  _, paths = _flatten(target)
  if set(saved) != set(paths):
    diff = sorted(set(saved) ^ set(paths))[:5]
    raise ValueError(f"checkpoint {where} holds {len(saved)} arrays under {prefix} but the target has "
                     f"{len(paths)}; differing leaves e.g. {diff}. Was it written for another model?")
  device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  abstract = {f"{saved[p]:06d}": jax.ShapeDtypeStruct(np.shape(x), x.dtype,
                                                       sharding=getattr(x, "sharding", None) or device)
              for p, x in zip(paths, leaves)}
  try:
    # The "arrays" item of the step's folder, read alone; partial_restore skips the other leaves.
    with ocp.PyTreeCheckpointer() as reader:
      restored = reader.restore(where / "arrays", args=ocp.args.PyTreeRestore(
          item=abstract, restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
          partial_restore=True))
  except Exception as e:  # orbax raises many types for truncated/garbled files
    raise ValueError(f"checkpoint {where} is corrupt or incomplete (arrays unreadable: {e}); "
                     f"pick an earlier step") from e
  subtree = jax.tree_util.tree_unflatten(treedef, [restored[f"{saved[p]:06d}"] for p in paths])
  return subtree, meta
