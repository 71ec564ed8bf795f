"""LoRA adapters (models/lora.py): zero-initialised adapters are the base model, scanned and unrolled
layers agree, merging equals the adapter forward (ours and transformers loading the merged export),
and the PEFT folder loads in peft with the same logits."""

import json

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import torch
from flax import nnx

from grounding_jax import config_fields
from grounding_jax.models import hf_export
from grounding_jax.models import lora
from grounding_jax.models import load_pretrained
from grounding_jax.sampling import engine

ALL = lora.LoRAConfig(rank=4, alpha=8.0, targets=lora.ALL_TARGETS)


def _batch(vocab, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(0, vocab, (2, 7)).astype(np.int32)
  mask = np.ones((2, 7), bool)
  mask[1, :2] = False  # left padding
  return jnp.asarray(ids), jnp.asarray(mask)


def _randomise_b(model, seed=1):
  """Non-zero B matrices (a trained adapter), in place."""
  key = jax.random.key(seed)
  for i, (_, _, ad) in enumerate(lora.adapters(model)):
    b = ad.b.get_value()
    ad.b.set_value(0.05 * jax.random.normal(jax.random.fold_in(key, i), b.shape, b.dtype))


@pytest.mark.parametrize("scan", [True, False])
def test_zero_init_adapters_equal_the_base(tiny_checkpoint, scan):
  path = tiny_checkpoint("qwen2")
  base = load_pretrained(path, scan_layers=scan)
  ids, mask = _batch(base.config.vocab_size)
  want = base(ids, mask)
  model = lora.add_adapters(load_pretrained(path, scan_layers=scan), ALL, jax.random.key(0))
  assert lora.has_adapters(model)
  np.testing.assert_array_equal(np.asarray(model(ids, mask)), np.asarray(want))
  # decode (prefill through the cache) too
  cache = model.init_cache(2, 7)
  pos = jnp.maximum(jnp.cumsum(mask, -1) - 1, 0)
  h1, _ = model.decode(ids, pos, cache, jnp.int32(0), mask)
  h0, _ = base.decode(ids, pos, base.init_cache(2, 7), jnp.int32(0), mask)
  np.testing.assert_array_equal(np.asarray(h1), np.asarray(h0))


def test_scan_and_unrolled_agree_and_merge_equals_adapter_forward(tiny_checkpoint):
  path = tiny_checkpoint("llama")
  scanned = lora.add_adapters(load_pretrained(path, scan_layers=True), ALL, jax.random.key(0))
  _randomise_b(scanned)
  unrolled = scanned.unstacked()  # per-layer slices of the same adapters
  assert lora.has_adapters(unrolled) and not unrolled.scan_layers
  ids, mask = _batch(scanned.config.vocab_size)
  want = np.asarray(scanned(ids, mask))
  base = np.asarray(load_pretrained(path)(ids, mask))
  assert np.abs(want - base).max() > 1e-3  # the adapters do something
  np.testing.assert_allclose(np.asarray(unrolled(ids, mask)), want, atol=2e-5)
  for m in (scanned, unrolled):
    folded = lora.merged(m)
    assert not lora.has_adapters(folded) and lora.has_adapters(m)  # the argument is unchanged
    np.testing.assert_allclose(np.asarray(folded(ids, mask)), want, atol=2e-5)
  # the sampler's weights: adapters folded in, layers unstacked
  graphdef, state = engine.inference_state(scanned)
  np.testing.assert_allclose(np.asarray(nnx.merge(graphdef, state)(ids, mask)), want, atol=2e-5)


def _torch_logits(model, ids, mask):
  with torch.no_grad():
    out = model(input_ids=torch.tensor(np.asarray(ids), dtype=torch.long),
                attention_mask=torch.tensor(np.asarray(mask), dtype=torch.long))
  return out.logits.float().numpy()


def test_merged_and_peft_exports_load_in_transformers_and_peft(tiny_chat_model, tmp_path):
  import peft  # pylint: disable=g-import-not-at-top  (a test extra: fails, never skips, when missing)
  import transformers  # pylint: disable=g-import-not-at-top
  path = tiny_chat_model
  model = lora.add_adapters(load_pretrained(path), ALL, jax.random.key(3))
  _randomise_b(model)
  ids, mask = _batch(model.config.vocab_size, seed=2)
  ids, mask = ids[:1], mask[:1]  # one unpadded row: HF's padded-row positions differ from ours
  want = np.asarray(model(ids, mask))

  merged_dir = hf_export.export_hf(model, tmp_path / "merged", tokenizer_from=path)
  hf = transformers.AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32)
  np.testing.assert_allclose(_torch_logits(hf, ids, mask), want, atol=2e-4)

  peft_dir = hf_export.export_peft(model, tmp_path / "adapter", base_model=path)
  config = json.loads((peft_dir / hf_export.PEFT_CONFIG).read_text())
  assert config["r"] == 4 and config["lora_alpha"] == 8.0 and config["peft_type"] == "LORA"
  base = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
  with_adapter = peft.PeftModel.from_pretrained(base, peft_dir)
  np.testing.assert_allclose(_torch_logits(with_adapter, ids, mask), want, atol=2e-4)


def test_adapters_shard_by_their_weights_names_with_the_rank_replicated(tiny_checkpoint):
  from grounding_jax import parallel
  path = tiny_checkpoint("llama")
  model = lora.add_adapters(load_pretrained(path), ALL, jax.random.key(0))
  _randomise_b(model)
  ids, mask = _batch(model.config.vocab_size)
  want = np.asarray(model(ids, mask))
  mesh = parallel.make_mesh({"data": 1, "fsdp": 2, "tensor": 2}, devices=jax.devices()[:4])
  parallel.shard_model(model, mesh)
  _, _, ad = lora.adapters(model)[0]  # the stacked q_proj adapter: A [layers, embed, r]
  assert ad.a.get_value().sharding.spec == jax.sharding.PartitionSpec(None, "fsdp", None)
  assert ad.b.get_value().sharding.spec[1] is None  # [layers, r, q_heads, head_dim]: r replicated
  with parallel.use_mesh(mesh):
    got = jax.jit(lambda m, i, k: m(i, k))(model, ids, mask)
  np.testing.assert_allclose(np.asarray(got), want, atol=2e-5)


def test_the_lora_section_is_checked_before_a_model_loads():
  """lora.check_config (the SFT trainer's check; the RL check_config runs the same rules) names each
  bad model.lora value with what is allowed, and a config without model.lora trains every weight."""
  c = ml_collections.ConfigDict(dict(model=dict(lora=lora.config_section())))
  lora.check_config(c)
  assert c.model.lora.to_dict() == dict(rank=0, alpha=16.0, dropout=0.0, targets=lora.ALL_TARGETS,
                                        save_base=False)
  c.model.lora.update(dict(rank=2, alpha=0.0, dropout=1.0, targets=("q_proj", "q_proj", "lm_head")))
  with pytest.raises(config_fields.ConfigError) as info:
    lora.check_config(c)
  assert info.value.problems == [
      "config.model.lora.alpha=0.0: must be a finite number > 0 (the adapters' scale is alpha / rank)",
      "config.model.lora.dropout=1.0: must be a finite number in [0, 1)",
      f"config.model.lora.targets=('q_proj', 'q_proj', 'lm_head'): must name distinct projections of "
      f"{lora.ALL_TARGETS}; unknown ['lm_head'] (PEFT's target_modules names)"]
  lora.check_config(ml_collections.ConfigDict(dict(model=dict(path=""))))  # no model.lora section
