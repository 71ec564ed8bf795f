"""A retriever served over HTTP, for users who serve their own index (Search-R1's retrieval server).

    tool = HttpRetriever("http://search-host:8000/retrieve", top_k=3, timeout_s=10, retries=2)
    tool(["capital of Veltria", ...])   # one POST for the batch

The protocol is Search-R1's (arXiv:2503.09516; its `search_r1/search/retrieval_server.py`):
POST {"queries": [...], "topk": k, "return_scores": true} → {"result": [[doc, ...] per query]},
each doc either {"document": {...}, "score": s} (with scores) or the document itself; a document is
{"id", "contents"} with the title on the first line of "contents" (Search-R1's wiki-18 corpus), or
{"id", "title", "text"}. Results are formatted as the in-process tools format them.

A call is retried on connection errors, timeouts, 408/429 and 5xx, waiting backoff_s · 2^attempt
(capped at max_backoff_s) between attempts, as the OpenAI-compatible judge does
(judges/openai_api.py); any other 4xx fails at once. A batch that still fails raises
`SearchRequestError` (on_error="raise"), or (on_error="empty") gives every query of the batch a
ToolResult whose text tells the policy the search failed and whose `error` says why, so a flaky
server costs the rollout information rather than the run. Successful results are cached by (query, k).

Withheld passages (an evidence-contrast group's gold_removed rows, sampling.tools.Withheld) are
filtered here, on the client: a query with m withheld passages asks the server for k + m, drops the
documents its Withheld hides (by id, or by text: the server's document text must equal the data's
gold passage, whitespace aside, or carry its id), keeps the first k, and asks again for twice as
many when the server held duplicates of a withheld passage and fewer than k are left. Under a server
that ranks by a per-document score (BM25 with fixed statistics, a dense index) these are exactly
the top k of the corpus without the withheld passages; the cache key holds the Withheld.
"""

from __future__ import annotations

import random
import time
from typing import Any, Sequence

import requests

from grounding_jax.data.schema import Passage
from grounding_jax.sampling.tools import ToolResult, Withheld
from grounding_jax.tools import retriever as retriever_lib

ON_ERROR = ("empty", "raise")
FAILED_TEXT = "The search failed; no results."  # what the policy reads when on_error="empty"
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class SearchRequestError(RuntimeError):
  """A search request failed after its retries (or the server's reply could not be read)."""


def _document(item: Any, where: str) -> Passage:
  doc = item.get("document", item) if isinstance(item, dict) else None
  if not isinstance(doc, dict):
    raise SearchRequestError(f"{where}: a result is {type(item).__name__}, expected an object")
  if "contents" in doc:
    title, _, text = str(doc["contents"]).partition("\n")  # Search-R1: first line is the title
  elif "text" in doc:
    title, text = str(doc.get("title", "")), str(doc["text"])
  else:
    raise SearchRequestError(f"{where}: a document has neither 'contents' nor 'text' "
                             f"(keys {sorted(doc)})")
  return Passage(text=text, title=title, id=str(doc.get("id", "")))


class HttpRetriever:
  """A `sampling.tools.Tool` calling a retrieval server; see the module docstring.

  Args:
    url: the endpoint, e.g. "http://localhost:8000/retrieve" (Search-R1's server).
    top_k: passages per query ("topk" in the request).
    timeout_s: per HTTP attempt (connect and read).
    retries: further attempts after the first.
    on_error: "empty" or "raise" (ON_ERROR).
    cache_size: results kept, keyed by (query, top_k) and the query's Withheld; 0 = none.
    backoff_s, max_backoff_s: the wait before retry n is min(backoff_s · 2^n, max_backoff_s).
  """

  withholds = True  # takes withheld=[Withheld per query], filtered on the client (module docstring)

  def __init__(self, url: str, *, top_k: int = 3, timeout_s: float = 10.0, retries: int = 2,
               on_error: str = "empty", cache_size: int = 4096, backoff_s: float = 0.5,
               max_backoff_s: float = 8.0):
    if not url or not str(url).startswith(("http://", "https://")):
      raise ValueError(f"search url={url!r}: give the retrieval server's endpoint, e.g. "
                       "http://search-host:8000/retrieve")
    if on_error not in ON_ERROR:
      raise ValueError(f"search on_error={on_error!r}; use one of {ON_ERROR}")
    if top_k < 1 or retries < 0 or timeout_s <= 0 or backoff_s < 0:
      raise ValueError(f"search top_k={top_k} must be >= 1, retries={retries} >= 0, timeout_s="
                       f"{timeout_s} > 0 and backoff_s={backoff_s} >= 0")
    self.url, self.top_k, self.timeout_s, self.retries = str(url), int(top_k), float(timeout_s), int(retries)
    self.on_error, self.backoff_s, self.max_backoff_s = on_error, float(backoff_s), float(max_backoff_s)
    self.cache = retriever_lib.LRUCache(cache_size)
    self.failures = 0  # batches that gave up

  def __getstate__(self):
    state = dict(vars(self))
    state["cache"] = retriever_lib.LRUCache(self.cache.size)  # a lock does not pickle; start empty
    return state

  def _post(self, queries: list[str], k: int) -> list[list[Passage]]:
    payload = {"queries": queries, "topk": k, "return_scores": True}
    error = ""
    for attempt in range(self.retries + 1):
      try:
        response = requests.post(self.url, json=payload, timeout=self.timeout_s)
      except requests.Timeout:
        error = f"no reply within timeout_s={self.timeout_s:g}"
      except requests.ConnectionError as e:
        error = f"cannot connect ({type(e).__name__})"
      else:
        if response.status_code == 200:
          return self._read(response, len(queries), k)
        error = f"HTTP {response.status_code}: {response.text[:200]}"
        if response.status_code not in _RETRY_STATUS:
          break  # the server rejects the request itself: retrying cannot help
      if attempt < self.retries:
        delay = min(self.backoff_s * 2 ** attempt, self.max_backoff_s)
        time.sleep(delay * (1.0 + 0.1 * random.random()))  # jitter: concurrent retries spread out
    raise SearchRequestError(f"search request to {self.url} failed after {attempt + 1} "
                             f"attempt(s): {error}")

  def _read(self, response: requests.Response, n: int, k: int) -> list[list[Passage]]:
    try:
      result = response.json()["result"]
    except (ValueError, KeyError, TypeError) as e:
      raise SearchRequestError(f"search server {self.url} answered 200 without a 'result' list "
                               f"({type(e).__name__}); body: {response.text[:200]!r}") from None
    if not isinstance(result, list) or len(result) != n:
      raise SearchRequestError(f"search server {self.url}: 'result' should hold {n} lists (one per "
                               f"query), got {type(result).__name__} of length "
                               f"{len(result) if isinstance(result, list) else '-'}")
    return [[_document(item, self.url) for item in docs[:k]] for docs in result]

  def _fetch(self, todo: list[tuple[str, Withheld]]) -> list[list[Passage]]:
    """Each (query, withheld)'s top_k documents without the withheld ones: one POST for all when
    nothing is withheld, else over-fetched and filtered (module docstring)."""
    out: list = [None] * len(todo)
    pending, k = list(range(len(todo))), self.top_k + max(w.size for _, w in todo)
    while pending:
      queries = list(dict.fromkeys(todo[i][0] for i in pending))
      found = dict(zip(queries, self._post(queries, k)))
      again = []
      for i in pending:
        query, withheld = todo[i]
        docs = found[query]
        kept = [p for p in docs if not withheld.hides(p.id, p.text)]
        if len(kept) >= self.top_k or len(docs) < k:  # enough, or the server has no more
          out[i] = kept[:self.top_k]
        else:
          again.append(i)
      pending, k = again, 2 * k
    return out

  def __call__(self, queries: Sequence[str],
               withheld: Sequence[Withheld] | None = None) -> list[ToolResult]:
    if withheld is not None and len(withheld) != len(queries):
      raise ValueError(f"withheld has {len(withheld)} entries for {len(queries)} queries; give one "
                       "Withheld per query")
    asks = list(zip(queries, withheld if withheld is not None else [Withheld()] * len(queries)))
    key = lambda ask: (ask[0], self.top_k, ask[1]) if ask[1] else (ask[0], self.top_k)
    results: dict = {}
    for ask in asks:
      cached = self.cache.get(key(ask))
      if cached is not None:
        results[key(ask)] = cached
    todo = list(dict.fromkeys(ask for ask in asks if key(ask) not in results))
    if todo:
      try:
        found = self._fetch(todo)
      except SearchRequestError as e:
        self.failures += 1
        if self.on_error == "raise":
          raise
        failed = ToolResult(text=FAILED_TEXT, error=str(e))
        return [results.get(key(ask), failed) for ask in asks]
      for ask, passages in zip(todo, found):
        results[key(ask)] = ToolResult(text=retriever_lib.format_passages(passages),
                                       doc_ids=tuple(p.id for p in passages),
                                       doc_texts=tuple(p.text for p in passages))
        self.cache.put(key(ask), results[key(ask)])
    return [results[key(ask)] for ask in asks]

  def __repr__(self) -> str:
    return f"HttpRetriever({self.url!r}, top_k={self.top_k})"
