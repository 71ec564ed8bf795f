"""Scanned layers (Transformer.scan_layers, the default) compute what unrolled layers compute: logits,
decoding (greedy tokens and log-probs), the shared-prefix forward, gradients with and without remat,
and HF checkpoints that transformers reads."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx

from grounding_jax import sampling
from grounding_jax.models import load_pretrained, save_pretrained
from grounding_jax.models import logprobs

_INIT = dict(initializer_range=0.2)  # sharp attention: a layer mix-up moves logits by O(1)


def _stack_layers(unrolled_tree):
  """An unrolled model's per-layer subtree {0: {...}, 1: {...}} stacked like a scanned model's."""
  layers = [unrolled_tree[i] for i in sorted(unrolled_tree)]
  return jax.tree.map(lambda *a: np.stack(a), *layers)


def _assert_trees_close(scanned, unrolled, rel=0.0):
  """Parameter-shaped trees (states or gradients) of a scanned and an unrolled model agree: in each
  array, max |difference| <= rel · max |value| (float32 sums in another order round differently)."""
  scanned, unrolled = jax.device_get(scanned), jax.device_get(unrolled)
  assert jax.tree.structure(scanned["layers"]) == jax.tree.structure(_stack_layers(
      unrolled["layers"]))
  pairs = [(scanned["layers"], _stack_layers(unrolled["layers"]))]
  pairs += [(scanned[k], unrolled[k]) for k in scanned if k != "layers"]
  for a, b in pairs:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
      assert x.shape == y.shape
      assert np.abs(x - y).max() <= rel * np.abs(y).max(), (np.abs(x - y).max(), np.abs(y).max())


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def both(request, tiny_checkpoint):
  """(checkpoint folder, scanned model, unrolled model) of each family."""
  folder = tiny_checkpoint(request.param, **_INIT)
  return folder, load_pretrained(folder), load_pretrained(folder, scan_layers=False)


def _batch(seed=0):
  rng = np.random.default_rng(seed)
  lengths = np.array([9, 4, 7, 9, 2, 6])
  ids = rng.integers(3, 96, (6, 9)).astype(np.int32)
  mask = np.arange(9)[None] >= 9 - lengths[:, None]
  return np.where(mask, ids, 0).astype(np.int32), mask


def test_stacked_parameters_are_the_per_layer_ones(both):
  _, scanned, unrolled = both
  assert scanned.scan_layers and not unrolled.scan_layers
  assert scanned.layers.attn.q_proj.shape[0] == scanned.config.num_layers
  _assert_trees_close(nnx.to_pure_dict(nnx.state(scanned, nnx.Param)),
                      nnx.to_pure_dict(nnx.state(unrolled, nnx.Param)))


def test_logits_and_unstacked_model_equal_unrolled(both):
  _, scanned, unrolled = both
  ids, mask = _batch()
  forward = nnx.jit(lambda m, i, k: m(i, k))
  want = np.asarray(forward(unrolled, ids, mask))
  np.testing.assert_allclose(np.asarray(forward(scanned, ids, mask))[mask], want[mask], atol=1e-6)
  np.testing.assert_allclose(np.asarray(forward(scanned.unstacked(), ids, mask))[mask], want[mask],
                             atol=1e-6)


def test_greedy_decode_tokens_and_logprobs_equal_unrolled(both):
  """(Sampled decoding: tests/sampling/test_sharded.py compares a sharded scanned model with an
  unrolled one.)"""
  _, scanned, unrolled = both
  ids, mask = _batch(1)
  kw = dict(max_new_tokens=10, eos_ids=[2], pad_id=0, temperature=0.0, num_samples=2)
  got = sampling.generate_ids(scanned, ids, mask, **kw)
  want = sampling.generate_ids(unrolled, ids, mask, **kw)
  np.testing.assert_array_equal(got.token_ids, want.token_ids)
  np.testing.assert_array_equal(got.lengths, want.lengths)
  np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)


def test_scanned_kv_cache_decode_equals_unrolled(both):
  """Transformer.decode itself on scanned layers (prefill and single steps, the shared-prefix
  step included) returns the unrolled model's hidden states and caches."""
  _, scanned, unrolled = both
  ids, mask = _batch(2)
  positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)

  def run(model):
    graphdef, state = nnx.split(model)

    @jax.jit
    def go(state):
      m = nnx.merge(graphdef, state)
      h0, prompt_cache = m.decode(ids, positions, m.init_cache(6, 9), jnp.int32(0), mask)
      rows = m.init_cache(12, 4)  # two rows per prompt continue it through the prefix
      step_ids = jnp.arange(12, dtype=jnp.int32)[:, None] + 3
      h1, rows = m.decode(step_ids, positions[:, -1:].repeat(2, 0) + 1, rows, jnp.int32(0),
                          jnp.ones((12, 4), bool), prefix=(prompt_cache, jnp.asarray(mask)))
      return h0, h1, prompt_cache, rows

    return jax.device_get(go(state))

  for a, b in zip(jax.tree.leaves(run(scanned)), jax.tree.leaves(run(unrolled))):
    np.testing.assert_allclose(a, b, atol=2e-6)


@pytest.mark.parametrize("remat,policy,rows_per_prompt", [
    (False, "full", 1), (True, "save_dots", 1), (True, "full", 3)])
def test_gradients_equal_unrolled(tiny_checkpoint, remat, policy, rows_per_prompt):
  """Gradients of completion log-probs, per-row forward (rows_per_prompt 1) or the shared-prefix
  forward (3 completions per prompt), with and without remat."""
  folder = tiny_checkpoint("llama", **_INIT)
  ids, mask = _batch(3)
  prompt_ids, prompt_mask = np.repeat(ids[:2], 3, 0), np.repeat(mask[:2], 3, 0)
  completion_ids = np.random.default_rng(4).integers(3, 96, (6, 5)).astype(np.int32)
  completion_mask = np.arange(5)[None] < np.array([5, 2, 4, 1, 5, 3])[:, None]

  def grads(scan_layers):
    model = load_pretrained(folder, remat=remat, remat_policy=policy, scan_layers=scan_layers)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss(params):
      logp, entropy = logprobs.completion_logprobs(
          nnx.merge(graphdef, params, rest), prompt_ids, prompt_mask, completion_ids,
          completion_mask, with_entropy=True, rows_per_prompt=rows_per_prompt, chunk_size=32)
      return jnp.sum(jnp.where(completion_mask, logp + 0.1 * entropy, 0.0)), logp

    (value, logp), g = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
    return value, np.where(completion_mask, logp, 0), nnx.to_pure_dict(g)

  v_s, lp_s, g_s = grads(True)
  v_u, lp_u, g_u = grads(False)
  np.testing.assert_allclose(v_s, v_u, rtol=1e-6)
  np.testing.assert_allclose(lp_s, lp_u, atol=1e-6)
  _assert_trees_close(g_s, g_u, rel=1e-5)


def test_hf_round_trip_across_layouts_and_into_transformers(both, tmp_path):
  """A scanned model saves per-layer HF tensors: an unrolled model loads them bit for bit and
  saves the same bytes, and transformers computes the same logits from them."""
  _, scanned, _ = both
  save_pretrained(scanned, tmp_path / "scanned")
  save_pretrained(load_pretrained(tmp_path / "scanned", scan_layers=False), tmp_path / "unrolled")
  assert ((tmp_path / "scanned" / "model.safetensors").read_bytes()
          == (tmp_path / "unrolled" / "model.safetensors").read_bytes())

  ids, mask = _batch(5)
  positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
  hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "scanned",
                                                         dtype=torch.float32).eval()
  with torch.no_grad():
    ref = hf(input_ids=torch.from_numpy(ids).long(), attention_mask=torch.from_numpy(mask).long(),
             position_ids=torch.from_numpy(positions).long()).logits.numpy()
  ours = np.asarray(nnx.jit(lambda m, i, k: m(i, k))(scanned, ids, mask))
  np.testing.assert_array_less(np.abs(ours - ref)[mask].max(), 1e-4)


def test_perf_counts_every_scanned_layer(both):
  """perf.program_cost counts the FLOPs of a scanned model's forward as the unrolled one's (XLA's
  own count sees the scanned layer body once)."""
  from grounding_jax import perf  # pylint: disable=g-import-not-at-top
  _, scanned, unrolled = both
  ids, mask = _batch()

  def cost(model):
    graphdef, state = nnx.split(model)
    return perf.program_cost(lambda s: nnx.merge(graphdef, s)(ids, mask), state)

  c_s, c_u = cost(scanned), cost(unrolled)
  assert c_s.flops == c_u.flops > 0
  assert c_s.xla_flops_per_device < c_u.xla_flops_per_device
