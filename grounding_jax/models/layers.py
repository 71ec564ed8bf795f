"""The parts of a decoder block: RMSNorm, grouped-query attention with RoPE, and the SwiGLU MLP.

Attention over more than ModelConfig.attention_query_chunk queries (a long prompt's prefill, a long
training sequence) runs one chunk of queries at a time against all keys (`attend`).

Every weight is an `nnx.Param` whose `out_sharding` metadata holds its logical axis names
("vocab", "embed", "q_heads", "kv_heads", "head_dim", "mlp", "norm"); `grounding_jax.parallel` maps
them to mesh axes. Weights are stored in `param_dtype` and cast, where used, to the dtype of the
incoming activations: the model casts its embeddings to its compute dtype once, and every layer
follows that dtype.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grounding_jax.models.config import ModelConfig
from grounding_jax.models.rope import apply_rope
from grounding_jax.parallel import with_logical_constraint

_INIT_STD = 0.02  # HF's initializer_range for Llama/Qwen; only used for fresh (untrained) models.


def logical_param(key: jax.Array | None, shape: Sequence[int], names: tuple[str, ...], dtype,
                  init: str = "normal") -> nnx.Param:
  """An nnx.Param initialised as "normal" (std 0.02, from `key`), "zeros" or "ones", with axis names.

  `eager_sharding=False` keeps the names as pure metadata: they are logical names, not mesh axes,
  so flax must not try to place the array when a mesh is active; `parallel.shard_model` does that.
  """
  if init == "normal":
    value = _INIT_STD * jax.random.normal(key, shape, dtype)
  elif init == "zeros":
    value = jnp.zeros(shape, dtype)
  elif init == "ones":
    value = jnp.ones(shape, dtype)
  else:
    raise ValueError(f"init={init!r}; expected 'normal', 'zeros' or 'ones'.")
  return nnx.Param(value, out_sharding=names, eager_sharding=False)


class RMSNorm(nnx.Module):
  """Root-mean-square layer norm (Zhang & Sennrich 2019), statistics in float32 like HF."""

  def __init__(self, dim: int, eps: float, *, param_dtype):
    self.scale = logical_param(None, (dim,), ("norm",), param_dtype, init="ones")
    self.eps = eps

  def __call__(self, x: jax.Array) -> jax.Array:
    """x: [..., dim] -> same shape and dtype."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    return self.scale[...].astype(x.dtype) * normed.astype(x.dtype)


def matmul(spec: str, x: jax.Array, w: jax.Array) -> jax.Array:
  """einsum(spec, x, w) in x's dtype, accumulated and emitted in float32, then cast back.

  With bfloat16 compute this is the form XLA:CPU hands to its bf16 kernels (AMX / AVX512-BF16:
  ~5x the float32 matmul rate on this project's Xeon test machine, while a bf16-output dot ran
  slower than float32); on TPU/GPU it is the usual f32 accumulation. A no-op cast in float32.
  """
  out = jnp.einsum(spec, x, w.astype(x.dtype), preferred_element_type=jnp.float32)
  return out.astype(x.dtype)


def project(module: nnx.Module, name: str, spec: str, x: jax.Array) -> jax.Array:
  """matmul(spec, x, module.<name>), plus its LoRA adapter's scale · (x A) B when `module` has one
  (module.<name>_lora, added by models/lora.py; the base weight is unchanged)."""
  out = matmul(spec, x, getattr(module, name)[...])
  adapter = getattr(module, name + "_lora", None)
  return out if adapter is None else out + adapter(spec, x)


def write_cache(cache: jax.Array, new: jax.Array, start: tuple) -> jax.Array:
  """dynamic_update_slice of `new` (cast to the cache dtype) into `cache` at `start`, in place.

  A 16-bit float cache is updated through a same-width integer view: XLA:CPU computes bf16
  updates in float32, which turned each decode step's one-slot write into a conversion and copy of
  the layer's whole cache. The bit casts are free on every backend.
  """
  new = new.astype(cache.dtype)
  if cache.dtype.itemsize != 2 or not jnp.issubdtype(cache.dtype, jnp.floating):
    return jax.lax.dynamic_update_slice(cache, new, start)
  bits = lambda a: jax.lax.bitcast_convert_type(a, jnp.uint16)
  return jax.lax.bitcast_convert_type(jax.lax.dynamic_update_slice(bits(cache), bits(new), start),
                                      cache.dtype)


def _gqa(q_bthd: jax.Array, k: jax.Array, v: jax.Array, mask_bts: jax.Array, kv: str,
         query_chunk: int) -> jax.Array:
  """Grouped-query attention with keys/values laid out as `kv` ("bskd" or "bksd"); see `attend`.

  More than `query_chunk` queries (if > 0) are attended to in chunks (`_gqa_by_query_chunks`);
  fewer run as one block, the same program as without chunking.
  """
  if query_chunk and q_bthd.shape[1] > query_chunk:
    return _gqa_by_query_chunks(q_bthd, k, v, mask_bts, kv, query_chunk)
  return _gqa_block(q_bthd, k, v, mask_bts, kv)


def _gqa_block(q_bthd: jax.Array, k: jax.Array, v: jax.Array, mask_bts: jax.Array,
               kv: str) -> jax.Array:
  """`_gqa` of all T queries at once: float32 scores [batch, kv_heads, group, T, S]."""
  b, t, h, d = q_bthd.shape
  kv_heads = k.shape[kv.index("k")]
  q = q_bthd.reshape(b, t, kv_heads, h // kv_heads, d)
  scores = jnp.einsum(f"btkgd,{kv}->bkgts", q, k, preferred_element_type=jnp.float32)
  probs = _masked_softmax(scores * (d ** -0.5), mask_bts[:, None, None, :, :]).astype(v.dtype)
  # Batch dims first in the output, then one small transpose: asking the dot for "btkgd" directly
  # made XLA:CPU's decode attention ~3x slower (the size-1 T axis between batch dims).
  out = matmul(f"bkgts,{kv}->bkgtd", probs, v)
  return out.transpose(0, 3, 1, 2, 4).reshape(b, t, h, d)


def _gqa_by_query_chunks(q_bthd: jax.Array, k: jax.Array, v: jax.Array, mask_bts: jax.Array,
                         kv: str, query_chunk: int) -> jax.Array:
  """`_gqa_block` over consecutive chunks of at most `query_chunk` queries, one after another.

  Every chunk sees all S keys, so its plain softmax is exact: no running max or normaliser as in
  flash attention. The scores held at once shrink from [batch, heads, T, S] to [batch, heads,
  chunk, S] floats (SmolLM2, 8 rows of 4,096 tokens: 4.8 GB per copy at once, 0.15 GB per chunk
  of 128). The T queries are split into n = ceil(T / query_chunk) chunks of equal length
  ceil(T / n), so padding adds fewer than n query rows (T = 513 runs as 2 x 257, not 2 x 512);
  padded rows attend to no key and are dropped. Each chunk is rematerialised in the backward
  pass (one more score product per chunk): a scan otherwise keeps every chunk's probabilities for
  it, all [T, S] of them again (SmolLM2's remat gradient at 8 x 4,096 tokens in chunks of 512:
  16.3 GB of XLA temporaries without it, 5.3 GB with it, 19.3 GB unchunked).
  """
  b, t, h, d = q_bthd.shape
  n = -(-t // query_chunk)
  c = -(-t // n)
  pad = n * c - t
  q = jnp.pad(q_bthd, ((0, 0), (0, pad), (0, 0), (0, 0)))
  mask = jnp.pad(mask_bts, ((0, 0), (0, pad), (0, 0)))  # False: padded queries see no key
  chunks = (q.reshape(b, n, c, h, d).swapaxes(0, 1),     # [n, batch, c, q_heads, head_dim]
            mask.reshape(b, n, c, -1).swapaxes(0, 1))    # [n, batch, c, S]
  attend_chunk = jax.checkpoint(lambda qm: _gqa_block(qm[0], k, v, qm[1], kv), prevent_cse=False)
  out = jax.lax.map(attend_chunk, chunks)                # [n, batch, c, q_heads, head_dim]
  return out.swapaxes(0, 1).reshape(b, n * c, h, d)[:, :t]


def _masked_softmax(scores: jax.Array, mask: jax.Array) -> jax.Array:
  """softmax over the last axis of float32 scores where `mask` (broadcast) is True.

  A large finite negative (not -inf) fills masked entries, so fully masked rows (left-pad queries)
  stay finite.
  """
  return jax.nn.softmax(jnp.where(mask, scores, jnp.finfo(jnp.float32).min), axis=-1)


def attend(q_bthd: jax.Array, k_bskd: jax.Array, v_bskd: jax.Array, mask_bts: jax.Array, *,
           query_chunk: int = 0) -> jax.Array:
  """Scaled dot-product attention with grouped-query heads, keys and values sequence-major.

  The float32 scores of all T queries against all S keys, [batch, kv_heads, group, T, S], are
  materialised at once, unless T > query_chunk > 0: then the queries run in chunks of at most
  `query_chunk` (see `_gqa_by_query_chunks`), each against all S keys, which holds only
  [batch, kv_heads, group, query_chunk, S] scores at a time and gives the same result up to float
  rounding.

  Args:
    q_bthd: [batch, T, q_heads, head_dim] queries.
    k_bskd, v_bskd: [batch, S, kv_heads, head_dim] keys and values; q_heads % kv_heads == 0, and
      query head h reads kv head h // (q_heads / kv_heads), as in HF's repeat_kv.
    mask_bts: bool[batch, T, S], True where query t may attend to key s.
    query_chunk: most queries attended to at once; 0 = all (ModelConfig.attention_query_chunk).

  Returns:
    [batch, T, q_heads, head_dim] in the dtype of `v_bskd`.
  """
  return _gqa(q_bthd, k_bskd, v_bskd, mask_bts, "bskd", query_chunk)


def attend_cached(q_bthd: jax.Array, k_bksd: jax.Array, v_bksd: jax.Array,
                  mask_bts: jax.Array, *, query_chunk: int = 0) -> jax.Array:
  """`attend` over a KV cache, whose keys and values are head-major [batch, kv_heads, S, head_dim].

  In this layout every (row, kv head) pair is one contiguous [S, head_dim] matrix, so both
  attention dots read the cache as stored. With the sequence-major layout of `attend`, XLA:CPU
  copies (transposes) each layer's whole cache on every decode step first: SmolLM2's 30 layers at
  32 rows x 184 slots took 20-25 ms per decode step head-major, against 44-56 ms for the best
  sequence-major form (a broadcast multiply-and-reduce) and 143 ms for the sequence-major dots
  (2-core AMD EPYC, the 30 layers' attention alone in one jitted program).

  Args:
    q_bthd: [batch, T, q_heads, head_dim] queries (T = 1 per decode step, the prompt at prefill).
    k_bksd, v_bksd: [batch, kv_heads, S, head_dim] the cache.
    mask_bts: bool[batch, T, S].
    query_chunk: as in `attend`: a long prefill runs its queries in chunks; decode (T = 1) and
      prompts of at most `query_chunk` tokens run as one block.
  Returns:
    [batch, T, q_heads, head_dim] in the dtype of `v_bksd`.
  """
  return _gqa(q_bthd, k_bksd, v_bksd, mask_bts, "bksd", query_chunk)


def attend_cached_with_prefix(q_bthd: jax.Array, kp_bksd: jax.Array, vp_bksd: jax.Array,
                              prefix_mask_bs: jax.Array, k_bksd: jax.Array, v_bksd: jax.Array,
                              mask_bts: jax.Array) -> jax.Array:
  """`attend_cached` for rows continuing shared prefixes: each group of G = rows / prefixes
  consecutive rows reads its prefix's keys and values once, then its own cache. Every query sees
  its whole prefix (its real tokens); `mask_bts` rules the rows' own slots.

  Args:
    q_bthd: [rows, T, q_heads, head_dim]: one query per row for a decode step, or a row's T
      tokens after a batch-shared prefix (an evaluation batch's common instructions).
    kp_bksd, vp_bksd: [prefixes, kv_heads, Sp, head_dim]; row r continues prefix r // G.
    prefix_mask_bs: bool[prefixes, Sp], True at real prefix tokens.
    k_bksd, v_bksd: [rows, kv_heads, S, head_dim] the rows' own cache.
    mask_bts: bool[rows, T, S], True where query t may attend to the row's slot s.
  Returns:
    [rows, T, q_heads, head_dim] in the dtype of `v_bksd`.
  """
  n, t, h, d = q_bthd.shape
  p, kv_heads, sp, _ = kp_bksd.shape
  g, hg = n // p, h // kv_heads
  m = t * hg  # the queries of one (row, kv head): its T tokens' hg heads
  low = jnp.finfo(jnp.float32).min

  def by_prefix(x):  # [n, kv_heads, m, ...] -> [p, kv_heads, g * m, ...]
    x = x.reshape(p, g, kv_heads, m, *x.shape[3:]).swapaxes(1, 2)
    return x.reshape(p, kv_heads, g * m, *x.shape[4:])

  def by_row(x):  # the inverse of by_prefix
    x = x.reshape(p, kv_heads, g, m, *x.shape[3:]).swapaxes(1, 2)
    return x.reshape(n, kv_heads, m, *x.shape[4:])

  # The two key sets are scored apart and share one softmax through its max and normaliser, so
  # each dot reads its keys as stored: one [G * m, Sp] product per (prefix, kv head), which reads
  # the prefix once per group, and one [m, S] product per (row, kv head).
  q = q_bthd.reshape(n, t, kv_heads, hg, d).swapaxes(1, 2).reshape(n, kv_heads, m, d)
  s_p = jnp.einsum("pkmd,pksd->pkms", by_prefix(q), kp_bksd, preferred_element_type=jnp.float32)
  s_p = jnp.where(prefix_mask_bs[:, None, None, :], s_p * (d ** -0.5), low)
  s_c = jnp.einsum("nkmd,nksd->nkms", q, k_bksd, preferred_element_type=jnp.float32)
  own = jnp.broadcast_to(mask_bts[:, None, :, None, :], (n, 1, t, hg, mask_bts.shape[-1]))
  s_c = jnp.where(own.reshape(n, 1, m, -1), s_c * (d ** -0.5), low)
  top = jnp.maximum(by_row(jnp.max(s_p, axis=-1)), jnp.max(s_c, axis=-1))   # [n, kv_heads, m]
  e_p = jnp.exp(s_p - by_prefix(top)[..., None])
  e_c = jnp.exp(s_c - top[..., None])
  total = by_row(jnp.sum(e_p, axis=-1)) + jnp.sum(e_c, axis=-1)
  out = (by_row(jnp.einsum("pkms,pksd->pkmd", e_p.astype(vp_bksd.dtype), vp_bksd,
                           preferred_element_type=jnp.float32))
         + jnp.einsum("nkms,nksd->nkmd", e_c.astype(v_bksd.dtype), v_bksd,
                      preferred_element_type=jnp.float32))
  out = (out / total[..., None]).reshape(n, kv_heads, t, hg, d).swapaxes(1, 2)
  return out.reshape(n, t, h, d).astype(v_bksd.dtype)


class Attention(nnx.Module):
  """Multi-head self-attention with RoPE, GQA, optional q/k/v bias (Qwen2) and q/k norm (Qwen3)."""

  def __init__(self, config: ModelConfig, *, key: jax.Array, param_dtype):
    d, h, kv, dh = config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim
    kq, kk, kv_, ko = jax.random.split(key, 4)
    self.q_proj = logical_param(kq, (d, h, dh), ("embed", "q_heads", "head_dim"), param_dtype)
    self.k_proj = logical_param(kk, (d, kv, dh), ("embed", "kv_heads", "head_dim"), param_dtype)
    self.v_proj = logical_param(kv_, (d, kv, dh), ("embed", "kv_heads", "head_dim"), param_dtype)
    self.o_proj = logical_param(ko, (h, dh, d), ("q_heads", "head_dim", "embed"), param_dtype)
    if config.qkv_bias:
      self.q_bias = logical_param(None, (h, dh), ("q_heads", "head_dim"), param_dtype, "zeros")
      self.k_bias = logical_param(None, (kv, dh), ("kv_heads", "head_dim"), param_dtype, "zeros")
      self.v_bias = logical_param(None, (kv, dh), ("kv_heads", "head_dim"), param_dtype, "zeros")
    if config.qk_norm:
      self.q_norm = RMSNorm(dh, config.rms_norm_eps, param_dtype=param_dtype)
      self.k_norm = RMSNorm(dh, config.rms_norm_eps, param_dtype=param_dtype)
    self.qkv_bias = config.qkv_bias
    self.qk_norm = config.qk_norm
    self.query_chunk = config.attention_query_chunk

  def __call__(self, x_btd: jax.Array, positions_bt: jax.Array, inv_freq: np.ndarray,
               mask_bts: jax.Array, kv_cache: tuple[jax.Array, jax.Array] | None = None,
               cache_index: jax.Array | None = None, prefix=None):
    """Attends from the T tokens in `x_btd` to themselves, or to a KV cache they are written into.

    Args:
      x_btd: [batch, T, embed] normalised inputs, in the compute dtype.
      positions_bt: int[batch, T] RoPE positions of the inputs.
      inv_freq: float32[head_dim / 2] RoPE frequencies.
      mask_bts: bool[batch, T, S]; S = T without a cache, S = cache length with one.
      kv_cache: optional (k, v), each HEAD-MAJOR [batch, kv_heads, S, head_dim] (KVCache). The
        new keys/values are written at slots [cache_index, cache_index + T) and attention reads
        the whole cache (`attend_cached`).
      cache_index: int32 scalar, first cache slot of the inputs.
      prefix: optional (k, v, mask) of prefixes shared by groups of rows, [prefixes, kv_heads, Sp,
        head_dim] and bool[prefixes, Sp] (with a cache): the queries also attend to their group's
        prefix (`attend_cached_with_prefix`).

    Returns:
      (out [batch, T, embed], (k, v) the updated cache, or this call's keys/values [batch, T,
      kv_heads, head_dim] without one).
    """
    dt = x_btd.dtype
    q, k, v = self._qkv(x_btd, positions_bt, inv_freq)

    if kv_cache is None:
      out = attend(q, k, v, mask_bts, query_chunk=self.query_chunk)
    else:
      start = (0, 0, cache_index, 0)
      k = write_cache(kv_cache[0], k.transpose(0, 2, 1, 3), start)
      v = write_cache(kv_cache[1], v.transpose(0, 2, 1, 3), start)
      if prefix is None:
        out = attend_cached(q, k.astype(dt), v.astype(dt), mask_bts, query_chunk=self.query_chunk)
      else:
        kp, vp, prefix_mask = prefix
        out = attend_cached_with_prefix(q, kp.astype(dt), vp.astype(dt), prefix_mask, k.astype(dt),
                                        v.astype(dt), mask_bts)
    out = project(self, "o_proj", "bthk,hkd->btd", out)
    return out, (k, v)

  def shared_prefix(self, xp_btd: jax.Array, positions_p: jax.Array, mask_p: jax.Array,
                    xc_btd: jax.Array, positions_c: jax.Array, mask_c: jax.Array,
                    inv_freq: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """Attention of a prefix stream to itself, and of a continuation stream to [prefix | itself].

    Args:
      xp_btd: [groups, S, embed] normalised prefix inputs; positions_p int[groups, S];
        mask_p bool[groups, S, S] (the prefix's causal attention, False at its padding).
      xc_btd: [groups, P, embed] normalised continuation inputs; positions_c int[groups, P];
        mask_c bool[groups, P, S + P]: which prefix slots, then which continuation tokens, each
        continuation token attends to.
    Returns:
      (prefix out [groups, S, embed], continuation out [groups, P, embed]).
    """
    qp, kp, vp = self._qkv(xp_btd, positions_p, inv_freq)
    qc, kc, vc = self._qkv(xc_btd, positions_c, inv_freq)
    out_p = attend(qp, kp, vp, mask_p, query_chunk=self.query_chunk)
    out_c = attend(qc, jnp.concatenate([kp, kc], axis=1), jnp.concatenate([vp, vc], axis=1), mask_c,
                   query_chunk=self.query_chunk)
    return (project(self, "o_proj", "bthk,hkd->btd", out_p),
            project(self, "o_proj", "bthk,hkd->btd", out_c))

  def _qkv(self, x: jax.Array, positions_bt: jax.Array, inv_freq: np.ndarray):
    """Projected, biased, normed and rotated (q, k, v), each [batch, T, heads, head_dim]."""
    dt = x.dtype
    q = project(self, "q_proj", "btd,dhk->bthk", x)
    k = project(self, "k_proj", "btd,dhk->bthk", x)
    v = project(self, "v_proj", "btd,dhk->bthk", x)
    if self.qkv_bias:
      q = q + self.q_bias[...].astype(dt)
      k = k + self.k_bias[...].astype(dt)
      v = v + self.v_bias[...].astype(dt)
    if self.qk_norm:  # Qwen3: per-head RMSNorm before the rotation.
      q = self.q_norm(q)
      k = self.k_norm(k)
    q = with_logical_constraint(apply_rope(q, positions_bt, inv_freq),
                                ("batch", "length", "q_heads", "head_dim"))
    k = with_logical_constraint(apply_rope(k, positions_bt, inv_freq),
                                ("batch", "length", "kv_heads", "head_dim"))
    v = with_logical_constraint(v, ("batch", "length", "kv_heads", "head_dim"))
    return q, k, v


class MLP(nnx.Module):
  """SwiGLU feed-forward (Shazeer 2020): down(silu(gate(x)) * up(x))."""

  def __init__(self, config: ModelConfig, *, key: jax.Array, param_dtype):
    d, f = config.hidden_size, config.intermediate_size
    kg, ku, kd = jax.random.split(key, 3)
    self.gate_proj = logical_param(kg, (d, f), ("embed", "mlp"), param_dtype)
    self.up_proj = logical_param(ku, (d, f), ("embed", "mlp"), param_dtype)
    self.down_proj = logical_param(kd, (f, d), ("mlp", "embed"), param_dtype)

  def __call__(self, x_btd: jax.Array) -> jax.Array:
    x = x_btd
    gate = jax.nn.silu(project(self, "gate_proj", "btd,df->btf", x))
    up = project(self, "up_proj", "btd,df->btf", x)
    hidden = with_logical_constraint(gate * up, ("batch", "length", "mlp"))
    return project(self, "down_proj", "btf,fd->btd", hidden)
