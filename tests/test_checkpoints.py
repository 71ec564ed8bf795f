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
