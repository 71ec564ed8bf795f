"""generate_ids(fuse_projections=True) (config rollout.fuse_projections): each layer's q/k/v and
gate/up projections as one GEMM each give the unfused sampler's tokens and log-probs in float32 —
prefill and every decode step, for Qwen2 (GQA, q/k/v biases), Llama and Qwen3 (q/k norms), a
group sharing its prompt's cache and one row per prompt; LoRA adapters are folded in before the
fusion, and a model whose projections cannot fuse (split over devices) runs unfused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax import sampling
from grounding_jax.models import load_pretrained, lora
from grounding_jax.parallel import make_mesh
from sampling_reference import random_prompts

# Weights large enough (std 0.3) that continuations vary instead of repeating one token.
_VARIED = dict(initializer_range=0.3)
_SAMPLED_GROUP = dict(max_new_tokens=10, eos_ids=[2], pad_id=0, temperature=0.8, num_samples=3)
_GREEDY = dict(max_new_tokens=10, eos_ids=[2], pad_id=0)


def _random_qkv_biases(model, seed=0):
  """Qwen2's q/k/v biases drawn at random (transformers initialises them to zero)."""
  rng = np.random.default_rng(seed)
  for name in ("q_bias", "k_bias", "v_bias"):
    w = getattr(model.layers.attn, name)
    w.set_value(jnp.asarray(0.5 * rng.normal(size=w[...].shape), w[...].dtype))
  return model


def _both(model, ids, mask, settings, **kw):
  """(unfused, fused) Generations of one call each, and whether the second ran fused."""
  key = jax.random.key(5)
  plain = sampling.generate_ids(model, ids, mask, seed=key, **settings, **kw)
  assert not sampling.last_stats()["fused_projections"]
  fused = sampling.generate_ids(model, ids, mask, seed=key, fuse_projections=True, **settings, **kw)
  return plain, fused, sampling.last_stats()["fused_projections"]


def _assert_same(plain, fused):
  np.testing.assert_array_equal(fused.token_ids, plain.token_ids)
  np.testing.assert_array_equal(fused.lengths, plain.lengths)
  np.testing.assert_array_equal(fused.truncated, plain.truncated)
  # float32 sums over the same products in another GEMM blocking: rounding, ~1e-6 of logits ~10
  np.testing.assert_allclose(fused.logprobs, plain.logprobs, rtol=0, atol=1e-5)


@pytest.mark.parametrize("family, settings", [("qwen2", _SAMPLED_GROUP), ("llama", _GREEDY),
                                              ("qwen3", _SAMPLED_GROUP)])
def test_fused_sampler_gives_the_unfused_tokens_and_logprobs(tiny_checkpoint, family, settings):
  model = load_pretrained(tiny_checkpoint(family, **_VARIED))
  if family == "qwen2":
    _random_qkv_biases(model)
  ids, mask = random_prompts((5, 11, 3), 96, seed=2)
  plain, fused, ran_fused = _both(model, ids, mask, settings)
  assert ran_fused
  _assert_same(plain, fused)
  assert plain.lengths.max() == 10 and len({tuple(r) for r in plain.token_ids}) > 2  # real decode
  assert hasattr(model.layers.attn, "q_proj")  # the caller's model keeps its layout


def test_lora_adapters_are_folded_in_before_fusing(tiny_checkpoint):
  """The sampler folds adapters into their weights (engine.inference_state) and fuses those: the
  adapted model's tokens and log-probs, fused or not."""
  model = load_pretrained(tiny_checkpoint("qwen2", **_VARIED))
  _random_qkv_biases(model)
  lora.add_adapters(model, lora.LoRAConfig(rank=2, targets=("q_proj", "up_proj")), jax.random.key(0))
  for _, _, adapter in lora.adapters(model):  # B = 0 would make the adapters no-ops
    adapter.b.set_value(jnp.full(adapter.b[...].shape, 0.2, adapter.b[...].dtype))
  ids, mask = random_prompts((5, 11, 3), 96, seed=3)
  base = sampling.generate_ids(lora.merged(model), ids, mask, seed=jax.random.key(5),
                               **_SAMPLED_GROUP)
  plain, fused, ran_fused = _both(model, ids, mask, _SAMPLED_GROUP)
  assert ran_fused and lora.has_adapters(model)
  _assert_same(plain, fused)
  np.testing.assert_array_equal(plain.token_ids, base.token_ids)


def test_projections_split_over_devices_run_unfused(tiny_checkpoint):
  """Heads and mlp over a tensor axis do not fuse (layers.Attention.fuse_projections); the sampler
  says so and samples what the unfused one does."""
  path = tiny_checkpoint("llama")
  mesh = make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
  ids, mask = random_prompts((5, 11, 3), 96, seed=1)
  plain, fused, ran_fused = _both(load_pretrained(path, mesh=mesh), ids, mask, _GREEDY, mesh=mesh)
  assert not ran_fused
  _assert_same(plain, fused)
