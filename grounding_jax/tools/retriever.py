"""In-process retriever tools: data/retrieval.py's retrievers over a corpus, called by query batches.

    tool = RetrieverTool(passages, retrieval.BM25Retriever(), top_k=3, cache_size=4096)
    tool(["capital of Veltria"])[0].text   # 'Doc 1(Title: Veltria) The capital of Veltria is Orsk. ...'

Results read as Search-R1 formats them for the policy (arXiv:2503.09516; its retrieval code,
`_passages2string`): one line per passage, best first, `Doc i(Title: <title>) <text>`, the lines
joined by newlines and stripped. The sampler wraps the text in `<information>…</information>`
(sampling.tools.ToolFormat.wrap). Results are cached by (query, k): a group's G completions often
ask the same query, and the same question comes back every epoch.

Withheld passages (an evidence-contrast group's gold_removed rows, sampling.tools.Withheld): the
passages a query's Withheld hides (by id, or by text under any id) are masked out of the ranking
(`retrieval.Retriever.search(exclude=...)`), so the query gets the top k of the rest under the full
index's scores, exact and at the cost of one search; the cache key then also holds the masked
passages' indices, so a masked result never answers an unmasked query nor another mask.
"""

from __future__ import annotations

import collections
import threading
from typing import Iterable, Sequence

from grounding_jax.data import retrieval
from grounding_jax.data.schema import Passage
from grounding_jax.sampling.tools import ToolResult, Withheld, same_text


def format_passages(passages: Sequence[Passage]) -> str:
  """Search-R1's text of retrieved passages: `Doc i(Title: t) text` lines, 1-based, best first."""
  return "\n".join(f"Doc {i + 1}(Title: {p.title}) {p.text}"
                   for i, p in enumerate(passages)).strip()


class LRUCache:
  """A bounded map that forgets the least recently used entry first (size 0 keeps nothing);
  `hits` and `misses` count lookups. Thread-safe: rollouts of several hosts' threads may share it."""

  def __init__(self, size: int):
    if size < 0:
      raise ValueError(f"cache_size={size}: must be >= 0 (0 = no cache)")
    self.size, self.hits, self.misses = int(size), 0, 0
    self._items: collections.OrderedDict = collections.OrderedDict()
    self._lock = threading.Lock()

  def get(self, key):
    with self._lock:
      if key in self._items:
        self._items.move_to_end(key)
        self.hits += 1
        return self._items[key]
      self.misses += 1
      return None

  def put(self, key, value) -> None:
    if not self.size:
      return
    with self._lock:
      self._items[key] = value
      self._items.move_to_end(key)
      while len(self._items) > self.size:
        self._items.popitem(last=False)

  def __len__(self) -> int:
    return len(self._items)


class RetrieverTool:
  """A `sampling.tools.Tool` over `passages` with one of data/retrieval.py's retrievers.

  Args:
    passages: the corpus (each with an id: the ToolResult's doc_ids, for retrieval recall).
    retriever: an unindexed `retrieval.Retriever` (BM25, dense, or BM25 reranked by dense: "hybrid");
      it indexes the corpus on the first call, so building the tool costs nothing until a rollout
      searches.
    top_k: passages per query.
    cache_size: results kept, keyed by (query, top_k) and, for a query with withheld passages, the
      indices they mask; 0 = none.
  """

  withholds = True  # takes withheld=[Withheld per query] (module docstring)

  def __init__(self, passages: Sequence[Passage], retriever: retrieval.Retriever, *, top_k: int = 3,
               cache_size: int = 4096):
    if top_k < 1:
      raise ValueError(f"top_k={top_k}: must be >= 1")
    if not passages:
      raise ValueError("a retriever tool needs a non-empty corpus")
    self.passages, self.retriever, self.top_k = list(passages), retriever, int(top_k)
    self.cache = LRUCache(cache_size)
    self._indexed = False
    self._lock = threading.Lock()
    self._by_id: dict[str, list[int]] | None = None  # built on the first withheld query
    self._by_text: dict[str, list[int]] = {}

  def masked(self, withheld: Withheld) -> frozenset[int]:
    """The corpus indices `withheld` hides: passages with one of its ids or, whitespace aside, one
    of its texts."""
    if not withheld:
      return frozenset()
    if self._by_id is None:
      by_id, by_text = {}, {}
      for i, p in enumerate(self.passages):
        by_id.setdefault(str(p.id), []).append(i)
        by_text.setdefault(same_text(p.text), []).append(i)
      self._by_id, self._by_text = by_id, by_text
    pairs = ((withheld.ids, self._by_id), (withheld.texts, self._by_text))
    return frozenset(i for keys, table in pairs for key in keys for i in table.get(key, ()))

  def missing(self, passages: Iterable[Passage]) -> list[Passage]:
    """The `passages` the corpus does not hold (by id, or by text under another id)."""
    return [p for p in passages if not self.masked(Withheld.of([p]))]

  def _search(self, query: str, masked: frozenset[int]) -> ToolResult:
    with self._lock:
      if not self._indexed:
        self.retriever.index(self.passages)
        self._indexed = True
    k = min(self.top_k, len(self.passages) - len(masked))
    hits = (self.retriever.search(query, k, exclude=masked) if masked else
            self.retriever.search(query, k)) if k > 0 else []
    found = [self.passages[i] for i, _ in hits]
    return ToolResult(text=format_passages(found), doc_ids=tuple(p.id for p in found),
                      doc_texts=tuple(p.text for p in found))

  def __call__(self, queries: Sequence[str],
               withheld: Sequence[Withheld] | None = None) -> list[ToolResult]:
    if withheld is not None and len(withheld) != len(queries):
      raise ValueError(f"withheld has {len(withheld)} entries for {len(queries)} queries; give one "
                       "Withheld per query")
    out = []
    for i, query in enumerate(queries):
      masked = self.masked(withheld[i]) if withheld is not None else frozenset()
      key = (query, self.top_k, masked) if masked else (query, self.top_k)
      result = self.cache.get(key)
      if result is None:
        result = self._search(query, masked)
        self.cache.put(key, result)
      out.append(result)
    return out

  def __repr__(self) -> str:
    return (f"RetrieverTool({type(self.retriever).__name__}, {len(self.passages)} passages, "
            f"top_k={self.top_k})")
