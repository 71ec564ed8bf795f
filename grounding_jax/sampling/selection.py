"""Choosing the next token from [batch, vocab] logits: greedy, temperature, top-k, top-p.

Everything here is a pure function of arrays, jitted as part of the decode loop.

Drawing is an inverse-CDF search rather than `jax.random.categorical`, which draws a Gumbel per
logit, and rather than one cumulative sum over the whole vocabulary (both cost as much as the decode
matmuls on a CPU; README "Where decode time goes"). Here a draw is one uniform per row and a
two-level search: cumulative sums of ~sqrt(V)-sized block totals find the block, then one cumulative
sum inside that block finds the token. Sorting happens only when top-p < 1 (full sort) or top-k is
set (`lax.top_k`).

Log-prob convention (shared with the trainer, models/logprobs.py): the log-prob recorded for a token is
log_softmax(logits / T)[token] over the FULL vocabulary, i.e. after temperature and before top-k/top-p
truncation. For greedy decoding (T = 0) it is log_softmax(logits)[token] (T = 1).
"""

import math

import jax
import jax.numpy as jnp


def _block_size(vocab_size: int) -> int:
  """A power of two near sqrt(V): both search levels then touch ~sqrt(V) entries per row."""
  return max(1, 2 ** math.ceil(math.log2(max(1.0, math.sqrt(vocab_size)))))


def _first_crossing(weights_nv: jax.Array, target_n: jax.Array, *, inclusive: bool):
  """Finds, per row, the first index i whose cumulative weight passes `target`.

  Args:
    weights_nv: float32[N, V] non-negative weights (need not be normalised).
    target_n: float32[N] targets in [0, sum(weights)).
    inclusive: if True, the first i with cdf[i] >= target; else the first i with cdf[i] > target.

  Returns:
    (index int32[N], cdf float32[N]) — the index (clipped to V-1) and the cumulative weight there.
  """
  n, v = weights_nv.shape
  block = _block_size(v)
  num_blocks = -(-v // block)
  pad = num_blocks * block - v
  if pad:
    weights_nv = jnp.pad(weights_nv, ((0, 0), (0, pad)))  # zero weight: never selected
  w_nbk = weights_nv.reshape(n, num_blocks, block)
  block_cdf = jnp.cumsum(jnp.sum(w_nbk, axis=-1), axis=-1)  # [N, num_blocks]
  t = target_n[:, None]
  before = (block_cdf < t) if inclusive else (block_cdf <= t)
  b = jnp.minimum(jnp.sum(before, axis=-1), num_blocks - 1)  # [N]
  prev = jnp.where(b > 0, jnp.take_along_axis(block_cdf, jnp.maximum(b - 1, 0)[:, None], 1)[:, 0], 0.0)
  in_block = jnp.take_along_axis(w_nbk, b[:, None, None], axis=1)[:, 0]  # [N, block]
  cdf = jnp.cumsum(in_block, axis=-1) + prev[:, None]
  before = (cdf < t) if inclusive else (cdf <= t)
  j = jnp.minimum(jnp.sum(before, axis=-1), block - 1)
  index = jnp.minimum(b * block + j, v - 1).astype(jnp.int32)
  return index, jnp.take_along_axis(cdf, j[:, None], 1)[:, 0]


def _draw(weights_nv: jax.Array, total_n: jax.Array, uniforms_n: jax.Array) -> jax.Array:
  """Inverse-CDF draw of one index per row with probability weights / total. int32[N]."""
  index, _ = _first_crossing(weights_nv, uniforms_n * total_n, inclusive=False)
  return index


def select_tokens(logits_nv: jax.Array, uniforms_n: jax.Array, temperature: jax.Array,
                  top_p: jax.Array, *, greedy: bool, top_k: int = 0, use_top_p: bool = False):
  """Picks one token per row and returns its log-prob.

  Args:
    logits_nv: float[N, V] next-token logits.
    uniforms_n: float32[N] uniforms in [0, 1), one per row (ignored when greedy).
    temperature: float32 scalar > 0 (ignored when greedy); traced, so changing it does not recompile.
    top_p: float32 scalar in (0, 1]; used only when `use_top_p`.
    greedy: static; argmax (ties go to the lowest id, as torch.argmax).
    top_k: static; keep the k most probable tokens (0 = off). Exactly k are kept (ties at the k-th
      value are broken by `lax.top_k`; transformers keeps all ties — measure-zero for float logits).
    use_top_p: static; nucleus filtering — keep the most probable tokens while the mass strictly
      before a token is < top_p (transformers' TopPLogitsWarper semantics), applied after top-k on the
      renormalised top-k distribution, as transformers does.

  Returns:
    (tokens int32[N], logprobs float32[N]) with logprobs = log_softmax(logits / T)[token] over the full
    vocabulary (T = 1 when greedy): after temperature, before top-k/top-p truncation.
  """
  x = logits_nv.astype(jnp.float32)
  if greedy:
    m = jnp.max(x, axis=-1, keepdims=True)
    # First index of the max: two cheap reductions (jnp.argmax is ~3x slower on XLA:CPU).
    iota = jnp.arange(x.shape[-1], dtype=jnp.int32)
    tokens = jnp.min(jnp.where(x == m, iota, x.shape[-1]), axis=-1).astype(jnp.int32)
    logprobs = -jnp.log(jnp.sum(jnp.exp(x - m), axis=-1))
    return tokens, logprobs

  z = x / temperature
  m = jnp.max(z, axis=-1, keepdims=True)
  w = jnp.exp(z - m)
  log_total = jnp.log(jnp.sum(w, axis=-1))  # full-vocabulary normaliser: the log-prob convention

  if top_k <= 0 and not use_top_p:
    tokens = _draw(w, jnp.exp(log_total), uniforms_n)
    z_tok = jnp.take_along_axis(z, tokens[:, None], axis=1)[:, 0]
    return tokens, z_tok - m[:, 0] - log_total

  # Candidates in descending order of probability.
  if top_k > 0:
    vals, idx = jax.lax.top_k(z, min(top_k, z.shape[-1]))
  else:
    iota = jnp.broadcast_to(jnp.arange(z.shape[-1], dtype=jnp.int32), z.shape)
    neg, idx = jax.lax.sort((-z, iota), dimension=-1, num_keys=1)
    vals = -neg
  wc = jnp.exp(vals - m)
  kept_mass = jnp.sum(wc, axis=-1)
  if use_top_p:
    # The kept prefix ends at the first candidate whose inclusive cumulative mass reaches top_p.
    last_kept, kept_mass = _first_crossing(wc, top_p * kept_mass, inclusive=True)
  # A draw below the kept mass can only land inside the kept prefix: no need to zero the tail.
  j = _draw(wc, kept_mass, uniforms_n)
  if use_top_p:  # guards against float disagreement between the two searches' cumulative sums
    j = jnp.minimum(j, last_kept)
  tokens = jnp.take_along_axis(idx, j[:, None], axis=1)[:, 0].astype(jnp.int32)
  z_tok = jnp.take_along_axis(vals, j[:, None], axis=1)[:, 0]
  return tokens, z_tok - m[:, 0] - log_total

