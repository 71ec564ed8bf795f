"""Decoder-only transformers (Llama 3.x / SmolLM2, Qwen2/2.5, Qwen3) with HF checkpoint I/O.

  model = load_pretrained(folder)                       # config.json + safetensors -> Transformer
  logits = model(input_ids, attention_mask)             # float32[B, T, V], left-padded batch
  save_pretrained(model, out_folder)                    # back to a folder transformers loads
  tokenizer = load_tokenizer(folder)                    # left padding, pad falls back to eos

The attention kernels and the one place one is chosen: models/attention.py
(load_pretrained(folder, attention_implementation="auto" | "xla" | "cudnn")).
"""

import jax.numpy as jnp

from grounding_jax.models.config import ModelConfig
from grounding_jax.models.hf_io import load_pretrained, save_pretrained
from grounding_jax.models.tokenizer import load_tokenizer
from grounding_jax.models.transformer import KVCache, Transformer

# The dtypes a config may name for parameters and compute (model.param_dtype / compute_dtype).
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}

__all__ = ["DTYPES", "KVCache", "ModelConfig", "Transformer", "load_pretrained", "load_tokenizer",
           "save_pretrained"]
