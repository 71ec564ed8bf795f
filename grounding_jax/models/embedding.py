"""Dense text embedders for retrieval, loaded from a local HF folder by its config.json.

  * `model_type: "bert"` — a sentence-transformers BERT (all-MiniLM-L6-v2, the offline default):
    mean pooling, bert.SentenceEncoder.
  * `model_type: "qwen3"` — Qwen3-Embedding (GRACE's dense retriever, App. B.1): our Flax Qwen3
    decoder, the final-norm hidden state of the last token, L2-normalised. Queries carry the model's
    instruction prompt ("Instruct: …\\nQuery:", from config_sentence_transformers.json); documents
    none. This is the model card's recipe; the GRACE authors' vLLM calls sent queries without the
    prompt (their code for arXiv:2601.04525) — pass query_prompt="" for that.

Every embedder has `encode(documents)` and `encode_queries(queries)`, each -> float32 [N, dim] unit rows.

  encoder = load_text_encoder("/ckpt/Qwen3-Embedding-0.6B")
  scores = encoder.encode(passages) @ encoder.encode_queries(["who founded Tannex?"])[0]
"""

from __future__ import annotations

import functools
import json
import pathlib
import tempfile
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grounding_jax.models import bert
from grounding_jax.models.batching import EmbeddingCache, length_sorted_batches, pad_rows
from grounding_jax.models.hf_io import load_pretrained

# Qwen3-Embedding's query prompt for retrieval (its model card and config_sentence_transformers.json).
QWEN3_EMBEDDING_QUERY_PROMPT = ("Instruct: Given a web search query, retrieve relevant passages that "
                                "answer the query\nQuery:")


def model_query_prompt(path: str | pathlib.Path) -> str:
  """The query prompt a sentence-transformers folder declares (prompts.query in
  config_sentence_transformers.json), else Qwen3-Embedding's retrieval prompt."""
  file = pathlib.Path(path) / "config_sentence_transformers.json"
  if file.is_file():
    prompt = json.loads(file.read_text()).get("prompts", {}).get("query")
    if prompt is not None:
      return prompt
  return QWEN3_EMBEDDING_QUERY_PROMPT


def _causal_lm_view(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
  """An HF folder `load_pretrained` reads, for a base-model checkpoint (Qwen3Model: tensors named
  "layers.0…" without the "model." prefix, no lm_head, as Qwen3-Embedding ships).

  Writes config.json (tied embeddings: the LM head is never used for embeddings) and the renamed
  tensors into `dst`; returns `src` itself when it is already a causal-LM checkpoint.
  """
  from safetensors import safe_open  # pylint: disable=g-import-not-at-top
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top

  index = src / "model.safetensors.index.json"
  files = (sorted({src / f for f in json.loads(index.read_text())["weight_map"].values()})
           if index.is_file() else [src / "model.safetensors"])
  if not files[0].is_file():
    raise FileNotFoundError(f"{files[0]} not found: the embedder needs safetensors weights.")
  with safe_open(str(files[0]), framework="np") as f:
    names = list(f.keys())
  if any(n.startswith("model.") for n in names):
    return src
  config = json.loads((src / "config.json").read_text())
  config["tie_word_embeddings"] = True
  (dst / "config.json").write_text(json.dumps(config))
  weight_map = {}
  for i, file in enumerate(files):  # one shard on the host at a time
    name = "model.safetensors" if len(files) == 1 else f"model-{i:05d}.safetensors"
    with safe_open(str(file), framework="np") as f:
      tensors = {f"model.{n}": f.get_tensor(n) for n in f.keys()}
    save_file(tensors, str(dst / name))
    weight_map.update(dict.fromkeys(tensors, name))
    del tensors
  if len(files) > 1:
    (dst / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
  return dst


@functools.partial(jax.jit, static_argnums=0)
def _last_token_embeddings(graphdef, state, input_ids, attention_mask):
  hidden = nnx.merge(graphdef, state).hidden_states(input_ids, attention_mask)  # [B, T, D]
  last = hidden[:, -1].astype(jnp.float32)  # left padding: column -1 is every row's last token
  return last / jnp.maximum(jnp.linalg.norm(last, axis=-1, keepdims=True), 1e-12)


class DecoderEmbedder:
  """Qwen3-Embedding on our Flax Qwen3: last-token pooling, L2 normalisation, a query prompt."""

  def __init__(self, path: str | pathlib.Path, *, query_prompt: str | None = None,
               max_length: int = 8192, batch_size: int = 8, cache_size: int = 100_000,
               dtype=jnp.float32):
    """Args:
      path: HF folder (config.json with model_type "qwen3", safetensors, tokenizer); the tokenizer is
        used as shipped (Qwen3-Embedding's appends <|endoftext|>, the token whose state is pooled).
      query_prompt: text put before every query; None = the folder's own (`model_query_prompt`),
        "" = none (the GRACE authors' vLLM calls).
      max_length: tokens per text (longer texts are truncated); the model card uses 8192.
      batch_size: texts per forward pass.
      cache_size: texts whose embedding is kept (see batching.EmbeddingCache).
      dtype: parameter and compute dtype.
    """
    import transformers  # pylint: disable=g-import-not-at-top

    path = pathlib.Path(path)
    with tempfile.TemporaryDirectory() as tmp:  # the renamed copy is freed once on device
      self.model = load_pretrained(_causal_lm_view(path, pathlib.Path(tmp)), dtype=dtype)
    self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    self.query_prompt = model_query_prompt(path) if query_prompt is None else query_prompt
    self.max_length = max_length
    self.batch_size = batch_size
    self._graphdef, self._state = nnx.split(self.model)
    self._cache = EmbeddingCache(cache_size)

  @property
  def dim(self) -> int:
    return self.model.config.hidden_size

  def encode(self, texts: Sequence[str]) -> np.ndarray:
    """float32 [len(texts), hidden] unit-norm embeddings of documents (no prompt)."""
    return self._cache.lookup(list(texts), self._encode_uncached, self.dim)

  def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
    """float32 [len(queries), hidden] unit-norm embeddings of `query_prompt + query`."""
    return self.encode([self.query_prompt + q for q in queries])

  @property
  def cache_size(self) -> int:
    return self._cache.size

  def _encode_uncached(self, texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), self.dim), np.float32)
    pad_id = self.tokenizer.pad_token_id or 0
    rows = self.tokenizer(texts, truncation=True, max_length=self.max_length, padding=False)["input_ids"]
    for idx in length_sorted_batches([len(r) for r in rows], self.batch_size):
      ids, mask = pad_rows([rows[i] for i in idx], max_rows=self.batch_size,
                           max_length=self.max_length, left=True, pad_id=pad_id)
      emb = _last_token_embeddings(self._graphdef, self._state, jnp.asarray(ids), jnp.asarray(mask))
      out[idx] = np.asarray(emb)[:len(idx)]
    return out


def load_text_encoder(path: str | pathlib.Path | None = None, *, query_prompt: str | None = None):
  """The dense embedder in `path`, chosen by its config.json model_type; None = MiniLM (offline).

  Raises:
    FileNotFoundError: no config.json in `path`.
    ValueError: a model_type without an embedder here (supported: bert, qwen3).
  """
  if path is None:
    return bert.default_encoder()
  file = pathlib.Path(path) / "config.json"
  if not file.is_file():
    raise FileNotFoundError(f"{file} not found: pass the HF folder of a dense embedder "
                            "(e.g. Qwen3-Embedding-0.6B or all-MiniLM-L6-v2).")
  model_type = json.loads(file.read_text()).get("model_type")
  if model_type == "bert":
    return bert.SentenceEncoder(path)
  if model_type == "qwen3":
    return DecoderEmbedder(path, query_prompt=query_prompt)
  raise ValueError(f"{file}: model_type={model_type!r} has no dense embedder here; supported: "
                   "'bert' (sentence-transformers mean pooling), 'qwen3' (Qwen3-Embedding).")
