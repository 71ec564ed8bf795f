"""Policy loss, its gradient and metrics against an independent float64 numpy re-derivation."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax.rl import losses

B, T = 6, 7


def _inputs(seed=0):
  rng = np.random.default_rng(seed)
  logp = np.log(rng.uniform(0.05, 0.9, size=(B, T)))
  old = logp + rng.normal(scale=0.3, size=(B, T))  # ratios spread across the clip range
  ref = logp + rng.normal(scale=0.5, size=(B, T))
  adv = rng.normal(size=B)
  adv[1] = 0.0
  mask = np.zeros((B, T))
  for i, n in enumerate([7, 3, 5, 1, 0, 6]):  # row 4: a masked (e.g. truncated) completion
    mask[i, :n] = 1
  ent = rng.uniform(0.1, 3.0, size=(B, T))
  return logp, old, ref, adv, mask, ent


def _np_loss(logp, old, ref, adv, mask, ent, c):
  ratio = np.exp(logp - old)
  a = adv[:, None]
  pg = np.maximum(-a * ratio, -a * np.clip(ratio, 1 - c.clip_eps_low, 1 + c.clip_eps_high))
  if c.dual_clip is not None:
    pg = np.where(a < 0, np.minimum(pg, -a * c.dual_clip), pg)
  d = ref - logp
  kl = {"k1": -d, "k2": 0.5 * d * d, "k3": np.exp(d) - d - 1}[c.kl_estimator]
  if c.kl_clamp is not None:
    kl = np.clip(kl, -c.kl_clamp, c.kl_clamp)
  tok = pg + c.kl_coef * kl - c.entropy_coef * ent
  lens = mask.sum(1)
  if c.aggregation == "token_mean":
    loss = (tok * mask).sum() / mask.sum()
  elif c.aggregation == "seq_mean_token_mean":
    per = [(tok[i] * mask[i]).sum() / lens[i] for i in range(B) if lens[i] > 0]
    loss = sum(per) / len(per)
  else:
    loss = (tok * mask).sum() / (B * c.max_completion_length)
  m = mask > 0
  low = (ratio < 1 - c.clip_eps_low) & (a < 0)
  high = (ratio > 1 + c.clip_eps_high) & (a > 0)
  metrics = dict(kl=kl[m].mean(), entropy=ent[m].mean(), clip_frac_low=low[m].mean(),
                 clip_frac_high=high[m].mean(), ratio_mean=ratio[m].mean(), ratio_min=ratio[m].min(),
                 ratio_max=ratio[m].max())
  return loss, metrics


_BASE = dict(clip_eps_low=0.2, clip_eps_high=0.28, max_completion_length=T)
# Each option varied on its own around DAPO-style defaults, and under every aggregation (16 programs).
_VARIANTS = [dict(), dict(clip_eps_high=0.2), dict(dual_clip=3.0), dict(kl_coef=0.04, kl_estimator="k1"),
             dict(kl_coef=0.04, kl_estimator="k2"), dict(kl_coef=0.1, kl_estimator="k3"),
             dict(kl_coef=0.1, kl_estimator="k3", kl_clamp=0.5), dict(entropy_coef=0.01),
             dict(dual_clip=3.0, kl_coef=0.04, kl_estimator="k2", entropy_coef=0.01)]
CONFIGS = [losses.PolicyLossConfig(**{**_BASE, **v, "aggregation": "token_mean"}) for v in _VARIANTS]
CONFIGS += [losses.PolicyLossConfig(**{**_BASE, **v, "aggregation": agg}) for agg in losses.AGGREGATIONS[1:]
            for v in (_VARIANTS[2], _VARIANTS[6], _VARIANTS[8])]


def _jax_loss(c):
  def f(logp, old, ref, adv, mask, ent):
    s, d, m = losses.policy_loss(logp, old, adv, mask, c, ref_logp=ref, entropy=ent)
    return s / d, losses.reduce_metrics([m])
  return jax.value_and_grad(f, has_aux=True)


@pytest.mark.parametrize("c", CONFIGS, ids=lambda c: (
    f"{c.clip_eps_high}-{c.dual_clip}-{c.kl_coef}{c.kl_estimator}{c.kl_clamp}-{c.entropy_coef}-"
    f"{c.aggregation}"))
def test_loss_grad_metrics_match_numpy(c):
  x = _inputs()
  (loss, metrics), grad = _jax_loss(c)(*[jnp.asarray(v, jnp.float32) for v in x])
  ref_loss, ref_metrics = _np_loss(*x, c)
  np.testing.assert_allclose(loss, ref_loss, rtol=2e-5, atol=1e-6)
  for k, v in ref_metrics.items():
    np.testing.assert_allclose(metrics[k], v, rtol=2e-5, atol=1e-6, err_msg=k)
  # Gradient w.r.t. log π by central differences of the float64 numpy loss.
  logp = x[0]
  h = 1e-6
  num = np.zeros_like(logp)
  for i, j in itertools.product(range(B), range(T)):
    up, dn = logp.copy(), logp.copy()
    up[i, j] += h
    dn[i, j] -= h
    num[i, j] = (_np_loss(up, *x[1:], c)[0] - _np_loss(dn, *x[1:], c)[0]) / (2 * h)
  np.testing.assert_allclose(grad, num, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("agg", losses.AGGREGATIONS)
def test_micro_batch_accumulation_is_exact(agg):
  c = losses.PolicyLossConfig(kl_coef=0.05, aggregation=agg, max_completion_length=T,
                              clip_eps_high=0.28)
  logp, old, ref, adv, mask, ent = [jnp.asarray(v, jnp.float32) for v in _inputs(1)]
  s, d, m = losses.policy_loss(logp, old, adv, mask, c, ref_logp=ref, entropy=ent)
  parts = [losses.policy_loss(logp[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2], c,
                              ref_logp=ref[i:i + 2], entropy=ent[i:i + 2]) for i in range(0, B, 2)]
  s2 = sum(p[0] for p in parts)
  d2 = sum(p[1] for p in parts)
  np.testing.assert_allclose(s / d, s2 / d2, rtol=1e-6)
  f1, f2 = losses.reduce_metrics([m]), losses.reduce_metrics([p[2] for p in parts])
  for k in f1:
    np.testing.assert_allclose(f1[k], f2[k], rtol=1e-5, err_msg=k)


def test_on_policy_is_plain_policy_gradient():
  # μ = 1: old = current, so ratio ≡ 1 and the loss is −Σ A·mask / Σ mask, grad = −A·mask / Σ mask.
  logp, _, _, adv, mask, _ = [jnp.asarray(v, jnp.float32) for v in _inputs(2)]
  c = losses.PolicyLossConfig(clip_eps_high=0.28, dual_clip=3.0)

  def f(lp):
    s, d, m = losses.policy_loss(lp, jax.lax.stop_gradient(lp), adv, mask, c)
    return s / d, losses.reduce_metrics([m])
  (loss, m), g = jax.value_and_grad(f, has_aux=True)(logp)
  np.testing.assert_allclose(m["ratio_min"], 1.0)
  np.testing.assert_allclose(m["ratio_max"], 1.0)
  assert float(m["clip_frac"]) == 0.0
  np.testing.assert_allclose(loss, -(adv[:, None] * mask).sum() / mask.sum(), rtol=1e-6)
  np.testing.assert_allclose(g, -adv[:, None] * mask / mask.sum(), rtol=1e-6, atol=1e-9)


def test_config_errors():
  with pytest.raises(ValueError, match="kl_estimator"):
    losses.PolicyLossConfig(kl_estimator="k4")
  with pytest.raises(ValueError, match="max_completion_length"):
    losses.PolicyLossConfig(aggregation="seq_sum_constant")
