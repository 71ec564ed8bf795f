"""The jitted GRPO update: micro-batch gradient accumulation + one optimizer step, and log-prob passes.

A mini-batch arrives as micro-batches. A jitted program per micro-batch shape adds the gradient of
the micro-batch's loss *sum* into a donated accumulator and returns its denominator; the optimizer
sees Σ grad(sum) / Σ denominator, which equals the gradient of the whole mini-batch's loss exactly
(denominators depend only on masks). Parameters and optimizer state are donated.

Batch keys (all leading dims [num_micro, micro_batch]):
  prompt_ids int32 [.., Lp], prompt_mask bool [.., Lp]     left-padded prompt of each completion
  completion_ids int32 [.., L], loss_mask bool [.., L]      tokens that count in the loss
  advantages float32 [..]                                   one per completion
  old_logp float32 [.., L]                                  omitted when on-policy (μ = 1, one update)
  ref_logp float32 [.., L]                                  omitted when β = 0
  sampler_logp float32 [.., L]                              optional: the sampler's log-probs of the
                                                            tokens, for the health/logprob_gap monitor
                                                            and loss.rollout_correction (required)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from grounding_jax.models import logprobs as logprobs_lib
from grounding_jax.models import lora
from grounding_jax.rl import losses
from grounding_jax.rl.config import checks
from grounding_jax.sampling.prompts import bucket_length, common_prefix_length, left_pad


@dataclasses.dataclass(frozen=True)
class UpdateSettings:
  """Static settings of the jitted update (hashable).

  Attributes:
    loss: the policy-loss options.
    temperature: T of the trained, old and reference log-probs, log_softmax(logits / T)
      (logprob_temperature below: the sampler's by default).
    chunk_size: vocabulary chunk of the log-prob kernel.
    remat: recompute chunk logits in the backward pass.
    on_policy: old log-probs are the current ones under stop_gradient (μ = 1 with one update per
      rollout batch, as TRL does), so no old_logp input and no extra forward pass.
    rows_per_prompt: consecutive rows that share one prompt in the update: the rollout group size G
      when every micro-batch holds whole groups (each prompt then runs once per micro-batch, its
      completions packed after it: logprobs.completion_logprobs); 1 = every row runs its own copy
      of its prompt.
    gpu_gemm: "cublas" | "xla": who runs the gradient program's GEMMs on a GPU
      (gemm_compiler_options).
    common_prefix_min: the fewest leading tokens that all of a batch's prompts share (a chat
      template and instructions) for them to run once per micro-batch (common_prefix; 0 = never).
  """
  loss: losses.PolicyLossConfig
  temperature: float = 1.0
  chunk_size: int = 4096
  remat: bool = True
  on_policy: bool = False
  rows_per_prompt: int = 1
  gpu_gemm: str = "cublas"
  common_prefix_min: int = 0


def gemm_compiler_options(gpu_gemm: str, backend: str | None = None) -> dict | None:
  """XLA options of the gradient program (jax.jit's compiler_options): on a GPU with gpu_gemm
  "cublas", XLA's Triton GEMM fusions off for this program only, so cuBLAS runs its GEMMs. On one
  H200 (docs/benchmarks.md, the 1.5 B GRACE step) that update took 1.38 s instead of 1.43 s and its
  compile skipped Triton's GEMM autotuning (the step-1 compile of a run with Triton off everywhere:
  17.5 s instead of 30.8 s), while decode ran slower on cuBLAS (3.91 against 3.03 ms a step), so
  the sampler keeps XLA's choice. None (no option) elsewhere and for "xla"."""
  backend = backend or jax.default_backend()
  if gpu_gemm == "cublas" and backend in ("gpu", "cuda", "rocm"):
    return {"xla_gpu_enable_triton_gemm": False}
  return None


def logprob_temperature(c) -> float:
  """T of the update's log-probs: the sampler's (loss.logprob_temperature="sampling", the exact
  ratio π_θ/π_old of the sampled distribution) or a number (ARENA's authors: 1.0, raw logits, while
  sampling at 0.9; their TRL 0.16 code for arXiv:2505.13258, App. E). Raises ValueError on a bad
  value, or when the old log-probs would come from the sampler at another temperature."""
  value = c.loss.logprob_temperature
  if value == "sampling":
    return float(c.rollout.temperature)
  if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
    raise ValueError(f"loss.logprob_temperature={value!r}: use 'sampling' or a number > 0")
  u = c.update_loop
  if (u.old_logprobs == "sampler" and not (u.num_iterations == 1 and u.num_minibatches == 1)
      and float(value) != float(c.rollout.temperature)):
    raise ValueError(f"loss.logprob_temperature={value} differs from rollout.temperature="
                     f"{c.rollout.temperature}, so the sampler's log-probs cannot be the old ones; set "
                     "update_loop.old_logprobs='recompute'")
  return float(value)


def settings_from_config(c, samples_per_prompt: int | None = None) -> UpdateSettings:
  """The update's static settings from a trainer config (rl/config/fields.py): loss, log-prob temperature,
  log-prob kernel, the on-policy shortcut, and prompt sharing when micro-batches hold whole groups.
  `samples_per_prompt`: rows per prompt, default rollout.group_size (G/k with evidence-contrast
  groups of k conditions, setup.samples_per_prompt)."""
  u = c.update_loop
  rows = c.loss.micro_batch_rows or u.micro_batch_size
  if c.loss.aggregation == "micro_token_mean" and (rows <= 0 or u.micro_batch_size % rows):
    raise ValueError(f"loss.micro_batch_rows={c.loss.micro_batch_rows} must divide "
                     f"update_loop.micro_batch_size={u.micro_batch_size}")
  loss_cfg = losses.PolicyLossConfig(
      clip_eps_low=c.loss.clip_eps_low, clip_eps_high=c.loss.clip_eps_high,
      dual_clip=c.loss.dual_clip, kl_coef=c.loss.kl_coef, kl_estimator=c.loss.kl_estimator,
      kl_clamp=c.loss.kl_clamp, entropy_coef=c.loss.entropy_coef, aggregation=c.loss.aggregation,
      max_completion_length=c.rollout.max_new_tokens,
      micro_batch_rows=rows if c.loss.aggregation == "micro_token_mean" else 0,
      ratio_level=c.loss.ratio_level, rollout_correction=c.loss.rollout_correction,
      rollout_correction_cap=c.loss.rollout_correction_cap)
  on_policy = u.num_iterations == 1 and u.num_minibatches == 1
  problem = checks.rollout_correction_problem(c)
  if problem:
    raise checks.ConfigError(
        [f"config.loss.rollout_correction={c.loss.rollout_correction!r}: {problem}"])
  g = samples_per_prompt or c.rollout.group_size
  shared = u.share_prompts and g > 1 and u.micro_batch_size % g == 0
  return UpdateSettings(loss=loss_cfg, temperature=logprob_temperature(c),
                        chunk_size=c.loss.logprob_chunk_size, remat=c.loss.logprob_remat,
                        on_policy=on_policy, rows_per_prompt=g if shared else 1,
                        gpu_gemm=u.gpu_gemm,
                        common_prefix_min=c.rollout.common_prefix_min_tokens if shared else 0)


# What `nonfinite/first` names (1-based; 0 = every quantity finite), in the order one feeds the next:
# the batch's advantages, the mini-batch loss, its gradient, and the parameters after the optimizer's
# update and the optimizer state (finite gradients can still overflow there, e.g. with a learning rate
# past float32's range, or Adam's second moment of a huge unclipped gradient).
NONFINITE_QUANTITIES = ("advantage", "loss", "gradient", "update")


def nonfinite_name(code: float) -> str | None:
  """The quantity a step's `nonfinite/first` metric names, or None when the step was finite."""
  return NONFINITE_QUANTITIES[int(code) - 1] if int(code) else None


def _all_finite(tree) -> jax.Array:
  """Whether every float leaf of `tree` is finite (True for a tree without any, e.g. SGD's state)."""
  checks = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
            if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
  return jnp.all(jnp.stack(checks)) if checks else jnp.bool_(True)


def _guard_nonfinite(advantages_finite, loss, grads, new_params, new_opt_state, params, opt_state):
  """(params, opt_state, metrics): the updated state if advantages, loss, gradient, updated
  parameters and optimizer state are all finite, else the state before the step, unchanged. A
  select inside the jitted step, so the donated buffers are reused either way and a finite step is
  bit-identical."""
  bad = jnp.stack([~jnp.all(advantages_finite), ~jnp.isfinite(loss), ~_all_finite(grads),
                   ~(_all_finite(new_params) & _all_finite(new_opt_state))])
  skip = jnp.any(bad)
  keep = lambda new, old: jnp.where(skip, old, new)
  metrics = {"nonfinite/skipped": skip.astype(jnp.float32),
             "nonfinite/first": jnp.where(skip, jnp.argmax(bad) + 1, 0).astype(jnp.float32)}
  return jax.tree.map(keep, new_params, params), jax.tree.map(keep, new_opt_state, opt_state), metrics


def make_train_step(graphdef: nnx.GraphDef, optimizer: optax.GradientTransformation,
                    settings: UpdateSettings) -> Callable:
  """Builds `train_step(params, rest, opt_state, batch, packed_width=None, dropout_key=None) ->
  (params, opt_state, metrics)`: one optimizer update from the micro-batches of one mini-batch.
  dropout_key seeds LoRA adapter dropout (models/lora.py; None = none), folded per micro-batch.

  params / rest are the nnx.Param and other state of `nnx.split(model, nnx.Param, ...)`; params and
  opt_state are donated. `batch` is a dict of arrays [num_micro, micro_batch, ...], or a list of
  micro-batch dicts [micro_batch, ...] whose widths may differ. packed_width (settings.rows_per_prompt
  > 1 only): columns of a group's packed completions (logprobs.completion_logprobs; default
  rows_per_prompt · L), one int or one per micro-batch. shared_prefix (rows_per_prompt > 1 only):
  C > 0 when every prompt of the batch begins with the same C real tokens (common_prefix), which
  then run once per micro-batch (logprobs.completion_logprobs). Each micro-batch runs in a jitted
  gradient program compiled once per shape, packed width and shared prefix; a jitted apply program
  then divides the summed gradients by the summed denominators and steps the optimizer. metrics:
  name -> scalar (loss, pg_loss, kl, entropy, clip fractions, ratio stats, grad_norm,
  nonfinite/skipped, nonfinite/first; logprob_gap_mean / _peak when the batch has sampler_logp: |log-prob − the
  sampler's| of this update's loss pass over the loss tokens, losses.logprob_gap).

  Non-finite guard: when an advantage, the loss, the gradient or an updated parameter is NaN or
  inf, the step applies no update — params and opt_state come back unchanged — and reports
  nonfinite/skipped = 1 and nonfinite/first = the 1-based index of the first non-finite quantity in
  NONFINITE_QUANTITIES (see nonfinite_name); the loss metrics then show the non-finite values.
  """
  cfg = settings.loss

  def micro_loss(params, rest, mb, packed_width, shared_prefix, dropout_key):
    model = nnx.merge(graphdef, params, rest)
    with lora.dropout_key(dropout_key):  # LoRA dropout in this (training) pass only
      logp, entropy = logprobs_lib.completion_logprobs(
          model, mb["prompt_ids"], mb["prompt_mask"], mb["completion_ids"], mb["loss_mask"],
          temperature=settings.temperature, chunk_size=settings.chunk_size, with_entropy=True,
          remat=settings.remat, rows_per_prompt=settings.rows_per_prompt, packed_width=packed_width,
          shared_prefix=shared_prefix)
    if not cfg.entropy_coef:
      entropy = jax.lax.stop_gradient(entropy)  # metric only: no backward through it
    old = jax.lax.stop_gradient(logp) if settings.on_policy else mb["old_logp"]
    s, d, m = losses.policy_loss(logp, old, mb["advantages"], mb["loss_mask"], cfg,
                                 ref_logp=mb.get("ref_logp"), entropy=entropy,
                                 sampler_logp=mb.get("sampler_logp"))
    if "sampler_logp" in mb:  # the loss pass's own log-probs: no extra forward pass
      m.update(losses.logprob_gap(jax.lax.stop_gradient(logp), mb["sampler_logp"], mb["loss_mask"]))
    return s, (d, m)

  grad_fn = jax.value_and_grad(micro_loss, has_aux=True)

  @functools.partial(jax.jit, donate_argnums=2, static_argnames=("packed_width", "shared_prefix"),
                     compiler_options=gemm_compiler_options(settings.gpu_gemm))
  def accumulate(params, rest, grad_sum, mb, packed_width=None, shared_prefix=0, dropout_key=None):
    (s, (d, m)), g = grad_fn(params, rest, mb, packed_width, shared_prefix, dropout_key)
    return jax.tree.map(jnp.add, grad_sum, g), (s, d, m, jnp.all(jnp.isfinite(mb["advantages"])))

  @functools.partial(jax.jit, donate_argnums=(0, 1))  # the summed gradients have no output to reuse
  def apply(params, opt_state, grad_sum, stats):
    s, d, _, advantages_finite = jax.tree.map(lambda *x: jnp.stack(x), *stats)
    denom = jnp.maximum(jnp.sum(d), 1e-8)
    grads = jax.tree.map(lambda g: g / denom, grad_sum)
    updates, new_opt_state = optimizer.update(grads, opt_state, params)
    new_params = optax.apply_updates(params, updates)
    metrics = losses.reduce_metrics([st[2] for st in stats])
    metrics["loss"] = jnp.sum(s) / denom
    metrics["grad_norm"] = optax.tree.norm(grads)
    params, opt_state, guard = _guard_nonfinite(advantages_finite, metrics["loss"], grads,
                                                new_params, new_opt_state, params, opt_state)
    return params, opt_state, {**metrics, **guard}

  def train_step(params, rest, opt_state, batch, packed_width=None, shared_prefix=0,
                 dropout_key=None):
    batch = micro_batches(batch)
    widths = packed_width if isinstance(packed_width, (list, tuple)) else [packed_width] * len(batch)
    grad_sum = jax.tree.map(jnp.zeros_like, params)
    stats = []
    for i, (mb, width) in enumerate(zip(batch, widths)):
      # Without dropout, the call's keywords are those the perf costing and the programs compiled
      # ahead use (jit keys its cache on them: dropout_key=None given would be another program).
      key = {} if dropout_key is None else {"dropout_key": jax.random.fold_in(dropout_key, i)}
      grad_sum, st = accumulate(params, rest, grad_sum, mb, packed_width=width,
                                shared_prefix=shared_prefix, **key)
      stats.append(st)
    return apply(params, opt_state, grad_sum, stats)

  train_step.accumulate = accumulate  # the gradient program, for ahead-of-time compiling
  return train_step


def micro_batches(batch) -> list[dict]:
  """A dict of arrays [num_micro, micro_batch, ...] as the list of its micro-batches (a list is
  returned as is), indexed as train_step indexes them."""
  if not isinstance(batch, dict):
    return batch
  return [jax.tree.map(lambda x, i=i: x[i], batch) for i in range(len(batch["advantages"]))]


def make_logprob_fn(graphdef: nnx.GraphDef, settings: UpdateSettings) -> Callable:
  """Builds `fn(params, rest, batch, packed_width=None, shared_prefix=0) -> logp float32
  [num_micro, micro_batch, L]` (jitted, no grad; packed_width and shared_prefix as in
  make_train_step).

  Used for reference log-probs (frozen π_ref params) and recomputed old log-probs (current params).
  """

  def one(params, rest, mb, packed_width, shared_prefix):
    model = nnx.merge(graphdef, params, rest)
    logp, _ = logprobs_lib.completion_logprobs(
        model, mb["prompt_ids"], mb["prompt_mask"], mb["completion_ids"], mb["loss_mask"],
        temperature=settings.temperature, chunk_size=settings.chunk_size, remat=False,
        rows_per_prompt=settings.rows_per_prompt, packed_width=packed_width,
        shared_prefix=shared_prefix)
    return logp

  def fn(params, rest, batch, packed_width=None, shared_prefix=0):
    keys = ("prompt_ids", "prompt_mask", "completion_ids", "loss_mask")
    return jax.lax.map(lambda mb: one(params, rest, mb, packed_width, shared_prefix),
                       {k: batch[k] for k in keys})

  return jax.jit(fn, static_argnames=("packed_width", "shared_prefix"))


_PROMPT_KEYS = ("prompt_ids", "prompt_mask")  # left-padded: trim on the left
_COMPLETION_KEYS = ("completion_ids", "loss_mask", "old_logp", "ref_logp", "sampler_logp")  # right


def content_widths(batch: dict) -> tuple[int, int]:
  """(longest prompt, last completion column with loss) of a host batch of [n, ...] numpy arrays."""
  prompt = int(np.asarray(batch["prompt_mask"]).sum(axis=1).max(initial=0))
  cols = np.flatnonzero(np.asarray(batch["loss_mask"]).any(axis=0))
  return prompt, int(cols[-1]) + 1 if cols.size else 0


def trim_batch(batch: dict, prompt_width: int, completion_width: int) -> dict:
  """Drops padding columns: prompts keep their last `prompt_width` columns, completions their first
  `completion_width` (widths are clipped to the arrays'). Exact: left padding is masked out of
  attention and RoPE positions count real tokens only, and under causal attention the columns after
  the last loss-bearing token cannot change the log-probs before it.
  """
  out = dict(batch)
  for k in _PROMPT_KEYS:
    out[k] = batch[k][:, max(batch[k].shape[1] - prompt_width, 0):]
  for k in _COMPLETION_KEYS:
    if k in batch:
      out[k] = batch[k][:, :completion_width]
  return out


def packed_width(batch: dict, rows_per_prompt: int) -> int:
  """The largest number of attended completion tokens (each row's up to its last loss token) in one
  group of `rows_per_prompt` consecutive rows: the width a group's completions need when packed
  (logprobs.completion_logprobs). Host numpy; batch as in `content_widths`."""
  mask = np.asarray(batch["loss_mask"])
  last = np.where(mask.any(axis=1), mask.shape[1] - np.argmax(mask[:, ::-1], axis=1), 0)
  return int(last.reshape(-1, rows_per_prompt).sum(axis=1).max(initial=0))


# common_prefix rounds down to this: a run's prompts share one template, so it compiles one value.
COMMON_PREFIX_MULTIPLE = 16


def common_prefix(batch: dict, minimum: int, multiple: int = COMMON_PREFIX_MULTIPLE) -> int:
  """The leading real tokens every prompt of a host batch (left-padded prompt_ids, prompt_mask
  [n, Lp]) shares, rounded down to a multiple of `multiple`, or 0 when fewer than `minimum` (or
  `minimum` is 0)."""
  if minimum <= 0:
    return 0
  same = common_prefix_length(batch["prompt_ids"], batch["prompt_mask"])
  same -= same % multiple
  return same if same >= minimum else 0


def common_prefix_of(prompts, minimum: int, multiple: int = COMMON_PREFIX_MULTIPLE) -> int:
  """common_prefix of prompts given as token sequences."""
  if minimum <= 0 or not len(prompts):
    return 0
  ids, mask = left_pad([list(p) for p in prompts], 0)
  return common_prefix({"prompt_ids": ids, "prompt_mask": mask}, minimum, multiple)


def round_up(n: int, multiple: int) -> int:
  """n rounded up to a positive multiple of `multiple`."""
  return max(-(-n // multiple), 1) * multiple


# The update's shape buckets. Every distinct (prompt width, completion width, packed width) is one
# more gradient program to compile, so widths are rounded up to a few values; padding is exact
# (masked out of attention and the loss) and costs only its compute. A run therefore compiles, per
# prompt bucket, at most |completion buckets| x |packed buckets| gradient programs: with
# max_new_tokens 128, length_multiple 32 and G = 4, 3 x 4 = 12 (rounding every width to a
# multiple of 32 or of L allowed 4 x 4 = 16); 256 tokens and G = 8: 4 x 6 = 24 (was 8 x 8 = 64).


def prompt_bucket(n: int) -> int:
  """The sampler's prompt bucket (prompts.bucket_length: four per octave, <= 25 % padding), so
  the update runs the prompt widths prefill already runs. A shared prompt costs 1/G of a row."""
  return bucket_length(n)


def completion_bucket(n: int, multiple: int) -> int:
  """multiple · 2^k >= n, the smallest: log2(max_new_tokens / multiple) + 1 values. Coarse, since
  with shared prompts (the default) the completion width only sizes the [rows, L] gathers and the
  loss; the model runs the packed width."""
  width = multiple
  while width < n:
    width *= 2
  return width


_PACKED_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


def packed_bucket(need: int, length: int, rows_per_prompt: int) -> int:
  """Columns of a group's packed completions: length · b for the smallest b in 1, 2, 3, 4, 6, 8,
  12, ... (two per octave, <= 50 % padding past 2) with length · b >= need, at most
  rows_per_prompt · length (which always fits). G <= 4 gives G widths, G = 8: 6, G = 16: 8."""
  for b in _PACKED_STEPS:
    if b >= rows_per_prompt or length * b >= need:
      return length * min(b, rows_per_prompt)
  return length * rows_per_prompt


def split_model(model: nnx.Module) -> tuple[nnx.GraphDef, Any, Any]:
  """(graphdef, params, rest): what the optimizer trains — the LoRA adapters when the model has
  some (models/lora.py), else every nnx.Param — and everything else (under LoRA: the frozen base
  weights, which get no gradient, optimizer state or reference copy)."""
  return lora.split(model)
