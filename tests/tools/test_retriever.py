"""The in-process retriever tools on a tiny corpus: Search-R1's format, doc ids, top-k, the three
retrievers, the (query, k) cache, and the config's search section."""

import ml_collections
import numpy as np
import pytest

from grounding_jax import tools
from grounding_jax.data import retrieval
from grounding_jax.data.schema import Passage
from grounding_jax.rl import config as rl_config
from grounding_jax.sampling.tools import ToolFormat, ToolResult, Withheld
from grounding_jax.tools import retriever as retriever_lib

CORPUS = [
    Passage("The capital of Veltria is Orsk.", title="Veltria", id="v1"),
    Passage("Veltria signed a trade treaty with Norland.", title="Veltria", id="v2"),
    Passage("Mara Quell lives in Veltria.", title="Mara Quell", id="m1"),
    Passage("Tannex was founded by Mara Quell.", title="Tannex", id="t1"),
    Passage("The river Dun flows to the sea.", title="Dun", id="d1"),
]


class WordEncoder:
  """A bag-of-words stand-in for MiniLM (unit vectors over the corpus vocabulary): fast and exact."""

  def __init__(self):
    self.vocab = {w: i for i, w in enumerate(sorted({w for p in CORPUS
                                                     for w in retrieval.tokenize(retrieval.passage_text(p))}))}

  def encode(self, texts):
    out = np.zeros((len(texts), len(self.vocab)))
    for row, t in enumerate(texts):
      for w in retrieval.tokenize(t):
        if w in self.vocab:
          out[row, self.vocab[w]] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

  encode_queries = encode


def test_bm25_tool_formats_results_as_search_r1():
  tool = tools.RetrieverTool(CORPUS, retrieval.BM25Retriever(), top_k=2)
  [result] = tool(["capital of Veltria"])
  assert result == ToolResult(
      text="Doc 1(Title: Veltria) The capital of Veltria is Orsk.\n"
           "Doc 2(Title: Veltria) Veltria signed a trade treaty with Norland.",
      doc_ids=("v1", "v2"), doc_texts=("The capital of Veltria is Orsk.",
                                       "Veltria signed a trade treaty with Norland."))
  # What the sampler inserts after </search> (Search-R1's blank lines around the block).
  assert ToolFormat().wrap(result).startswith("\n\n<information>Doc 1(Title: Veltria)")


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_dense_and_hybrid_tools_rank_the_matching_passage_first(kind, tmp_path):
  tools.write_corpus(tmp_path / "c.jsonl", CORPUS)
  search = dict(retriever=kind, corpus=str(tmp_path / "c.jsonl"), top_k=3, cache_size=8)
  tool = tools.from_config(search, encoder=WordEncoder())
  assert isinstance(tool.retriever, retrieval.RerankRetriever if kind == "hybrid"
                    else retrieval.DenseRetriever)
  results = tool(["who founded Tannex", "river Dun sea"])
  assert [r.doc_ids[0] for r in results] == ["t1", "d1"]
  assert all(len(r.doc_ids) == 3 for r in results)


def test_top_k_larger_than_the_corpus_returns_it_all():
  [result] = tools.RetrieverTool(CORPUS, retrieval.BM25Retriever(), top_k=9)(["Veltria"])
  assert sorted(result.doc_ids) == sorted(p.id for p in CORPUS)
  assert result.text.count("\nDoc ") == len(CORPUS) - 1


def test_the_cache_answers_repeated_queries_and_forgets_the_least_recent():
  tool = tools.RetrieverTool(CORPUS, retrieval.BM25Retriever(), top_k=1, cache_size=2)
  first = tool(["Orsk", "Orsk", "Tannex"])
  assert first[0] is first[1] and (tool.cache.hits, tool.cache.misses) == (1, 2)
  tool(["Dun"])                      # evicts "Orsk", the least recently used
  assert len(tool.cache) == 2 and tool.cache.get(("Orsk", 1)) is None
  assert tool.cache.get(("Dun", 1)).doc_ids == ("d1",)
  uncached = tools.RetrieverTool(CORPUS, retrieval.BM25Retriever(), cache_size=0)
  uncached(["Orsk", "Orsk"])
  assert len(uncached.cache) == 0
  with pytest.raises(ValueError, match="cache_size"):
    retriever_lib.LRUCache(-1)


def test_from_config_builds_the_tool_the_search_section_names(tmp_path):
  c = rl_config.default_config()
  assert tools.from_config(c.search) is None            # search is off by default
  path = tmp_path / "corpus.jsonl"
  tools.write_corpus(path, CORPUS)
  c.search.update(dict(retriever="bm25", corpus=str(path), top_k=1))
  tool = tools.from_config(c.search)
  assert tool(["Tannex founder"])[0].doc_ids == ("t1",)
  c.search.corpus = "synthetic"
  data = c.stages[0].data
  with pytest.raises(ValueError, match="withheld_share"):
    tools.from_config(c.search, data_spec=data)       # half the questions unanswerable, every fact kept
  data.withheld_share = 0.5
  assert len(tools.from_config(c.search, data_spec=data).passages) == 72
  with pytest.raises(ValueError, match="data.kind must be 'synthetic'"):
    tools.from_config(c.search, data_spec=ml_collections.ConfigDict(dict(kind="jsonl")))
  c.search.update(dict(retriever="http", url=""))
  with pytest.raises(ValueError, match="endpoint"):
    tools.from_config(c.search)


# ------------------------------------------------------------------ withheld passages (contrast)

GOLD = CORPUS[0]  # "The capital of Veltria is Orsk.", v1
QUERY = "capital of Veltria Orsk"


def _kinds():
  return {"bm25": lambda: retrieval.BM25Retriever(),
          "dense": lambda: retrieval.DenseRetriever(WordEncoder()),
          "hybrid": lambda: retrieval.make_retriever(
              "bm25_rerank", rerank_fn=retrieval.dense_rerank_fn(WordEncoder()),
              extra_candidates=1)}


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_a_withheld_query_never_gets_its_passage_and_gets_the_best_of_the_rest(kind):
  make = _kinds()[kind]
  tool = tools.RetrieverTool(CORPUS, make(), top_k=2)
  kept, removed = tool([QUERY, QUERY], withheld=[Withheld(), Withheld.of([GOLD])])
  assert kept.doc_ids[0] == "v1"                        # the same query finds the gold ...
  assert "v1" not in removed.doc_ids and len(removed.doc_ids) == 2  # ... unless it is withheld
  # The reference: the full index's scores with the gold left out (numpy), or for the reranker a
  # first stage over the others, reranked.
  if kind == "hybrid":
    first = retrieval.BM25Retriever().index(CORPUS)
    scores = first.scores(QUERY)
    candidates = [i for i in np.argsort(-scores, kind="stable") if i != 0][:2 + 1]
    dense = retrieval.DenseRetriever(WordEncoder()).index(CORPUS).scores(QUERY)
    want = [CORPUS[i].id for i in sorted(candidates, key=lambda i: -dense[i])][:2]
  else:
    scores = make().index(CORPUS).scores(QUERY)
    want = [CORPUS[i].id for i in np.argsort(-scores, kind="stable") if i != 0][:2]
  assert list(removed.doc_ids) == want
  if kind == "dense":  # cosine does not depend on the corpus: the same as a corpus without it
    [alone] = tools.RetrieverTool(CORPUS[1:], make(), top_k=2)([QUERY])
    assert alone.doc_ids == removed.doc_ids


def test_a_passage_is_withheld_by_its_text_under_another_id():
  tool = tools.RetrieverTool(CORPUS, retrieval.BM25Retriever(), top_k=5)
  same = Passage("The capital of  Veltria is Orsk.\n", title="x", id="elsewhere-17")
  [r] = tool([QUERY], withheld=[Withheld.of([same])])
  assert "v1" not in r.doc_ids and len(r.doc_ids) == 4
  assert tool.missing([same, Passage("Not in the corpus.", id="zz")]) == [
      Passage("Not in the corpus.", id="zz")]
  [everything] = tools.RetrieverTool(CORPUS, retrieval.BM25Retriever(), top_k=5)(
      [QUERY], withheld=[Withheld.of(CORPUS)])
  assert everything.doc_ids == () and everything.text == ""


@pytest.mark.parametrize("first", ["kept", "removed"])
def test_the_cache_never_answers_one_condition_with_the_others_result(first):
  tool = tools.RetrieverTool(CORPUS, retrieval.BM25Retriever(), top_k=1, cache_size=8)
  gone = Withheld.of([GOLD])
  calls = {"kept": lambda: tool([QUERY])[0], "removed": lambda: tool([QUERY], withheld=[gone])[0]}
  second = "removed" if first == "kept" else "kept"
  a, b = calls[first](), calls[second]()
  results = {first: a, second: b}
  assert results["kept"].doc_ids == ("v1",) and results["removed"].doc_ids != ("v1",)
  assert tool.cache.misses == 2 and len(tool.cache) == 2   # two keys, neither hit the other
  assert calls["removed"]() is results["removed"] and calls["kept"]() is results["kept"]
  assert tool.cache.hits == 2
  # Two withheld sets that mask the same corpus passages share one entry (the key is the mask).
  tool([QUERY], withheld=[Withheld.of([Passage(GOLD.text, id="other-id")])])
  assert tool.cache.hits == 3 and len(tool.cache) == 2


def test_a_withheld_list_must_match_the_queries():
  tool = tools.RetrieverTool(CORPUS, retrieval.BM25Retriever())
  with pytest.raises(ValueError, match="withheld has 1 entries for 2 queries"):
    tool([QUERY, QUERY], withheld=[Withheld()])
