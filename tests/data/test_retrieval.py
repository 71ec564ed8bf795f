"""Retrievers: BM25 against a hand-written reference, dense MiniLM, rerank hook, random, oracle."""

import math
from collections import Counter

import numpy as np
import pytest

from grounding_jax.data import retrieval
from grounding_jax.data.schema import Passage

CORPUS = [
    Passage("The capital of Veltria is Orsk. Orsk lies on a cold river.", title="Veltria"),
    Passage("Veltria is known for its salt mines and its salt trade."),
    Passage("Mara Quell lives in Veltria and works as a baker in Orsk."),
    Passage("The river Dun flows through three countries before reaching the sea."),
    Passage("Tannex was founded by Mara Quell. Tannex makes bicycles and lamps and bicycles."),
    Passage("Salt, salt and more salt: the mines of the north."),
    Passage("Bicycles are popular in Orsk."),
    Passage("Nothing relevant here at all."),
]
QUERIES = ["capital of Veltria", "who founded Tannex", "salt mines", "bicycles in Orsk",
           "Mara Quell baker", "river sea", "unknownword", "the the the"]


def _reference_bm25(query_tokens, docs_tokens, k1=1.5, b=0.75):
  """Okapi BM25, Lucene idf, written out term by term (float64)."""
  n = len(docs_tokens)
  avgdl = sum(map(len, docs_tokens)) / n
  df = Counter(t for d in docs_tokens for t in set(d))
  scores = []
  for d in docs_tokens:
    tf = Counter(d)
    s = 0.0
    for t in query_tokens:
      if df[t] == 0:
        continue
      idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
      s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
    scores.append(s)
  return np.array(scores)


@pytest.mark.parametrize("mode", ["words", "whitespace"])
def test_bm25_matches_reference_ranking(mode):
  r = retrieval.BM25Retriever(k1=1.5, b=0.75, tokenizer=mode).index(CORPUS)
  docs = [retrieval.tokenize(retrieval.passage_text(p), mode) for p in CORPUS]
  for q in QUERIES:
    want = _reference_bm25(retrieval.tokenize(q, mode), docs)
    got = r.scores(q)
    # The reference keeps the classic (k1 + 1) numerator; bm25s's Lucene form drops it. Same ranking.
    np.testing.assert_allclose(got * (1.5 + 1), want, rtol=1e-9, atol=1e-12)
    order = [i for i, _ in r.search(q, len(CORPUS))]
    assert order == list(np.argsort(-want, kind="stable")), q


def test_bm25_words_mode_ignores_case_and_punctuation():
  r = retrieval.BM25Retriever().index(CORPUS)
  assert {i for i, s in r.search("ORSK?", 8) if s > 0} == {0, 2, 6}  # the passages naming Orsk
  assert r.search("capital of veltria", 1)[0][0] == 0
  # The GRACE authors' whitespace tokens keep case and punctuation, so the same query finds nothing.
  assert not retrieval.BM25Retriever(tokenizer="whitespace").index(CORPUS).scores("ORSK?").any()


def test_dense_minilm_ranks_paraphrase_first():
  passages = [Passage("The automobile would not start because its battery was dead."),
              Passage("A car battery stores energy for the starter motor of a vehicle."),
              Passage("She bought a new dress for the wedding in June."),
              Passage("The recipe needs two cups of flour and an egg."),
              Passage("Dead batteries are recycled at the municipal depot.")]
  r = retrieval.DenseRetriever().index(passages)
  hits = r.search("My car won't turn on since the battery is flat.", 3)
  assert hits[0][0] == 0
  assert hits[0][1] > hits[1][1]
  assert {i for i, _ in hits}.isdisjoint({2, 3})


def test_rerank_hook_reorders_first_stage_candidates():
  # The hook's logic is what is tested here, so a deterministic scorer stands in for a cross-encoder.
  by_length = lambda query, cands: [-len(p.text) for p in cands]
  first = retrieval.BM25Retriever()
  r = retrieval.RerankRetriever(first, by_length, extra_candidates=2).index(CORPUS)
  candidates = [i for i, _ in first.search("Orsk", 3 + 2)]
  got = [i for i, _ in r.search("Orsk", 3)]
  want = sorted(candidates, key=lambda i: len(CORPUS[i].text))[:3]
  assert got == want


def test_random_retriever_is_seeded_and_uniform_without_replacement():
  r = retrieval.RandomRetriever(seed=1).index(CORPUS)
  a = r.search("q", 5)
  assert a == r.search("q", 5)
  assert len({i for i, _ in a}) == 5
  assert a != retrieval.RandomRetriever(seed=2).index(CORPUS).search("q", 5)
  firsts = Counter(retrieval.RandomRetriever(seed=s).index(CORPUS).search("q", 1)[0][0]
                   for s in range(800))
  assert set(firsts) == set(range(len(CORPUS)))
  assert max(firsts.values()) < 2 * 800 / len(CORPUS)


def test_oracle_puts_gold_first():
  r = retrieval.OracleRetriever().index(CORPUS)
  assert [i for i, _ in r.search("q", 5, gold=[4, 2])] == [4, 2]
  filled = retrieval.OracleRetriever(fill=True).index(CORPUS).search("q", 4, gold=[4, 2])
  assert [i for i, _ in filled] == [4, 2, 0, 1]
  with pytest.raises(ValueError, match="gold index 9"):
    r.search("q", 2, gold=[9])


def test_make_retriever_rejects_unknown_name_and_a_no_op_rerank():
  with pytest.raises(ValueError, match="bm25"):
    retrieval.make_retriever("splade")
  with pytest.raises(ValueError, match="rerank_fn"):
    retrieval.make_retriever("dense_rerank")
  assert isinstance(retrieval.make_retriever("bm25_rerank"), retrieval.RerankRetriever)


def test_dense_retriever_embeds_queries_with_the_embedders_query_prompt(tmp_path):
  from grounding_jax.models.embedding import DecoderEmbedder
  from tiny_encoders import QUERY_PROMPT, build_qwen3_embedding
  enc = DecoderEmbedder(build_qwen3_embedding(tmp_path))
  docs = [Passage("the capital of veltria is orsk ."), Passage("mara quell was a baker .", title="mara"),
          Passage("salt mines")]
  r = retrieval.make_retriever("dense", encoder=enc).index(docs)
  query = "what is the capital of veltria ?"
  want = enc.encode([retrieval.passage_text(p) for p in docs]) @ enc.encode([QUERY_PROMPT + query])[0]
  np.testing.assert_allclose(r.scores(query), want, atol=1e-6)
  assert not np.allclose(want, enc.encode([retrieval.passage_text(p) for p in docs]) @ enc.encode([query])[0])


def test_cross_encoder_rerank_orders_candidates_by_its_logits(tmp_path):
  from grounding_jax.models.reranker import CrossEncoder
  from tiny_encoders import build_xlmr_reranker
  ce = CrossEncoder(build_xlmr_reranker(tmp_path))
  corpus = [Passage(p.text.lower()) for p in CORPUS]
  r = retrieval.make_retriever("dense_rerank", rerank_fn=retrieval.cross_encoder_rerank_fn(ce),
                               extra_candidates=2).index(corpus)
  first = [i for i, _ in r.first_stage.search("who founded tannex?", 5)]
  logits = ce.score("who founded tannex?", [corpus[i].text for i in first])
  got = r.search("who founded tannex?", 3)
  assert [i for i, _ in got] == [first[j] for j in np.argsort(-logits, kind="stable")[:3]]
  np.testing.assert_allclose([s for _, s in got], np.sort(logits)[::-1][:3], rtol=1e-6)


def test_fusion_rerank_adds_reciprocal_ranks_of_dense_and_bm25():
  from grounding_jax.models import bert
  cands = CORPUS[:6]
  query = "bicycles made by Tannex"
  got = retrieval.fusion_rerank_fn()(query, cands)
  texts = [retrieval.passage_text(p) for p in cands]
  enc = bert.default_encoder()
  dense = enc.encode(texts) @ enc.encode([query])[0]
  # bm25s (Lucene) leaves out the reference's constant (k1 + 1) factor: ranks are unchanged.
  lexical = _reference_bm25(retrieval.tokenize(query), [retrieval.tokenize(t) for t in texts])
  rank = lambda s: {i: r + 1 for r, i in enumerate(sorted(range(len(s)), key=lambda i: (-s[i], i)))}
  want = [1 / (60 + rank(dense)[i]) + 1 / (60 + rank(lexical)[i]) for i in range(len(cands))]
  np.testing.assert_allclose(got, want, rtol=1e-12)
  assert np.argsort(-np.asarray(got)).tolist() not in (np.argsort(-dense).tolist(),
                                                       np.argsort(-lexical, kind="stable").tolist())


def test_exclude_skips_passages_and_keeps_the_order_of_the_rest():
  """Every kind's `exclude`: the full ranking (a longer k) without the excluded indices."""
  gone = {0, 2}
  bm25 = retrieval.BM25Retriever().index(CORPUS)
  by_length = lambda q, ps: [len(p.text) for p in ps]
  rerank = retrieval.RerankRetriever(retrieval.BM25Retriever(), by_length,
                                     extra_candidates=2).index(CORPUS)
  cases = [(bm25, {}), (retrieval.RandomRetriever(seed=3).index(CORPUS), {}),
           (retrieval.OracleRetriever(fill=True).index(CORPUS), {"gold": [2, 4]})]
  for r, kw in cases:
    for q in QUERIES[:4]:
      full = [i for i, _ in r.search(q, len(CORPUS), **kw)]
      want = [i for i in full if i not in gone][:3]
      assert [i for i, _ in r.search(q, 3, exclude=gone, **kw)] == want
  # The reranker sees the first stage's candidates of the masked corpus (k + 2 of them), not fewer.
  first = [i for i, _ in bm25.search("capital of Veltria", 5, exclude=gone)]
  want = sorted(first, key=lambda i: -len(CORPUS[i].text))[:3]
  assert [i for i, _ in rerank.search("capital of Veltria", 3, exclude=gone)] == want
  oracle = retrieval.OracleRetriever().index(CORPUS)
  assert oracle.search("q", 2, gold=[2, 4], exclude=gone) == [(4, 1.0)]
