"""Retrievers behind one interface: `index(passages)`, then `search(query, k) -> [(idx, score)]`.

`idx` is the 0-based position of a passage in the list given to `index`; results are best first.
Implementations: BM25 (bm25s, Lucene variant), dense (any embedder with `encode` / `encode_queries`:
all-MiniLM-L6-v2 by default, Qwen3-Embedding from a folder — models/embedding.py), retrieve-then-rerank
(any scoring callable: a cross-encoder such as bge-reranker-v2-m3 — `cross_encoder_rerank_fn` — or,
offline, a rank fusion of dense and BM25 — `fusion_rerank_fn`), seeded random, and oracle (gold
first). GRACE (App. B.1) builds its training contexts with exactly these five kinds.

Every `search` takes a keyword `gold` (0-based gold indices) so a caller can treat retrievers
uniformly; only the oracle reads it. And a keyword `exclude` (0-based indices never returned): the
ranking of the whole index with those passages skipped, so the top k of what is left are exactly the
k best of the others under the full corpus's scores (BM25's statistics are the full corpus's, as a
filtered search in a vector store) — how a search tool withholds one prompt's gold passages
(tools/retriever.py).
"""

from __future__ import annotations

import re
import zlib
from typing import Callable, Collection, Sequence

import numpy as np

from grounding_jax.data.schema import Passage
from grounding_jax.models import bert

SearchResult = list[tuple[int, float]]
# (query, candidate passages) -> one relevance score per candidate, higher is better.
RerankFn = Callable[[str, Sequence[Passage]], Sequence[float]]

_WORD_RE = re.compile(r"\w+", re.UNICODE)


def passage_text(p: Passage) -> str:
  """The text a retriever sees: `title` then `text` on the next line (GRACE chunks HotpotQA this way)."""
  return f"{p.title}\n{p.text}" if p.title else p.text


def tokenize(text: str, mode: str = "words") -> list[str]:
  """BM25 tokens.

  "words" (default): lower-cased maximal runs of Unicode word characters (`\\w+`), so "Orsk." and
  "orsk" match. "whitespace": `str.split()` with case kept — the GRACE authors' BM25 (their code).
  """
  if mode == "words":
    return _WORD_RE.findall(text.lower())
  if mode == "whitespace":
    return text.split()
  raise ValueError(f"tokenizer mode {mode!r} unknown; use 'words' or 'whitespace'.")


def _top_k(scores: np.ndarray, k: int, exclude: Collection[int] = ()) -> SearchResult:
  # Stable sort: ties keep index order, so results are deterministic.
  order = np.argsort(-scores, kind="stable")
  if exclude:
    order = order[~np.isin(order, np.fromiter(exclude, np.int64, len(exclude)))]
  return [(int(i), float(scores[i])) for i in order[:k]]


def _check_k(k: int) -> None:
  if k < 1:
    raise ValueError(f"k={k}: must be ≥ 1.")


class Retriever:
  """Base class: keeps the indexed passages; subclasses score them."""

  passages: list[Passage]

  def index(self, passages: Sequence[Passage]) -> "Retriever":
    self.passages = list(passages)
    return self

  def search(self, query: str, k: int, *, gold: Sequence[int] = (),
             exclude: Collection[int] = ()) -> SearchResult:
    """The k best passages for `query`, [(index, score)] best first, none of `exclude`."""
    raise NotImplementedError

  def precompute(self, passages: Sequence[Passage]) -> None:
    """Hook to embed a whole corpus ahead of many per-question `index` calls (dense kinds)."""

  def _require_index(self) -> None:
    if not hasattr(self, "passages"):
      raise RuntimeError(f"{type(self).__name__}.search called before index(passages).")


class BM25Retriever(Retriever):
  """Okapi BM25, Lucene variant, via `bm25s`.

  score(q, d) = Σ_{t ∈ q} idf(t) · tf(t,d) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl)),
  idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5)); the sum runs over query tokens with repetition.
  This is the GRACE authors' idf; their tf term's extra (k1 + 1) factor is a constant and does not
  change rankings. Query tokens absent from the corpus contribute 0.
  """

  def __init__(self, k1: float = 1.5, b: float = 0.75, tokenizer: str = "words"):
    tokenize("", tokenizer)  # validate the mode early
    self.k1, self.b, self.tokenizer = k1, b, tokenizer

  def index(self, passages: Sequence[Passage]) -> "BM25Retriever":
    import bm25s  # pylint: disable=g-import-not-at-top

    super().index(passages)
    corpus = [tokenize(passage_text(p), self.tokenizer) for p in self.passages]
    self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method="lucene", dtype="float64")
    self._bm25.index(corpus, show_progress=False)
    return self

  def scores(self, query: str) -> np.ndarray:
    """float64 [num_passages] BM25 scores of every indexed passage."""
    self._require_index()
    ids = self._bm25.get_tokens_ids(tokenize(query, self.tokenizer))
    if not ids:
      return np.zeros(len(self.passages))
    return np.asarray(self._bm25.get_scores(ids), np.float64)

  def search(self, query: str, k: int, *, gold: Sequence[int] = (),
             exclude: Collection[int] = ()) -> SearchResult:
    _check_k(k)
    return _top_k(self.scores(query), k, exclude)


class DenseRetriever(Retriever):
  """Cosine similarity of unit-norm embeddings: `encoder.encode(passages)` against
  `encoder.encode_queries([query])` (default encoder: all-MiniLM-L6-v2)."""

  def __init__(self, encoder=None):
    self._encoder = encoder

  @property
  def encoder(self):
    if self._encoder is None:
      self._encoder = bert.default_encoder()
    return self._encoder

  def precompute(self, passages: Sequence[Passage]) -> None:
    """Embeds `passages` in one length-sorted pass, filling the encoder's cache so the per-question
    `index` calls of a GRACE build look them up (skipped when the cache cannot hold them all)."""
    texts = list(dict.fromkeys(passage_text(p) for p in passages))
    if len(texts) <= getattr(self.encoder, "cache_size", 0):
      self.encoder.encode(texts)

  def index(self, passages: Sequence[Passage]) -> "DenseRetriever":
    super().index(passages)
    self.embeddings = self.encoder.encode([passage_text(p) for p in self.passages])  # [N, D]
    return self

  def scores(self, query: str) -> np.ndarray:
    self._require_index()
    return self.embeddings @ self.encoder.encode_queries([query])[0]

  def search(self, query: str, k: int, *, gold: Sequence[int] = (),
             exclude: Collection[int] = ()) -> SearchResult:
    _check_k(k)
    return _top_k(self.scores(query), k, exclude)


def dense_rerank_fn(encoder=None) -> RerankFn:
  """A rerank hook scoring candidates by sentence-embedding cosine (offline stand-in for a
  cross-encoder such as bge-reranker-v2-m3, which GRACE used)."""
  state = {"encoder": encoder}

  def rerank(query: str, candidates: Sequence[Passage]) -> list[float]:
    if state["encoder"] is None:
      state["encoder"] = bert.default_encoder()
    enc = state["encoder"]
    docs = enc.encode([passage_text(p) for p in candidates])
    return list(map(float, docs @ enc.encode_queries([query])[0]))

  return rerank


def cross_encoder_rerank_fn(cross_encoder) -> RerankFn:
  """A rerank hook scoring each (query, `title\ntext`) pair with a cross-encoder
  (models.reranker.CrossEncoder, e.g. bge-reranker-v2-m3 as GRACE used)."""

  def rerank(query: str, candidates: Sequence[Passage]) -> list[float]:
    return list(map(float, cross_encoder.score(query, [passage_text(p) for p in candidates])))

  return rerank


def fusion_rerank_fn(encoder=None, *, k: int = 60) -> RerankFn:
  """A rerank hook fusing two orders of the candidates, embedding cosine and BM25 over the candidate
  set, by reciprocal rank: score = 1 / (k + rank_dense) + 1 / (k + rank_bm25) (Cormack et al. 2009,
  k = 60). The offline stand-in for a cross-encoder: on a HotpotQA pool the dense top k + 5 is the
  whole pool, so BM25 alone would copy the bm25 retriever and dense alone the dense one."""
  dense = dense_rerank_fn(encoder)

  def rerank(query: str, candidates: Sequence[Passage]) -> list[float]:
    fused = np.zeros(len(candidates))
    for scores in (np.asarray(dense(query, candidates)),
                   BM25Retriever().index(candidates).scores(query)):
      ranks = np.empty(len(candidates))
      ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(candidates) + 1)
      fused += 1.0 / (k + ranks)
    return list(map(float, fused))

  return rerank


class RerankRetriever(Retriever):
  """Retrieve `k + extra_candidates` with `first_stage`, then order them by `rerank_fn`.

  GRACE retrieves top_k + 5 with the dense retriever before reranking (authors' code).
  """

  def __init__(self, first_stage: Retriever, rerank_fn: RerankFn, extra_candidates: int = 5):
    self.first_stage, self.rerank_fn, self.extra_candidates = first_stage, rerank_fn, extra_candidates

  def precompute(self, passages: Sequence[Passage]) -> None:
    self.first_stage.precompute(passages)

  def index(self, passages: Sequence[Passage]) -> "RerankRetriever":
    super().index(passages)
    self.first_stage.index(self.passages)
    return self

  def rerank(self, query: str, candidates: Sequence[int]) -> SearchResult:
    """Orders candidate indices by the rerank score, best first."""
    candidates = list(candidates)
    if not candidates:
      return []
    scores = np.asarray(self.rerank_fn(query, [self.passages[i] for i in candidates]), np.float64)
    if scores.shape != (len(candidates),):
      raise ValueError(f"rerank_fn returned shape {scores.shape}, expected ({len(candidates)},).")
    order = np.argsort(-scores, kind="stable")
    return [(candidates[i], float(scores[i])) for i in order]

  def search(self, query: str, k: int, *, gold: Sequence[int] = (),
             exclude: Collection[int] = ()) -> SearchResult:
    _check_k(k)
    self._require_index()
    # Excluded before the candidates are cut: the reranker sees the masked corpus's candidates.
    first = self.first_stage.search(query, k + self.extra_candidates, exclude=exclude)
    return self.rerank(query, [i for i, _ in first])[:k]


def stable_seed(*parts) -> int:
  """A process-independent seed from strings/ints (Python's hash() is salted per process)."""
  return zlib.crc32("\x1f".join(map(str, parts)).encode("utf-8"))


class RandomRetriever(Retriever):
  """Uniform sampling without replacement, seeded by (seed, query) so a query always gets the same
  draw. (GRACE's code returns the first chunks in document order by mistake; this is the intent.)"""

  def __init__(self, seed: int = 0):
    self.seed = seed

  def search(self, query: str, k: int, *, gold: Sequence[int] = (),
             exclude: Collection[int] = ()) -> SearchResult:
    _check_k(k)
    self._require_index()
    rng = np.random.default_rng(stable_seed("random-retriever", self.seed, query))
    draw = [int(i) for i in rng.permutation(len(self.passages)) if int(i) not in exclude][:k]
    return [(i, 0.0) for i in draw]


class OracleRetriever(Retriever):
  """Gold passages first (score 1, in the given order); with `fill`, the rest in index order (0).

  GRACE's oracle context is exactly the gold chunks (`fill=False`, the authors' code): then every gold
  passage is returned even when there are more than `k` (context length = #gold, as theirs).
  """

  def __init__(self, fill: bool = False):
    self.fill = fill

  def search(self, query: str, k: int, *, gold: Sequence[int] = (),
             exclude: Collection[int] = ()) -> SearchResult:
    _check_k(k)
    self._require_index()
    for g in gold:
      if not 0 <= g < len(self.passages):
        raise ValueError(f"gold index {g} out of range for {len(self.passages)} indexed passages.")
    out = [(int(g), 1.0) for g in dict.fromkeys(gold) if g not in exclude]
    if not self.fill:
      return out
    skip = set(gold) | set(exclude)
    out += [(i, 0.0) for i in range(len(self.passages)) if i not in skip]
    return out[:k]


def make_retriever(name: str, **options) -> Retriever:
  """Builds a retriever by name: "bm25", "dense", "dense_rerank", "bm25_rerank", "random", "oracle".

  "dense" and "dense_rerank" embed with `options["encoder"]` (default MiniLM). The *_rerank kinds
  rerank with `options["rerank_fn"]`. "bm25_rerank" defaults to MiniLM cosine (`dense_rerank_fn`, a
  sparse-then-dense hybrid); "dense_rerank" needs one (GRACE's: `cross_encoder_rerank_fn` of
  bge-reranker-v2-m3; offline: `fusion_rerank_fn`), since reranking dense candidates by the same
  encoder changes nothing.
  """
  encoder = options.pop("encoder", None)
  if name == "bm25":
    return BM25Retriever(**options)
  if name == "dense":
    return DenseRetriever(encoder=encoder)
  if name in ("dense_rerank", "bm25_rerank"):
    first = DenseRetriever(encoder=encoder) if name == "dense_rerank" else BM25Retriever()
    rerank_fn = options.pop("rerank_fn", None)
    if rerank_fn is None and name == "dense_rerank":
      raise ValueError("make_retriever('dense_rerank') needs rerank_fn=(query, passages) -> scores, "
                       "e.g. cross_encoder_rerank_fn(CrossEncoder(folder)) or fusion_rerank_fn(); "
                       "reranking by the dense encoder itself is a no-op.")
    rerank_fn = rerank_fn or dense_rerank_fn(encoder)
    return RerankRetriever(first, rerank_fn, **options)
  if name == "random":
    return RandomRetriever(**options)
  if name == "oracle":
    return OracleRetriever(**options)
  raise ValueError(f"retriever {name!r} unknown; choose from bm25, dense, dense_rerank, bm25_rerank, "
                   "random, oracle.")
