"""One decoder-only transformer for Llama 3.x / SmolLM2, Qwen2 / Qwen2.5 and Qwen3, in Flax NNX.

    x = embed[input_ids]
    for each layer:  x = x + attn(rmsnorm(x));  x = x + mlp(rmsnorm(x))
    logits = rmsnorm(x) @ lm_head          # lm_head = embed.T when embeddings are tied

Two entry points share the layers: `__call__`/`hidden_states` run a whole (left-padded) batch, and
`decode` runs T new tokens against a KV cache (prefill: T = prompt length; sampling: T = 1). Both are
pure functions of their inputs with static shapes, written to be jitted.

Attention inside a block is one call, `models.attention.attention`; which kernel runs it (and whether
long sequences run in query chunks) is ModelConfig's attention_implementation and
attention_query_chunk, never the model's business.

With `scan_layers` (the default) the layers are one Block whose parameters carry a leading layer
axis, run by one `lax.scan`: XLA compiles the layer body once instead of once per layer.
`unstacked()` gives the same model as a list of blocks, which a many-step decode loop runs faster
(see its docstring).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from grounding_jax.models import packed
from grounding_jax.models.config import ModelConfig
from grounding_jax.models.layers import MLP, Attention, RMSNorm, logical_param
from grounding_jax.models.rope import inverse_frequencies
from grounding_jax.parallel import with_logical_constraint

_ACTIVATION = ("batch", "length", "embed")  # logical names of the residual stream [B, T, D]

# What a rematerialised layer keeps for the backward pass (Transformer.remat_policy).
_REMAT_POLICIES = {
    "full": None,  # only the layer input: the backward pass reruns the whole layer
    # The outputs of the weight matmuls (q/k/v/o, gate/up/down projections): the backward pass
    # recomputes only norms, RoPE, attention scores and activations. Per layer and token this keeps
    # (2·q_heads + 2·kv_heads)·head_dim + 2·mlp + embed floats — far below what makes
    # un-rematerialised training run out of memory (every activation, and the attention
    # probabilities, [heads, T, T] up to ModelConfig.attention_query_chunk tokens) — and skips
    # recomputing the matmuls, which are most of a layer's FLOPs. Measure before choosing it
    # (launch/bench_grpo_step.py): on a CPU the stored outputs can cost more than the recomputation.
    "save_dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class KVCache:
  """Keys and values of every layer: `k[layer]`, `v[layer]` are [batch, kv_heads, max_length, head_dim].

  Head-major, so each (row, kv head) is one contiguous [max_length, head_dim] matrix that a decode
  step's attention dots read in place (attention.KV_LAYOUTS, "bksd"). One array per layer, also for
  a scanned model: a decode step that reads and writes a layer's slice of one stacked [layers, ...]
  cache inside a scan copies that slice, while per-layer arrays are updated in place.
  """
  k: tuple[jax.Array, ...]
  v: tuple[jax.Array, ...]

  LOGICAL_AXES: ClassVar[tuple[str, ...]] = ("batch", "kv_heads", "length", "head_dim")


class Block(nnx.Module):
  """Pre-norm decoder layer: attention then SwiGLU MLP, each added to the residual stream."""

  def __init__(self, config: ModelConfig, *, key: jax.Array, param_dtype):
    attn_key, mlp_key = jax.random.split(key)
    self.input_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, param_dtype=param_dtype)
    self.attn = Attention(config, key=attn_key, param_dtype=param_dtype)
    self.post_attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, param_dtype=param_dtype)
    self.mlp = MLP(config, key=mlp_key, param_dtype=param_dtype)

  def __call__(self, x_btd, positions_bt, inv_freq, mask_bts, kv_cache=None, cache_index=None,
               prefix=None):
    h, kv = self.attn(self.input_norm(x_btd), positions_bt, inv_freq, mask_bts, kv_cache, cache_index,
                      prefix)
    x_btd = with_logical_constraint(x_btd + h, _ACTIVATION)
    x_btd = with_logical_constraint(x_btd + self.mlp(self.post_attn_norm(x_btd)), _ACTIVATION)
    return x_btd, kv

  def shared_prefix(self, xs, positions_p, mask_p, prefix_mask, positions_c, mask_c, inv_freq):
    """The block over `xs` = (prefix stream [groups, S, D], continuation stream [groups, P, D]); the
    continuations attend to their group's prefix and to themselves (Attention.shared_prefix)."""
    xp, xc = xs
    hp, hc = self.attn.shared_prefix(self.input_norm(xp), positions_p, mask_p, prefix_mask,
                                     self.input_norm(xc), positions_c, mask_c, inv_freq)
    out = []
    for x, h in ((xp, hp), (xc, hc)):
      x = with_logical_constraint(x + h, _ACTIVATION)
      out.append(with_logical_constraint(x + self.mlp(self.post_attn_norm(x)), _ACTIVATION))
    return tuple(out)


class Transformer(nnx.Module):
  """Decoder-only language model built from a `ModelConfig`.

  Attributes:
    config: the architecture.
    param_dtype: dtype parameters are stored in (float32 for training).
    compute_dtype: dtype of matmuls and activations (bfloat16 on accelerators); logits are float32.
      Read at call time (embeddings are cast to it and every layer follows), so it may be reassigned.
    remat: recompute each layer's activations in the backward pass (saves memory when training).
    remat_policy: what a rematerialised layer keeps: "full" (only its input) or "save_dots" (also
      its weight-matmul outputs, so the backward pass reruns only the cheap parts); see
      _REMAT_POLICIES.
    scan_layers: the layers are one Block over stacked parameters ([layers, ...] each, logical
      axis "layers") run by `lax.scan` — one layer body to compile — instead of a list of Blocks.
      Both give the same numbers; checkpoints (orbax) of the two layouts differ.
    source_path: the HF folder the weights came from (set by `load_pretrained`), or None.
  """

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, param_dtype=jnp.float32,
               compute_dtype=jnp.float32, remat: bool = False, remat_policy: str = "full",
               scan_layers: bool = True):
    if remat_policy not in _REMAT_POLICIES:
      raise ValueError(f"remat_policy={remat_policy!r}; expected one of {sorted(_REMAT_POLICIES)}")
    self.config = config
    self.param_dtype = param_dtype
    self.compute_dtype = compute_dtype
    self.remat = remat
    self.remat_policy = remat_policy
    self.scan_layers = scan_layers
    self.source_path: str | None = None
    # One draw from `rngs`, split per weight: each Rngs draw is a counter update, which is slow to
    # trace hundreds of times under nnx.eval_shape (load_pretrained builds the model abstractly).
    embed_key, head_key, *layer_keys = jax.random.split(rngs.params(), config.num_layers + 2)
    self.embed = logical_param(embed_key, (config.vocab_size, config.hidden_size),
                               ("vocab", "embed"), param_dtype)
    if scan_layers:  # one Block, each parameter stacked over the layers (its names get "layers")
      self.layers = nnx.vmap(lambda k: Block(config, key=k, param_dtype=param_dtype),
                             transform_metadata={nnx.PARTITION_NAME: "layers"})(
                                 jnp.stack(layer_keys))
    else:
      self.layers = nnx.List([Block(config, key=k, param_dtype=param_dtype) for k in layer_keys])
    self.final_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, param_dtype=param_dtype)
    if not config.tie_word_embeddings:
      self.lm_head = logical_param(head_key, (config.hidden_size, config.vocab_size),
                                   ("embed", "vocab"), param_dtype)

  # --------------------------------------------------------------------------------------------
  # Full-sequence forward
  # --------------------------------------------------------------------------------------------

  def __call__(self, input_ids: jax.Array, attention_mask: jax.Array, *,
               positions: jax.Array | None = None) -> jax.Array:
    """float32[batch, T, vocab] next-token logits.

    Args:
      input_ids: int32[batch, T] token ids, LEFT-padded.
      attention_mask: bool[batch, T], False at padding.
      positions: int32[batch, T] RoPE positions; default cumsum(mask) - 1 clipped at 0, so each
        row's real tokens sit at positions 0..n-1 whatever its padding.
    """
    return self.logits(self.hidden_states(input_ids, attention_mask, positions=positions))

  def hidden_states(self, input_ids: jax.Array, attention_mask: jax.Array, *,
                    positions: jax.Array | None = None) -> jax.Array:
    """[batch, T, embed] final-norm outputs in compute_dtype (arguments as in `__call__`)."""
    attention_mask = attention_mask.astype(bool)
    if positions is None:
      positions = jnp.maximum(jnp.cumsum(attention_mask, axis=-1) - 1, 0)
    t = input_ids.shape[1]
    causal_tt = jnp.tril(jnp.ones((t, t), bool))
    mask_bts = causal_tt[None] & attention_mask[:, None, :]   # key must be real and not in the future
    x, _ = self._run_layers(input_ids, positions, mask_bts)
    return x

  def hidden_states_shared_prefix(self, prefix_ids: jax.Array, prefix_mask: jax.Array,
                                  ids: jax.Array, positions: jax.Array, segment_ids: jax.Array, *,
                                  rows: tuple[int, int] | None = None, shared: int = 0
                                  ) -> tuple[jax.Array, jax.Array]:
    """`hidden_states` of several continuations of one prefix per group, the prefix run once.

    GRPO's G completions of a prompt all continue the same prompt. Instead of G rows
    [prompt | completion], a prefix stream runs each prompt once, and a continuation stream holds
    the group's completions packed one after another; a completion token attends to every real
    prompt token and to the earlier tokens of its own completion. The backward pass sums the
    completions' gradients into the one prompt pass, so the result equals the per-row forward
    exactly while running groups · (S + P) tokens instead of rows · (S + T).

    Args:
      prefix_ids: int32[groups, S] LEFT-padded prefixes; prefix_mask: bool[groups, S]. One prefix
        ([1, S]) may lead every group: it runs once and each group's stream attends to it.
      ids: int32[groups, P] each group's continuations, packed.
      positions: int32[groups, P] their RoPE positions (the prefix's length + offset in the
        continuation).
      segment_ids: int32[groups, P] which continuation a token belongs to; packed.SHARED_SEGMENT =
        a token every later token of its group attends to (the rest of a prompt after a prefix that all
        groups share, logprobs.completion_logprobs); other negatives = padding.
      rows: (G, L) when each stream is [shared rest | G completions of at most L tokens, in
        segment order | padding]: attention may then run the completions as rows
        (ModelConfig.packed_attention, models/packed.py); None = always one mask over the stream.
      shared: R >= the shared rest's columns in any stream (with `rows`).
    Returns:
      (prefix hidden [groups, S, embed], continuation hidden [groups, P, embed]), final-norm
      outputs in compute_dtype; prefix position S − 1 predicts every continuation's first token.
    """
    prefix_mask = prefix_mask.astype(bool)
    s = prefix_ids.shape[1]
    positions_p = jnp.maximum(jnp.cumsum(prefix_mask, axis=-1) - 1, 0)
    mask_p = jnp.tril(jnp.ones((s, s), bool))[None] & prefix_mask[:, None, :]
    mask_c = packed.continuation_mask(self.config.packed_attention, segment_ids, prefix=s,
                                      rows=rows, shared=shared)
    inv_freq = inverse_frequencies(self.config)
    xs = (self._embed(prefix_ids), self._embed(ids))
    xs, _ = self._over_layers(
        lambda b, x, _: (b.shared_prefix(x, positions_p, mask_p, prefix_mask, positions, mask_c,
                                         inv_freq), None),
        xs, remat=self.remat)
    return self.final_norm(xs[0]), self.final_norm(xs[1])

  def lm_head_kernel(self) -> jax.Array:
    """[embed, vocab] output projection in compute_dtype (the embedding transposed when tied).

    Callers that need log-probs of a few tokens can multiply by vocab slices of it instead of
    materialising [batch, T, vocab] logits.
    """
    kernel = self.embed[...].T if self.config.tie_word_embeddings else self.lm_head[...]
    return kernel.astype(self.compute_dtype)

  def logits(self, hidden: jax.Array) -> jax.Array:
    """float32[..., vocab] logits of hidden states [..., embed] (accumulated in float32)."""
    return jnp.einsum("...d,dv->...v", hidden.astype(self.compute_dtype), self.lm_head_kernel(),
                      preferred_element_type=jnp.float32)

  # --------------------------------------------------------------------------------------------
  # Incremental decoding with a KV cache
  # --------------------------------------------------------------------------------------------

  def init_cache(self, batch_size: int, max_length: int, dtype=None) -> KVCache:
    """An all-zero KVCache of `max_length` slots per row (dtype default: compute_dtype)."""
    c = self.config
    shape = (batch_size, c.num_kv_heads, max_length, c.head_dim)
    dtype = dtype or self.compute_dtype
    zeros = tuple(jnp.zeros(shape, dtype) for _ in range(c.num_layers))
    return KVCache(k=zeros, v=tuple(jnp.zeros(shape, dtype) for _ in range(c.num_layers)))

  def decode(self, input_ids: jax.Array, positions: jax.Array, cache: KVCache,
             cache_index: jax.Array, kv_mask: jax.Array,
             prefix: tuple[KVCache, jax.Array] | None = None) -> tuple[jax.Array, KVCache]:
    """Runs T new tokens per row against the cache.

    Args:
      input_ids: int32[batch, T] new tokens (T = prompt length for prefill, 1 per sampling step).
      positions: int32[batch, T] their RoPE positions.
      cache: KVCache with S slots per row.
      cache_index: int32 scalar; the new keys/values go to slots [cache_index, cache_index + T).
        Or int32[batch], a first slot per row (slots at or past S are dropped); query i of row b
        is then at slot cache_index[b] + i.
      kv_mask: bool[batch, S], True at slots holding real tokens (including the new ones).
      prefix: optional (KVCache [prefixes, Sp], bool[prefixes, Sp] real-token mask) of prefixes
        that groups of batch / prefixes consecutive rows continue (a GRPO group's prompt, or the
        instructions every prompt of an evaluation batch begins with, prefilled once). Each row
        then attends to its group's whole prefix, read once per group, and to its own cache, which
        holds only the tokens after the prefix (its slot 0 follows the prefix).

    Returns:
      (hidden [batch, T, embed] after the final norm, updated KVCache). Query i (slot
      cache_index + i) attends to slot j iff j <= cache_index + i and kv_mask[b, j].
    """
    t = input_ids.shape[1]
    s = cache.k[0].shape[KVCache.LOGICAL_AXES.index("length")]
    if jnp.ndim(cache_index) == 1:  # a first slot per row: causal by each row's own slots
      query_slot = cache_index[:, None] + jnp.arange(t)[None, :]  # [batch, T]
      mask_bts = ((jnp.arange(s)[None, None, :] <= query_slot[:, :, None])
                  & kv_mask.astype(bool)[:, None, :])
    else:
      query_slot = cache_index + jnp.arange(t)
      mask_bts = (jnp.arange(s)[None, :] <= query_slot[:, None])[None] & kv_mask.astype(bool)[:, None, :]
    x, new_kv = self._run_layers(input_ids, positions, mask_bts, cache, cache_index, prefix)
    return x, KVCache(k=tuple(k for k, _ in new_kv), v=tuple(v for _, v in new_kv))

  def unstacked(self, dtype=None) -> "Transformer":
    """This model with a list of per-layer Blocks (slices of the stacked parameters; a copy of
    them, with floats cast to `dtype` if given); itself, uncast, when its layers are not scanned.
    Works eagerly and inside a trace.

    For code that runs the model many times inside one program, such as the sampler's decode loop:
    slicing the stacked parameters once, before the loop, keeps each step as fast as an unrolled
    model's, where a scan (or slices taken inside the loop) reads every weight through a copy.
    """
    if not self.scan_layers:
      return self
    graphdef, state = nnx.split(self)
    model = nnx.merge(graphdef, state)
    model.layers = nnx.List(layer_blocks(self.layers, self.config.num_layers, dtype))
    model.scan_layers = False
    return model

  def fused_projections(self) -> "Transformer":
    """This model with each layer's q/k/v projections run as one GEMM and gate/up as one
    (Attention / MLP.fuse_projections: 4 projection GEMMs a layer instead of 7, the same dot
    products, equal up to float rounding), for inference. A new module: its fused weights are new
    arrays, the others shared; the argument is unchanged. Built once before a decode loop, never
    inside it (each concatenation copies its weights). A layer part that cannot fuse exactly keeps
    its separate weights (a LoRA adapter: fold it in first with lora.merged; a heads or mlp axis
    split over devices); `projections_fused()` says whether every part fused.

    Raises:
      ValueError: the layers are scanned (stacked); fuse `unstacked()`'s model.
    """
    if self.scan_layers:
      raise ValueError("fused_projections needs per-layer weights: call it on model.unstacked().")
    graphdef, state = nnx.split(self)
    model = nnx.merge(graphdef, state)
    for block in model.layers:
      block.attn.fuse_projections()
      block.mlp.fuse_projections()
    return model

  def projections_fused(self) -> bool:
    """Whether every layer runs its q/k/v and gate/up projections fused (`fused_projections`)."""
    return not self.scan_layers and all(
        hasattr(b.attn, "qkv_proj") and hasattr(b.mlp, "gate_up_proj") for b in self.layers)

  # --------------------------------------------------------------------------------------------

  def _run_layers(self, input_ids, positions, mask_bts, cache: KVCache | None = None,
                  cache_index=None, prefix=None):
    """Embeds, runs every block (against `cache` if given), applies the final norm.

    Returns (hidden [B, T, D], per-layer updated (k, v) — empty without a cache).
    """
    inv_freq = inverse_frequencies(self.config)
    x = self._embed(input_ids)
    if cache is None:
      x, _ = self._over_layers(lambda b, x_, _: (b(x_, positions, inv_freq, mask_bts)[0], None), x,
                               remat=self.remat)
      return self.final_norm(x), []
    per_layer = [(k, v, None if prefix is None else (prefix[0].k[i], prefix[0].v[i], prefix[1]))
                 for i, (k, v) in enumerate(zip(cache.k, cache.v))]
    x, new_kv = self._over_layers(
        lambda b, x_, kvp: b(x_, positions, inv_freq, mask_bts, kvp[:2], cache_index, kvp[2]),
        x, per_layer)
    return self.final_norm(x), new_kv

  def _embed(self, input_ids):
    x = jnp.take(self.embed[...], input_ids, axis=0).astype(self.compute_dtype)
    return with_logical_constraint(x, _ACTIVATION)

  def _over_layers(self, call: Callable, carry: Any, per_layer: list | None = None, *,
                   remat: bool = False) -> tuple[Any, list]:
    """`carry, out = call(block, carry, per_layer[i])` for every layer i in order.

    Scanned layers run as one lax.scan over the stacked parameters (and `per_layer`, stacked);
    unrolled ones as a Python loop. With `remat`, each layer keeps only its inputs (and what
    remat_policy saves) for the backward pass and recomputes the rest (`_rematerialised`).

    Returns:
      (final carry, [out of layer i for every i]).
    """
    n = self.config.num_layers
    per_layer = [None] * n if per_layer is None else per_layer
    if remat:
      call = _rematerialised(call, _REMAT_POLICIES[self.remat_policy])
    if not self.scan_layers:
      outs = []
      for block, inputs in zip(self.layers, per_layer):
        carry, out = call(block, carry, inputs)
        outs.append(out)
      return carry, outs
    block_def, stacked = nnx.split(self.layers)

    def body(carry, xs):
      state, inputs = xs
      return call(nnx.merge(block_def, state), carry, inputs)

    stacked_inputs = jax.tree.map(lambda *a: jnp.stack(a), *per_layer)
    carry, outs = jax.lax.scan(body, carry, (stacked, stacked_inputs))
    return carry, [jax.tree.map(lambda a, i=i: a[i], outs) for i in range(n)]


def _rematerialised(call: Callable, policy) -> Callable:
  """`call(block, carry, inputs)` under jax.checkpoint: the backward pass keeps only the layer's
  inputs (and what `policy` saves) and recomputes the rest.

  jax.checkpoint over the block's split state, not nnx.remat: nnx.remat writes the block's state
  back after the call, which fails when the model was merged inside another transform's trace
  (the reference log-prob pass runs the model inside lax.map).
  """

  def wrapped(block, carry, inputs):
    block_def, state = nnx.split(block)
    run = lambda state, carry, inputs: call(nnx.merge(block_def, state), carry, inputs)
    return jax.checkpoint(run, policy=policy)(state, carry, inputs)

  return wrapped


def layer_blocks(stacked_block: Block, num_layers: int, dtype=None) -> list[Block]:
  """The per-layer Blocks of a scanned model's stacked Block: slices of its parameters (floats cast
  to `dtype` if given), whose logical names drop the leading "layers"."""
  block_def, state = nnx.split(stacked_block)

  def layer(i):
    def take(var):
      names = var.get_metadata().get("out_sharding")
      out = var.replace(_layer_slice(var.get_value(), i, dtype))
      if names:
        out.set_metadata(out_sharding=tuple(names[1:]))
      return out
    return jax.tree.map(take, state, is_leaf=lambda x: isinstance(x, nnx.Variable))

  return [nnx.merge(block_def, layer(i)) for i in range(num_layers)]


@functools.partial(jax.jit, static_argnums=2)
def _layer_slice(stacked: jax.Array, i, dtype) -> jax.Array:
  """stacked[i] (cast to `dtype` if floating). Jitted with a traced index: called eagerly, it
  compiles one program per parameter shape, not one per (shape, layer) — XLA:CPU takes seconds
  for SmolLM2's 270 slices compiled apart or in one program."""
  out = jax.lax.dynamic_index_in_dim(stacked, i, keepdims=False)
  return out.astype(dtype) if dtype is not None and jnp.issubdtype(out.dtype, jnp.floating) else out
