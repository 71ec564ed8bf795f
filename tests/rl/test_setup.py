"""rl/setup.py: the config's model settings reach the policy it loads."""

import pytest

import toy_task
from grounding_jax.rl import setup


@pytest.mark.parametrize("attention", ["auto", "xla"])
def test_model_attention_reaches_the_loaded_policy(tiny_smollm2_dir, tmp_path, attention):
  c = toy_task.toy_config(tmp_path)
  c.model.path = str(tiny_smollm2_dir)
  c.model.attention = attention
  model, tokenizer = setup.load_policy(c, mesh=None)
  assert model.config.attention_implementation == attention
  assert tokenizer is not None
