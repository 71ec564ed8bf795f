"""Cross-encoder reranker (bge-reranker-v2-m3's architecture): text in, logits equal transformers'."""

import numpy as np
import pytest

from grounding_jax.models.reranker import CrossEncoder
from tiny_encoders import build_xlmr_reranker

QUERY = "who founded tannex?"
PASSAGES = ["tannex was founded by mara quell.", "the capital of veltria is orsk.",
            "salt mines of the north and the cold river dun which flows to the sea " * 3,
            "bicycles", "mara quell lives in orsk and was a baker."]


def test_scores_match_transformers_pair_by_pair(tmp_path):
  import torch
  import transformers

  path = build_xlmr_reranker(tmp_path)
  ref = transformers.XLMRobertaForSequenceClassification.from_pretrained(path).eval()
  tok = transformers.AutoTokenizer.from_pretrained(path)
  want = []
  for p in PASSAGES:  # one unpadded pair at a time: the score a pair has on its own
    enc = tok(QUERY, p, return_tensors="pt")
    assert enc["input_ids"][0, 0] == tok.cls_token_id and (enc["input_ids"][0] == tok.sep_token_id).sum() == 3
    with torch.no_grad():
      want.append(ref(**enc).logits[0, 0].item())
  # batch_size 2: three batches, the last one padded with a filler row.
  got = CrossEncoder(path, batch_size=2).score(QUERY, PASSAGES)
  assert got.shape == (5,) and got.dtype == np.float32
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
  assert np.argsort(-got).tolist() == np.argsort(-np.array(want)).tolist()


def test_truncates_the_passage_not_the_query(tmp_path):
  path = build_xlmr_reranker(tmp_path)
  ce = CrossEncoder(path, max_length=24)
  long = "the capital of veltria is orsk. " * 20
  short = ce.score(QUERY, [long])
  # Cut by hand to the same 24 tokens: the query keeps all its tokens.
  enc = ce.tokenizer(QUERY, long, truncation="only_second", max_length=24)
  assert len(enc["input_ids"]) == 24
  assert ce.tokenizer.decode(enc["input_ids"]).startswith("<s> who founded tannex?</s></s>")
  assert np.isfinite(short).all()
  assert CrossEncoder(path).max_length == 1026 - 2  # the model's limit: positions start at pad + 1


def test_rejects_a_classifier_with_several_labels(tmp_path):
  path = build_xlmr_reranker(tmp_path, num_labels=2)
  with pytest.raises(ValueError, match="num_labels=1"):
    CrossEncoder(path)
