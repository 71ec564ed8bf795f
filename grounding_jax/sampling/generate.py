"""Host side of generation: prompts -> bucketed device arrays -> the jitted engine -> `Generation`.

  gen = generate(model, tokenizer, prompts, max_new_tokens=256, temperature=1.0, num_samples=8,
                 stop=("</answer>",), seed=step_key)
  gen.texts[p * 8 + g], gen.token_ids, gen.logprobs, gen.completion_mask, gen.truncated

`generate_ids` is the same engine for callers that already hold left-padded prompt ids (the GRPO
rollout), so nothing is re-tokenised.

Log-probs: log_softmax(logits / T) of each sampled token over the full vocabulary — after temperature,
before top-k/top-p truncation; for greedy decoding (T = 0), log_softmax(logits). The trainer computes
its log-probs with the same temperature (models/logprobs.py).

Compiled programs: the prompt length (longest real prompt) and max_new_tokens are each rounded up to a
bucket in {16, 20, 24, 28, 32, 40, 48, 56, 64, 80, ...} (four buckets per octave, <= 25% padding), and the
batch to a multiple of the mesh's batch shards. A run therefore compiles one prefill program per
(batch, prompt bucket) and one decode program per (batch, prompt bucket, generation bucket, greedy /
top-k / top-p on-off switches, group size, stop-table shape): prompts between 100 and 1,000 tokens at a
fixed batch and settings give at most 14 of each. The temperature, the top-p value (once top-p < 1) and
the key are traced values: changing them never recompiles.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import pathlib
import time
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grounding_jax.parallel import (DEFAULT_RULES, gather_hosts, global_to_host_local,
                                    host_local_to_global, logical_to_spec, spanned_processes,
                                    use_mesh)
from grounding_jax.sampling import engine, stopping
from grounding_jax.sampling.prompts import (bucket_length, common_prefix_length, left_pad,
                                            tokenize_prompts)


@dataclasses.dataclass
class Generation:
  """Sampled completions, grouped by prompt (prompt-major: row = prompt_index * num_samples + g).

  Attributes:
    texts: [N] decoded completions (special tokens skipped; cut right after a stop string, which is
      kept). Empty list when `generate_ids` was called without a tokenizer.
    token_ids: int32[N, L] completion ids, L = max_new_tokens; pad id after each row's end. The EOS
      token that ended a row is included (it is part of what the policy chose).
    logprobs: float32[N, L] log_softmax(logits / T)[token] (T = 1 for greedy); 0 after the end.
    lengths: int32[N] number of completion tokens (including a final EOS).
    truncated: bool[N] the row hit max_new_tokens without EOS or a stop string.
    completion_mask: bool[N, L] True for the first `lengths` tokens.
    prompt_ids: int32[P, Lp] the left-padded prompts actually run (Lp is the bucketed length).
    prompt_mask: bool[P, Lp] True at real prompt tokens.
    policy_mask: bool[N, L] True at the tokens the policy sampled, False at tokens a tool inserted
      (sampling/multiturn.py); None when every completion token is sampled (one turn).
    tool_calls: [N] each row's executed tool calls in order (multiturn.ToolCall); None for one turn.
  """
  texts: list[str]
  token_ids: np.ndarray
  logprobs: np.ndarray
  lengths: np.ndarray
  truncated: np.ndarray
  completion_mask: np.ndarray
  prompt_ids: np.ndarray
  prompt_mask: np.ndarray
  policy_mask: np.ndarray | None = None
  tool_calls: list | None = None


_LAST_STATS: dict = {}
_STATS_LOG: list[dict] = []  # every call's stats since the last drain_stats()
_STATS_LOG_MAX = 4096  # a process that never drains keeps the newest calls only


def last_stats() -> dict:
  """Timings of the most recent call: prefill_seconds, decode_seconds, decode_steps, batch sizes,
  and whether every layer's projections ran fused (fused_projections)."""
  return dict(_LAST_STATS)


def record_stats(**stats) -> None:
  """Makes `stats` the most recent call's (last_stats) and logs them (drain_stats)."""
  _LAST_STATS.clear()
  _LAST_STATS.update(stats)
  _STATS_LOG.append(dict(_LAST_STATS))
  del _STATS_LOG[:-_STATS_LOG_MAX]


def drain_stats() -> list[dict]:
  """The last_stats() of every call since the previous drain (oldest first), and forgets them:
  e.g. the GRPO trainer's FLOPs of a step's rollout, which may call the sampler several times."""
  out = list(_STATS_LOG)
  _STATS_LOG.clear()
  return out


def release_kv_cache() -> None:
  """Frees the decode KV cache kept between calls (it is re-allocated on the next call)."""
  engine.POOL.release()


def default_eos_ids(model, tokenizer=None) -> tuple[int, ...]:
  """EOS ids from the model config, its folder's generation_config.json, and the tokenizer."""
  found: list[int] = []

  def add(value):
    for v in (value if isinstance(value, (list, tuple)) else [value]):
      if v is not None and int(v) not in found:
        found.append(int(v))

  add(getattr(model.config, "eos_token_id", None))
  source = getattr(model, "source_path", None)
  if source and (pathlib.Path(source) / "generation_config.json").is_file():
    add(json.loads((pathlib.Path(source) / "generation_config.json").read_text()).get("eos_token_id"))
  if tokenizer is not None:
    add(tokenizer.eos_token_id)
  return tuple(found)


def _as_key(seed) -> jax.Array:
  if isinstance(seed, (int, np.integer)):
    return jax.random.key(int(seed))
  seed = jnp.asarray(seed)
  if jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
    return seed
  if seed.dtype == jnp.uint32 and seed.shape == (2,):
    return jax.random.wrap_key_data(seed)
  raise ValueError(f"seed must be an int or a PRNG key (jax.random.key / PRNGKey); got dtype "
                   f"{seed.dtype} shape {seed.shape}.")


def _batch_shards(mesh, rules) -> int:
  if mesh is None:
    return 1
  axes = logical_to_spec(("batch",), rules)[0]
  axes = (axes,) if isinstance(axes, str) else (axes or ())
  return math.prod(mesh.shape[a] for a in axes if a in mesh.shape)


def _host_row_multiple(mesh, rules) -> int:
  """Rows each host pads its prompts to a multiple of, so the global batch splits over the shards."""
  shards, hosts = _batch_shards(mesh, rules), spanned_processes(mesh)
  return shards // hosts if shards % hosts == 0 else shards


def _hosts_max(value: int, mesh) -> int:
  """max(value) over the processes of a multi-host mesh (their rows form one batch); else value."""
  return int(gather_hosts(np.array([value])).max()) if spanned_processes(mesh) > 1 else value


def _check_args(max_new_tokens, temperature, top_p, top_k, num_samples):
  if int(max_new_tokens) < 1:
    raise ValueError(f"max_new_tokens={max_new_tokens} must be >= 1.")
  if temperature < 0:
    raise ValueError(f"temperature={temperature} must be >= 0 (0 = greedy).")
  if not 0.0 < top_p <= 1.0:
    raise ValueError(f"top_p={top_p} must be in (0, 1] (1 = off).")
  if top_k < 0:
    raise ValueError(f"top_k={top_k} must be >= 0 (0 = off).")
  if num_samples < 1:
    raise ValueError(f"num_samples={num_samples} must be >= 1.")


def _left_pad_to_bucket(prompt_ids, prompt_mask, pad_id: int, mesh=None):
  ids = np.asarray(prompt_ids, np.int32)
  mask = np.asarray(prompt_mask).astype(bool)
  if ids.ndim != 2 or ids.shape != mask.shape:
    raise ValueError(f"prompt_ids {ids.shape} and prompt_mask {mask.shape} must both be [P, Lp].")
  real = mask.sum(axis=1)
  bad = np.flatnonzero((real == 0) | np.any(np.diff(mask.astype(np.int8), axis=1) < 0, axis=1))
  if bad.size:
    raise ValueError(f"prompt rows {bad[:5].tolist()} are empty or not LEFT-padded (mask must be "
                     "0...0 1...1); pad prompts on the left (tokenizer.padding_side='left').")
  width = int(real.max())
  lp = bucket_length(_hosts_max(width, mesh))
  out_ids = np.full((ids.shape[0], lp), pad_id, np.int32)
  out_mask = np.zeros((ids.shape[0], lp), bool)
  out_ids[:, lp - width:] = ids[:, ids.shape[1] - width:]
  out_mask[:, lp - width:] = mask[:, mask.shape[1] - width:]
  out_ids[~out_mask] = pad_id
  return out_ids, out_mask


def _split_shared_prefix(ids: np.ndarray, mask: np.ndarray, pad_id: int, min_tokens: int):
  """(prefix ids [1, Sp], its mask, each row's remaining ids [P, Lr], their mask), every part
  left-padded to a bucket, when the left-padded prompts' real tokens all begin with the same
  `min_tokens` or more tokens; else None. Every row keeps at least its last token, whose logits
  start its completion."""
  rows = [r[m] for r, m in zip(ids, mask)]
  common = min(common_prefix_length(ids, mask), min(len(r) for r in rows) - 1)
  if common < min_tokens:
    return None
  prefix_ids, prefix_mask = _left_pad_to_bucket(rows[0][None, :common], np.ones((1, common), bool),
                                                pad_id)
  rest = left_pad([r[common:] for r in rows], pad_id)
  return (prefix_ids, prefix_mask, *_left_pad_to_bucket(*rest, pad_id))


def _with_filler_rows(ids: np.ndarray, mask: np.ndarray, rows: int, pad_id: int):
  """`ids`/`mask` with rows appended up to `rows`: one real (pad) token each, as generate_ids'
  batch-padding rows, inactive from the start."""
  extra = rows - ids.shape[0]
  if extra <= 0:
    return ids, mask
  ids = np.concatenate([ids, np.full((extra, ids.shape[1]), pad_id, np.int32)])
  mask = np.concatenate([mask, np.zeros((extra, mask.shape[1]), bool)])
  mask[-extra:, -1] = True
  return ids, mask


_STATIC_VIEWS: dict = {}  # graphdef -> the model over abstract arrays (config, dtypes, cache shapes)


def split_model(model):
  """(graphdef, state, view) of a Transformer or of its (graphdef, state) split.

  A training loop passes its split so that nothing is merged and re-split every step; `view` is then
  the model over abstract (shape-only) arrays, built once per graphdef, which is all the static
  information generation reads (config, compute dtype, cache shapes).
  """
  if not isinstance(model, tuple):
    graphdef, state = nnx.split(model)
    return graphdef, state, model
  graphdef, state = model
  view = _STATIC_VIEWS.get(graphdef)
  if view is None:
    shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
    view = _STATIC_VIEWS[graphdef] = nnx.merge(graphdef, shapes)
  return graphdef, state, view


def generate_ids(model, prompt_ids, prompt_mask, *, max_new_tokens: int,
                 eos_ids: Sequence[int] | None = None, pad_id: int | None = None,
                 temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, num_samples: int = 1,
                 stop: Sequence[str] = (), tokenizer=None, seed: int | jax.Array = 0, mesh=None,
                 rules=None, shared_prefix_min_tokens: int = 0,
                 fuse_projections: bool = False) -> Generation:
  """Samples completions for already-tokenised, left-padded prompts.

  Args:
    model: a grounding_jax Transformer, or its (graphdef, state) split (`split_model`); weights are
      read, never donated. With `mesh`, its parameters must already be placed on that mesh
      (load_pretrained(mesh=...) or shard_model).
    prompt_ids: int[P, Lp] left-padded prompt ids; prompt_mask: bool[P, Lp], True at real tokens.
    max_new_tokens: the generation limit per row.
    eos_ids: ids that end a row (kept in the output); default `default_eos_ids(model, tokenizer)`.
    pad_id: emitted after a row ends; default tokenizer / config pad id, else the first EOS id, else 0.
    temperature: 0 = greedy; else the softmax temperature.
    top_p, top_k: nucleus / top-k filtering (1.0 / 0 = off), applied after temperature.
    num_samples: samples per prompt (the GRPO group size); the prompt is prefilled once per group.
    stop: stop strings (need `tokenizer`); a row ends with the token that completes one.
    tokenizer: decodes `texts` and defines the bytes of each token for stop strings.
    seed: int or PRNG key. Pass a fresh key every call; row r's draws depend only on (key, r).
    mesh: a jax Mesh; batch rows are split over its (data, fsdp) axes, heads over tensor (`rules`).
      On a mesh spanning several processes, every process calls with ITS prompts (same count on
      each); they run as one global batch (process p's rows after those of processes < p, which
      fixes each row's key) and each process gets back only its own rows.
    rules: logical-axis rules; default grounding_jax.parallel.DEFAULT_RULES.
    shared_prefix_min_tokens: without a mesh, when every prompt begins with the same tokens (a
      recipe's chat template and instructions) and there are at least this many of them, they are
      prefilled once for the batch (`engine.prefill_after_prefix`); with one sample per prompt
      every decode step then reads them once, with groups of samples (GRPO) each prompt's cache
      is the prefix's joined to its own (`engine.join_prefix`), read once per group as without
      it. 0 = off. The same computation in another order (outputs equal up to float rounding);
      `Generation.prompt_ids` are the whole prompts either way.
    fuse_projections: run each layer's q/k/v projections as one GEMM and gate/up as one, on
      weights concatenated once for this call (engine.inference_state): the same numbers up to
      float rounding; off by default until measured faster on a GPU (docs/benchmarks.md).
      last_stats()["fused_projections"] says whether every layer ran fused.

  Returns:
    Generation with N = P * num_samples rows (prompt-major) and L = max_new_tokens.
  """
  _check_args(max_new_tokens, temperature, top_p, top_k, num_samples)
  live = not isinstance(model, tuple)  # else `model` becomes an abstract view of the split
  graphdef, state, model = split_model(model)
  if stop and tokenizer is None:
    raise ValueError(f"stop={tuple(stop)!r} needs a tokenizer to know each token's text.")
  stop = tuple(stop)
  rules = DEFAULT_RULES if rules is None else rules
  eos_ids = default_eos_ids(model, tokenizer) if eos_ids is None else tuple(int(e) for e in eos_ids)
  if pad_id is None:
    candidates = [getattr(tokenizer, "pad_token_id", None), model.config.pad_token_id,
                  *eos_ids, 0]
    pad_id = next(int(c) for c in candidates if c is not None)

  ids, mask = _left_pad_to_bucket(prompt_ids, prompt_mask, pad_id, mesh)
  num_prompts, lp = ids.shape
  shards = _host_row_multiple(mesh, rules)  # per host; the global batch is hosts x padded_prompts
  padded_prompts = -(-_hosts_max(num_prompts, mesh) // shards) * shards
  ids, mask = _with_filler_rows(ids, mask, padded_prompts, pad_id)
  g = int(num_samples)
  split = None
  if shared_prefix_min_tokens > 0 and mesh is None:
    split = _split_shared_prefix(ids[:num_prompts], mask[:num_prompts], pad_id,
                                 int(shared_prefix_min_tokens))
  n = padded_prompts * g
  active = np.arange(n) < num_prompts * g
  ln = bucket_length(int(max_new_tokens))
  greedy = temperature == 0.0
  config = engine.DecodeConfig(num_samples=g, greedy=greedy, top_k=int(top_k),
                               use_top_p=(not greedy) and top_p < 1.0, pad_id=int(pad_id))
  eos = np.asarray(list(eos_ids) or [-1], np.int32)
  tables = stopping.build_stop_tables(tokenizer, stop, model.config.vocab_size) if stop else None

  context = use_mesh(mesh, rules) if mesh is not None else contextlib.nullcontext()
  with context:
    # The sampler's weights (compute dtype, layers unstacked); a split is merged for it (no copy).
    graphdef, state = engine.inference_state(model if live else nnx.merge(graphdef, state),
                                             fuse_projections)
    fused = fuse_projections and nnx.merge(graphdef, state).projections_fused()
    if mesh is not None:  # each host's rows become its slice of the global batch
      put = lambda x, names: host_local_to_global(x, names, mesh, rules=rules)
      ids_d, mask_d = put(ids, ("batch", "length")), put(mask, ("batch", "length"))
      active_d = put(active, ("batch",))
    else:
      ids_d, mask_d, active_d = jnp.asarray(ids), jnp.asarray(mask), jnp.asarray(active)
    shared = None
    start = time.perf_counter()
    if split is None:
      prompt_cache, prompt_logits = engine.prefill(graphdef, state, ids_d, mask_d)
    else:  # the rows' tokens after the common prefix become the prompts the engine sees
      prefix_ids, prefix_mask, rest_ids, rest_mask = split
      rest_ids, rest_mask = _with_filler_rows(rest_ids, rest_mask, padded_prompts, pad_id)
      ids_d, mask_d = jnp.asarray(rest_ids), jnp.asarray(rest_mask)
      prefix_cache, prompt_cache, prompt_logits = engine.prefill_after_prefix(
          graphdef, state, jnp.asarray(prefix_ids), jnp.asarray(prefix_mask), ids_d, mask_d)
      shared = (prefix_cache, jnp.asarray(prefix_mask))
      lp = rest_ids.shape[1]
      if g > 1:  # a group reads its prompt's cache once a step: the prefix becomes part of it
        prompt_cache, mask_d = engine.join_prefix(prefix_cache, shared[1], prompt_cache, mask_d)
        shared = None
    jax.block_until_ready(prompt_logits)
    prefill_seconds = time.perf_counter() - start
    cache = engine.POOL.take(model, n * spanned_processes(mesh), ln if g > 1 else lp + ln, mesh)
    start = time.perf_counter()
    tokens, logprobs, lengths, stopped, steps, cache = engine.decode(
        graphdef, config, state, cache, prompt_cache, prompt_logits, mask_d, active_d, _as_key(seed),
        jnp.float32(1.0 if greedy else temperature), jnp.float32(top_p), jnp.int32(max_new_tokens),
        jnp.asarray(eos), tables, shared)
    engine.POOL.give_back(model, cache, mesh)
    tokens, logprobs, lengths, stopped, steps = (  # this host's rows only
        global_to_host_local(x) for x in (tokens, logprobs, lengths, stopped, steps))
    decode_seconds = time.perf_counter() - start
  record_stats(prefill_seconds=prefill_seconds, decode_seconds=decode_seconds,
               decode_steps=int(steps), prompt_rows=padded_prompts, rows=n,
               prompt_bucket=lp, new_tokens_bucket=ln,
               shared_prefix_bucket=0 if split is None else split[0].shape[1],
               shared_prefix_copies=padded_prompts if split is not None and g > 1 else 1,
               fused_projections=bool(fused))

  rows, width = num_prompts * g, int(max_new_tokens)
  tokens = np.array(tokens[:rows, :width])
  logprobs = np.array(logprobs[:rows, :width])
  lengths = np.array(lengths[:rows])
  truncated = ~np.asarray(stopped[:rows])
  texts: list[str] = []
  if tokenizer is not None:
    for r in range(rows):
      if stop:
        text, keep = stopping.truncate_at_stop(tokenizer, tokens[r, :lengths[r]], stop)
        if keep < lengths[r] or any(s in text for s in stop):
          tokens[r, keep:], logprobs[r, keep:] = pad_id, 0.0
          lengths[r], truncated[r] = keep, False
      else:
        text = tokenizer.decode(tokens[r, :lengths[r]], skip_special_tokens=True)
      texts.append(text)
  completion_mask = np.arange(width)[None, :] < lengths[:, None]
  return Generation(texts=texts, token_ids=tokens, logprobs=logprobs, lengths=lengths,
                    truncated=truncated, completion_mask=completion_mask,
                    prompt_ids=ids[:num_prompts], prompt_mask=mask[:num_prompts])


def generate(model, tokenizer, prompts: Sequence[str], *, max_new_tokens: int,
             temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, num_samples: int = 1,
             stop: Sequence[str] = (), seed: int | jax.Array = 0, mesh=None, **kwargs) -> Generation:
  """Samples `num_samples` completions for each rendered prompt text.

  Args:
    model: a grounding_jax Transformer.
    tokenizer: its tokenizer (ids, EOS, pad and the text of each token).
    prompts: [P] prompt texts, chat template already applied by the data layer.
    max_new_tokens, temperature, top_p, top_k, num_samples, stop, seed, mesh: see `generate_ids`.
    **kwargs: passed to `generate_ids` (eos_ids, pad_id, rules).

  Returns:
    Generation: texts [P * num_samples], token_ids / logprobs int32 / float32 [N, max_new_tokens],
    lengths, truncated, completion_mask, prompt_ids, prompt_mask; rows prompt-major. Log-probs are
    log_softmax(logits / T) of the sampled tokens (before top-k/top-p; T = 1 when greedy).
  """
  ids, mask = tokenize_prompts(tokenizer, prompts)
  return generate_ids(model, ids, mask, max_new_tokens=max_new_tokens, temperature=temperature,
                      top_p=top_p, top_k=top_k, num_samples=num_samples, stop=stop,
                      tokenizer=tokenizer, seed=seed, mesh=mesh, **kwargs)
