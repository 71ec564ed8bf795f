"""A cross-encoder reranker: (query, passage) -> one relevance logit, e.g. bge-reranker-v2-m3.

GRACE (App. B.1) reranks the dense retriever's top k + 5 with BAAI/bge-reranker-v2-m3, an
XLM-RoBERTa sequence classifier with one output; the authors served it with vLLM's /v1/rerank, which
encodes each pair as the tokenizer's text pair (`<s> query </s></s> passage </s>`) and returns the raw
logit. Scores are only compared within a query, so the logit (not its sigmoid) is returned.

  reranker = CrossEncoder("/ckpt/bge-reranker-v2-m3")
  reranker.score("who founded Tannex?", ["Tannex was founded by …", "…"])   # float32 [2]
"""

from __future__ import annotations

import functools
import pathlib
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grounding_jax.models.batching import pad_rows
from grounding_jax.models.bert import load_bert_classifier


@functools.partial(jax.jit, static_argnums=0)
def _logits(graphdef, state, input_ids, attention_mask, token_type_ids):
  return nnx.merge(graphdef, state)(input_ids, attention_mask, token_type_ids)


class CrossEncoder:
  """Scores (query, passage) pairs with a one-logit BERT / XLM-RoBERTa classifier folder."""

  def __init__(self, path: str | pathlib.Path, *, max_length: int | None = None,
               batch_size: int = 16):
    """Args:
      path: HF folder of a sequence classifier with one label (config.json, model.safetensors and
        its tokenizer).
      max_length: pair length in tokens, truncating the passage; default the model's limit (8192
        for bge-reranker-v2-m3, what vLLM allowed the authors), so 512-token chunks are never cut.
      batch_size: pairs per forward pass.
    """
    import transformers  # pylint: disable=g-import-not-at-top

    path = pathlib.Path(path)
    self.model = load_bert_classifier(path)
    config = self.model.config
    if config.num_labels != 1:
      raise ValueError(f"{path / 'config.json'}: id2label has {config.num_labels} labels; a reranker "
                       "returns one relevance logit (num_labels=1).")
    limit = config.max_position_embeddings - (config.pad_token_id + 1 if config.offset_positions
                                              else 0)
    self.max_length = min(max_length or limit, limit)
    self.batch_size = batch_size
    self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    self._graphdef, self._state = nnx.split(self.model)

  def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
    """float32 [len(passages)] relevance logits of `query` against each passage (higher = better)."""
    return self.score_pairs([(query, p) for p in passages])

  def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """float32 [len(pairs)] logits of (query, passage) pairs."""
    out = np.zeros(len(pairs), np.float32)
    use_types = self.model.config.type_vocab_size > 1  # BERT pairs: segment 0 / 1; XLM-R: one type
    for start in range(0, len(pairs), self.batch_size):
      batch = pairs[start:start + self.batch_size]
      enc = self.tokenizer([q for q, _ in batch], [p for _, p in batch], truncation="only_second",
                           max_length=self.max_length, padding=False)
      ids, mask = pad_rows(enc["input_ids"], max_rows=self.batch_size, max_length=self.max_length)
      types = np.zeros_like(ids)
      if use_types and "token_type_ids" in enc:
        types, _ = pad_rows(enc["token_type_ids"], max_rows=self.batch_size,
                            max_length=self.max_length)
      logits = _logits(self._graphdef, self._state, jnp.asarray(ids), jnp.asarray(mask),
                       jnp.asarray(types))
      out[start:start + len(batch)] = np.asarray(logits)[:len(batch), 0]
    return out
