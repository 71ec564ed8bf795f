"""The Checkpointer: saves a training state as `<dir>/<step>/` (arrays and JSON metadata, through an
orbax CheckpointManager), restores it verified against its checksums, and on resume falls back past
damaged steps (restore_latest_intact). The format and what happens when things go wrong: the
package's doc (grounding_jax/checkpoints/__init__.py)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from typing import Any, Callable, Mapping, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from grounding_jax import paths
from grounding_jax import perf
from grounding_jax.checkpoints.errors import (CheckpointError, CheckpointSpaceError,
                                              CheckpointWriteError, NonFiniteStateError,
                                              layer_layout_hint, one_line, out_of_space)
from grounding_jax.checksums import checksums

_ITEMS = ("arrays", "meta")

# checkpoint.background_write: "auto" writes in the background where the state lives on an
# accelerator, whose steps do not need the host's cores. On a 2-core CPU, where the writing thread
# shares the cores with the steps, it made no difference past the noise (docs/training.md).
BACKGROUND_MODES = ("auto", "on", "off")


def writes_in_background(mode: str, device: Optional[jax.Device] = None) -> bool:
  """Whether checkpoint.background_write=`mode` writes in the background on `device` (default the
  first)."""
  if mode not in BACKGROUND_MODES:
    raise ValueError(f"checkpoint.background_write={mode!r}: expected one of {BACKGROUND_MODES}")
  device = device or jax.devices()[0]
  return mode == "on" or (mode == "auto" and device.platform != "cpu")


def latest_step(directory: str | os.PathLike) -> Optional[int]:
  """The newest complete checkpoint's step under `directory` (as Checkpointer.latest_step), or None
  when there is none or the directory does not exist; reads only (creates nothing)."""
  path = paths.as_path(directory)
  if not path.exists():
    return None
  steps = ocp.utils.checkpoint_steps(path)  # finalized checkpoints only, like the manager's
  return max(steps) if steps else None


def flatten(tree) -> tuple[dict[str, Any], list[str]]:
  """The leaves of `tree` as {"000000": leaf, ...} (the saved "arrays" item) and their key paths."""
  leaves_with_paths, _ = jax.tree_util.tree_flatten_with_path(tree)
  arrays = {f"{i:06d}": leaf for i, (_, leaf) in enumerate(leaves_with_paths)}
  paths = [jax.tree_util.keystr(p) for p, _ in leaves_with_paths]
  return arrays, paths


def _dtype_name(x) -> str:
  return str(getattr(x, "dtype", None) or np.asarray(x).dtype)


def _nbytes(arrays: Mapping[str, Any]) -> int:
  """The arrays' size in bytes, uncompressed (global shapes: every process's shards together)."""
  return int(sum(np.prod(np.shape(x), dtype=np.int64) * np.dtype(x.dtype).itemsize
                 for x in arrays.values()))


def uncommitted(x) -> bool:
  """A jax.Array on the default device that jax may move (not placed by a sharding or device), or
  an abstract one: a jax.ShapeDtypeStruct without a sharding."""
  if isinstance(x, jax.ShapeDtypeStruct):
    return x.sharding is None
  return isinstance(x, jax.Array) and not x.committed


class Checkpointer:
  """Saves and restores training states under one directory.

  Args:
    directory: checkpoint root (created now; it must be writable — checked now and before each save);
      a local path or a bucket URI (gs://…).
    max_to_keep: keep only the newest this many checkpoints (None = all). Only finite states are
      written, so rotation never removes the newest finite checkpoint.
    compress: write the arrays zstd-compressed (orbax's default). Off by default: float32 weights
      and Adam moments shrink ~7 % under zstd while a save and a restore take ~1.6-1.8x as long
      (launch/bench_checkpoint.py, docs/benchmarks.md); either kind restores under either setting.
  """

  def __init__(self, directory: str | os.PathLike, *, max_to_keep: Optional[int] = 3,
               compress: bool = False):
    self.directory = paths.as_path(directory)
    self._check_writable()
    self._manager = ocp.CheckpointManager(
        self.directory, item_names=_ITEMS,
        item_handlers={"arrays": ocp.PyTreeCheckpointHandler(use_compression=compress),
                       "meta": ocp.JsonCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                             enable_async_checkpointing=False))
    self._writer: Optional[threading.Thread] = None  # a save(blocking=False) under way
    self._write_error: Optional[BaseException] = None

  def _check_writable(self) -> None:
    """Creates the directory and a probe file in it; raises PermissionError/OSError naming the path."""
    probe = self.directory / f".write_probe.{jax.process_index()}.{os.getpid()}"
    try:
      self.directory.mkdir(parents=True, exist_ok=True)
      probe.write_bytes(b"0")
      probe.unlink()
    except OSError as e:
      raise type(e)(e.errno, f"checkpoint directory {self.directory} is not writable ({e.strerror}); "
                    "fix its permissions or set config.workdir to a writable place") from e

  def latest_step(self) -> Optional[int]:
    """The newest complete checkpoint's step, or None if there is none."""
    self._join()
    self._manager.reload()
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    self._join()
    self._manager.reload()
    return sorted(self._manager.all_steps())

  def save(self, step: int, state: Any, meta: Optional[Mapping[str, Any]] = None, *,
           blocking: bool = True) -> None:
    """Writes `state` (a pytree of arrays) and `meta` (JSON-serialisable) as checkpoint `step`.

    The write is atomic (orbax writes a temporary directory, then renames it), so a failure leaves
    the earlier checkpoints as they were. It waits for a write still under way first.

    With blocking=False (one process only) the arrays are copied where they live (a device copy,
    jnp.copy; host arrays in host memory) and written by a background thread from the copy, so the
    caller may go on and even donate the state's buffers; checksums and the finiteness check run
    before it returns. A failure of that write is raised by the next save, `wait` or `close`.
    Where a device lacks the room for the copy (jax's memory stats), the save is synchronous.

    Raises:
      NonFiniteStateError: a floating-point leaf holds NaN or inf (names the leaves); nothing written.
      PermissionError / OSError: the directory is not writable (names it); nothing written.
      CheckpointWriteError: the write failed part-way; the earlier checkpoints are kept.
      CheckpointSpaceError: the same, for want of space (names the bytes needed and free).
    """
    self.wait()
    arrays, paths = flatten(state)
    sums, finite = checksums(arrays)
    bad = [p for p, k in zip(paths, arrays) if not finite[k]]
    if bad:
      kept = self.latest_step()
      raise NonFiniteStateError(
          f"not writing checkpoint {self.directory / str(step)}: non-finite values in {len(bad)} of "
          f"{len(paths)} arrays, e.g. {bad[:3]}; the newest finite checkpoint "
          f"{'(none)' if kept is None else self.directory / str(kept)} is kept")
    meta = dict(meta or {})
    meta.update(step=int(step), leaf_paths=paths, checksums=[sums[k] for k in arrays],
                dtypes=[_dtype_name(v) for v in arrays.values()])
    self._check_writable()
    if blocking or jax.process_count() > 1 or not _room_for_a_copy(arrays):
      self._write(step, arrays, meta)
      return
    copies = {k: jnp.copy(v) if isinstance(v, jax.Array) else np.array(v, copy=True)
              for k, v in arrays.items()}

    def write():
      try:
        self._write(step, copies, meta)
      except BaseException as e:  # pylint: disable=broad-except  (raised by the next wait)
        self._write_error = e

    # Not a daemon: an interpreter that exits while it writes waits for it.
    self._writer = threading.Thread(target=write, name=f"checkpoint-{step}")
    self._writer.start()

  def _write(self, step: int, arrays: dict, meta: dict) -> None:
    try:
      self._manager.save(int(step), args=ocp.args.Composite(
          arrays=ocp.args.PyTreeSave(arrays), meta=ocp.args.JsonSave(meta)), force=True)
      self._manager.wait_until_finished()
    except Exception as e:  # pylint: disable=broad-except  (disk full, a vanished mount, ...)
      if out_of_space(e):
        raise CheckpointSpaceError(self._space_message(step, _nbytes(arrays))) from e
      raise CheckpointWriteError(f"writing checkpoint {self.directory / str(step)} failed "
                                 f"({one_line(e)}); the earlier checkpoints are kept") from e

  def _join(self) -> None:
    """Waits for a background write (its error, if any, is kept for `wait`)."""
    if self._writer is not None and self._writer is not threading.current_thread():
      self._writer.join()
      self._writer = None

  def wait(self, *, raise_error: bool = True) -> None:
    """Waits for a save(blocking=False) still writing; raises what its write raised (with
    raise_error=False, e.g. while another exception unwinds, logs it instead)."""
    self._join()
    error, self._write_error = self._write_error, None
    if error is not None:
      if raise_error:
        raise error
      logging.error("%s", error)

  def _space_message(self, step: int, needed: int) -> str:
    """Removes step's unfinished folder (orbax's `<step>.orbax-checkpoint-tmp-*`: its space back)
    and says what the write needs."""
    if jax.process_index() == 0:
      for tmp in self.directory.glob(f"{step}.orbax-checkpoint-tmp*"):
        shutil.rmtree(tmp, ignore_errors=True)
    try:
      free = f"{shutil.disk_usage(os.fspath(self.directory)).free:,} bytes free there"
    except (OSError, TypeError, ValueError):  # a bucket has no disk usage to ask
      free = "free space unknown"
    kept = self.latest_step()
    return (f"writing checkpoint {self.directory / str(step)} failed: no space left on device; the "
            f"training state needs up to {needed:,} bytes ({needed / 2**30:.2f} GiB, uncompressed), "
            f"{free}. The earlier checkpoints are kept (newest: "
            f"{'none' if kept is None else self.directory / str(kept)}); free space or set "
            "config.workdir elsewhere (or lower checkpoint.max_to_keep), then re-run to resume")

  def read_meta(self, step: Optional[int] = None) -> dict:
    """The JSON metadata of checkpoint `step` (default: latest), e.g. to build a matching target.

    Raises:
      FileNotFoundError: no checkpoint (or not that step).
      CheckpointError: the metadata is unreadable (one line).
    """
    self._join()
    self._manager.reload()
    steps = self._manager.all_steps()
    step = self._manager.latest_step() if step is None else step
    if step is None or step not in steps:
      raise FileNotFoundError(
          f"no checkpoint {'' if step is None else f'for step {step} '}under {self.directory} "
          f"(found steps {sorted(steps)}); check the path, or start without resuming")
    try:
      return self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
    except Exception as e:  # pylint: disable=broad-except  (orbax raises many types for bad files)
      raise CheckpointError(f"checkpoint {self.directory / str(step)} is corrupt or incomplete "
                            f"(metadata unreadable: {one_line(e)})") from e

  def restore(self, target: Any, step: Optional[int] = None) -> tuple[Any, dict]:
    """Restores checkpoint `step` (default: latest) into the structure, dtypes and shardings of `target`,
    and verifies every array against the checksum written with it.

    Args:
      target: a pytree like the saved state: concrete arrays, or jax.ShapeDtypeStructs (with a
        .sharding to restore onto it; without one, as an uncommitted array on the default device,
        like a concrete uncommitted leaf).
      step: which checkpoint; None = the latest.
    Returns:
      (state, meta).
    Raises:
      FileNotFoundError: no checkpoint (or not that step) under the directory.
      CheckpointError: the checkpoint is unreadable, fails its checksums or holds non-finite values
        (a one-line message naming the step's path).
      ValueError: the checkpoint does not match `target`'s structure (another config wrote it).
    """
    meta = self.read_meta(step)
    step = int(meta["step"]) if step is None else step
    where = self.directory / str(step)
    leaves, treedef = jax.tree_util.tree_flatten(target)
    _, paths = flatten(target)
    if meta.get("leaf_paths") != paths:
      saved = meta.get("leaf_paths") or []
      diff = sorted(set(saved) ^ set(paths))[:5]
      raise ValueError(f"checkpoint {where} holds {len(saved)} arrays but the model/optimizer expects "
                       f"{len(paths)}; differing leaves e.g. {diff}. Was it written by another config?"
                       + layer_layout_hint(saved, paths))

    def abstract(x):
      if uncommitted(x):  # read to the host, then placed as the target was (see below)
        return np.empty(np.shape(x), x.dtype)
      sharding = getattr(x, "sharding", None)
      return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)

    abstract_arrays = {f"{i:06d}": abstract(x) for i, x in enumerate(leaves)}
    try:
      restored = self._manager.restore(step, args=ocp.args.Composite(arrays=ocp.args.PyTreeRestore(
          abstract_arrays, restore_args=ocp.checkpoint_utils.construct_restore_args(
              abstract_arrays))))["arrays"]
    except Exception as e:  # pylint: disable=broad-except
      line = one_line(e)
      named = re.search(r"\b(\d{6})/", line)  # TensorStore names the flat key; say which leaf it is
      if named and int(named.group(1)) < len(paths):
        line += f" — array {named.group(1)} is {paths[int(named.group(1))]}"
      raise CheckpointError(f"checkpoint {where} is corrupt or incomplete (arrays unreadable: "
                            f"{line})") from e
    # An uncommitted target (one device, no mesh: what a fresh run holds) gets an uncommitted
    # array back. A committed one would lower every jitted program with sharding annotations the
    # fresh run's programs lack, so a resumed run would compile them all again, and miss the
    # persistent compilation cache (parallel/compile_cache.py).
    values = {k: jax.device_put(restored[k]) if uncommitted(x) else restored[k]
              for k, x in zip(abstract_arrays, leaves)}
    del restored
    # Verified where the arrays now live: a jitted checksum over host numpy arrays copies each one
    # in first, which made verifying a large state (params + Adam moments) several times slower
    # than over the placed arrays (launch/bench_grpo_step.py times a resumed run).
    self._verify(where, meta, values, abstract_arrays, paths)
    values = [values[f"{i:06d}"] for i in range(len(leaves))]
    state = jax.tree_util.tree_unflatten(treedef, values)
    return state, meta

  def _verify(self, where, meta, restored, abstract_arrays, paths) -> None:
    """Raises CheckpointError when a restored array's checksum differs from the saved one or a value
    is non-finite. Leaves restored into another dtype than they were saved in are not compared."""
    sums, finite = checksums(restored)
    saved, dtypes = meta.get("checksums"), meta.get("dtypes")
    if saved is None:
      logging.warning("checkpoint %s was written without checksums; restoring it unverified", where)
    wrong = [p for i, (k, p) in enumerate(zip(restored, paths))
             if saved is not None and dtypes[i] == _dtype_name(abstract_arrays[k])
             and saved[i] != sums[k]]
    if wrong:
      raise CheckpointError(f"checkpoint {where} is corrupt: {len(wrong)} of {len(paths)} arrays "
                            f"differ from their saved checksums, e.g. {wrong[0]}")
    nonfinite = [p for k, p in zip(restored, paths) if not finite[k]]
    if nonfinite:
      raise CheckpointError(f"checkpoint {where} holds non-finite values in {len(nonfinite)} arrays, "
                            f"e.g. {nonfinite[0]}")

  def restore_latest_intact(self, target: Union[Any, Callable[[dict], Any]]
                            ) -> Optional[tuple[Any, dict, int]]:
    """Restores the newest checkpoint that reads back intact; what a resuming trainer calls.

    Steps are tried newest first. A corrupt or incomplete step is reported in one warning line and
    moved aside to `<dir>/<step>.corrupt` (kept for inspection; the step number is free again for
    the resumed run to write), and the next older step is tried; the step restored from is logged.

    Args:
      target: the restore target as in `restore`, or a function meta -> target (when the target's
        structure depends on what was saved, e.g. the stage's optimizer).
    Returns:
      (state, meta, step), or None when the directory holds no checkpoint.
    Raises:
      CheckpointError: checkpoints exist but none is intact (lists each one's problem).
      ValueError: an intact checkpoint does not match the target's structure.
    """
    steps = sorted(self.all_steps(), reverse=True)
    if not steps:
      return None
    problems = []
    for step in steps:
      try:
        meta = self.read_meta(step)
        state, meta = self.restore(target(meta) if callable(target) else target, step)
      except CheckpointError as e:
        problems.append(str(e))
        moved = self._move_aside(step)
        logging.warning("%s; moved to %s, trying an earlier step", e, moved)
        continue
      if problems:
        logging.warning("resuming from step %d, the newest intact checkpoint under %s",
                        step, self.directory)
      return state, meta, step
    raise CheckpointError(f"no intact checkpoint under {self.directory}: " + " | ".join(problems))

  def _move_aside(self, step: int):
    src = self.directory / str(step)
    dst = self.directory / f"{step}.corrupt"
    n = 1
    while dst.exists():
      n += 1
      dst = self.directory / f"{step}.corrupt{n}"
    if jax.process_index() == 0:
      src.rename(dst)
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
      multihost_utils.sync_global_devices(f"checkpoint_move_aside_{step}")
    self._manager.reload()
    return dst

  def close(self) -> None:
    """Waits for a background write (raising its error) and closes the manager."""
    try:
      self.wait()
    finally:
      self._manager.wait_until_finished()
      self._manager.close()


def _room_for_a_copy(arrays: Mapping[str, Any]) -> bool:
  """Whether every device holding `arrays` has their bytes on it free (jax's memory stats; a device
  that reports none, like the CPU's, is taken to have room)."""
  need: dict[Any, int] = {}
  for x in arrays.values():
    if isinstance(x, jax.Array):
      for shard in x.addressable_shards:
        need[shard.device] = need.get(shard.device, 0) + shard.data.nbytes
  for device, nbytes in need.items():
    free = perf.free_memory(device)
    if free is not None and nbytes > free:
      logging.info("checkpoint: %.2f GiB of state on %s, %.2f GiB free: saving synchronously",
                   nbytes / 2**30, device, free / 2**30)
      return False
  return True
