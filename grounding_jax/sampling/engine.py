"""The two jitted programs of generation: prefill a prompt batch, then decode in a `lax.while_loop`.

  prefill(prompts [P, Lp])               -> prompt KV cache [P, Lp], last-position logits [P, V]
  decode(prompt KV cache [P, Lp],
         donated KV cache [P*G, Ln])      -> ids, log-probs [P*G, Ln], lengths, stop flags, cache

The group of G = num_samples samples per prompt shares one prefill and one copy of its keys and
values: rows are prompt-major (row = p * G + g), each row's cache holds only its generated tokens,
and every decode step attends to the group's prompt cache, read once per group
(Transformer.decode's `prefix`), then to the row's own slots. The prompt is run once, not G times,
and a step reads P·Lp + N·Ln cache slots instead of N·(Lp + Ln) (GRPO-shaped sampling, 8 prompts
x G = 4 of ~270 tokens: ~35 -> ~31 s per call). With G = 1 the prompt's keys and values start
the row's own [N, Lp + Ln] cache, as a plain KV cache does — unless every prompt of the batch
begins with the same tokens (an evaluation batch: one chat template and one recipe's instructions,
236 of TruthRL's ~350 prompt tokens): then `prefill_after_prefix` runs that prefix once, the rows'
caches hold only what follows it, and the decode steps read the prefix once for all rows. With
G > 1 the same prefill runs the prefix once, and `join_prefix` puts it in front of each prompt's
cache, which decoding reads once per group as before.

The decode cache is allocated once per shape and DONATED to `decode`, which returns it; `KVCachePool`
keeps it for the next call of the same shape, so steady-state generation allocates no cache memory.
Model weights are never donated (the trainer holds the same arrays); both programs take them as
`inference_state` prepares them (compute dtype, layers unstacked).

Each program is traced once per static configuration (shapes, greedy/top-k/top-p switches, number of
samples); `trace_counts()` exposes the count so tests can check that repeated calls do not recompile.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from grounding_jax.models import KVCache
from grounding_jax.models import lora
from grounding_jax.parallel import logical_sharding, with_logical_constraint
from grounding_jax.sampling import selection, stopping

_TRACES: collections.Counter = collections.Counter()
# Read the cache layout from the model's declaration rather than assuming it.
_CACHE_AXES = KVCache.LOGICAL_AXES
_BATCH_AXIS = _CACHE_AXES.index("batch")
_LENGTH_AXIS = _CACHE_AXES.index("length")


def trace_counts() -> dict[str, int]:
  """How many times each program has been traced (= compiled) in this process."""
  return dict(_TRACES)


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
  """Static (compile-time) switches of the decode program; part of the jit cache key."""
  num_samples: int
  greedy: bool
  top_k: int
  use_top_p: bool
  pad_id: int


def _constrain_cache(cache):
  return jax.tree.map(lambda x: with_logical_constraint(x, _CACHE_AXES), cache)


FUSE_MODES = ("auto", "on", "off")  # config rollout.fuse_projections


def fuse_projections_enabled(mode: str | bool) -> bool:
  """Whether the sampler fuses projections under config rollout.fuse_projections = `mode`: 'on',
  'off', or 'auto' = on a GPU only, where XLA otherwise concatenates the q/k/v (and gate/up)
  weights inside each decode step's GEMM fusion (docs/benchmarks.md: 7 % faster decode on an H200).
  A bool passes through."""
  if isinstance(mode, bool):
    return mode
  if mode not in FUSE_MODES:
    raise ValueError(f"fuse_projections={mode!r}: expected 'auto', 'on' or 'off'")
  return mode == "on" or (mode == "auto" and jax.default_backend() == "gpu")


def inference_state(model, fuse_projections: bool = False) -> tuple[nnx.GraphDef, Any]:
  """(graphdef, state) of `model` as `prefill` and `decode` take it: float parameters in the
  compute dtype, layers unstacked (Transformer.unstacked). `nnx.split(model)` itself when it is
  already so, else a copy of the weights that lives for the call.

  With `fuse_projections`, each layer's q/k/v weights are concatenated into one and gate/up into
  one (Transformer.fused_projections: 4 projection GEMMs a layer instead of 7, the same dot
  products, equal up to float rounding), here, once per call, outside the programs: concatenating
  inside the decode loop would copy the weights every step. The fused arrays replace the separate
  ones in the copy (no more memory than the cast copy), or add to the caller's arrays when no copy
  is made (compute dtype = parameter dtype, layers not scanned). LoRA adapters are folded in
  before (below), so an adapted model fuses too; a layer part that cannot fuse exactly and locally
  (a heads or mlp axis split over devices) runs unfused.

  Converted once per call, outside the programs and their loops: with bf16 compute over float32
  master weights each decode step then reads half the weight bytes, and the matmuls see the same
  bf16 weights either way, so log-probs match the trainer's. A scanned model is unstacked because
  the decode loop runs per-layer weights faster than a scan inside the loop, and eagerly, one small
  program per parameter shape, because XLA:CPU compiles the same slices inside one program slowly
  (figures in docs/benchmarks.md, "Smaller figures"). Each call then costs one pass over the weights.
  """
  dtype = jnp.dtype(model.compute_dtype)
  # LoRA adapters are folded into their weights here, in float32 before the cast (W + s·A B, one
  # small matmul per adapted weight per call): each decode step then runs the base model's program
  # at the base model's cost, instead of two extra matmuls per adapted projection and token; the
  # folded copy replaces the copy unstacking makes anyway.
  graphdef, state = nnx.split(lora.merged(model).unstacked(dtype))
  state = jax.tree.map(
      lambda x: _cast(x, dtype) if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != dtype
      else x, state)
  if fuse_projections:  # after the cast: the concatenations copy compute-dtype weights
    graphdef, state = nnx.split(nnx.merge(graphdef, state).fused_projections())
  return graphdef, state


_cast = jax.jit(lambda x, dtype: x.astype(dtype), static_argnums=1)


def _prefill(graphdef, state, prompt_ids, prompt_mask):
  """Runs the left-padded prompts through the model once.

  Args:
    prompt_ids: int32[P, Lp]; prompt_mask: bool[P, Lp] (left padding; every row has >= 1 real token).

  Returns:
    (cache with Lp slots per row, float32[P, V] logits of the last prompt position).
  """
  _TRACES["prefill"] += 1
  model = nnx.merge(graphdef, state)
  p, lp = prompt_ids.shape
  positions = jnp.maximum(jnp.cumsum(prompt_mask, axis=-1) - 1, 0).astype(jnp.int32)
  cache = _constrain_cache(model.init_cache(p, lp))
  hidden, cache = model.decode(prompt_ids, positions, cache, jnp.int32(0), prompt_mask)
  return _constrain_cache(cache), model.logits(hidden[:, -1])


prefill = jax.jit(_prefill, static_argnums=0)


def _prefill_after_prefix(graphdef, state, prefix_ids, prefix_mask, prompt_ids, prompt_mask):
  """`_prefill` for prompts that all begin with one prefix: the prefix runs once, then each row's
  remaining tokens attend to it and to themselves (Transformer.decode's `prefix`).

  Args:
    prefix_ids: int32[1, Sp]; prefix_mask: bool[1, Sp] (left padding).
    prompt_ids: int32[P, Lp] each row's tokens after the prefix; prompt_mask: bool[P, Lp] (left
      padding; every row has >= 1 real token).

  Returns:
    (prefix cache [1, Sp], cache with Lp slots per row, float32[P, V] last-position logits).
  """
  _TRACES["prefill_after_prefix"] += 1
  model = nnx.merge(graphdef, state)
  sp = prefix_ids.shape[1]
  p, lp = prompt_ids.shape
  prefix_positions = jnp.maximum(jnp.cumsum(prefix_mask, axis=-1) - 1, 0).astype(jnp.int32)
  _, prefix_cache = model.decode(prefix_ids, prefix_positions, model.init_cache(1, sp), jnp.int32(0),
                                 prefix_mask)
  positions = (jnp.sum(prefix_mask, dtype=jnp.int32)
               + jnp.maximum(jnp.cumsum(prompt_mask, axis=-1) - 1, 0)).astype(jnp.int32)
  cache = _constrain_cache(model.init_cache(p, lp))
  hidden, cache = model.decode(prompt_ids, positions, cache, jnp.int32(0), prompt_mask,
                               (prefix_cache, prefix_mask.astype(bool)))
  return prefix_cache, _constrain_cache(cache), model.logits(hidden[:, -1])


prefill_after_prefix = jax.jit(_prefill_after_prefix, static_argnums=0)


def _join_prefix(prefix_cache, prefix_mask, cache, mask):
  """Each row's prompt cache with the batch-shared prefix's in front ([P, Sp + Lp] slots and mask:
  the prefix's padding, its tokens, the row's padding, the row's tokens), for decoding G samples a
  prompt from `prefill_after_prefix`'s caches; keys keep the RoPE positions they were run at."""
  rows = mask.shape[0]
  join = lambda shared, own: jnp.concatenate(
      [jnp.broadcast_to(shared, (rows, *shared.shape[1:])), own.astype(shared.dtype)],
      axis=_LENGTH_AXIS)
  joined = KVCache(k=tuple(map(join, prefix_cache.k, cache.k)),
                   v=tuple(map(join, prefix_cache.v, cache.v)))
  mask = jnp.concatenate([jnp.broadcast_to(prefix_mask, (rows, prefix_mask.shape[1])),
                          mask.astype(bool)], axis=1)
  return _constrain_cache(joined), mask


join_prefix = jax.jit(_join_prefix)


def _decode(graphdef, config: DecodeConfig, state, cache, prompt_cache, prompt_logits, prompt_mask,
            active, key, temperature, top_p, max_new_tokens, eos_ids, stop_tables, shared=None):
  """Samples up to `max_new_tokens` tokens per row, leaving the loop once every row is done.

  Args:
    cache: KVCache [N, Ln] when G > 1, [N, Lp + Ln] when G = 1 (donated; N = P * G, Ln = the
      bucketed generation length); contents are overwritten before they are read.
    prompt_cache: KVCache [P, Lp] from `prefill`; prompt_logits: float32[P, V]; prompt_mask: bool[P, Lp].
    active: bool[N], False for batch-padding rows (they finish at once and emit padding).
    key: a PRNG key; row r draws its step-t uniform from fold_in(fold_in(key, r), t), so a row's draws
      do not depend on the batch size or the device layout.
    temperature, top_p: float32 scalars; max_new_tokens: int32 scalar <= Ln.
    eos_ids: int32[E] (-1 entries never match).
    stop_tables: stopping.StopTables or None.
    shared: None, or (KVCache [1, Sp], bool[1, Sp]) from `prefill_after_prefix` (G = 1): the prefix
      every row's prompt begins with, read once per step for all rows; prompt_cache and prompt_mask
      then hold each row's tokens after it.

  Returns:
    (tokens int32[N, Ln], logprobs float32[N, Ln], lengths int32[N], stopped bool[N], steps int32,
     cache). Tokens after a row's end are `pad_id` with log-prob 0; `stopped` rows ended on EOS or a
     stop string; `steps` is the number of decode positions run.
  """
  _TRACES["decode"] += 1
  model = nnx.merge(graphdef, state)
  g = config.num_samples
  n, s = cache.k[0].shape[_BATCH_AXIS], cache.k[0].shape[_LENGTH_AXIS]
  prompt_len = jnp.repeat(jnp.sum(prompt_mask, axis=-1), g).astype(jnp.int32)
  if shared is not None:
    if g > 1:
      raise ValueError("a batch-shared prefix is for one sample per prompt (num_samples = 1)")
    prompt_len = prompt_len + jnp.sum(shared[1], dtype=jnp.int32)
  if g > 1:  # the group's prompt cache is read by every step, never copied per row
    prefix, first_slot = (prompt_cache, prompt_mask.astype(bool)), 0
    kv_mask = jnp.ones((n, s), bool)  # slot j holds token j; the causal slot rule masks the future
  else:  # one row per prompt: the prompt's keys and values (after a shared prefix: the tokens
    # after it) start the row's own cache
    prefix, first_slot = shared, prompt_mask.shape[1]
    cache = _constrain_cache(jax.tree.map(
        lambda big, small: jax.lax.dynamic_update_slice(big, small.astype(big.dtype),
                                                        (0,) * big.ndim), cache, prompt_cache))
    kv_mask = jnp.concatenate([prompt_mask.astype(bool), jnp.ones((n, s - first_slot), bool)], 1)
  ln = s - first_slot  # generation slots
  return _sample_loop(model, config, cache, jnp.repeat(prompt_logits, g, axis=0), first_slot,
                      prompt_len, kv_mask, prefix, active, key, temperature, top_p, max_new_tokens,
                      eos_ids, stop_tables, ln)


def _sample_loop(model, config: DecodeConfig, cache, logits, first_slot, prompt_len, kv_mask, prefix,
                 active, key, temperature, top_p, max_new_tokens, eos_ids, stop_tables, ln,
                 row_limit=None):
  """The decode loop shared by `_decode` and `_continue`: token t of row r is selected from the
  carried logits, written to cache slot first_slot + t, at RoPE position prompt_len[r] + t.

  first_slot: an int (every row's slots line up) or int32[N] (a slot per row, multi-turn);
  row_limit: None, or int32[N] each row's own token limit (<= max_new_tokens).
  Returns (tokens, logprobs [N, ln], lengths, stopped, steps, cache) as `_decode`.
  """
  n = logits.shape[0]
  row_keys = jax.vmap(lambda r: jax.random.fold_in(key, r))(jnp.arange(n))

  def select(logits, t):
    u = jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(k, t)))(row_keys)
    return selection.select_tokens(logits, u, temperature, top_p, greedy=config.greedy,
                                   top_k=config.top_k, use_top_p=config.use_top_p)

  def record(carry, t, tokens, logprobs):
    done, stopped, out_tokens, out_logprobs, lengths, tail = carry
    alive = ~done
    out_tokens = out_tokens.at[:, t].set(jnp.where(alive, tokens, config.pad_id))
    out_logprobs = out_logprobs.at[:, t].set(jnp.where(alive, logprobs, 0.0))
    lengths = lengths + alive.astype(jnp.int32)
    hit = jnp.any(tokens[:, None] == eos_ids[None, :], axis=-1)
    if stop_tables is not None:
      stop_hit, new_tail = stopping.stop_step(tail, tokens, stop_tables)
      hit = hit | stop_hit
      tail = jnp.where(alive[:, None], new_tail, tail)
    stopped = stopped | (alive & hit)
    done = done | stopped
    if row_limit is not None:  # a row whose budget is spent ends, truncated
      done = done | (lengths >= row_limit)
    return (done, stopped, out_tokens, out_logprobs, lengths, tail)

  tail = (stopping.initial_tail(n, stop_tables) if stop_tables is not None
          else jnp.zeros((n, 1), jnp.int16))
  carry = (~active, jnp.zeros((n,), bool), jnp.full((n, ln), config.pad_id, jnp.int32),
           jnp.zeros((n, ln), jnp.float32), jnp.zeros((n,), jnp.int32), tail)

  def cond(loop):
    t, _, _, carry = loop
    return (t < max_new_tokens) & ~jnp.all(carry[0])

  def body(loop):
    # Select token t from the carried logits, then run it (cache slot first_slot + t, position
    # prompt_len + t) to get the logits of token t + 1. One body holds the only copy of the model
    # and of the selection code, which halves compile time; the price is one unused forward pass
    # after the last token.
    t, cache, logits, carry = loop
    tokens, logprobs = select(logits, t)
    carry = record(carry, t, tokens, logprobs)
    hidden, cache = model.decode(tokens[:, None], (prompt_len + t)[:, None], cache, first_slot + t,
                                 kv_mask, prefix)
    return t + 1, _constrain_cache(cache), model.logits(hidden[:, 0]), carry

  t, cache, _, carry = jax.lax.while_loop(cond, body, (jnp.int32(0), cache, logits, carry))
  _, stopped, out_tokens, out_logprobs, lengths, _ = carry
  return out_tokens, out_logprobs, lengths, stopped, t, cache


decode = jax.jit(_decode, static_argnums=(0, 1), donate_argnums=(3,))


def _continue(graphdef, config: DecodeConfig, state, cache, prompt_cache, prompt_mask, used,
              chunk_ids, chunk_len, active, key, temperature, top_p, row_limit, eos_ids, stop_tables):
  """The next turn of a multi-turn rollout, from the cache `decode` (or `_continue`) returned:
  each row's inserted tokens (a tool's result) are run at the row's own next slots, as a prefill
  chunk, then sampling goes on from the chunk's last logits. Nothing decoded before is run again.

  Args:
    cache, prompt_cache, prompt_mask: as `_decode` (cache donated; no batch-shared prefix).
    used: int32[N] completion tokens each row holds so far (its next slot after the prompt).
    chunk_ids: int32[N, C] each row's inserted tokens, RIGHT-padded (C a bucket: one program per
      bucket); chunk_len: int32[N] their counts (>= 1 on active rows).
    active: bool[N] rows that go on (the others' writes land past the cache and are dropped).
    row_limit: int32[N] each row's new-token budget for this turn.
    key: this turn's PRNG key (the caller folds in the turn number).

  Returns:
    (tokens, logprobs [N, Ln], lengths, stopped, steps, cache) of this turn, columns from 0.
  """
  _TRACES["continue"] += 1
  model = nnx.merge(graphdef, state)
  g = config.num_samples
  n, s = cache.k[0].shape[_BATCH_AXIS], cache.k[0].shape[_LENGTH_AXIS]
  prompt_len = jnp.repeat(jnp.sum(prompt_mask, axis=-1), g).astype(jnp.int32)
  if g > 1:  # the layout of `_decode`: the group's prompt as a prefix, the row's tokens from slot 0
    prefix, first_slot = (prompt_cache, prompt_mask.astype(bool)), 0
    kv_mask = jnp.ones((n, s), bool)
  else:  # the prompt in the row's first slots
    prefix, first_slot = None, prompt_mask.shape[1]
    kv_mask = jnp.concatenate([prompt_mask.astype(bool), jnp.ones((n, s - first_slot), bool)], 1)
  slot = jnp.where(active, first_slot + used, s).astype(jnp.int32)
  position = prompt_len + used
  c = chunk_ids.shape[1]
  hidden, cache = model.decode(chunk_ids, position[:, None] + jnp.arange(c)[None, :], cache, slot,
                               kv_mask, prefix)
  last = hidden[jnp.arange(n), jnp.maximum(chunk_len - 1, 0)]
  steps = jnp.max(jnp.where(active, row_limit, 0))
  return _sample_loop(model, config, _constrain_cache(cache), model.logits(last), slot + chunk_len,
                      position + chunk_len, kv_mask, prefix, active, key, temperature, top_p, steps,
                      eos_ids, stop_tables, s - first_slot, row_limit)


continue_decode = jax.jit(_continue, static_argnums=(0, 1), donate_argnums=(3,))


class KVCachePool:
  """Keeps the most recent decode cache so the next call of the same shape reuses its memory.

  Holding one cache trades memory for allocation: SmolLM2-135M at 32 rows x 256 slots is ~380 MB in
  float32. `release()` drops it (e.g. before a memory-hungry training phase).
  """

  def __init__(self):
    self._key: Any = None
    self._cache = None

  @staticmethod
  def _key_of(model, batch_size, length, mesh):
    c = model.config
    return (batch_size, length, c.num_layers, c.num_kv_heads, c.head_dim,
            jnp.dtype(model.compute_dtype).name, mesh)

  def take(self, model, batch_size: int, length: int, mesh) -> Any:
    """A [batch_size, length] cache (contents undefined) placed for `mesh`; the pool forgets it."""
    key = self._key_of(model, batch_size, length, mesh)
    if self._key == key and self._cache is not None:
      cache, self._cache, self._key = self._cache, None, None
      return cache
    self.release()
    shapes = jax.eval_shape(lambda: model.init_cache(batch_size, length))
    if mesh is None:
      return jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)
    # Created in place by a jitted zeros: no full-size host buffer, and valid on a multi-host mesh.
    shardings = jax.tree.map(lambda a: logical_sharding(_CACHE_AXES, a.shape, mesh), shapes)
    return jax.jit(lambda: jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), shapes),
                   out_shardings=shardings)()

  def give_back(self, model, cache, mesh) -> None:
    """Keeps `cache` (returned by `decode`) for the next call of the same shape."""
    shape = cache.k[0].shape
    self._key = self._key_of(model, shape[_BATCH_AXIS], shape[_LENGTH_AXIS], mesh)
    self._cache = cache

  def release(self) -> None:
    """Drops the kept cache."""
    self._key, self._cache = None, None


POOL = KVCachePool()
