"""One part of a saved state, read alone: the policy parameters of a run, to evaluate or export it
without rebuilding the optimizer state that `Checkpointer.restore` needs."""

from __future__ import annotations

from typing import Any, Optional

import jax
import numpy as np
import orbax.checkpoint as ocp

from grounding_jax.checkpoints.checkpointer import Checkpointer, flatten


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
  _, paths = flatten(target)
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
