"""restore_subtree reads one part of a saved state (the policy parameters) into a target of its own
dtypes, and names the steps there are and the leaves that differ."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax import checkpoints
from test_checkpointer import _state  # a small trained-looking state: params, Adam moments, rng


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
