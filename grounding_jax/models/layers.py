"""The parts of a decoder block: RMSNorm, grouped-query attention with RoPE, and the SwiGLU MLP.

The attention block projects, rotates and caches; the attention itself (which kernel, chunked or
not, with a shared prefix or not) is `models.attention.attention`, chosen by ModelConfig's
attention_implementation and attention_query_chunk.

For inference, `Attention.fuse_projections` and `MLP.fuse_projections` replace a layer's q/k/v
weights by their concatenation and gate/up by theirs (vLLM's QKVParallelLinear and
MergedColumnParallelLinear): one GEMM each, 4 a layer instead of 7, over the same products. Only
the sampler's copy of the weights is fused (Transformer.fused_projections); the stored, trained and
exported layout is always the separate one.

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

from grounding_jax.models import packed
from grounding_jax.models.attention import attention
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


class FusedWeight(nnx.Variable):
  """A concatenation of trained weights, built for inference (`fuse_projections`): never trained,
  checkpointed or exported, and not an nnx.Param, so no parameter filter picks it up."""


def _adapted(module: nnx.Module, names: Sequence[str]) -> bool:
  """Whether any of module.<name> has a LoRA adapter (module.<name>_lora, models/lora.py)."""
  return any(getattr(module, name + "_lora", None) is not None for name in names)


def _split_over_devices(w: jax.Array, axis: int) -> bool:
  """Whether `w`'s `axis` is split over devices (False under a trace, where placement is XLA's)."""
  if isinstance(w, jax.core.Tracer):
    return False
  return w.sharding.shard_shape(w.shape)[axis] != w.shape[axis]


def _fusable(module: nnx.Module, names: Sequence[str], axis: int, ndim: int) -> bool:
  """Whether module's weights `names` (one layer's: `ndim` axes) can be concatenated along `axis`
  into one GEMM computing what theirs do, each device alone: no LoRA adapter on them (its low-rank
  term is not in the weight; lora.merged folds it in), and the axis whole on every device
  (concatenating shards split over devices would interleave them; vLLM's per-shard layout, which
  avoids that, is not built here)."""
  weights = [getattr(module, name)[...] for name in names]
  if any(w.ndim != ndim for w in weights):
    raise ValueError(f"fuse_projections takes one layer's weights (Transformer.unstacked()), not "
                     f"shapes {[w.shape for w in weights]} of {names}")
  return not _adapted(module, names) and not any(_split_over_devices(w, axis) for w in weights)


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
  """einsum(spec, x, w) in x's dtype, its products accumulated in float32.

  On CPU with bfloat16 compute the dot emits float32 and is cast back: the form XLA:CPU hands to
  its bf16 kernels (AMX / AVX512-BF16), where a bf16-output dot ran slower than float32. On GPU and
  TPU the dot emits x's dtype directly (cuBLAS and the MXU accumulate bf16 products in float32
  anyway, so the forward values are the same): a float32-output dot gets a float32 cotangent, and
  its backward dots then run in float32 — on an H200 the 1.5 B GRPO update spent 37 % of its time
  in TF32 GEMMs and their casts that way. Nothing changes in float32.
  """
  w = w.astype(x.dtype)
  if x.dtype == jnp.float32 or jax.default_backend() != "cpu":
    return jnp.einsum(spec, x, w)
  return jnp.einsum(spec, x, w, preferred_element_type=jnp.float32).astype(x.dtype)


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


def write_cache_rows(cache: jax.Array, new_bhtd: jax.Array, start_b: jax.Array) -> jax.Array:
  """`write_cache` with a first slot per row: row b's T new slots go to [start_b[b], start_b[b] + T)
  of cache [B, H, S, D]; slots at or past S are dropped (a multi-turn row's padding near its end,
  or a finished row parked at S). The same 16-bit integer view as `write_cache`."""
  new = new_bhtd.astype(cache.dtype).transpose(0, 2, 1, 3)  # [B, T, H, D]: the scatter's layout
  slots = start_b[:, None] + jnp.arange(new.shape[1])[None, :]  # [B, T]
  rows = jnp.arange(new.shape[0])[:, None]
  scatter = lambda c, n: c.at[rows, :, slots, :].set(n, mode="drop")
  if cache.dtype.itemsize != 2 or not jnp.issubdtype(cache.dtype, jnp.floating):
    return scatter(cache, new)
  bits = lambda a: jax.lax.bitcast_convert_type(a, jnp.uint16)
  return jax.lax.bitcast_convert_type(scatter(bits(cache), bits(new)), cache.dtype)


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
    self.implementation = config.attention_implementation

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
        the whole cache.
      cache_index: int32 scalar, first cache slot of the inputs; or int32[batch], one per row
        (a multi-turn rollout's rows continue at different slots; sampling/multiturn.py).
      prefix: optional (k, v, mask) of prefixes shared by groups of rows, [prefixes, kv_heads, Sp,
        head_dim] and bool[prefixes, Sp] (with a cache): the queries also attend to their group's
        prefix.

    Returns:
      (out [batch, T, embed], (k, v) the updated cache, or this call's keys/values [batch, T,
      kv_heads, head_dim] without one).
    """
    dt = x_btd.dtype
    q, k, v = self._qkv(x_btd, positions_bt, inv_freq)

    if kv_cache is None:
      out = self._attention(q, k, v, mask_bts)
    else:
      if jnp.ndim(cache_index) == 1:
        k = write_cache_rows(kv_cache[0], k.transpose(0, 2, 1, 3), cache_index)
        v = write_cache_rows(kv_cache[1], v.transpose(0, 2, 1, 3), cache_index)
      else:
        start = (0, 0, cache_index, 0)
        k = write_cache(kv_cache[0], k.transpose(0, 2, 1, 3), start)
        v = write_cache(kv_cache[1], v.transpose(0, 2, 1, 3), start)
      if prefix is not None:
        kp, vp, prefix_mask = prefix
        prefix = (kp.astype(dt), vp.astype(dt), prefix_mask)
      out = self._attention(q, k.astype(dt), v.astype(dt), mask_bts, kv_layout="bksd",
                            prefix=prefix)
    out = project(self, "o_proj", "bthk,hkd->btd", out)
    return out, (k, v)

  def shared_prefix(self, xp_btd: jax.Array, positions_p: jax.Array, mask_p: jax.Array,
                    prefix_mask: jax.Array, xc_btd: jax.Array, positions_c: jax.Array,
                    mask_c: jax.Array | packed.PackedRows, inv_freq: np.ndarray
                    ) -> tuple[jax.Array, jax.Array]:
    """Attention of a prefix stream to itself, and of a continuation stream to [prefix | itself].

    Args:
      xp_btd: [groups, S, embed] normalised prefix inputs, or [1, S, embed]: one prefix that
        every group continues; positions_p int[groups, S];
        mask_p bool[groups, S, S] (the prefix's causal attention, False at its padding);
        prefix_mask bool[groups, S], True at the prefix's real tokens, which every continuation
        token attends to.
      xc_btd: [groups, P, embed] normalised continuation inputs; positions_c int[groups, P];
        mask_c bool[groups, P, P]: which continuation tokens each continuation token attends to;
        or the stream as rows or blocks (models/packed.py, which attends them).
    Returns:
      (prefix out [groups, S, embed], continuation out [groups, P, embed]).
    """
    qp, kp, vp = self._qkv(xp_btd, positions_p, inv_freq)
    qc, kc, vc = self._qkv(xc_btd, positions_c, inv_freq)
    out_p = self._attention(qp, kp, vp, mask_p)
    if isinstance(mask_c, packed.LAYOUTS):
      out_c = packed.attend(self._attention, qc, kc, vc, mask_c, (kp, vp, prefix_mask))
    else:
      if kp.shape[0] != qc.shape[0]:  # one prefix leads every group: its keys are read by each
        rows = qc.shape[0]
        kp, vp = (jnp.broadcast_to(x, (rows, *x.shape[1:])) for x in (kp, vp))
        prefix_mask = jnp.broadcast_to(prefix_mask, (rows, prefix_mask.shape[1]))
      out_c = self._attention(qc, kc, vc, mask_c, prefix=(kp, vp, prefix_mask))
    return (project(self, "o_proj", "bthk,hkd->btd", out_p),
            project(self, "o_proj", "bthk,hkd->btd", out_c))

  def _attention(self, q, k, v, mask_bts, **kwargs):
    """`attention.attention` as ModelConfig chooses it (attention_implementation, _query_chunk)."""
    return attention(q, k, v, mask_bts, query_chunk=self.query_chunk,
                     implementation=self.implementation, **kwargs)

  def fuse_projections(self) -> bool:
    """For inference, in place: q_proj, k_proj and v_proj become one
    qkv_proj [embed, q_heads + 2·kv_heads, head_dim] (their biases one qkv_proj_bias), which `_qkv`
    runs as one GEMM and splits by heads. Exact: every output is the same dot product as before
    (its sum possibly blocked otherwise by the wider GEMM: equal up to float rounding).

    Returns whether it fused; False leaves the module as it was where fusing would not be exact
    or local (`_fusable`: a LoRA adapter on q/k/v, or a heads axis split over devices).
    """
    names = ("q_proj", "k_proj", "v_proj")
    if not _fusable(self, names, axis=1, ndim=3):
      return False
    weights = [getattr(self, name)[...] for name in names]
    q_heads, kv_heads = weights[0].shape[1], weights[1].shape[1]
    self.qkv_sections = (q_heads, q_heads + kv_heads)  # where q ends and k ends on the heads axis
    self.qkv_proj = FusedWeight(jnp.concatenate(weights, axis=1))
    if self.qkv_bias:
      biases = ("q_bias", "k_bias", "v_bias")
      self.qkv_proj_bias = FusedWeight(jnp.concatenate([getattr(self, b)[...] for b in biases], 0))
      names += biases
    for name in names:  # the sampler's copy holds the fused weights only
      delattr(self, name)
    return True

  def _qkv(self, x: jax.Array, positions_bt: jax.Array, inv_freq: np.ndarray):
    """Projected, biased, normed and rotated (q, k, v), each [batch, T, heads, head_dim]."""
    dt = x.dtype
    if hasattr(self, "qkv_proj"):  # fused (fuse_projections): one GEMM, split by heads
      qkv = matmul("btd,dhk->bthk", x, self.qkv_proj[...])
      if self.qkv_bias:
        qkv = qkv + self.qkv_proj_bias[...].astype(dt)
      q, k, v = jnp.split(qkv, self.qkv_sections, axis=2)
    else:
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

  def fuse_projections(self) -> bool:
    """For inference, in place: gate_proj and up_proj become one gate_up_proj [embed, 2·mlp], one
    GEMM whose output `__call__` splits in two. Exact, and refused (False, the module unchanged)
    as `Attention.fuse_projections` is: a LoRA adapter on either, or an mlp axis split over
    devices."""
    names = ("gate_proj", "up_proj")
    if not _fusable(self, names, axis=1, ndim=2):
      return False
    self.gate_up_proj = FusedWeight(jnp.concatenate([getattr(self, n)[...] for n in names], 1))
    for name in names:
      delattr(self, name)
    return True

  def __call__(self, x_btd: jax.Array) -> jax.Array:
    x = x_btd
    if hasattr(self, "gate_up_proj"):  # fused (fuse_projections): one GEMM, split in two
      gate, up = jnp.split(matmul("btd,df->btf", x, self.gate_up_proj[...]), 2, axis=-1)
    else:
      gate = project(self, "gate_proj", "btd,df->btf", x)
      up = project(self, "up_proj", "btd,df->btf", x)
    hidden = with_logical_constraint(jax.nn.silu(gate) * up, ("batch", "length", "mlp"))
    return project(self, "down_proj", "btf,fd->btd", hidden)
