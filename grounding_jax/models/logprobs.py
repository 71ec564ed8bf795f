"""Completion log-probs and entropies from hidden states, in vocabulary chunks.

Logits [B, T, V] are never materialised: the vocabulary is split into chunks of `chunk_size` columns of the
LM-head kernel, and a lax.scan keeps a running (max, Σexp, Σexp·z) per position, plus the target's logit.
With `remat`, the backward pass recomputes each chunk's logits instead of storing them, so memory stays at
O(B·T·chunk) whatever V is (SmolLM2 V = 49,152; Qwen V = 151,936).

Temperature matches the sampler (sampling/selection.py): log_softmax(logits / T); T = 0 (greedy) means
T = 1.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from grounding_jax.models.packed import SHARED_SEGMENT


@jax.custom_vjp
def _head(hidden: jax.Array, kernel: jax.Array) -> jax.Array:
  """hidden @ kernel in hidden's dtype, accumulated and returned in float32 (one vocabulary chunk's
  logits). Differentiated like every other matmul of a bf16 model: the backward GEMMs read the
  logits' cotangent in hidden's dtype. Autodiff would keep that cotangent float32, and a float32
  operand turns both backward GEMMs into float32 ones, read at twice the bytes (on a GPU TF32, half
  bf16's rate: 104 ms of a 1.37 s update on the H200, docs/benchmarks.md). Exact for float32."""
  return jnp.einsum("...d,dv->...v", hidden, kernel.astype(hidden.dtype),
                    preferred_element_type=jnp.float32)


def _head_fwd(hidden, kernel):
  return _head(hidden, kernel), (hidden, kernel)


def _head_bwd(residuals, g):
  hidden, kernel = residuals
  g = g.astype(hidden.dtype)
  d_hidden = jnp.einsum("...v,dv->...d", g, kernel.astype(hidden.dtype),
                        preferred_element_type=jnp.float32).astype(hidden.dtype)
  d_kernel = jnp.einsum("nd,nv->dv", hidden.reshape(-1, hidden.shape[-1]), g.reshape(-1, g.shape[-1]),
                        preferred_element_type=jnp.float32)
  return d_hidden, d_kernel.astype(kernel.dtype)


_head.defvjp(_head_fwd, _head_bwd)


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
    z = _head(hidden, k_c) * inv_t  # [..., chunk] float32
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


def pack_groups(completion_ids: jax.Array, lengths: jax.Array, rows_per_prompt: int, width: int):
  """Packs each group's completions one after another: G rows of [L] -> one row of [width].

  Args:
    completion_ids: int32[N, L], N = groups · rows_per_prompt consecutive rows per group.
    lengths: int[N], tokens kept from the start of each row.
    width: packed columns; at least the largest per-group sum of lengths (later tokens are lost).
  Returns:
    (ids int32[groups, width], offset int32[groups, width] of each token in its own row,
    segment int32[groups, width] = its row within the group (−1 at padding), start int32[N] =
    the packed column of each row's first token).
  """
  n, length = completion_ids.shape
  groups = n // rows_per_prompt
  lens = lengths.reshape(groups, rows_per_prompt).astype(jnp.int32)
  ends = jnp.cumsum(lens, axis=1)
  starts = ends - lens
  cols = jnp.arange(width, dtype=jnp.int32)
  segment = jnp.sum(cols[None, :, None] >= ends[:, None, :], axis=-1)          # [groups, width]
  valid = segment < rows_per_prompt
  segment = jnp.minimum(segment, rows_per_prompt - 1)
  offset = cols[None] - jnp.take_along_axis(starts, segment, axis=1)
  src = segment * length + jnp.clip(offset, 0, length - 1)
  ids = jnp.take_along_axis(completion_ids.reshape(groups, rows_per_prompt * length), src, axis=1)
  return (jnp.where(valid, ids, 0), jnp.where(valid, offset, 0), jnp.where(valid, segment, -1),
          starts.reshape(n))


def completion_logprobs(model, prompt_ids: jax.Array, prompt_mask: jax.Array,
                        completion_ids: jax.Array, completion_mask: jax.Array, *,
                        temperature: float = 1.0, chunk_size: int = 4096, with_entropy: bool = False,
                        remat: bool = True, rows_per_prompt: int = 1,
                        packed_width: Optional[int] = None, shared_prefix: int = 0
                        ) -> tuple[jax.Array, Optional[jax.Array]]:
  """Log-probs (and entropies) of completion tokens given their prompts, under `model`.

  The sequence is [left-padded prompt | right-padded completion]; the hidden state at position
  Lp − 1 + t predicts completion token t.

  Args:
    model: a Transformer (hidden_states, hidden_states_shared_prefix, lm_head_kernel).
    prompt_ids, prompt_mask: int32 / bool [N, Lp], left-padded (one row per completion).
    completion_ids, completion_mask: int32 / bool [N, L], right-padded. Every completion token up
      to a row's last True is attended, so a token inside the completion that conditions what follows
      without counting (LEAR's forced "<answer>" prefix, recipes/lear/rollout.py) stays in the context.
    rows_per_prompt: G > 1 when rows come in groups of G consecutive rows with the same prompt (a
      GRPO group; only each group's first prompt row is read). Each prompt then runs once and its
      completions, up to their last attended token, run packed into one row of `packed_width`
      columns (Transformer.hidden_states_shared_prefix): the same log-probs from groups · (Lp +
      packed_width) tokens instead of N · (Lp + L). N % G == 0.
    packed_width: columns of a group's packed completions, at least the largest per-group total of
      attended tokens (update.packed_width computes it on the host); default G · L (always enough).
    shared_prefix: C > 0 when every prompt of the batch begins with the same C real tokens (the
      caller's promise: update.common_prefix measures it on the host), e.g. a chat template and
      instructions. They then run once for the whole batch, and each group's stream is the rest of
      its prompt followed by its packed completions: the same log-probs from C + groups ·
      (Lp − C + packed_width) tokens. Every prompt holds at least C real tokens.
  Returns:
    (logp float32 [N, L], entropy float32 [N, L] or None); values at masked positions are arbitrary.
  """
  lp = prompt_ids.shape[1]
  n, length = completion_ids.shape
  completion_ids = completion_ids.astype(jnp.int32)
  # Holes in completion_mask are closed (reverse running max); prefix masks are unchanged.
  attended = jax.lax.cummax(completion_mask.astype(jnp.int32), axis=1, reverse=True) > 0
  kernel = model.lm_head_kernel()
  opts = dict(temperature=temperature, chunk_size=chunk_size, with_entropy=with_entropy, remat=remat)
  if rows_per_prompt == 1 and not shared_prefix:
    ids = jnp.concatenate([prompt_ids.astype(jnp.int32), completion_ids], axis=1)
    mask = jnp.concatenate([prompt_mask.astype(bool), attended], axis=1)
    hidden = model.hidden_states(ids, mask)[:, lp - 1:lp - 1 + length]
    return token_logprobs(hidden, kernel, completion_ids, **opts)

  # Each group's first row, by reshape: a strided slice (prompt_ids[::G]) gave a wrong embedding
  # gradient on a data 2 x fsdp 2 x tensor 2 mesh (XLA's partitioner; tests/rl/test_update.py).
  first_row = lambda x: x.reshape(-1, rows_per_prompt, lp)[:, 0]
  p_ids, p_mask = first_row(prompt_ids).astype(jnp.int32), first_row(prompt_mask).astype(bool)
  width = packed_width or rows_per_prompt * length
  ids, offset, segment, start = pack_groups(completion_ids, jnp.sum(attended, axis=1), rows_per_prompt,
                                            width)
  if shared_prefix:
    hidden = _after_common_prefix(model, p_ids, p_mask, ids, offset, segment, shared_prefix,
                                  rows=(rows_per_prompt, length))
  else:
    positions = jnp.sum(p_mask, axis=1, keepdims=True) + offset
    prompt_h, packed_h = model.hidden_states_shared_prefix(p_ids, p_mask, ids, positions, segment,
                                                           rows=(rows_per_prompt, length))
    # A row's first token is predicted by the prompt's last position, the others by the one before.
    before = jnp.concatenate([prompt_h[:, -1:], packed_h[:, :-1]], axis=1)
    hidden = jnp.where((offset == 0)[..., None], prompt_h[:, -1:], before)
  logp, entropy = token_logprobs(hidden, kernel, ids, **opts)
  # Back to rows: token t of row r sits at packed column start[r] + t of its group.
  group = jnp.arange(n)[:, None] // rows_per_prompt
  col = jnp.minimum(start[:, None] + jnp.arange(length)[None], width - 1)
  unpack = lambda x: None if x is None else x[group, col]
  return unpack(logp), unpack(entropy)


def _after_common_prefix(model, p_ids: jax.Array, p_mask: jax.Array, ids: jax.Array,
                         offset: jax.Array, segment: jax.Array, common: int,
                         rows: tuple[int, int]) -> jax.Array:
  """Hidden states predicting each packed completion token [groups, width, embed], when every
  prompt begins with the same `common` real tokens (completion_logprobs' shared_prefix).

  The common tokens (read from the first group's prompt) run once as a prefix of all groups. Each
  group's stream is [the rest of its prompt | its packed completions | padding], Lp − common +
  width columns: the prompt's rest is a SHARED_SEGMENT that all of the group's completions attend
  to, right after the common prefix in RoPE positions as in the whole prompt. rows: (G, L) of
  Transformer.hidden_states_shared_prefix.
  """
  groups, lp = p_ids.shape
  width = ids.shape[1]
  lens = jnp.sum(p_mask, axis=1).astype(jnp.int32)                      # real prompt tokens
  prefix = jax.lax.dynamic_slice_in_dim(p_ids[0], lp - lens[0], common)[None]   # [1, common]
  rest = (lens - common)[:, None]                                       # [groups, 1]
  cols = jnp.arange(lp - common + width, dtype=jnp.int32)[None]
  in_rest = cols < rest
  # Prompts are left-padded: a group's rest is its prompt's last `rest` columns.
  rest_ids = jnp.take_along_axis(p_ids, jnp.clip(lp - rest + cols, 0, lp - 1), axis=1)
  packed_col = cols - rest
  in_packed = packed_col < width
  packed_col = jnp.clip(packed_col, 0, width - 1)
  stream_ids = jnp.where(in_rest, rest_ids, jnp.take_along_axis(ids, packed_col, axis=1))
  packed_segment = jnp.where(in_packed, jnp.take_along_axis(segment, packed_col, axis=1), -1)
  stream_segment = jnp.where(in_rest, SHARED_SEGMENT, packed_segment)
  positions = jnp.where(in_rest, common + cols,
                        lens[:, None] + jnp.take_along_axis(offset, packed_col, axis=1))
  prefix_h, stream_h = model.hidden_states_shared_prefix(
      prefix, jnp.ones(prefix.shape, bool), stream_ids, positions, stream_segment, rows=rows,
      shared=lp - common)
  # Index k of [prefix's last | stream] predicts stream column k. A row's first token (offset 0)
  # follows its prompt's last token; the others follow the token before them.
  hidden = jnp.concatenate(
      [jnp.broadcast_to(prefix_h[:, -1:], (groups, 1, prefix_h.shape[-1])), stream_h], axis=1)
  source = rest + jnp.where(offset == 0, 0, jnp.arange(width, dtype=jnp.int32)[None])
  return jnp.take_along_axis(hidden, source[..., None], axis=1)
