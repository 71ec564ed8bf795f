"""The jitted generation engine: prefill + `lax.while_loop` decode over a donated KV cache.

  from grounding_jax.sampling import generate, generate_ids, Generation
  gen = generate(model, tokenizer, prompts, max_new_tokens=256, temperature=1.0, num_samples=8,
                 stop=("</answer>",), seed=key)

Log-probs are log_softmax(logits / T) of the sampled tokens, before top-k/top-p (T = 1 when greedy).
"""

from grounding_jax.sampling.engine import fuse_projections_enabled, trace_counts
from grounding_jax.sampling.generate import (Generation, default_eos_ids, drain_stats, generate,
                                             generate_ids, last_stats, release_kv_cache)
from grounding_jax.sampling.prompts import (bucket_length, common_prefix_length, left_pad,
                                            tokenize_prompts)
from grounding_jax.sampling.selection import select_tokens

__all__ = ["Generation", "bucket_length", "common_prefix_length", "default_eos_ids", "drain_stats",
           "fuse_projections_enabled", "generate", "generate_ids", "last_stats",
           "left_pad", "release_kv_cache", "select_tokens", "tokenize_prompts", "trace_counts"]
