"""Qwen3-Embedding on our Flax Qwen3 (last-token pooling, query prompt, L2 norm) against transformers."""

import json

import numpy as np
import pytest

from grounding_jax.models import bert, embedding
from tiny_encoders import QUERY_PROMPT, build_qwen3_embedding

TEXTS = ["the capital of veltria is orsk .", "who founded tannex ?",
         "mara quell lives in orsk and was a baker . " * 4, "salt"]


def _reference(path, texts):
  """transformers Qwen3Model, one unpadded text at a time: last token's state, L2-normalised."""
  import torch
  import transformers
  model = transformers.AutoModel.from_pretrained(path).eval()
  tok = transformers.AutoTokenizer.from_pretrained(path)
  out = []
  for t in texts:
    enc = tok(t, return_tensors="pt")
    assert enc["input_ids"][0, -1] == tok.eos_token_id  # the tokenizer appends <|endoftext|>
    with torch.no_grad():
      h = model(**enc).last_hidden_state[0, -1]
    out.append(torch.nn.functional.normalize(h, dim=-1).numpy())
  return np.stack(out)


@pytest.mark.parametrize("sharded", [False, True])
def test_embeddings_match_transformers(tmp_path, sharded):
  path = build_qwen3_embedding(tmp_path, max_shard_size="20KB" if sharded else None)
  files = sorted(p.name for p in path.glob("*.safetensors"))
  assert (len(files) > 1) == sharded
  enc = embedding.DecoderEmbedder(path, batch_size=2)  # 4 texts: two left-padded batches
  np.testing.assert_allclose(enc.encode(TEXTS), _reference(path, TEXTS), atol=1e-5)
  # Queries carry the folder's prompt (config_sentence_transformers.json); documents do not.
  assert enc.query_prompt == QUERY_PROMPT
  np.testing.assert_allclose(enc.encode_queries(TEXTS[:2]),
                             _reference(path, [QUERY_PROMPT + t for t in TEXTS[:2]]), atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(enc.encode(TEXTS), axis=-1), 1.0, atol=1e-6)


def test_query_prompt_options(tmp_path):
  path = build_qwen3_embedding(tmp_path)
  assert embedding.DecoderEmbedder(path, query_prompt="").query_prompt == ""  # GRACE authors' vLLM
  (path / "config_sentence_transformers.json").unlink()
  assert embedding.model_query_prompt(path) == embedding.QWEN3_EMBEDDING_QUERY_PROMPT


def test_load_text_encoder_dispatches_on_model_type(tmp_path):
  path = build_qwen3_embedding(tmp_path / "q")
  assert isinstance(embedding.load_text_encoder(path), embedding.DecoderEmbedder)
  assert embedding.load_text_encoder(None) is bert.default_encoder()
  assert isinstance(embedding.load_text_encoder(bert.minilm_path()), bert.SentenceEncoder)
  (tmp_path / "x").mkdir()
  (tmp_path / "x" / "config.json").write_text(json.dumps({"model_type": "t5"}))
  with pytest.raises(ValueError, match="model_type='t5'"):
    embedding.load_text_encoder(tmp_path / "x")
  with pytest.raises(FileNotFoundError, match="config.json"):
    embedding.load_text_encoder(tmp_path / "missing")
