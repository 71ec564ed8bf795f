"""Checkpoints round-trip params, optimizer state, PRNG key and metadata; bad paths fail clearly."""

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


def test_restore_subtree_reads_only_the_params(tmp_path):
  ck = checkpoints.Checkpointer(tmp_path / "ck")
  s4, s6 = _state(4), _state(6)
  ck.save(4, s4)
  ck.save(6, s6)
  target = {"w": jnp.zeros((4, 3), jnp.bfloat16), "b": jnp.zeros(3, jnp.bfloat16)}
  params, meta = checkpoints.restore_subtree(ck, target)  # latest; cast to the target's bfloat16
  assert meta["step"] == 6 and params["w"].dtype == jnp.bfloat16
  np.testing.assert_array_equal(params["w"], s6["params"]["w"].astype(jnp.bfloat16))
  params, _ = checkpoints.restore_subtree(ck, jax.tree.map(jnp.float32, target), step=4)
  np.testing.assert_array_equal(params["b"], s4["params"]["b"])
  with pytest.raises(FileNotFoundError, match=r"step 5 .*found steps \[4, 6\]"):
    checkpoints.restore_subtree(ck, target, step=5)
  with pytest.raises(ValueError, match="holds 2 arrays under"):
    checkpoints.restore_subtree(ck, {"w": target["w"]})
  with pytest.raises(ValueError, match="holds 0 arrays under"):
    checkpoints.restore_subtree(ck, target, prefix="['ref_params']")


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
