"""Completion log-probs and entropies from hidden states, in vocabulary chunks.

Logits [B, T, V] are never materialised: the vocabulary is split into chunks of `chunk_size` columns of the
LM-head kernel, and a lax.scan keeps a running (max, Σexp, Σexp·z) per position, plus the target's logit.
With `remat`, the backward pass recomputes each chunk's logits instead of storing them, so memory stays at
O(B·T·chunk) whatever V is (SmolLM2 V = 49,152; Qwen V = 151,936).

Temperature matches the sampler (CONTRACTS.md): log_softmax(logits / T); T = 0 (greedy) means T = 1.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp


def _chunk_stats(hidden, kernel, targets, chunk_size, temperature, want_entropy, remat):
  """Running log-sum-exp over vocabulary chunks. Returns (target_logit, lse, entropy or None)."""
  d, vocab = kernel.shape
  n_chunks = -(-vocab // chunk_size)
  padded = n_chunks * chunk_size
  if padded != vocab:
    kernel = jnp.pad(kernel, ((0, 0), (0, padded - vocab)))
  kernel_c = kernel.reshape(d, n_chunks, chunk_size).transpose(1, 0, 2)  # [C, D, chunk]
  inv_t = 1.0 / temperature
  lead = hidden.shape[:-1]
  neg_inf = jnp.float32(-jnp.inf)

  def body(carry, xs):
    m, s, t, tgt = carry
    k_c, start = xs
    z = jnp.einsum("...d,dv->...v", hidden, k_c.astype(hidden.dtype),
                   preferred_element_type=jnp.float32) * inv_t  # [..., chunk]
    cols = start + jnp.arange(chunk_size)
    z = jnp.where(cols < vocab, z, neg_inf)
    m_new = jnp.maximum(m, jnp.max(z, axis=-1))
    scale = jnp.exp(m - m_new)
    e = jnp.exp(z - m_new[..., None])
    s = s * scale + jnp.sum(e, axis=-1)
    if want_entropy:
      t = t * scale + jnp.sum(e * jnp.where(cols < vocab, z, 0.0), axis=-1)
    hit = cols == targets[..., None]
    tgt = tgt + jnp.sum(jnp.where(hit, z, 0.0), axis=-1)
    return (m_new, s, t, tgt), None

  init = (jnp.full(lead, -jnp.inf, jnp.float32), jnp.zeros(lead, jnp.float32),
          jnp.zeros(lead, jnp.float32), jnp.zeros(lead, jnp.float32))
  starts = jnp.arange(n_chunks, dtype=jnp.int32) * chunk_size
  if remat:
    # Checkpoint each chunk, not the whole scan: the backward pass then recomputes one chunk's logits
    # at a time and stores only the [B, T] carries, never [B, T, V] worth of residuals.
    body = jax.checkpoint(body)
  (m, s, t, tgt), _ = jax.lax.scan(body, init, (kernel_c, starts))
  lse = m + jnp.log(s)
  # H = lse − E_p[z] with E_p[z] = Σ e^{z−m} z / Σ e^{z−m}.
  entropy = lse - t / s if want_entropy else None
  return tgt, lse, entropy


def token_logprobs(hidden: jax.Array, kernel: jax.Array, targets: jax.Array, *,
                   temperature: float = 1.0, chunk_size: int = 4096, with_entropy: bool = False,
                   remat: bool = True) -> tuple[jax.Array, Optional[jax.Array]]:
  """log p(target) under log_softmax(hidden @ kernel / T), without forming the full logits.

  Args:
    hidden: [B, T, D] final-norm hidden states (any float dtype; matmul accumulates in float32).
    kernel: [D, V] LM-head kernel (Transformer.lm_head_kernel()).
    targets: int32 [B, T] token ids whose log-prob to return.
    temperature: sampler temperature; 0 means greedy and is treated as 1.
    chunk_size: vocabulary columns per chunk (memory ∝ B·T·chunk_size).
    with_entropy: also return the per-position entropy (nats) of the tempered distribution.
    remat: recompute chunk logits in the backward pass (jax.checkpoint) instead of storing them.
  Returns:
    (logp float32 [B, T], entropy float32 [B, T] or None).
  """
  if temperature < 0:
    raise ValueError(f"temperature={temperature} must be >= 0")
  temperature = 1.0 if temperature == 0 else float(temperature)
  chunk_size = int(min(chunk_size, kernel.shape[1]))
  tgt, lse, entropy = _chunk_stats(hidden, kernel, targets, chunk_size, temperature, with_entropy,
                                   remat)
  return tgt - lse, entropy


def completion_logprobs(model, prompt_ids: jax.Array, prompt_mask: jax.Array,
                        completion_ids: jax.Array, completion_mask: jax.Array, *,
                        temperature: float = 1.0, chunk_size: int = 4096, with_entropy: bool = False,
                        remat: bool = True, group_size: int = 1
                        ) -> tuple[jax.Array, Optional[jax.Array]]:
  """Log-probs (and entropies) of completion tokens given their prompts, under `model`.

  The sequence is [left-padded prompt | right-padded completion]; the hidden state at position
  Lp − 1 + t predicts completion token t.

  Args:
    model: a Transformer (hidden_states, hidden_states_shared_prefix, lm_head_kernel).
    prompt_ids, prompt_mask: int32 / bool [N, Lp], left-padded (one row per completion).
    completion_ids, completion_mask: int32 / bool [N, L], right-padded. Every completion token up
      to a row's last True is attended, so a token inside the completion that conditions what follows
      without counting (LEAR's forced "<answer>" prefix, rl/lear_rollout.py) stays in the context.
    group_size: G > 1 when rows come in groups of G consecutive rows with the same prompt (a GRPO
      group): each group's prompt then runs once (Transformer.hidden_states_shared_prefix), reading
      only the group's first prompt row. Same result, N·Lp − N/G·Lp fewer tokens. N % G == 0.
  Returns:
    (logp float32 [N, L], entropy float32 [N, L] or None); values at masked positions are arbitrary.
  """
  lp = prompt_ids.shape[1]
  length = completion_ids.shape[1]
  completion_ids = completion_ids.astype(jnp.int32)
  # Holes in completion_mask are closed (reverse running max); prefix masks are unchanged.
  attended = jax.lax.cummax(completion_mask.astype(jnp.int32), axis=1, reverse=True) > 0
  if group_size > 1:
    # Each group's first row, by reshape: a strided slice (prompt_ids[::G]) gave a wrong embedding
    # gradient on a data 2 x fsdp 2 x tensor 2 mesh (XLA's partitioner; tests/rl/test_update.py).
    first_row = lambda x: x.reshape(-1, group_size, lp)[:, 0]
    prompt_h, completion_h = model.hidden_states_shared_prefix(
        first_row(prompt_ids).astype(jnp.int32), first_row(prompt_mask), completion_ids,
        attended)
    first = jnp.repeat(prompt_h[:, -1:], group_size, axis=0)  # predicts completion token 0
    hidden = jnp.concatenate([first, completion_h[:, :length - 1]], axis=1)
  else:
    ids = jnp.concatenate([prompt_ids.astype(jnp.int32), completion_ids], axis=1)
    mask = jnp.concatenate([prompt_mask.astype(bool), attended], axis=1)
    hidden = model.hidden_states(ids, mask)[:, lp - 1:lp - 1 + length]
  return token_logprobs(hidden, model.lm_head_kernel(), completion_ids,
                        temperature=temperature, chunk_size=chunk_size, with_entropy=with_entropy,
                        remat=remat)
