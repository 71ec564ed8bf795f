"""ModelConfig: parsing HF config.json for each family, round trips, and clear errors."""

import dataclasses
import json

import pytest
import transformers

from grounding_jax.models import ModelConfig


def _hf(family, **overrides):
  from conftest import _TINY  # the shared tiny configs (tests/conftest.py)
  cfg = transformers.AutoConfig.for_model(**{**_TINY[family], **overrides})
  return cfg.to_dict()


@pytest.mark.parametrize("family,qkv_bias,qk_norm,head_dim,tied", [
    ("llama", False, False, 8, True), ("qwen2", True, False, 8, False),
    ("qwen3", False, True, 16, True)])
def test_families_parse_from_transformers_configs(family, qkv_bias, qk_norm, head_dim, tied):
  config = ModelConfig.from_hf(_hf(family))
  assert (config.qkv_bias, config.qk_norm, config.head_dim) == (qkv_bias, qk_norm, head_dim)
  assert config.tie_word_embeddings == tied
  assert (config.num_heads, config.num_kv_heads, config.num_layers) == (4, 2, 2)
  assert (config.rope_scaling is not None) == (family == "llama")


def test_v4_style_rope_scaling_and_v5_rope_parameters_agree():
  v5 = _hf("llama")
  v4 = {k: v for k, v in v5.items() if k != "rope_parameters"}
  v4["rope_theta"] = 10000.0
  v4["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
  assert ModelConfig.from_hf(v4) == ModelConfig.from_hf(v5)


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_to_hf_dict_round_trips_through_transformers(family, tmp_path):
  config = ModelConfig.from_hf(_hf(family))
  (tmp_path / "config.json").write_text(json.dumps(config.to_hf_dict()))
  hf_config = transformers.AutoConfig.from_pretrained(tmp_path)
  assert hf_config.model_type == family
  assert ModelConfig.from_hf(hf_config.to_dict()) == config
  assert ModelConfig.from_hf(tmp_path) == config


@pytest.mark.parametrize("overrides,field", [
    (dict(model_type="gpt2"), "model_type"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(mlp_bias=True), "mlp_bias"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}), "rope_type"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}, rope_parameters=None), "linear"),
])
def test_unsupported_llama_options_raise_naming_the_field(overrides, field):
  hf = _hf("llama")
  hf.update(overrides)
  with pytest.raises(ValueError, match=field):
    ModelConfig.from_hf(hf)


def test_sliding_window_raises():
  hf = _hf("qwen2")
  hf["use_sliding_window"] = True
  with pytest.raises(ValueError, match="use_sliding_window"):
    ModelConfig.from_hf(hf)


def test_missing_config_json_names_the_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="config.json"):
    ModelConfig.from_hf(tmp_path)


def test_attention_query_chunk_is_not_read_from_or_written_to_config_json():
  config = ModelConfig.from_hf(_hf("llama"))
  assert config.attention_query_chunk > 0  # long sequences are chunked unless a caller says 0
  assert "attention_query_chunk" not in config.to_hf_dict()
  off = dataclasses.replace(config, attention_query_chunk=0)
  assert off != config  # a setting of the compiled program, so part of jit's static key
  for bad in (-1, 2.5, True):
    with pytest.raises(ValueError, match=f"attention_query_chunk={bad!r}"):
      dataclasses.replace(config, attention_query_chunk=bad)
