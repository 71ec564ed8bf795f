"""REINFORCE++-baseline advantages and the GSPO loss against verl's own functions, run as-is on
seeded inputs (fixtures/verl_reference.json; fixtures/make_verl_reference.py names the verl commit
and remakes it), and against a numpy re-derivation of verl's formula."""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax.rl import advantages as adv_lib
from grounding_jax.rl import config as rl_config
from grounding_jax.rl import losses
from grounding_jax.rl.config import presets

REFERENCE = json.loads((pathlib.Path(__file__).parent / "fixtures" / "verl_reference.json").read_text())


def _verl_formula(rewards, g, counts):
  """verl's REINFORCE++-baseline re-derived: reward − group mean, repeated over each completion's
  tokens, whitened over all tokens (masked_whiten: unbiased variance, 1e-8 under the root)."""
  c = (rewards.reshape(-1, g) - rewards.reshape(-1, g).mean(1, keepdims=True)).reshape(-1)
  tokens = np.repeat(c, counts.astype(int))
  return (c - tokens.mean()) / np.sqrt(tokens.var(ddof=1) + 1e-8)


@pytest.mark.parametrize("case", REFERENCE["reinforce_pp_baseline"], ids=lambda c: f"{len(c['rewards'])}")
def test_batch_tokens_is_verls_reinforce_pp_baseline(case):
  rewards, mask = np.asarray(case["rewards"]), np.asarray(case["mask"])
  verl = np.asarray(case["advantages"])
  counts = mask.sum(1)
  a = presets.reinforce_pp_baseline(rl_config.default_config()).advantage
  got = adv_lib.group_advantages(rewards, case["group_size"], scale=a.scale, std_ddof=a.std_ddof,
                                 eps=a.eps, token_counts=counts)
  rows = counts > 0
  np.testing.assert_allclose(np.repeat(got[rows], counts[rows].astype(int)), verl[mask > 0],
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(got[rows], _verl_formula(rewards, case["group_size"], counts)[rows],
                             rtol=1e-5, atol=1e-6)


def test_batch_scale_is_not_reinforce_pp_baseline():
  # "batch" (TRL scale_rewards="batch") divides by the raw rewards' std per completion and does not
  # re-centre, so it differs from verl's token whitening on rows of unequal length.
  case = REFERENCE["reinforce_pp_baseline"][0]
  rewards, mask = np.asarray(case["rewards"]), np.asarray(case["mask"])
  got = adv_lib.group_advantages(rewards, case["group_size"], scale="batch")
  rows = mask.sum(1) > 0
  assert np.abs(got[rows] - np.asarray(case["advantages"])[rows, 0]).max() > 1e-2


@pytest.mark.parametrize("level", ["sequence_token", "sequence"])
@pytest.mark.parametrize("case", REFERENCE["gspo"], ids=lambda c: f"clip{c['clip_eps_high']}")
def test_gspo_loss_and_gradient_match_verl(case, level):
  # verl implements GSPO-token; with one advantage per completion, GSPO's gradient is the same.
  c = losses.PolicyLossConfig(clip_eps_low=case["clip_eps_low"], clip_eps_high=case["clip_eps_high"],
                              aggregation="seq_mean_token_mean", ratio_level=level)
  logp, old, adv, mask = (jnp.asarray(case[k], jnp.float32)
                          for k in ("logp", "old_logp", "advantages", "mask"))

  def f(lp):
    s, d, m = losses.policy_loss(lp, old, adv, mask, c)
    return s / d, losses.reduce_metrics([m])
  (loss, metrics), grad = jax.value_and_grad(f, has_aux=True)(logp)  # float32 against verl's float64
  np.testing.assert_allclose(loss, case["loss"], rtol=2e-5, atol=1e-7)
  np.testing.assert_allclose(grad, case["grad"], rtol=2e-5, atol=1e-7)
  np.testing.assert_allclose(metrics["clip_frac"], case["clip_frac"], rtol=1e-6)
