"""Named model shapes: the architecture of a public checkpoint, built with random weights.

  config = shapes.shape_config("qwen2.5-1.5b")                # a ModelConfig, no files read
  model = shapes.random_model("qwen2.5-1.5b", dtype=jnp.bfloat16)   # a Transformer, random weights
  peer = shapes.hf_random_model(config, "bfloat16", "cuda")    # transformers' model of the same shape

Benchmarks measure speed at the shapes users train (launch/bench_sampler.py --model_shape=...)
without carrying multi-GB checkpoints: the weights are random (normal, std 0.02), so only speed,
memory and parity with transformers mean anything, never the text. Any tokenizer whose ids fit the
vocabulary serves (the benches use SmolLM2's, 49,152 ids, < every vocabulary below; sampled ids past
the tokenizer's last one decode to nothing). `vocab_size=` shrinks the vocabulary, e.g. to the
tokenizer's, as the first GPU run's 1.39 B model did (docs/benchmarks.md).

Each row is the public config.json of the model card named beside it (architecture fields only).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from grounding_jax import parallel
from grounding_jax.models import gguf_convert
from grounding_jax.models import tokenizer as tokenizer_lib
from grounding_jax.models.config import ModelConfig
from grounding_jax.models.transformer import Transformer

_QWEN = dict(rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=True, vocab_size=151936,
             bos_token_id=151643, eos_token_id=151645)

SHAPES: dict[str, dict[str, Any]] = {
    # A toy for tests and CPU smoke runs (seconds); SmolLM2's vocabulary so real prompts fit.
    "tiny": dict(model_type="qwen2", vocab_size=49152, hidden_size=64, intermediate_size=128,
                 num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, rms_norm_eps=1e-6,
                 rope_theta=1e6, max_position_embeddings=4096, tie_word_embeddings=True,
                 qkv_bias=True),
    # huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/config.json
    "qwen2.5-0.5b": dict(_QWEN, model_type="qwen2", hidden_size=896, intermediate_size=4864,
                         num_layers=24, num_heads=14, num_kv_heads=2, head_dim=64,
                         max_position_embeddings=32768, qkv_bias=True),
    # huggingface.co/Qwen/Qwen2.5-1.5B-Instruct/blob/main/config.json
    "qwen2.5-1.5b": dict(_QWEN, model_type="qwen2", hidden_size=1536, intermediate_size=8960,
                         num_layers=28, num_heads=12, num_kv_heads=2, head_dim=128,
                         max_position_embeddings=32768, qkv_bias=True),
    # huggingface.co/Qwen/Qwen3-4B/blob/main/config.json (head_dim 128 explicit, q/k RMSNorm)
    "qwen3-4b": dict(_QWEN, model_type="qwen3", hidden_size=2560, intermediate_size=9728,
                     num_layers=36, num_heads=32, num_kv_heads=8, head_dim=128,
                     max_position_embeddings=40960, qk_norm=True),
    # huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json (untied head, no RoPE scaling)
    "llama3-8b": dict(model_type="llama", vocab_size=128256, hidden_size=4096,
                      intermediate_size=14336, num_layers=32, num_heads=32, num_kv_heads=8,
                      head_dim=128, rms_norm_eps=1e-5, rope_theta=500000.0,
                      max_position_embeddings=8192, tie_word_embeddings=False,
                      bos_token_id=128000, eos_token_id=128001),
}


def shape_config(name: str, *, vocab_size: int | None = None, **overrides) -> ModelConfig:
  """The ModelConfig of shape `name` (SHAPES); `vocab_size` and other ModelConfig fields override.

  Raises:
    ValueError: an unknown name (the message lists the known ones).
  """
  if name not in SHAPES:
    raise ValueError(f"model shape {name!r} is unknown; expected one of {sorted(SHAPES)}.")
  fields = dict(SHAPES[name], **overrides)
  if vocab_size:
    fields["vocab_size"] = int(vocab_size)
  return ModelConfig(**fields)


def random_model(shape: str | ModelConfig, *, dtype=jnp.float32, compute_dtype=None, seed: int = 0,
                 remat: bool = False, remat_policy: str = "full", scan_layers: bool = True,
                 vocab_size: int | None = None, mesh=None) -> Transformer:
  """A Transformer of `shape` (a SHAPES name or a ModelConfig) with random weights, initialised in
  one jitted program on the default device (no checkpoint is written or read); arguments as
  load_pretrained's (dtype: the parameters', compute_dtype default dtype). With `mesh`, the
  weights are then placed by their logical axis names (grounding_jax.parallel.shard_model)."""
  config = shape if isinstance(shape, ModelConfig) else shape_config(shape, vocab_size=vocab_size)
  compute_dtype = dtype if compute_dtype is None else compute_dtype
  build = nnx.jit(lambda: Transformer(config, rngs=nnx.Rngs(seed), param_dtype=dtype,
                                      compute_dtype=compute_dtype, remat=remat,
                                      remat_policy=remat_policy, scan_layers=scan_layers))
  model = build()
  if mesh is not None:
    model = parallel.shard_model(model, mesh)
  return model


def param_count(model: Transformer) -> int:
  """Parameters of a built (or nnx.eval_shape'd) model, each array once."""
  return sum(int(x.size) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))


def hf_random_model(config: ModelConfig, dtype: str = "float32", device: str = "cpu", seed: int = 0):
  """transformers' causal LM of the same architecture, random weights, on a torch `device`
  ("cuda", "cpu", "meta": shapes only): the peer of a benchmark at a named shape."""
  import torch  # pylint: disable=g-import-not-at-top  # the peers' dependency, not the library's
  import transformers  # pylint: disable=g-import-not-at-top
  hf = transformers.AutoConfig.for_model(**config.to_hf_dict(dtype))
  torch.manual_seed(seed)
  with torch.device(device):
    model = transformers.AutoModelForCausalLM.from_config(hf, dtype=getattr(torch, dtype))
  return model.eval()


def config_and_tokenizer(name: str, tokenizer_dir: str | None = None, vocab_size: int = 0
                         ) -> tuple[ModelConfig, Any, str]:
  """(ModelConfig of shape `name`, a tokenizer, its folder), as the benches' --model_shape takes them:
  the tokenizer from `tokenizer_dir` (default SmolLM2's, prepared offline); `vocab_size` 0 keeps the
  shape's vocabulary, -1 takes the tokenizer's, any other value replaces it."""
  tokenizer_dir = str(tokenizer_dir or gguf_convert.prepare_smollm2())
  tokenizer = tokenizer_lib.load_tokenizer(tokenizer_dir)
  vocab = len(tokenizer) if vocab_size == -1 else vocab_size
  return shape_config(name, vocab_size=vocab or None), tokenizer, tokenizer_dir
