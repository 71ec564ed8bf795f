"""Policy loss, its gradient and metrics against an independent float64 numpy re-derivation (every
aggregation, TRL's per-micro-batch token mean included; the k1 / k2 / k3 KL metrics)."""

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
  elif c.aggregation == "micro_token_mean":  # each group of rows its own token mean, groups averaged
    r = c.micro_batch_rows
    per = [(tok[i:i + r] * mask[i:i + r]).sum() / mask[i:i + r].sum() for i in range(0, B, r)
           if mask[i:i + r].sum() > 0]
    loss = sum(per) / len(per)
  else:
    loss = (tok * mask).sum() / (B * c.max_completion_length)
  m = mask > 0
  low = (ratio < 1 - c.clip_eps_low) & (a < 0)
  high = (ratio > 1 + c.clip_eps_high) & (a > 0)
  metrics = dict(kl=kl[m].mean(), entropy=ent[m].mean(), clip_frac_low=low[m].mean(),
                 clip_frac_high=high[m].mean(), ratio_mean=ratio[m].mean(), ratio_min=ratio[m].min(),
                 ratio_max=ratio[m].max())
  # Schulman's three estimators of KL(π ‖ π_ref), logged whatever the loss uses (unclamped).
  metrics.update({"kl/k1": (-d)[m].mean(), "kl/k2": (0.5 * d * d)[m].mean(),
                  "kl/k3": (np.exp(d) - d - 1)[m].mean()})
  return loss, metrics


_BASE = dict(clip_eps_low=0.2, clip_eps_high=0.28, max_completion_length=T, micro_batch_rows=2)
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
                              clip_eps_high=0.28, micro_batch_rows=2)
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
  with pytest.raises(ValueError, match="micro_batch_rows"):
    losses.PolicyLossConfig(aggregation="micro_token_mean")
  c = losses.PolicyLossConfig(aggregation="micro_token_mean", micro_batch_rows=4)
  logp, old, _, adv, mask, _ = [jnp.asarray(v, jnp.float32) for v in _inputs()]
  with pytest.raises(ValueError, match="6 rows"):
    losses.policy_loss(logp, old, adv, mask, c)


def test_micro_token_mean_differs_from_the_batch_token_mean():
  # Rows of very different lengths: TRL's per-micro-batch mean weighs a short row's tokens more.
  logp, old, _, adv, mask, _ = [jnp.asarray(v, jnp.float32) for v in _inputs()]
  results = {}
  for agg in ("token_mean", "micro_token_mean"):
    c = losses.PolicyLossConfig(aggregation=agg, micro_batch_rows=2)
    s, d, _ = losses.policy_loss(logp, old, adv, mask, c)
    results[agg] = float(s / d)
  assert abs(results["token_mean"] - results["micro_token_mean"]) > 1e-3
  # With one group of all rows it is the batch token mean.
  c = losses.PolicyLossConfig(aggregation="micro_token_mean", micro_batch_rows=B)
  s, d, _ = losses.policy_loss(logp, old, adv, mask, c)
  np.testing.assert_allclose(float(s / d), results["token_mean"], rtol=1e-6)


def test_kl_estimators_are_logged_whatever_the_loss_uses():
  logp, old, ref, adv, mask, _ = [jnp.asarray(v, jnp.float32) for v in _inputs(3)]
  got = {}
  for est, coef in (("k1", 0.0), ("k2", 0.04), ("k3", 0.1)):
    _, _, m = losses.policy_loss(logp, old, adv, mask, losses.PolicyLossConfig(
        kl_coef=coef, kl_estimator=est, kl_clamp=0.01), ref_logp=ref)
    got[est] = losses.reduce_metrics([m])
  for k in ("kl/k1", "kl/k2", "kl/k3"):  # the same three numbers, unclamped, under every estimator
    np.testing.assert_allclose([float(g[k]) for g in got.values()], float(got["k1"][k]), rtol=1e-6)
  assert float(got["k3"]["kl/k3"]) > 0.01 >= float(got["k3"]["kl"])  # "kl" is the loss's, clamped
  _, _, m = losses.policy_loss(logp, old, adv, mask, losses.PolicyLossConfig())
  assert not any(k.startswith("kl") for k in m)  # no reference, no KL metrics


def _np_gspo(logp, old, adv, mask, c, sampler=None):
  """GSPO (arXiv:2507.18071 §4.1) in float64 numpy: s_i = exp(mean of the row's token log-ratios),
  clipped per sequence, each row's loss given to its tokens, then the aggregation; with a
  rollout-correction weight per token when `sampler` is given."""
  lens = mask.sum(1)
  s = np.exp(((logp - old) * mask).sum(1) / np.maximum(lens, 1))[:, None] * np.ones_like(logp)
  a = adv[:, None]
  tok = np.maximum(-a * s, -a * np.clip(s, 1 - c.clip_eps_low, 1 + c.clip_eps_high))
  if sampler is not None:
    tok = tok * _np_weight(old, sampler, c)[0]
  if c.aggregation == "token_mean":
    return (tok * mask).sum() / mask.sum()
  if c.aggregation == "seq_mean_token_mean":
    per = [(tok[i] * mask[i]).sum() / lens[i] for i in range(B) if lens[i] > 0]
    return sum(per) / len(per)
  if c.aggregation == "seq_sum_constant":
    return (tok * mask).sum() / (B * c.max_completion_length)
  r = c.micro_batch_rows
  per = [(tok[i:i + r] * mask[i:i + r]).sum() / mask[i:i + r].sum() for i in range(0, B, r)
         if mask[i:i + r].sum() > 0]
  return sum(per) / len(per)


def _np_weight(old, sampler, c):
  """TIS: min(π_old / π_sampler, C); MIS: π_old / π_sampler where <= C, else 0. (weight, capped)."""
  w = np.exp(old - sampler)
  capped = w > c.rollout_correction_cap
  if c.rollout_correction == "tis":
    return np.minimum(w, c.rollout_correction_cap), capped
  return np.where(capped, 0.0, w), capped


def _fd_grad(fn, logp, h=1e-6):
  num = np.zeros_like(logp)
  for i, j in itertools.product(range(B), range(T)):
    up, dn = logp.copy(), logp.copy()
    up[i, j] += h
    dn[i, j] -= h
    num[i, j] = (fn(up) - fn(dn)) / (2 * h)
  return num


@pytest.mark.parametrize("agg", losses.AGGREGATIONS)
def test_gspo_sequence_ratio_matches_numpy_and_gspo_token_has_its_gradient(agg):
  logp, old, _, adv, mask, _ = _inputs(4)
  old = logp + np.random.default_rng(4).normal(scale=0.05, size=(B, T))  # some sequences clipped
  grads = {}
  for level in ("sequence", "sequence_token"):
    c = losses.PolicyLossConfig(**{**_BASE, "clip_eps_low": 0.01, "clip_eps_high": 0.015,
                                   "aggregation": agg, "ratio_level": level})

    def f(lp, c=c):
      s, d, m = losses.policy_loss(lp, jnp.asarray(old, jnp.float32), jnp.asarray(adv, jnp.float32),
                                   jnp.asarray(mask, jnp.float32), c)
      return s / d, losses.reduce_metrics([m])
    (loss, metrics), grads[level] = jax.value_and_grad(f, has_aux=True)(jnp.asarray(logp, jnp.float32))
    np.testing.assert_allclose(loss, _np_gspo(logp, old, adv, mask, c), rtol=2e-5, atol=1e-6)
    assert 0 < float(metrics["clip_frac"]) < 1  # both clipped and unclipped sequences
  # GSPO's gradient flows through each sequence's mean log-ratio: finite differences of the numpy loss.
  num = _fd_grad(lambda lp: _np_gspo(lp, old, adv, mask, c), logp)
  np.testing.assert_allclose(grads["sequence"], num, rtol=1e-3, atol=1e-5)
  # GSPO-token: sg[s_i]·π/sg[π] at every token gives the same gradient (one advantage per row).
  np.testing.assert_allclose(grads["sequence_token"], grads["sequence"], rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("kind,level", [("tis", "token"), ("mis", "token"), ("tis", "sequence")])
def test_rollout_correction_matches_numpy(kind, level):
  logp, old, _, adv, mask, _ = _inputs(5)
  sampler = old + np.random.default_rng(5).normal(scale=0.8, size=(B, T))  # some weights past C
  c = losses.PolicyLossConfig(clip_eps_high=0.28, ratio_level=level, rollout_correction=kind,
                              rollout_correction_cap=2.0)

  def ref(lp):
    if level == "sequence":
      return _np_gspo(lp, old, adv, mask, c, sampler)
    ratio = np.exp(lp - old)
    a = adv[:, None]
    pg = np.maximum(-a * ratio, -a * np.clip(ratio, 1 - c.clip_eps_low, 1 + c.clip_eps_high))
    return (pg * _np_weight(old, sampler, c)[0] * mask).sum() / mask.sum()

  def f(lp):
    s, d, m = losses.policy_loss(lp, *[jnp.asarray(v, jnp.float32) for v in (old, adv, mask)], c,
                                 sampler_logp=jnp.asarray(sampler, jnp.float32))
    return s / d, losses.reduce_metrics([m])
  (loss, metrics), grad = jax.value_and_grad(f, has_aux=True)(jnp.asarray(logp, jnp.float32))
  np.testing.assert_allclose(loss, ref(logp), rtol=2e-5, atol=1e-6)
  np.testing.assert_allclose(grad, _fd_grad(ref, logp), rtol=1e-3, atol=1e-5)
  weight, capped = _np_weight(old, sampler, c)
  m = mask > 0
  assert 0 < capped[m].mean() < 1
  np.testing.assert_allclose(metrics["rollout_is/capped_frac"], capped[m].mean(), rtol=1e-6)
  np.testing.assert_allclose(metrics["rollout_is/weight_mean"], weight[m].mean(), rtol=1e-5)
  with pytest.raises(ValueError, match="needs sampler_logp"):
    losses.policy_loss(*[jnp.asarray(v, jnp.float32) for v in (logp, old, adv, mask)], c)


@pytest.mark.parametrize("agg", losses.AGGREGATIONS)
def test_sequence_ratio_and_correction_accumulate_exactly(agg):
  # A sequence's ratio reads its own row only, and micro-batches hold whole rows.
  c = losses.PolicyLossConfig(aggregation=agg, max_completion_length=T, micro_batch_rows=2,
                              ratio_level="sequence", rollout_correction="tis", kl_coef=0.05)
  logp, old, ref, adv, mask, ent = [jnp.asarray(v, jnp.float32) for v in _inputs(6)]
  sampler = old + 0.3
  s, d, m = losses.policy_loss(logp, old, adv, mask, c, ref_logp=ref, sampler_logp=sampler)
  parts = [losses.policy_loss(logp[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2], c,
                              ref_logp=ref[i:i + 2], sampler_logp=sampler[i:i + 2])
           for i in range(0, B, 2)]
  np.testing.assert_allclose(s / d, sum(p[0] for p in parts) / sum(p[1] for p in parts), rtol=1e-5,
                             atol=1e-7)  # float32 sums in another order
  f1, f2 = losses.reduce_metrics([m]), losses.reduce_metrics([p[2] for p in parts])
  for k in f1:
    np.testing.assert_allclose(f1[k], f2[k], rtol=1e-5, err_msg=k)
