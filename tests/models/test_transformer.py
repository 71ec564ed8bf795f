"""Transformer forward and KV-cache decoding against transformers (torch, float32)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx

from grounding_jax.models import KVCache, Transformer, load_pretrained

# Larger init than HF's 0.02 so attention is sharp and a RoPE / masking error moves logits by O(1)
# (with 0.02 a missing llama3 scaling shifts logits by only ~1e-3).
_INIT = dict(initializer_range=0.2)
_LOGICAL_NAMES = {"vocab", "embed", "q_heads", "kv_heads", "head_dim", "mlp", "norm"}


@nnx.jit
def _forward(model, ids, mask):
  return model(ids, mask)  # jitted: a 2-layer model compiles faster than it runs op by op


def _left_padded_batch(vocab_size, lengths, width, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(3, vocab_size, (len(lengths), width)).astype(np.int32)
  mask = np.zeros((len(lengths), width), bool)
  for row, n in enumerate(lengths):
    mask[row, width - n:] = True
  ids[~mask] = 0
  return ids, mask


def _hf_logits(folder, ids, mask):
  model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
  positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
  with torch.no_grad():
    return model(input_ids=torch.from_numpy(ids).long(), attention_mask=torch.from_numpy(mask).long(),
                 position_ids=torch.from_numpy(positions).long()).logits.numpy()


@pytest.mark.parametrize("family,overrides,query_chunk", [
    ("llama", {}, None),                             # tied, GQA 4/2, llama3 RoPE scaling
    ("llama", dict(tie_word_embeddings=False, num_key_value_heads=1), None),  # untied, MQA
    ("qwen2", {}, None),                             # q/k/v bias, untied
    ("qwen3", {}, None),                             # q/k norm, head_dim 16 != 32/4
    ("llama", {}, 40),                               # queries in 3 chunks of 34 (2 padded)
])
def test_logits_match_transformers_on_left_padded_batch(tiny_checkpoint, family, overrides,
                                                        query_chunk):
  folder = tiny_checkpoint(family, **_INIT, **overrides)
  # Width 100 > original_max_position_embeddings (64), so llama3 scaling's low band is exercised.
  ids, mask = _left_padded_batch(96, lengths=[100, 61, 7], width=100)
  ours = np.asarray(_forward(load_pretrained(folder, attention_query_chunk=query_chunk), ids, mask))
  ref = _hf_logits(folder, ids, mask)
  assert ours.dtype == np.float32
  assert np.abs(ref[mask]).max() > 1.0  # non-trivial logits
  np.testing.assert_array_less(np.abs(ours - ref)[mask].max(), 1e-4)


def test_decode_with_cache_matches_full_forward(tiny_checkpoint):
  model = load_pretrained(tiny_checkpoint("qwen3", **_INIT))
  prompt_ids, prompt_mask = _left_padded_batch(96, lengths=[6, 3], width=6, seed=1)
  steps = np.random.default_rng(2).integers(3, 96, (2, 5)).astype(np.int32)
  full_ids = np.concatenate([prompt_ids, steps], axis=1)
  full_mask = np.concatenate([prompt_mask, np.ones_like(steps, bool)], axis=1)
  expected = np.asarray(_forward(model, full_ids, full_mask))

  graphdef, state = nnx.split(model)

  @jax.jit
  def decode(state, ids, positions, cache, index, kv_mask):
    model = nnx.merge(graphdef, state)
    hidden, cache = model.decode(ids, positions, cache, index, kv_mask)
    return model.logits(hidden), cache

  max_len = 16  # more slots than tokens: unused slots must stay invisible
  kv_mask = np.zeros((2, max_len), bool)
  kv_mask[:, :6] = prompt_mask
  positions = np.maximum(np.cumsum(prompt_mask, axis=1) - 1, 0)
  cache = model.init_cache(2, max_len)
  step_logits, cache = decode(state, prompt_ids, positions, cache, jnp.int32(0), kv_mask)  # prefill
  got = [step_logits]
  for i in range(4):
    kv_mask[:, 6 + i] = True
    step_logits, cache = decode(state, steps[:, i:i + 1], positions[:, -1:] + 1 + i, cache,
                                jnp.int32(6 + i), kv_mask)
    got.append(step_logits)
  assert isinstance(cache, KVCache) and cache.k[0].shape == (2, 2, max_len, 16)
  got = np.concatenate([np.asarray(g) for g in got], axis=1)  # logits for tokens 0..9
  n = got.shape[1]
  np.testing.assert_allclose(got[full_mask[:, :n]], expected[:, :n][full_mask[:, :n]], atol=1e-5)


@pytest.mark.parametrize("scan_layers", [True, False])
def test_every_param_has_contract_axis_names_and_partition_specs(scan_layers):
  from grounding_jax.models.config import ModelConfig
  from conftest import _TINY
  for family in ("llama", "qwen2", "qwen3"):
    config = ModelConfig.from_hf(transformers.AutoConfig.for_model(**_TINY[family]).to_dict())
    abstract = nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(0), scan_layers=scan_layers))
    state = nnx.state(abstract, nnx.Param)
    specs = jax.tree.leaves(nnx.get_partition_spec(state),
                            is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
    params = jax.tree_util.tree_flatten_with_path(
        state, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]
    assert len(specs) == len(params) > 0
    for (path, param), spec in zip(params, specs):
      names = param.get_metadata()["out_sharding"]
      in_layer = jax.tree_util.keystr(path).startswith("['layers']")
      # A scanned model's layer parameters lead with the (replicated) layer axis.
      if scan_layers and in_layer:
        assert names[0] == "layers" and param.shape[0] == config.num_layers
        names = names[1:]
      assert len(names) == len(param.shape) - (scan_layers and in_layer)
      assert set(names) <= _LOGICAL_NAMES
      assert tuple(spec)[-len(names):] == tuple(names)


@pytest.mark.parametrize("scan_layers", [True, False])
def test_remat_is_applied_and_bf16_compute_keeps_float32_logits(tiny_checkpoint, scan_layers):
  folder = tiny_checkpoint("llama", **_INIT)
  ids, mask = _left_padded_batch(96, lengths=[12, 5], width=12)
  plain = load_pretrained(folder, scan_layers=scan_layers)
  remat = load_pretrained(folder, remat=True, scan_layers=scan_layers)
  ref = np.asarray(_forward(plain, ids, mask))
  np.testing.assert_array_equal(np.asarray(_forward(remat, ids, mask)), ref)

  # Each layer sits in a checkpoint (jax's "remat2" primitive), so the backward pass recomputes it:
  # the one scanned layer body, or every unrolled layer. (Tracing only; jax guarantees
  # checkpointed gradients equal plain ones.)
  def n_checkpoints(model):
    graphdef, state = nnx.split(model)
    jaxpr = jax.make_jaxpr(lambda s: nnx.merge(graphdef, s)(jnp.asarray(ids), jnp.asarray(mask)))
    return len(re.findall(r"\b(?:remat\d*|checkpoint)\[", str(jaxpr(state))))
  assert n_checkpoints(remat) == (1 if scan_layers else remat.config.num_layers)
  assert n_checkpoints(plain) == 0

  # bf16 activations with float32 parameters: float32 logits, close to the float32 forward.
  plain.compute_dtype = jnp.bfloat16
  low = _forward(plain, ids, mask)
  assert low.dtype == jnp.float32
  assert np.abs(np.asarray(low) - ref)[mask].max() < 0.1 * np.abs(ref).max()


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_write_cache_equals_dynamic_update_slice(dtype):
  """The integer-view update of a 16-bit cache writes exactly what dynamic_update_slice would."""
  from grounding_jax.models import layers  # pylint: disable=g-import-not-at-top
  cache = jax.random.normal(jax.random.key(0), (2, 6, 3, 4)).astype(dtype)
  new = jax.random.normal(jax.random.key(1), (2, 1, 3, 4), jnp.float32)
  got = jax.jit(layers.write_cache, static_argnums=2)(cache, new, (0, 4, 0, 0))
  want = jax.lax.dynamic_update_slice(cache, new.astype(dtype), (0, 4, 0, 0))
  assert got.dtype == dtype
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_write_cache_rows_writes_each_rows_slots_and_drops_past_the_end(dtype):
  """A first slot per row (multi-turn continuation): row b's slots [start_b, start_b + T) get its
  keys/values, as a per-row dynamic_update_slice would, and slots at or past S are dropped."""
  from grounding_jax.models import layers  # pylint: disable=g-import-not-at-top
  cache = jax.random.normal(jax.random.key(0), (3, 2, 6, 4)).astype(dtype)  # [B, H, S, D]
  new = jax.random.normal(jax.random.key(1), (3, 2, 3, 4), jnp.float32)   # T = 3
  got = np.asarray(jax.jit(layers.write_cache_rows)(cache, new, jnp.array([0, 2, 5])), np.float32)
  want = np.asarray(cache, np.float32).copy()
  new = np.asarray(new.astype(dtype), np.float32)
  want[0, :, 0:3], want[1, :, 2:5], want[2, :, 5:6] = new[0], new[1], new[2, :, :1]
  np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("family,query_chunk", [("llama", None), ("qwen2", None), ("qwen3", None),
                                               ("llama", 5)])  # chunks: prefix 2 x 5, packed 4 x 4
def test_shared_prefix_forward_matches_transformers_per_row(tiny_checkpoint, family, query_chunk):
  """Groups of continuations packed after one prefix run once (GRPO's shared prompts) give, at every
  real token, transformers' logits of the rows [prefix | continuation] run one by one."""
  folder = tiny_checkpoint(family, **_INIT)
  g, width, t, packed = 3, 9, 5, 16
  p_ids, p_mask = _left_padded_batch(96, lengths=[9, 4], width=width, seed=1)
  c_len = np.array([5, 1, 3, 4, 5, 2])
  c_mask = np.arange(t)[None] < c_len[:, None]
  c_ids = np.where(c_mask, np.random.default_rng(2).integers(3, 96, (6, t)), 0).astype(np.int32)
  ids, pos, seg = (np.zeros((2, packed), np.int32) for _ in range(3))
  seg[:] = -1
  where = []  # (group, packed column) of each row's tokens
  for grp in range(2):
    col = 0
    for row in range(grp * g, grp * g + g):
      n = c_len[row]
      ids[grp, col:col + n] = c_ids[row, :n]
      pos[grp, col:col + n] = p_mask[grp].sum() + np.arange(n)
      seg[grp, col:col + n] = row - grp * g
      where.append((grp, col))
      col += n
  model = load_pretrained(folder, attention_query_chunk=query_chunk)
  hp, hc = nnx.jit(lambda m, *a: m.hidden_states_shared_prefix(*a))(model, p_ids, p_mask, ids, pos,
                                                                      seg)
  assert hp.shape == (2, width, model.config.hidden_size) and hc.shape == (2, packed, hp.shape[-1])
  ref = _hf_logits(folder, np.concatenate([np.repeat(p_ids, g, 0), c_ids], 1),
                   np.concatenate([np.repeat(p_mask, g, 0), c_mask], 1))
  ours_p, ours_c = np.asarray(model.logits(hp)), np.asarray(model.logits(hc))
  for row, (grp, col) in enumerate(where):
    real = p_mask[grp]
    np.testing.assert_array_less(np.abs(ours_p[grp] - ref[row, :width])[real].max(), 1e-4)
    n = c_len[row]
    np.testing.assert_array_less(np.abs(ours_c[grp, col:col + n] - ref[row, width:width + n]).max(),
                                 1e-4)
