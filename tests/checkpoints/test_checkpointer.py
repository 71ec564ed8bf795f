"""Checkpoints round-trip params, optimizer state, PRNG key and metadata; bad paths fail clearly;
damaged steps are detected by checksum and skipped; non-finite states and unwritable directories are
refused before anything is written; a write that runs out of space keeps the earlier steps. (The
checksums themselves: test_checksums.py.)"""

import errno
import subprocess
import threading

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from grounding_jax import checkpoints


def _state(seed):
  k = jax.random.key(seed)
  params = {"w": jax.random.normal(k, (4, 3)), "b": jnp.arange(3.0)}
  opt = optax.adamw(1e-3)
  opt_state = opt.init(params)
  _, opt_state = opt.update(params, opt_state, params), opt_state
  return {"params": params, "opt_state": opt_state, "rng": jax.random.key_data(jax.random.key(seed))}


def test_round_trip_and_latest(tmp_path):
  ck = checkpoints.Checkpointer(tmp_path / "ck", max_to_keep=2)
  assert ck.latest_step() is None
  s1, s2 = _state(1), _state(2)
  ck.save(1, s1, {"stage": 0, "data_position": 8})
  ck.save(2, s2, {"stage": 1, "data_position": 16})
  restored, meta = ck.restore(_state(0))
  assert meta["step"] == 2 and meta["stage"] == 1 and meta["data_position"] == 16
  for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(s2)):
    np.testing.assert_array_equal(a, b)
  assert jax.tree.structure(restored) == jax.tree.structure(s2)
  r1, m1 = ck.restore(_state(0), step=1)
  np.testing.assert_array_equal(r1["params"]["w"], s1["params"]["w"])
  ck.close()



def test_abstract_target_without_sharding_restores_uncommitted_like_a_fresh_state(tmp_path):
  """A jax.ShapeDtypeStruct without a sharding (what a one-device trainer's restore target holds
  for the optimizer state: its shapes, not a zeroed copy) restores as a concrete uncommitted target
  does: the saved values, uncommitted, so the programs a fresh run compiled are reused."""
  ck = checkpoints.Checkpointer(tmp_path / "ck")
  saved = _state(5)
  ck.save(1, saved)
  target = {**_state(0), "opt_state": jax.eval_shape(lambda: _state(0)["opt_state"])}
  restored, _ = ck.restore(target)
  for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(saved)):
    np.testing.assert_array_equal(got, want)
  assert all(isinstance(x, jax.Array) and not x.committed
             for x in jax.tree.leaves(restored["opt_state"]) + jax.tree.leaves(restored["params"]))
  ck.close()

def test_compressed_and_plain_checkpoints_restore_under_either_setting(tmp_path):
  """compress=False (the default) writes the arrays as they are; orbax's zstd (compress=True)
  shrinks a zero state to almost nothing. Each kind restores bit-exact under either setting, so
  checkpoints written before the default changed still resume."""
  zeros = {"params": {"w": jnp.zeros((256, 256)), "b": jnp.arange(8.0)},
           "rng": np.asarray(jax.random.key_data(jax.random.key(0)))}
  sizes = {}
  for compress in (False, True):
    ck = checkpoints.Checkpointer(tmp_path / str(compress), compress=compress)
    ck.save(1, zeros)
    ck.save(2, _state(3))
    ck.close()
    sizes[compress] = sum(p.stat().st_size for p in (tmp_path / str(compress) / "1" / "arrays")
                          .rglob("*") if p.is_file())
  assert sizes[False] > 256 * 256 * 4 > 20 * sizes[True]
  for written in (False, True):
    for reading in (False, True):
      ck = checkpoints.Checkpointer(tmp_path / str(written), compress=reading)
      for step, want in ((1, zeros), (2, _state(3))):
        got, _ = ck.restore(jax.tree.map(jnp.zeros_like, want) if step == 1 else _state(0), step)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
          np.testing.assert_array_equal(a, b)
      ck.close()


def test_missing_and_corrupt(tmp_path):
  ck = checkpoints.Checkpointer(tmp_path / "ck")
  with pytest.raises(FileNotFoundError, match="no checkpoint"):
    ck.restore(_state(0))
  ck.save(3, _state(3))
  with pytest.raises(ValueError, match="expects"):
    ck.restore({"params": {"w": jnp.zeros((4, 3))}})
  # Garble every array file of step 3.
  for f in (tmp_path / "ck" / "3" / "arrays").rglob("*"):
    if f.is_file() and f.stat().st_size > 0 and "meta" not in f.name:
      f.write_bytes(b"garbage")
  with pytest.raises(ValueError, match="corrupt"):
    ck.restore(_state(0))


def test_latest_step_reads_without_creating(tmp_path):
  """checkpoints.latest_step (what launch/sweep.py uses to skip finished runs) agrees with the
  Checkpointer, and on a missing directory answers None without creating it."""
  assert checkpoints.latest_step(tmp_path / "absent") is None
  assert not (tmp_path / "absent").exists()
  ck = checkpoints.Checkpointer(tmp_path / "ck")
  assert checkpoints.latest_step(tmp_path / "ck") is None
  ck.save(2, _state(2))
  ck.save(5, _state(5))
  assert checkpoints.latest_step(tmp_path / "ck") == ck.latest_step() == 5
  ck.close()


# ---------------------------------------------------------------- integrity (issue 18)


def _largest_array_file(step_dir):
  files = [p for p in (step_dir / "arrays").rglob("*") if p.is_file()]
  return max(files, key=lambda p: p.stat().st_size)


def _big_state(seed):
  k = jax.random.key(seed)
  return {"params": {"w": jax.random.normal(k, (128, 128)), "b": jnp.arange(8.0)},
          "rng": np.asarray(jax.random.key_data(k))}


def _flip_bytes(path, n=64):
  data = bytearray(path.read_bytes())
  mid = len(data) // 2
  for i in range(n):
    data[mid + i] ^= 0xFF
  path.write_bytes(bytes(data))


def _truncate(path):
  path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


@pytest.mark.parametrize("damage", [_flip_bytes, _truncate], ids=["flipped_bytes", "truncated"])
def test_damaged_newest_step_falls_back_to_the_previous_one(tmp_path, caplog, damage):
  ck = checkpoints.Checkpointer(tmp_path / "ck", max_to_keep=3)
  ck.save(1, _big_state(1), {"stage": 0})
  ck.save(2, _big_state(2), {"stage": 0})
  damage(_largest_array_file(tmp_path / "ck" / "2"))
  with pytest.raises(checkpoints.CheckpointError) as info:
    ck.restore(_big_state(0))
  assert str(info.value).count("\n") == 0 and str(tmp_path / "ck" / "2") in str(info.value)
  caplog.set_level("WARNING")
  seen = []
  state, meta, step = ck.restore_latest_intact(lambda m: seen.append(m["step"]) or _big_state(0))
  assert step == 1 and meta["step"] == 1 and seen == [2, 1]
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(_big_state(1))):
    np.testing.assert_array_equal(a, b)
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert len(warnings) == 2 and all("\n" not in w for w in warnings)
  assert "ck/2 is corrupt" in warnings[0] and "2.corrupt" in warnings[0]
  assert "resuming from step 1" in warnings[1]
  # The damaged step is kept aside for inspection; the resumed run can write step 2 again.
  assert (tmp_path / "ck" / "2.corrupt").is_dir() and ck.all_steps() == [1]
  ck.save(2, _big_state(2))
  assert ck.restore_latest_intact(_big_state(0))[2] == 2


def test_no_checkpoint_and_no_intact_checkpoint(tmp_path):
  ck = checkpoints.Checkpointer(tmp_path / "ck")
  assert ck.restore_latest_intact(_big_state(0)) is None
  ck.save(1, _big_state(1))
  _flip_bytes(_largest_array_file(tmp_path / "ck" / "1"))
  with pytest.raises(checkpoints.CheckpointError, match="no intact checkpoint.*ck/1 is corrupt"):
    ck.restore_latest_intact(_big_state(0))


def test_non_finite_state_is_never_written_and_rotation_keeps_the_finite_ones(tmp_path):
  ck = checkpoints.Checkpointer(tmp_path / "ck", max_to_keep=2)
  ck.save(1, _big_state(1))
  ck.save(2, _big_state(2))
  bad = _big_state(3)
  bad["params"]["b"] = bad["params"]["b"].at[3].set(jnp.nan)
  with pytest.raises(checkpoints.NonFiniteStateError, match=r"\['params'\]\['b'\].*ck/2 is kept"):
    ck.save(3, bad)
  bad["params"]["b"] = bad["params"]["b"].at[3].set(jnp.inf)
  with pytest.raises(checkpoints.NonFiniteStateError):
    ck.save(4, bad)
  assert ck.all_steps() == [1, 2]
  assert ck.restore_latest_intact(_big_state(0))[2] == 2


def test_read_only_directory_fails_at_once_and_keeps_the_previous_checkpoint(tmp_path,
                                                                           make_read_only):
  ck = checkpoints.Checkpointer(tmp_path / "ck", max_to_keep=1)
  ck.save(1, _big_state(1))
  undo = make_read_only(tmp_path / "ck")
  threads_before = set(threading.enumerate())
  try:
    with pytest.raises(PermissionError, match=f"{tmp_path / 'ck'} is not writable"):
      ck.save(2, _big_state(2))
    with pytest.raises(PermissionError, match="not writable"):  # and a new run says so before a step
      checkpoints.Checkpointer(tmp_path / "ck")
  finally:
    undo()
  # Nothing is left waiting (asynchronous orbax kept a thread on a 300 s barrier that blocked exit).
  assert not [t for t in set(threading.enumerate()) - threads_before if t.is_alive()]
  assert ck.all_steps() == [1]
  np.testing.assert_array_equal(ck.restore(_big_state(0))[0]["params"]["w"], _big_state(1)["params"]["w"])


def test_unrolled_checkpoint_into_scanned_model_names_the_fix(tmp_path):
  """Orbax stores the model's own tree: a checkpoint of unrolled layers does not restore into
  scanned ones, and the error says which setting to flip."""
  from flax import nnx  # pylint: disable=g-import-not-at-top
  from grounding_jax.models import ModelConfig, Transformer  # pylint: disable=g-import-not-at-top
  config = ModelConfig(model_type="llama", vocab_size=16, hidden_size=8, intermediate_size=16,
                       num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4)
  unrolled, scanned = (nnx.state(Transformer(config, rngs=nnx.Rngs(0), scan_layers=scan), nnx.Param)
                       for scan in (False, True))
  ck = checkpoints.Checkpointer(tmp_path / "ck")
  ck.save(1, {"params": unrolled})
  with pytest.raises(ValueError, match=r"layers are unrolled and the model's scanned: set "
                                       r"model\.scan_layers=False"):
    ck.restore({"params": scanned})
  restored, _ = ck.restore({"params": unrolled})
  assert jax.tree.structure(restored) == jax.tree.structure({"params": unrolled})


def _check_space_error(ck, info, step, needed):
  message = str(info.value)
  assert "\n" not in message and f"{ck.directory / str(step)} failed: no space left" in message
  assert f"needs up to {needed:,} bytes" in message and "bytes free there" in message
  assert f"newest: {ck.directory / '1'}" in message
  assert ck.all_steps() == [1] and not list(ck.directory.glob(f"{step}.orbax-checkpoint-tmp*"))
  np.testing.assert_array_equal(ck.restore(_big_state(0))[0]["params"]["w"], _big_state(1)["params"]["w"])


def test_a_write_that_runs_out_of_space_keeps_the_previous_checkpoint_and_says_what_it_needs(
    tmp_path, monkeypatch):
  """ENOSPC raised at orbax's write call (the size-limited file system: the next test)."""
  ck = checkpoints.Checkpointer(tmp_path / "ck", max_to_keep=1)
  ck.save(1, _big_state(1))

  def full(*args, **kwargs):
    (ck.directory / "2.orbax-checkpoint-tmp-123").mkdir()  # what orbax leaves after a failed write
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(ck._manager, "save", full)
  state = _big_state(2)
  with pytest.raises(checkpoints.CheckpointSpaceError) as info:
    ck.save(2, state)
  needed = sum(np.asarray(x).nbytes for x in jax.tree.leaves(state))
  _check_space_error(ck, info, 2, needed)


def test_a_size_limited_file_system_fills_up(tmp_path):
  """A real 1 MiB tmpfs (needs root, as CI containers often run): a 4 MiB state does not fit."""
  mount = tmp_path / "small"
  mount.mkdir()
  if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                    capture_output=True).returncode:
    pytest.skip("cannot mount a size-limited tmpfs here (not root); the ENOSPC test above covers it")
  try:
    ck = checkpoints.Checkpointer(mount / "ck", max_to_keep=2)
    ck.save(1, _big_state(1))
    state = {"params": {"w": jax.random.normal(jax.random.key(0), (1024, 1024))}}  # 4 MiB of noise
    with pytest.raises(checkpoints.CheckpointSpaceError) as info:
      ck.save(2, state)
    _check_space_error(ck, info, 2, 4 * 1024 * 1024)
  finally:
    subprocess.run(["umount", str(mount)], check=True)


def test_a_background_write_saves_the_state_as_it_was_when_the_caller_donates_it(tmp_path):
  """save(blocking=False) writes from a copy: the caller may overwrite (donate) the state's buffers
  at once, and the checkpoint still holds the values of the save; reading the directory waits for
  the write."""
  ck = checkpoints.Checkpointer(tmp_path / "ck", max_to_keep=2)
  state = _big_state(3)
  want = jax.tree.map(np.array, state)
  donated, write = threading.Event(), ck._write
  ck._write = lambda *args: (donated.wait(60), write(*args))  # the write starts after the donation
  ck.save(1, state, {"stage": 0}, blocking=False)
  assert ck._writer is not None  # writing in the background
  zero = jax.jit(lambda t: jax.tree.map(lambda x: x * 0, t), donate_argnums=0)
  jax.block_until_ready(zero(state["params"]))  # the caller's next update reuses the buffers
  assert state["params"]["w"].is_deleted()
  donated.set()
  ck.wait()
  assert ck.latest_step() == 1 and ck._writer is None
  restored, meta = ck.restore(jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), want))
  assert meta["stage"] == 0
  for got, expected in zip(jax.tree.leaves(restored), jax.tree.leaves(want)):
    np.testing.assert_array_equal(got, expected)
  ck.close()


def test_a_failed_background_write_is_raised_by_the_next_save_wait_or_close(tmp_path, monkeypatch):
  ck = checkpoints.Checkpointer(tmp_path / "ck", max_to_keep=1)
  ck.save(1, _big_state(1))
  save = ck._manager.save

  def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(ck._manager, "save", full)
  ck.save(2, _big_state(2), blocking=False)  # returns: the failure happens in the thread
  with pytest.raises(checkpoints.CheckpointSpaceError, match="checkpoint .*2 failed: no space"):
    ck.save(3, _big_state(3))  # raised before step 3 is tried; step 1 kept
  assert ck.all_steps() == [1]
  ck.save(2, _big_state(2), blocking=False)
  ck.wait(raise_error=False)  # logged, not raised (e.g. while another error unwinds)
  ck.wait()  # the error was reported once
  ck.save(2, _big_state(2), blocking=False)
  with pytest.raises(checkpoints.CheckpointSpaceError):
    ck.close()
  monkeypatch.setattr(ck._manager, "save", save)


def test_a_device_without_room_for_the_copy_saves_synchronously(tmp_path, monkeypatch):
  """Where jax's memory stats say the state's bytes are not free on a device, no copy is made."""
  from grounding_jax import perf
  from grounding_jax.checkpoints import checkpointer
  state = _big_state(4)
  arrays = checkpointer.flatten(state)[0]
  nbytes = sum(x.nbytes for x in jax.tree.leaves(state) if isinstance(x, jax.Array))
  assert perf.free_memory(jax.devices()[0]) is None  # the CPU reports no memory stats
  assert checkpointer._room_for_a_copy(arrays)
  monkeypatch.setattr(perf, "free_memory", lambda device: nbytes - 1)
  assert not checkpointer._room_for_a_copy(arrays)
  ck = checkpoints.Checkpointer(tmp_path / "ck")
  ck.save(1, state, blocking=False)
  assert ck._writer is None and ck.latest_step() == 1
  monkeypatch.setattr(perf, "free_memory", lambda device: nbytes)
  assert checkpointer._room_for_a_copy(arrays)
  ck.close()


def test_auto_writes_in_the_background_on_an_accelerator_only():
  cpu = jax.devices()[0]
  assert not checkpoints.writes_in_background("auto", cpu)
  assert checkpoints.writes_in_background("on", cpu)
  assert not checkpoints.writes_in_background("off", cpu)

  class Gpu:
    platform = "gpu"

  assert checkpoints.writes_in_background("auto", Gpu())
  with pytest.raises(ValueError, match="checkpoint.background_write='yes'"):
    checkpoints.writes_in_background("yes")
