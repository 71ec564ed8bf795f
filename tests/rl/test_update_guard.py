"""The update's non-finite guard (issue 18): a finite step is the plain optimizer update; a batch
with NaN or inf values (advantage, loss, gradient) applies no update and names what was first
non-finite; an overflowing learning rate is stopped before the parameters turn non-finite."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from grounding_jax import models
from grounding_jax.rl import update
from update_cases import SETTINGS, micro_batches, reference_update


@pytest.fixture(scope="module")
def reference(tiny_checkpoint):
  """(batch, gradient, metrics) of test_update.py's reference update of the tiny llama."""
  return reference_update(tiny_checkpoint("llama"))


def _host(tree):
  return [np.array(x) for x in jax.tree.leaves(tree)]  # copies: the step donates its inputs


@pytest.fixture(scope="module")
def adam_step(tiny_checkpoint):
  """(step, fresh): one AdamW train step compiled for every guard test (the learning rate lives in
  the optimizer state, so the lr = 1e6 case reuses it); fresh() -> (params, rest, opt_state)."""
  tiny = tiny_checkpoint("llama")
  opt = optax.inject_hyperparams(optax.adamw)(learning_rate=1e-2)
  graphdef, _, _ = update.split_model(models.load_pretrained(tiny))
  step = update.make_train_step(graphdef, opt, SETTINGS)

  def fresh(lr=1e-2):
    _, params, rest = update.split_model(models.load_pretrained(tiny))
    opt_state = opt.init(params)
    opt_state.hyperparams["learning_rate"] = jnp.asarray(lr, jnp.float32)
    return params, rest, opt_state

  return step, fresh


def test_a_finite_step_is_the_plain_optimizer_update(adam_step, reference):
  """A finite step passes the guard's select unchanged: its params are AdamW applied to the
  reference gradient. To rounding: the programs fuse differently, and AdamW's first step
  (lr · g / (|g| + eps), lr = 1e-2) turns gradient rounding into ~1e-7 here."""
  batch, grads, metrics = reference
  step, fresh = adam_step
  params, rest, opt_state = fresh()
  want = optax.apply_updates(params, optax.adamw(1e-2).update(grads, optax.adamw(1e-2).init(params),
                                                               params)[0])
  want = _host(want)
  got, _, m = step(params, rest, opt_state, micro_batches(batch, 2))
  for a, b in zip(_host(got), want):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert float(m["nonfinite/skipped"]) == 0 and update.nonfinite_name(m["nonfinite/first"]) is None
  np.testing.assert_allclose(m["loss"], metrics["loss"], rtol=1e-6)


@pytest.mark.parametrize("case,first", [
    ("nan_advantage", "advantage"), ("inf_advantage_on_a_masked_row", "advantage"),
    ("inf_ref_logp", "loss"),       # k3 KL: exp(inf) − inf − 1
    ("inf_old_logp", "gradient"),   # ratio = inf: the clipped loss stays finite, its gradient does not
])
def test_a_nonfinite_batch_applies_no_update(adam_step, reference, case, first):
  good = reference[0]
  batch = {k: v.copy() for k, v in good.items()}
  if case == "nan_advantage":
    batch["advantages"][3] = np.nan
  elif case == "inf_advantage_on_a_masked_row":
    batch["loss_mask"][6] = False
    batch["advantages"][6] = np.inf
  elif case == "inf_ref_logp":
    batch["ref_logp"][2, 0] = np.inf
  else:
    batch["old_logp"][5, 0] = -np.inf
  step, fresh = adam_step
  params, rest, opt_state = fresh()
  params, opt_state, m = step(params, rest, opt_state, micro_batches(good, 2))  # one good step first
  before = _host((params, opt_state))
  params, opt_state, m = step(params, rest, opt_state, micro_batches(batch, 2))
  assert float(m["nonfinite/skipped"]) == 1 and update.nonfinite_name(m["nonfinite/first"]) == first
  for a, b in zip(_host((params, opt_state)), before):
    np.testing.assert_array_equal(a, b)
  # The run goes on: the next finite batch updates again.
  params, opt_state, m = step(params, rest, opt_state, micro_batches(good, 2))
  assert float(m["nonfinite/skipped"]) == 0
  assert not all(np.array_equal(a, b) for a, b in zip(_host(params), before))


def test_an_overflowing_learning_rate_is_stopped_before_parameters_turn_nonfinite(adam_step, reference):
  """lr = 1e6 drives the parameters to ~1e8 in two steps; then the gradient overflows and each such
  step is skipped, leaving finite parameters and the optimizer state as they were."""
  step, fresh = adam_step
  params, rest, opt_state = fresh(lr=1e6)
  skipped = []
  for _ in range(4):
    before = _host((params, opt_state))
    params, opt_state, m = step(params, rest, opt_state, micro_batches(reference[0], 2))
    skipped.append(float(m["nonfinite/skipped"]))
    if skipped[-1]:
      assert update.nonfinite_name(m["nonfinite/first"]) in ("loss", "gradient", "update")
      for a, b in zip(_host((params, opt_state)), before):
        np.testing.assert_array_equal(a, b)
    assert all(np.isfinite(x).all() for x in _host(params))
  assert skipped[0] == 0 and skipped[-1] == 1
  assert max(np.abs(x).max() for x in _host(params)) > 1e5  # it did blow up before the guard caught it
