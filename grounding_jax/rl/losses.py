"""The clipped policy-gradient loss of GRPO / DAPO / Dr.GRPO, as pure jittable functions.

Every loss and metric is returned as a (sum, denominator) pair: a mini-batch split into micro-batches
accumulates sums and denominators separately and divides once, so the result equals the loss of the whole
mini-batch exactly, whatever the micro-batch size (tunix `algo_core`; DAPO §3.3 on token-level means).
"micro_token_mean" keeps that exactness for TRL's per-device normalisation: its pair is (Σ of each
group of `micro_batch_rows` rows' token mean, number of groups), so the mini-batch loss is the mean of
the groups' token means, whatever the memory micro-batch (a multiple of the group).

When a reference is given, the three estimators k1, k2 and k3 of KL(π ‖ π_ref) are logged every step
(kl/k1, kl/k2, kl/k3) whichever one the loss uses (ARENA Fig. 4 compares k2 and k3).

The importance ratio is per token (PPO / GRPO), or per sequence (GSPO, arXiv:2507.18071 §4.1:
the exp of the mean token log-ratio over the completion), whose value is clipped per sequence; its
GSPO-token form (§4.3) gives every token that value with its own token's gradient path. A
sequence's ratio reads only its own row, and rows are never split between micro-batches, so the
(sum, denominator) pairs stay exact. The policy-gradient term can also carry a rollout-correction
weight (truncated or masked importance sampling of the trainer's old log-probs against the sampler's).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import jax
import jax.numpy as jnp

KL_ESTIMATORS = ("k1", "k2", "k3")
AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_sum_constant", "micro_token_mean")
RATIO_LEVELS = ("token", "sequence", "sequence_token")
ROLLOUT_CORRECTIONS = ("none", "tis", "mis")
_LOG_RATIO_BOUND = 20.0  # exp(±20) keeps an IS weight finite in float32 (verl's SAFETY_BOUND)


@dataclasses.dataclass(frozen=True)
class PolicyLossConfig:
  """Static options of the policy loss (hashable: it is a jit static argument).

  Attributes:
    clip_eps_low: ε_low, ratio floor 1 − ε_low (PPO/GRPO 0.2).
    clip_eps_high: ε_high, ratio ceiling 1 + ε_high (DAPO clip-higher 0.28; GRACE Table 2).
    dual_clip: c of dual-clip PPO: for A < 0 the per-token loss is capped at −c·A (GRACE 10.0); None = off.
    kl_coef: β. 0 disables the KL term (and the trainer skips the reference forward).
    kl_estimator: "k1" = log π − log π_ref; "k2" = ½(log π − log π_ref)² (ARENA arXiv:2505.13258
      §3.2); "k3" = π_ref/π − log(π_ref/π) − 1 (DeepSeekMath GRPO, TRL default).
    kl_clamp: clamp the per-token KL to [−kl_clamp, kl_clamp] (VeRL low_var_kl uses 10); None = off.
    entropy_coef: coefficient of an entropy *bonus* (loss −= coef · entropy); 0 = metric only.
    aggregation: "token_mean" = Σ tokens / Σ mask over the batch (DAPO, TRL bnpo);
      "seq_mean_token_mean" = mean over sequences of each sequence's token mean (GRPO paper);
      "seq_sum_constant" = Σ tokens / (num sequences · max_completion_length) (Dr.GRPO);
      "micro_token_mean" = the mean over consecutive groups of `micro_batch_rows` rows of each group's
      Σ tokens / Σ mask (TRL ≤ 0.18: a device's micro-batch is its own token mean, and DDP and
      gradient accumulation average them; ARENA, 4 completions per device: arXiv:2505.13258
      App. E and its TRL code).
    max_completion_length: the constant normaliser of "seq_sum_constant".
    micro_batch_rows: the rows of one normalisation group of "micro_token_mean".
    ratio_level: "token" = π_θ/π_old per token (PPO, GRPO); "sequence" = GSPO's s_i(θ) =
      exp(mean over the completion's loss tokens of log π_θ − log π_old), clipped per sequence, its
      gradient through the mean (arXiv:2507.18071 §4.1, Eq. 5); "sequence_token" = GSPO-token
      (§4.3): sg[s_i]·π_θ(y_t)/sg[π_θ(y_t)], s_i's value at every token with that token's own
      gradient (the same gradient as "sequence" when a completion's tokens share one advantage).
    rollout_correction: "none"; "tis" multiplies each token's policy-gradient term by
      min(π_old/π_sampler, cap) (truncated importance sampling of the sampler's log-probs against the
      trainer's old ones); "mis" multiplies it by π_old/π_sampler where that is <= cap and by 0 past
      it (masked IS: the token is dropped from the gradient; the denominators are unchanged).
    rollout_correction_cap: C of "tis" / "mis".
  """
  clip_eps_low: float = 0.2
  clip_eps_high: float = 0.2
  dual_clip: Optional[float] = None
  kl_coef: float = 0.0
  kl_estimator: str = "k3"
  kl_clamp: Optional[float] = None
  entropy_coef: float = 0.0
  aggregation: str = "token_mean"
  max_completion_length: int = 0
  micro_batch_rows: int = 0
  ratio_level: str = "token"
  rollout_correction: str = "none"
  rollout_correction_cap: float = 2.0

  def __post_init__(self):
    if self.kl_estimator not in KL_ESTIMATORS:
      raise ValueError(f"kl_estimator={self.kl_estimator!r}; expected one of {KL_ESTIMATORS}")
    if self.aggregation not in AGGREGATIONS:
      raise ValueError(f"aggregation={self.aggregation!r}; expected one of {AGGREGATIONS}")
    if self.aggregation == "seq_sum_constant" and self.max_completion_length <= 0:
      raise ValueError("aggregation='seq_sum_constant' (Dr.GRPO) needs max_completion_length > 0")
    if self.aggregation == "micro_token_mean" and self.micro_batch_rows <= 0:
      raise ValueError("aggregation='micro_token_mean' needs micro_batch_rows > 0 (loss.micro_batch_rows)")
    if not 0 <= self.clip_eps_low < 1 or self.clip_eps_high < 0:
      raise ValueError(f"clip eps low={self.clip_eps_low}, high={self.clip_eps_high}: need 0<=low<1, high>=0")
    if self.dual_clip is not None and self.dual_clip <= 1:
      raise ValueError(f"dual_clip={self.dual_clip} must be > 1 (or None to turn it off)")
    if self.ratio_level not in RATIO_LEVELS:
      raise ValueError(f"ratio_level={self.ratio_level!r}; expected one of {RATIO_LEVELS}")
    if self.rollout_correction not in ROLLOUT_CORRECTIONS:
      raise ValueError(f"rollout_correction={self.rollout_correction!r}; expected one of "
                       f"{ROLLOUT_CORRECTIONS}")
    if self.rollout_correction_cap <= 0:
      raise ValueError(f"rollout_correction_cap={self.rollout_correction_cap} must be > 0")


def kl_per_token(logp: jax.Array, ref_logp: jax.Array, estimator: str,
                 clamp: Optional[float] = None) -> jax.Array:
  """Per-token estimate of KL(π ‖ π_ref) from the sampled token's log-probs. Shapes [B, T]."""
  delta = ref_logp - logp  # log(π_ref / π)
  if estimator == "k1":
    kl = -delta
  elif estimator == "k2":
    kl = 0.5 * jnp.square(delta)
  elif estimator == "k3":
    kl = jnp.exp(delta) - delta - 1.0
  else:
    raise ValueError(f"kl_estimator={estimator!r}; expected one of {KL_ESTIMATORS}")
  if clamp is not None:
    kl = jnp.clip(kl, -clamp, clamp)
  return kl


def aggregate(values: jax.Array, mask: jax.Array, aggregation: str,
              max_completion_length: int = 0, micro_batch_rows: int = 0) -> tuple[jax.Array, jax.Array]:
  """(sum, denominator) of per-token `values` [B, T] under `mask` [B, T] for one aggregation mode.

  Rows with an all-zero mask (e.g. masked truncated completions) count in no denominator except
  "seq_sum_constant", whose denominator is the fixed B · max_completion_length (Dr.GRPO); a
  "micro_token_mean" group whose rows are all masked counts in none either. "micro_token_mean" needs
  B to be a multiple of micro_batch_rows.
  """
  mask = mask.astype(values.dtype)
  if aggregation == "token_mean":
    return jnp.sum(values * mask), jnp.sum(mask)
  if aggregation == "seq_mean_token_mean":
    lengths = jnp.sum(mask, axis=-1)
    per_seq = jnp.sum(values * mask, axis=-1) / jnp.maximum(lengths, 1.0)
    return jnp.sum(per_seq), jnp.sum((lengths > 0).astype(values.dtype))
  if aggregation == "seq_sum_constant":
    denom = jnp.asarray(values.shape[0] * max_completion_length, values.dtype)
    return jnp.sum(values * mask), denom
  if aggregation == "micro_token_mean":
    rows = values.shape[0]
    if micro_batch_rows <= 0 or rows % micro_batch_rows:
      raise ValueError(f"micro_token_mean: {rows} rows do not split into groups of "
                       f"micro_batch_rows={micro_batch_rows}")
    groups = (rows // micro_batch_rows, -1)
    sums = jnp.sum((values * mask).reshape(groups), axis=-1)
    tokens = jnp.sum(mask.reshape(groups), axis=-1)
    return jnp.sum(sums / jnp.maximum(tokens, 1.0)), jnp.sum((tokens > 0).astype(values.dtype))
  raise ValueError(f"aggregation={aggregation!r}; expected one of {AGGREGATIONS}")


def log_importance_ratio(logp: jax.Array, old_logp: jax.Array, mask: jax.Array,
                         level: str) -> jax.Array:
  """log of the importance ratio at each token [B, T] for a ratio level (RATIO_LEVELS).

  "sequence" and "sequence_token" use the mean of log π_θ − log π_old over each row's `mask` tokens
  (GSPO's length-normalised ratio, arXiv:2507.18071 §4.1), broadcast to the row; a row without
  mask tokens gets 0 (ratio 1). `old_logp` carries no gradient.
  """
  log_ratio = logp - jax.lax.stop_gradient(old_logp)
  if level == "token":
    return log_ratio
  mask_f = mask.astype(log_ratio.dtype)
  per_seq = jnp.sum(log_ratio * mask_f, axis=-1) / jnp.maximum(jnp.sum(mask_f, axis=-1), 1.0)
  if level == "sequence":
    return jnp.broadcast_to(per_seq[:, None], log_ratio.shape)
  if level == "sequence_token":  # GSPO-token (§4.3): the value of s_i, the gradient of log π(y_t)
    return jax.lax.stop_gradient(per_seq)[:, None] + logp - jax.lax.stop_gradient(logp)
  raise ValueError(f"ratio_level={level!r}; expected one of {RATIO_LEVELS}")


def rollout_correction_weight(old_logp: jax.Array, sampler_logp: jax.Array, kind: str,
                              cap: float) -> tuple[jax.Array, jax.Array]:
  """(weight, capped) per token [B, T]: the rollout-correction weight of the policy-gradient term
  and where π_old/π_sampler exceeds `cap` (truncated by "tis", dropped by "mis"). No gradient."""
  log_w = jnp.clip(jax.lax.stop_gradient(old_logp) - jax.lax.stop_gradient(sampler_logp),
                   -_LOG_RATIO_BOUND, _LOG_RATIO_BOUND)
  w = jnp.exp(log_w)
  capped = w > cap
  if kind == "tis":
    return jnp.minimum(w, cap), capped
  if kind == "mis":
    return jnp.where(capped, 0.0, w), capped
  raise ValueError(f"rollout_correction={kind!r}; expected 'tis' or 'mis'")


def policy_loss(logp: jax.Array, old_logp: jax.Array, advantages: jax.Array, mask: jax.Array,
                config: PolicyLossConfig, *, ref_logp: Optional[jax.Array] = None,
                entropy: Optional[jax.Array] = None, sampler_logp: Optional[jax.Array] = None
                ) -> tuple[jax.Array, jax.Array, dict]:
  """Clipped surrogate (× rollout-correction weight) + β·KL − entropy bonus, as (loss_sum,
  denominator, metric_sums).

  Args:
    logp: float32 [B, T], log π_θ of each completion token (with gradient).
    old_logp: float32 [B, T], log π_θ_old of the same tokens (rollout policy; no gradient).
    advantages: float32 [B], one per completion, broadcast to its tokens.
    mask: bool/float [B, T], 1 on completion tokens that count in the loss.
    config: PolicyLossConfig.
    ref_logp: float32 [B, T], log π_ref; required when config.kl_coef > 0.
    entropy: float32 [B, T], per-token entropy of π_θ (nats); required when entropy_coef > 0.
    sampler_logp: float32 [B, T], the sampler's log-probs of the tokens; required when
      config.rollout_correction != "none" (then `old_logp` must be the trainer's).
  Returns:
    loss_sum, denominator: loss = loss_sum / denominator (sum the pairs over micro-batches first).
    metric_sums: name -> (sum, count) pairs; mean = Σ sum / Σ count. Token-level metrics count tokens.
  """
  mask_f = mask.astype(jnp.float32)
  old_logp = jax.lax.stop_gradient(old_logp)
  adv = jax.lax.stop_gradient(advantages)[:, None].astype(jnp.float32)
  ratio = jnp.exp(log_importance_ratio(logp, old_logp, mask_f, config.ratio_level))
  clipped = jnp.clip(ratio, 1.0 - config.clip_eps_low, 1.0 + config.clip_eps_high)
  # PPO: maximise min(ρA, clip(ρ)A)  <=>  minimise max(−ρA, −clip(ρ)A).
  pg = jnp.maximum(-adv * ratio, -adv * clipped)
  if config.dual_clip is not None:
    # Dual-clip PPO (Ye et al. 2020; GRACE Table 2 clip_ratio_c = 10): for A < 0 cap the loss at −c·A.
    pg = jnp.where(adv < 0, jnp.minimum(pg, -adv * config.dual_clip), pg)
  tokens = jnp.sum(mask_f)
  metrics = {}

  def token_metric(x):
    return (jnp.sum(x * mask_f), tokens)

  if config.rollout_correction != "none":
    if sampler_logp is None:
      raise ValueError(f"rollout_correction={config.rollout_correction!r} needs sampler_logp")
    weight, capped = rollout_correction_weight(old_logp, sampler_logp, config.rollout_correction,
                                               config.rollout_correction_cap)
    pg = pg * weight  # the policy-gradient term only, as verl and TRL weigh it
    metrics["rollout_is/weight_mean"] = token_metric(weight)
    metrics["rollout_is/capped_frac"] = token_metric(capped.astype(jnp.float32))
  per_token = pg

  agg = dict(aggregation=config.aggregation, max_completion_length=config.max_completion_length,
             micro_batch_rows=config.micro_batch_rows)
  metrics["pg_loss"] = aggregate(pg, mask_f, **agg)
  if config.kl_coef:
    if ref_logp is None:
      raise ValueError("kl_coef > 0 but no ref_logp was given")
    kl = kl_per_token(logp, jax.lax.stop_gradient(ref_logp), config.kl_estimator, config.kl_clamp)
    per_token = per_token + config.kl_coef * kl
    metrics["kl"] = token_metric(kl)
  elif ref_logp is not None:
    metrics["kl"] = token_metric(kl_per_token(logp, ref_logp, config.kl_estimator, config.kl_clamp))
  if ref_logp is not None:  # every estimator, unclamped, whichever the loss uses (ARENA Fig. 4)
    logp_sg, ref_sg = jax.lax.stop_gradient(logp), jax.lax.stop_gradient(ref_logp)
    for name in KL_ESTIMATORS:
      metrics[f"kl/{name}"] = token_metric(kl_per_token(logp_sg, ref_sg, name))
  if entropy is not None:
    metrics["entropy"] = token_metric(entropy)
  if config.entropy_coef:
    if entropy is None:
      raise ValueError("entropy_coef > 0 but no entropy was given")
    per_token = per_token - config.entropy_coef * entropy
  # Which tokens did clipping stop from moving further (TRL's is_low/high_clipped)?
  low = ((ratio < 1.0 - config.clip_eps_low) & (adv < 0)).astype(jnp.float32)
  high = ((ratio > 1.0 + config.clip_eps_high) & (adv > 0)).astype(jnp.float32)
  metrics["clip_frac_low"] = token_metric(low)
  metrics["clip_frac_high"] = token_metric(high)
  metrics["clip_frac"] = token_metric(low + high)
  if config.dual_clip is not None:
    dual = ((adv < 0) & (ratio > config.dual_clip)).astype(jnp.float32)
    metrics["clip_frac_dual"] = token_metric(dual)
  metrics["ratio_mean"] = token_metric(ratio)
  # min / max are returned as (value, 1) so accumulation keeps them as extremes (see reduce_metrics).
  big = jnp.asarray(jnp.finfo(jnp.float32).max, jnp.float32)
  metrics["ratio_min"] = (jnp.min(jnp.where(mask_f > 0, ratio, big)), jnp.float32(1))
  metrics["ratio_max"] = (jnp.max(jnp.where(mask_f > 0, ratio, -big)), jnp.float32(1))
  loss_sum, denom = aggregate(per_token, mask_f, **agg)
  metrics["loss"] = (loss_sum, denom)
  return loss_sum, denom, metrics


def logprob_gap(logp, sampler_logp, mask, xp=jnp) -> dict:
  """How far the trainer's log-probs of the sampled tokens are from the sampler's, as metric sums.

  The two should agree up to float rounding when both run the same parameters at the same
  temperature; a larger gap means the sampler and the trainer compute different distributions
  (dtype, kernel or sharding mismatch), which biases the policy-gradient ratio.

  Args:
    logp, sampler_logp: float [B, T], log-probs of the same completion tokens.
    mask: bool/float [B, T], the tokens compared (the loss tokens).
    xp: jax.numpy inside jit, numpy for host arrays.
  Returns:
    {"logprob_gap_mean": (Σ |Δ|, tokens), "logprob_gap_peak": (max |Δ|, 1)} (reduce_metrics pairs;
    the peak is 0 when no token counts).
  """
  mask_f = xp.asarray(mask).astype(xp.float32)
  gap = xp.abs(xp.asarray(logp, xp.float32) - xp.asarray(sampler_logp, xp.float32)) * mask_f
  return {"logprob_gap_mean": (xp.sum(gap), xp.sum(mask_f)),
          "logprob_gap_peak": (xp.max(gap, initial=0.0), xp.float32(1))}


MAX_METRICS = ("ratio_max", "logprob_gap_peak")  # extremes: reduce_metrics keeps the largest


def reduce_metrics(metric_sums: Sequence[dict], xp=jnp) -> dict:
  """One value per metric from several (sum, count) dicts (micro-batches of policy_loss, or mini-batch
  means as (mean, 1)): ratio_min and MAX_METRICS stay extremes; a step's count of skipped non-finite
  updates adds up, and the first non-finite quantity is the first one reported; every other metric
  is Σ sum / Σ count. `xp` is jax.numpy inside jit, numpy for host values."""
  out = {}
  for k in metric_sums[0]:
    sums = xp.stack([xp.asarray(m[k][0]) for m in metric_sums])
    if k == "ratio_min":
      out[k] = xp.min(sums)
    elif k in MAX_METRICS:
      out[k] = xp.max(sums)
    elif k == "nonfinite/skipped":
      out[k] = xp.sum(sums)
    elif k == "nonfinite/first":
      out[k] = sums[xp.argmax(sums != 0)]  # 0 when every update was finite
    else:
      counts = xp.stack([xp.asarray(m[k][1]) for m in metric_sums])
      out[k] = xp.sum(sums) / xp.maximum(xp.sum(counts), 1e-8)
  return out
