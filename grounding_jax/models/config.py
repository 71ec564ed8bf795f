"""Model hyper-parameters read from (and written back to) a Hugging Face `config.json`.

One frozen dataclass covers the decoder-only families we support:
  * Llama 3.x (and SmolLM2, which is a Llama): optional "llama3" RoPE frequency scaling.
  * Qwen2 / Qwen2.5: bias on the q/k/v projections.
  * Qwen3: RMSNorm on every query and key head (before RoPE), explicit head_dim.
All use SwiGLU MLPs, pre-norm RMSNorm blocks, rotate-half RoPE and grouped-query attention.
Anything else (sliding windows, other RoPE scalings, extra biases) raises a ValueError that names the
config field and value, because silently ignoring it would give a model with different logits.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any, Mapping

from grounding_jax.models import attention, packed

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3")

_ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}


@dataclasses.dataclass(frozen=True)
class RopeScaling:
  """Llama 3 RoPE frequency scaling (transformers' rope_type "llama3")."""
  factor: float
  low_freq_factor: float
  high_freq_factor: float
  original_max_position_embeddings: int


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Architecture of a decoder-only transformer; hashable, so it can sit in a jit-static graph."""
  model_type: str
  vocab_size: int
  hidden_size: int
  intermediate_size: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  rms_norm_eps: float = 1e-5
  rope_theta: float = 10000.0
  rope_scaling: RopeScaling | None = None
  max_position_embeddings: int = 2048
  tie_word_embeddings: bool = True
  qkv_bias: bool = False   # Qwen2 / Qwen2.5
  qk_norm: bool = False    # Qwen3
  bos_token_id: int | None = None
  eos_token_id: int | tuple[int, ...] | None = None
  pad_token_id: int | None = None
  # Not architecture, and not in config.json: how attention runs (models/attention.py).
  # At most this many queries are scored at once, so a long sequence's float32 scores take
  # [batch, heads, chunk, S], not [batch, heads, T, S]; 0 = all T at once. Results equal up to float
  # rounding; decode (T = 1) and sequences of at most this many tokens trace the unchunked program.
  # SmolLM2 prefill, 8 x 4,096 tokens: 3.2 GB of XLA temporaries instead of 10.1 GB.
  attention_query_chunk: int = 128
  # Which code runs attention: "xla" (jnp programs), "cudnn" (GPU only), or "auto" (cuDNN on a GPU
  # where its shapes and dtypes allow, else "xla"; see models/attention.py).
  attention_implementation: str = "auto"
  # How attention runs a GRPO group's packed completions: "stream" (one block-diagonal mask over
  # the group's stream), "rows" (each completion a row over [prompt | itself]), "blocks" (the
  # stream in blocks of queries over the columns they can need), or "auto" (the one scoring fewest
  # query-key pairs); the same numbers up to float rounding (models/packed.py).
  packed_attention: str = "auto"
  # The source config.json as canonical JSON, so to_hf_dict() keeps fields we do not model
  # (generation defaults, tokenizer ids, ...). Excluded from equality: it never changes the math.
  hf_json: str = dataclasses.field(default="", compare=False, repr=False)

  def __post_init__(self):
    if self.model_type not in SUPPORTED_MODEL_TYPES:
      raise ValueError(f"model_type={self.model_type!r} is not supported; expected one of "
                       f"{SUPPORTED_MODEL_TYPES}.")
    for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                 "num_kv_heads", "head_dim"):
      if getattr(self, name) <= 0:
        raise ValueError(f"{name}={getattr(self, name)} must be positive.")
    if self.num_heads % self.num_kv_heads:
      raise ValueError(f"num_attention_heads={self.num_heads} is not a multiple of "
                       f"num_key_value_heads={self.num_kv_heads} (grouped-query attention needs it).")
    if self.head_dim % 2:
      raise ValueError(f"head_dim={self.head_dim} must be even for rotary embeddings.")
    chunk = self.attention_query_chunk
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 0:
      raise ValueError(f"attention_query_chunk={self.attention_query_chunk!r} must be an int >= 0 "
                       f"(queries attended to at once; 0 = all).")
    if self.attention_implementation not in attention.IMPLEMENTATIONS:
      raise ValueError(f"attention_implementation={self.attention_implementation!r}; expected one "
                       f"of {attention.IMPLEMENTATIONS}.")
    if self.packed_attention not in packed.MODES:
      raise ValueError(f"packed_attention={self.packed_attention!r}; expected one of "
                       f"{packed.MODES}.")

  @property
  def architecture(self) -> str:
    return _ARCHITECTURES[self.model_type]

  # ---------------------------------------------------------------------------------------------
  # Hugging Face config.json <-> ModelConfig
  # ---------------------------------------------------------------------------------------------

  @classmethod
  def from_hf(cls, path_or_dict: str | os.PathLike | Mapping[str, Any]) -> "ModelConfig":
    """Builds a ModelConfig from an HF config dict, a config.json path, or a model folder.

    Raises:
      FileNotFoundError: the folder has no config.json.
      ValueError: an unsupported model_type or option, naming the field and value.
    """
    if isinstance(path_or_dict, Mapping):
      hf = dict(path_or_dict)
      where = "config"
    else:
      path = pathlib.Path(path_or_dict)
      if path.is_dir():
        path = path / "config.json"
      if not path.is_file():
        raise FileNotFoundError(f"{path}: no config.json found; an HF model folder needs one.")
      try:
        hf = json.loads(path.read_text())
      except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e}).") from e
      where = str(path)

    def fail(field, value, why):
      raise ValueError(f"{where}: unsupported {field}={value!r}: {why}")

    model_type = hf.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
      fail("model_type", model_type, f"supported model types are {SUPPORTED_MODEL_TYPES}.")
    hidden_act = hf.get("hidden_act", "silu")
    if hidden_act != "silu":
      fail("hidden_act", hidden_act, "only SwiGLU MLPs (silu) are implemented.")
    if hf.get("use_sliding_window"):
      fail("use_sliding_window", hf["use_sliding_window"], "sliding-window attention is not "
           "implemented; set it to false (all layers use full attention).")
    for layer_type in hf.get("layer_types") or ():
      if layer_type != "full_attention":
        fail("layer_types", layer_type, "only 'full_attention' layers are implemented.")
    if hf.get("mlp_bias"):
      fail("mlp_bias", hf["mlp_bias"], "MLP biases are not implemented.")
    if hf.get("attention_bias"):
      fail("attention_bias", hf["attention_bias"],
           "biases on all attention projections are not implemented (Qwen2's q/k/v bias is).")
    if hf.get("pretraining_tp", 1) not in (1, None):
      fail("pretraining_tp", hf["pretraining_tp"], "only 1 is supported.")

    num_heads = int(hf["num_attention_heads"])
    hidden_size = int(hf["hidden_size"])
    # Qwen3Config defaults head_dim to 128; the others derive it from the hidden size.
    head_dim = hf.get("head_dim") or (128 if model_type == "qwen3" else hidden_size // num_heads)
    if model_type == "qwen2" and hf.get("head_dim") not in (None, hidden_size // num_heads):
      fail("head_dim", hf["head_dim"], "Qwen2 derives head_dim from hidden_size/num_heads.")

    rope_theta, rope_scaling = _parse_rope(hf, fail)
    eos = hf.get("eos_token_id")
    if isinstance(eos, list):
      eos = tuple(eos)
    return cls(
        model_type=model_type,
        vocab_size=int(hf["vocab_size"]),
        hidden_size=hidden_size,
        intermediate_size=int(hf["intermediate_size"]),
        num_layers=int(hf["num_hidden_layers"]),
        num_heads=num_heads,
        num_kv_heads=int(hf.get("num_key_value_heads") or num_heads),
        head_dim=int(head_dim),
        rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        max_position_embeddings=int(hf.get("max_position_embeddings", 2048)),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),  # HF default: untied
        qkv_bias=model_type == "qwen2",
        qk_norm=model_type == "qwen3",
        bos_token_id=hf.get("bos_token_id"),
        eos_token_id=eos,
        pad_token_id=hf.get("pad_token_id"),
        hf_json=json.dumps(hf, sort_keys=True),
    )

  def to_hf_dict(self, dtype: str = "float32") -> dict[str, Any]:
    """An HF config.json dict that transformers (v4 and v5) loads as the same architecture.

    Args:
      dtype: the parameter dtype name recorded as `dtype`/`torch_dtype` ("float32", "bfloat16").
    """
    hf = json.loads(self.hf_json) if self.hf_json else {}
    for stale in ("rope_scaling", "rope_parameters", "rope_theta", "torch_dtype", "dtype",
                  "transformers_version"):
      hf.pop(stale, None)
    rope = {"rope_type": "default", "rope_theta": self.rope_theta}
    if self.rope_scaling is not None:
      rope = {"rope_type": "llama3", "rope_theta": self.rope_theta,
              **dataclasses.asdict(self.rope_scaling)}
    hf.update(
        architectures=[self.architecture],
        model_type=self.model_type,
        vocab_size=self.vocab_size,
        hidden_size=self.hidden_size,
        intermediate_size=self.intermediate_size,
        num_hidden_layers=self.num_layers,
        num_attention_heads=self.num_heads,
        num_key_value_heads=self.num_kv_heads,
        head_dim=self.head_dim,
        hidden_act="silu",
        rms_norm_eps=self.rms_norm_eps,
        max_position_embeddings=self.max_position_embeddings,
        tie_word_embeddings=self.tie_word_embeddings,
        bos_token_id=self.bos_token_id,
        eos_token_id=(list(self.eos_token_id) if isinstance(self.eos_token_id, tuple)
                      else self.eos_token_id),
        pad_token_id=self.pad_token_id,
        # transformers v5 reads rope_parameters; v4 reads rope_theta + rope_scaling.
        rope_parameters=rope,
        rope_theta=self.rope_theta,
        rope_scaling=({k: v for k, v in rope.items() if k != "rope_theta"}
                      if self.rope_scaling is not None else None),
        dtype=dtype,
        torch_dtype=dtype,
    )
    if self.model_type == "llama":
      hf.update(attention_bias=False, mlp_bias=False)
    else:
      hf.update(use_sliding_window=False)
    return hf


def _parse_rope(hf: Mapping[str, Any], fail) -> tuple[float, RopeScaling | None]:
  """Reads RoPE base and scaling from either the v5 `rope_parameters` or v4 `rope_scaling` field."""
  params = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
  field = "rope_parameters" if hf.get("rope_parameters") else "rope_scaling"
  theta = float(params.get("rope_theta", hf.get("rope_theta", 10000.0)))
  rope_type = params.get("rope_type", params.get("type", "default"))
  partial = params.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0))
  if partial != 1.0:
    fail("partial_rotary_factor", partial, "only full rotary embeddings (1.0) are implemented.")
  if rope_type == "default":
    return theta, None
  if rope_type != "llama3":
    fail(f"{field}.rope_type", rope_type, "only 'default' and 'llama3' RoPE are implemented.")
  if hf.get("model_type") != "llama":
    fail(f"{field}.rope_type", rope_type, f"llama3 scaling is only accepted for model_type "
         f"'llama', not {hf.get('model_type')!r}.")
  try:
    scaling = RopeScaling(
        factor=float(params["factor"]),
        low_freq_factor=float(params["low_freq_factor"]),
        high_freq_factor=float(params["high_freq_factor"]),
        original_max_position_embeddings=int(params["original_max_position_embeddings"]))
  except KeyError as e:
    fail(field, params, f"llama3 RoPE scaling needs the key {e.args[0]!r}.")
  if scaling.high_freq_factor <= scaling.low_freq_factor:
    fail(f"{field}.high_freq_factor", scaling.high_freq_factor, "must exceed low_freq_factor.")
  return theta, scaling
