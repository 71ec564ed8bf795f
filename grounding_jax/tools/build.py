"""The `search.*` config section (rl/config/fields.py) → a Tool, or None when search is off."""

from __future__ import annotations

from typing import Any, Mapping

from grounding_jax.data import retrieval
from grounding_jax.tools import corpus as corpus_lib
from grounding_jax.tools import http
from grounding_jax.tools import retriever as retriever_lib

# "" = no tool; "hybrid" = BM25 candidates reranked by MiniLM cosine (retrieval's "bm25_rerank").
RETRIEVERS = ("", "bm25", "dense", "hybrid", "http")
ON_ERROR = http.ON_ERROR
SYNTHETIC = "synthetic"  # search.corpus: the run's own synthetic world


def _retriever(name: str, encoder: Any) -> retrieval.Retriever:
  kind = {"bm25": "bm25", "dense": "dense", "hybrid": "bm25_rerank"}[name]
  return retrieval.make_retriever(kind, **({} if name == "bm25" else {"encoder": encoder}))


def corpus_of(search: Mapping[str, Any], data_spec: Mapping[str, Any] | None = None) -> list:
  """The passages `search.corpus` names: a JSONL file, or "synthetic" (the world of `data_spec`,
  the first stage's data, without its withheld facts)."""
  if search["corpus"] != SYNTHETIC:
    return corpus_lib.read_corpus(search["corpus"])
  if data_spec is None or data_spec.get("kind") != SYNTHETIC:
    raise ValueError("search.corpus='synthetic' searches the run's synthetic world: the first "
                     "stage's data.kind must be 'synthetic' (or give search.corpus a JSONL file)")
  if float(data_spec.get("answerable_ratio", 1.0)) < 1.0 and not data_spec.get("withheld_share"):
    raise ValueError("search.corpus='synthetic' with unanswerable questions needs "
                     "data.withheld_share > 0: otherwise the corpus holds every fact and the "
                     "'unanswerable' questions are answerable by search (e.g. withheld_share=0.5)")
  return corpus_lib.synthetic_corpus_of(data_spec)


def from_config(search: Mapping[str, Any], *, data_spec: Mapping[str, Any] | None = None,
                encoder: Any = None):
  """The tool `search` (config.search) describes, or None when search.retriever is "".

  Args:
    search: the config's `search` section (fields: rl/config/fields.py SEARCH).
    data_spec: the first stage's `data` section (search.corpus="synthetic" reads its world).
    encoder: the sentence encoder of "dense" / "hybrid" (default: all-MiniLM-L6-v2).
  """
  name = search["retriever"]
  if name not in RETRIEVERS:
    raise ValueError(f"search.retriever={name!r}; choose from {RETRIEVERS}")
  if not name:
    return None
  if name == "http":
    return http.HttpRetriever(search["url"], top_k=int(search["top_k"]),
                              timeout_s=float(search["timeout_s"]), retries=int(search["retries"]),
                              on_error=search["on_error"], cache_size=int(search["cache_size"]))
  return retriever_lib.RetrieverTool(corpus_of(search, data_spec), _retriever(name, encoder),
                                     top_k=int(search["top_k"]), cache_size=int(search["cache_size"]))
