"""GRACE training-set construction: heterogeneous retrievers × balanced sufficient / insufficient contexts.

GRACE (arXiv:2601.04525) §3.1 and App. B.1, with the gaps filled from the authors' code:
  * each annotated question has its own knowledge base (HotpotQA: its 10 paragraphs; QASPER: its
    paper), chunked into 512-token windows with 64 overlap; gold chunks are those matching the
    evidence (substring either way; optionally word-overlap recall/precision, as for QASPER);
  * per retriever, int(N × 0.5) questions are insufficient — every natural unanswerable plus a seeded
    sample of answerable ones — and the rest sufficient. Seeds are a stable hash of
    (dataset, method, retriever, seed) (the authors' Python hash() was salted per process);
  * sufficient: retrieve `retrieve_k`, append missing gold in place of the lowest-ranked non-gold, and
    truncate to `max(k, #gold)` keeping all gold and the best non-gold in rank order — so retrieved gold
    keeps its rank and missing gold takes the last slots. For a reranker, gold joins the candidate pool
    before reranking;
  * insufficient: the retriever's ranked list with every gold chunk removed, first k (next-ranked
    non-gold chunks backfill the slots);
  * oracle (authors' code): the context is exactly the gold chunks, always sufficient;
  * union over retrievers, deduplicated on (question, ordered passage texts) — "soft" — and shuffled.

Table 5's ablation data (`mode=`): "naive" (§3.1's naive construction: a seeded half of the questions
get only their gold chunks, the other half k uniformly drawn non-gold chunks; no retrievers) and
"wo_ab" (W/O AB, "W/O CB" in the text: each retriever's natural top-k, no gold forcing or removal
and no 50/50 split; a context is sufficient iff it holds the gold, as at test time). The single-
retriever ablation (SR) is the default mode with one retriever.

Input items are `Example`s whose `passages` are the knowledge base and whose `gold_passage_ids`
(1-indexed) mark gold passages; `answerable=False` marks a natural unanswerable.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import re
from typing import Mapping, Sequence

from grounding_jax.data import retrieval
from grounding_jax.data.schema import Example, Passage

_NON_SPACE = re.compile(r"\S+")


# The balanced construction, then Table 5's ablations. The names are the --grace_mode values and
# salt the modes' seeds, so every built dataset depends on them: they stay as the paper's.
GRACE_MODES = ("grace", "naive", "wo_ab")
MODES_WITHOUT_RETRIEVERS = frozenset({"naive"})


def _token_spans(text: str, tokenizer) -> list[tuple[int, int]]:
  """Character spans of tokens: whitespace-separated words, or an HF fast tokenizer's offsets."""
  if tokenizer is None:
    return [m.span() for m in _NON_SPACE.finditer(text)]
  if not getattr(tokenizer, "is_fast", False):
    raise ValueError(f"chunking by tokens needs a fast (Rust) tokenizer for character offsets; "
                     f"{getattr(tokenizer, 'name_or_path', tokenizer)!r} is a slow one. Use a folder "
                     "with tokenizer.json.")
  enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
  return [tuple(o) for o in enc["offset_mapping"]]


def chunk_passage(passage: Passage, *, tokenizer=None, max_tokens: int = 512,
                  overlap: int = 64) -> list[Passage]:
  """Splits a passage into windows of `max_tokens` tokens that overlap by `overlap` (stride 448).

  Chunks are slices of the original text (by token character offsets), so they stay exact substrings
  and evidence matching is byte-exact; GRACE re-decoded tokens instead, which can alter spacing.
  `tokenizer=None` counts whitespace-separated words; pass an HF fast tokenizer to count its tokens.
  """
  if not 0 <= overlap < max_tokens:
    raise ValueError(f"overlap={overlap} must be in [0, max_tokens={max_tokens}).")
  spans = _token_spans(passage.text, tokenizer)
  if len(spans) <= max_tokens:
    return [passage]
  stride = max_tokens - overlap
  chunks = []
  for j, start in enumerate(range(0, len(spans) - overlap, stride)):
    window = spans[start:start + max_tokens]
    text = passage.text[window[0][0]:window[-1][1]]
    chunks.append(Passage(text=text, title=passage.title, id=f"{passage.id}#{j}"))
  return chunks


def _words(s: str) -> set[str]:
  return set(s.lower().split())


def is_gold_chunk(chunk: str, evidence: Sequence[str], *, recall_threshold: float | None = None,
                  precision_threshold: float | None = None) -> bool:
  """GRACE's gold-chunk test: an evidence string inside the chunk or the chunk inside it; optionally
  (QASPER) word-set recall ≥ `recall_threshold` or precision ≥ `precision_threshold` (lower-cased
  whitespace words; the authors' defaults are 0.5 / 0.5)."""
  for ev in evidence:
    if not ev:
      continue
    if ev in chunk or chunk in ev:
      return True
    if recall_threshold is not None or precision_threshold is not None:
      ev_w, ch_w = _words(ev), _words(chunk)
      common = len(ev_w & ch_w)
      if recall_threshold is not None and ev_w and common / len(ev_w) >= recall_threshold:
        return True
      if precision_threshold is not None and ch_w and common / len(ch_w) >= precision_threshold:
        return True
  return False


@dataclasses.dataclass(frozen=True)
class ChunkPool:
  """One question's knowledge base after chunking, with 0-based gold chunk indices."""
  chunks: list[Passage]
  gold: list[int]


def chunk_pool(item: Example, *, tokenizer=None, max_tokens: int = 512, overlap: int = 64,
               recall_threshold: float | None = None,
               precision_threshold: float | None = None) -> ChunkPool:
  """Chunks `item.passages` and finds the gold chunks.

  With `gold_passage_ids`, a gold passage that fits one chunk is a gold chunk; of a gold passage split
  into several chunks, those matching the evidence are gold (all of them when none matches). Without
  gold ids, every chunk is tested against the evidence (a QASPER paper). A natural unanswerable
  (`answerable is False`) has no gold.
  """
  chunks, source = [], []
  for j, p in enumerate(item.passages):
    for c in chunk_passage(p, tokenizer=tokenizer, max_tokens=max_tokens, overlap=overlap):
      chunks.append(c)
      source.append(j + 1)
  if item.answerable is False:
    return ChunkPool(chunks, [])
  match = lambda i: is_gold_chunk(chunks[i].text, item.evidence, recall_threshold=recall_threshold,
                                  precision_threshold=precision_threshold)
  if item.gold_passage_ids:
    gold = []
    for g in sorted(set(item.gold_passage_ids)):
      pieces = [i for i, s in enumerate(source) if s == g]
      matched = [i for i in pieces if match(i)] if len(pieces) > 1 else pieces
      gold += matched or pieces
    return ChunkPool(chunks, gold)
  return ChunkPool(chunks, [i for i in range(len(chunks)) if match(i)])


def merge_gold(ranked: Sequence[int], gold: Sequence[int], keep: int) -> list[int]:
  """GRACE's sufficient context (authors' `merge_by_reverse_removal` + `_truncate_preserving_gt`).

  Appends the gold ids missing from `ranked`, drops as many lowest-ranked non-gold ids, then keeps
  `keep` ids: all gold (up to `keep`) and the best non-gold, in list order.
  """
  gold_set = set(gold)
  missing = [g for g in gold if g not in set(ranked)]
  non_gold = [i for i in ranked if i not in gold_set]
  drop = set(non_gold[max(0, len(non_gold) - len(missing)):]) if missing else set()
  merged = [i for i in ranked if i not in drop] + missing
  n_gold = min(len(gold_set), keep)
  room = keep - n_gold
  out, seen_gold = [], 0
  for i in merged:
    if i in gold_set and seen_gold < n_gold:
      out.append(i)
      seen_gold += 1
    elif i not in gold_set and room > 0:
      out.append(i)
      room -= 1
  return out


def _insufficient_ids(n: int, natural: Sequence[int], rate: float, rng: random.Random) -> set[int]:
  """All natural unanswerables plus a sample of the rest, up to int(n × rate) (authors' code)."""
  answerable = [i for i in range(n) if i not in set(natural)]
  extra = max(0, int(n * rate) - len(natural))
  return set(natural) | set(rng.sample(answerable, min(extra, len(answerable))))


def _references(evidence: Sequence[str], join: bool) -> tuple[str, ...]:
  # The GRACE authors' code: HotpotQA's supporting sentences form ONE reference (partial evidence earns
  # partial ROUGE); QASPER's annotator paragraphs stay separate (max over references).
  return (" ".join(e for e in evidence if e),) if join and evidence else tuple(evidence)


def _context_example(item: Example, pool: ChunkPool, ids: Sequence[int], sufficient: bool,
                     retriever_name: str, join_evidence: bool = False) -> Example:
  gold_set = set(pool.gold)
  return Example(
      question=item.question,
      passages=tuple(pool.chunks[i] for i in ids),
      answers=item.answers,
      evidence=_references(item.evidence, join_evidence) if sufficient else (),
      gold_passage_ids=tuple(j + 1 for j, i in enumerate(ids) if i in gold_set),
      answerable=sufficient,
      id=f"{item.id}:{retriever_name}",
      meta={**item.meta, "retriever": retriever_name, "source_id": item.id,
            "generation_type": "gt_evidence" if sufficient else "wo_gt_evidence"},
  )


def construct_for_retriever(items: Sequence[Example], pools: Sequence[ChunkPool], name: str,
                            retriever: retrieval.Retriever, *, k: int = 5,
                            insufficient_rate: float = 0.5, all_gold: bool = True,
                            join_evidence: bool = True, dataset: str = "dataset",
                            seed: int = 0) -> list[Example]:
  """One retriever's dataset D^(r): one context per item, sufficient or insufficient (GRACE §3.1)."""
  oracle_code = isinstance(retriever, retrieval.OracleRetriever) and not retriever.fill
  rng = random.Random(retrieval.stable_seed(dataset, "grace", name, seed))
  natural = [i for i, p in enumerate(pools) if not p.gold]
  insufficient = (set(natural) if oracle_code
                  else _insufficient_ids(len(items), natural, insufficient_rate, rng))
  rerank = isinstance(retriever, retrieval.RerankRetriever)
  out = []
  for i, (item, pool) in enumerate(zip(items, pools)):
    retriever.index(pool.chunks)
    keep = max(k, len(pool.gold)) if all_gold else k  # authors' top_k_for_gt
    if oracle_code:
      ids = [j for j, _ in retriever.search(item.question, k, gold=pool.gold)]
    else:
      # Authors' candidate pools: k + 3 (k + 5 before a reranker), at least `keep`.
      retrieve_k = max(k + (5 if rerank else 3), keep)
      first = retriever.first_stage if rerank else retriever
      ranked = [j for j, _ in first.search(item.question, retrieve_k, gold=pool.gold)]
      if i in insufficient:
        if rerank:
          ranked = [j for j, _ in retriever.rerank(item.question, ranked)]
        ids = [j for j in ranked if j not in set(pool.gold)][:k]
      else:
        if rerank:  # gold joins the candidates before reranking, so it takes the reranker's order
          ranked = merge_gold(ranked, pool.gold, len(ranked))
          ranked = [j for j, _ in retriever.rerank(item.question, ranked)]
        ids = merge_gold(ranked, pool.gold, keep)
    out.append(_context_example(item, pool, ids, i not in insufficient, name, join_evidence))
  return out


def _natural_ids(item: Example, pool: ChunkPool, retriever: retrieval.Retriever, k: int,
                 all_gold: bool) -> tuple[list[int], bool]:
  """The retriever's own top-k over the pool, and whether it holds the gold: all gold chunks
  (HotpotQA) or any (QASPER, `all_gold=False`); never for a question without gold."""
  retriever.index(pool.chunks)
  ids = [j for j, _ in retriever.search(item.question, k, gold=pool.gold)]
  hit = [g in ids for g in pool.gold]
  return ids, bool(pool.gold) and (all(hit) if all_gold else any(hit))


def construct_natural(items: Sequence[Example], pools: Sequence[ChunkPool], name: str,
                      retriever: retrieval.Retriever, *, k: int = 5, all_gold: bool = True,
                      join_evidence: bool = True) -> list[Example]:
  """Table 5 "W/O AB": one retriever's natural top-k per item, labelled sufficient iff it holds the
  gold — no gold forcing or removal, no class balancing."""
  out = []
  for item, pool in zip(items, pools):
    ids, sufficient = _natural_ids(item, pool, retriever, k, all_gold)
    out.append(_context_example(item, pool, ids, sufficient, name, join_evidence))
  return out


def construct_naive(items: Sequence[Example], pools: Sequence[ChunkPool], *, k: int = 5,
                    insufficient_rate: float = 0.5, join_evidence: bool = True,
                    dataset: str = "dataset", seed: int = 0) -> list[Example]:
  """GRACE §3.1's naive construction (Table 5 "Naive"): the questions are split as in the balanced
  construction; a sufficient one is paired with its gold chunks only (no distractors, "too easy"),
  an insufficient one with k non-gold chunks drawn uniformly ("often irrelevant")."""
  rng = random.Random(retrieval.stable_seed(dataset, "naive", seed))
  natural = [i for i, p in enumerate(pools) if not p.gold]
  insufficient = _insufficient_ids(len(items), natural, insufficient_rate, rng)
  out = []
  for i, (item, pool) in enumerate(zip(items, pools)):
    if i in insufficient:
      non_gold = [j for j in range(len(pool.chunks)) if j not in set(pool.gold)]
      ids = rng.sample(non_gold, min(k, len(non_gold)))
    else:
      ids = list(pool.gold)
    out.append(_context_example(item, pool, ids, i not in insufficient, "naive", join_evidence))
  return out


def deduplicate(examples: Sequence[Example]) -> list[Example]:
  """Keeps the first example of each (question, ordered passage texts) — GRACE's "soft" dedup."""
  seen, out = set(), []
  for e in examples:
    key = (e.question, tuple(p.text for p in e.passages))
    if key not in seen:
      seen.add(key)
      out.append(e)
  return out


def summarize(examples: Sequence[Example]) -> dict[str, collections.Counter]:
  """Counts per retriever: sufficient, insufficient, and gold positions (1-indexed) in sufficient ones."""
  stats: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for e in examples:
    c = stats[e.meta.get("retriever", "?")]
    c["sufficient" if e.answerable else "insufficient"] += 1
    for g in e.gold_passage_ids:
      c[f"gold@{g}"] += 1
  return dict(stats)


def format_summary(stats: Mapping[str, collections.Counter]) -> str:
  rows = [f"{'retriever':<16}{'sufficient':>12}{'insufficient':>14}  gold positions"]
  for name, c in stats.items():
    positions = sorted((key for key in c if key.startswith("gold@")), key=lambda key: int(key[5:]))
    pos = " ".join(f"{key[5:]}:{c[key]}" for key in positions)
    rows.append(f"{name:<16}{c['sufficient']:>12}{c['insufficient']:>14}  {pos}")
  total_s = sum(c["sufficient"] for c in stats.values())
  total_i = sum(c["insufficient"] for c in stats.values())
  rows.append(f"{'total':<16}{total_s:>12}{total_i:>14}")
  return "\n".join(rows)


def build_grace_dataset(items: Sequence[Example], retrievers: Mapping[str, retrieval.Retriever], *,
                        k: int = 5, insufficient_rate: float = 0.5, all_gold: bool = True,
                        join_evidence: bool = True, dataset: str = "dataset", seed: int = 0,
                        shuffle_seed: int | None = 42, tokenizer=None, max_tokens: int = 512,
                        overlap: int = 64, recall_threshold: float | None = None,
                        precision_threshold: float | None = None, mode: str = "grace",
                        verbose: bool = True) -> list[Example]:
  """Builds the GRACE training set from annotated items.

  Args:
    items: knowledge-base examples (see module docstring).
    retrievers: name -> retriever, in order (dedup keeps the first retriever's variant). GRACE used
      oracle, bm25, dense, dense_rerank, random (`retrieval.make_retriever`).
    k: context size (GRACE: 5 at train time).
    insufficient_rate: share of insufficient contexts per retriever (authors: 0.5).
    all_gold: True (HotpotQA): every gold chunk is kept, so k grows to #gold; False (QASPER): k.
    join_evidence: True (HotpotQA): the evidence sentences become one reference; False (QASPER):
      each annotator paragraph is its own reference.
    dataset, seed: feed the per-retriever stable seeds.
    shuffle_seed: the final shuffle (authors: 42); None keeps retriever-major order.
    tokenizer, max_tokens, overlap: chunking (None → whitespace words).
    recall_threshold, precision_threshold: QASPER's word-overlap gold test (authors: 0.5 / 0.5).
    mode: "grace" (the balanced construction), or Table 5's ablations "naive" (retrievers unused)
      and "wo_ab" (natural top-k per retriever, labelled by gold retrieved); module docstring.
    verbose: print the per-retriever class counts and gold-position histogram.

  Returns:
    Deduplicated examples; `answerable` is the sufficiency label, `meta["retriever"]` the source.
  """
  if not 0.0 <= insufficient_rate <= 1.0:
    raise ValueError(f"insufficient_rate={insufficient_rate}: must be in [0, 1].")
  if k < 1:
    raise ValueError(f"k={k}: must be ≥ 1.")
  if mode not in GRACE_MODES:
    raise ValueError(f"mode={mode!r}: choose one of {GRACE_MODES}.")
  pools = [chunk_pool(it, tokenizer=tokenizer, max_tokens=max_tokens, overlap=overlap,
                      recall_threshold=recall_threshold, precision_threshold=precision_threshold)
           for it in items]
  for r in retrievers.values():
    r.precompute([c for pool in pools for c in pool.chunks])
  if mode == "naive":
    per_retriever = construct_naive(items, pools, k=k, insufficient_rate=insufficient_rate,
                                    join_evidence=join_evidence, dataset=dataset, seed=seed)
  else:
    per_retriever = []
    for name, r in retrievers.items():
      if mode == "wo_ab":
        per_retriever += construct_natural(items, pools, name, r, k=k, all_gold=all_gold,
                                           join_evidence=join_evidence)
      else:
        per_retriever += construct_for_retriever(
            items, pools, name, r, k=k, insufficient_rate=insufficient_rate, all_gold=all_gold,
            join_evidence=join_evidence, dataset=dataset, seed=seed)
  examples = deduplicate(per_retriever)
  if verbose:
    print(f"GRACE construction ({dataset}, mode={mode}): {len(per_retriever)} contexts, "
          f"{len(examples)} after dedup")
    print(format_summary(summarize(examples)))
  if shuffle_seed is not None:
    random.Random(shuffle_seed).shuffle(examples)
  return examples


def build_test_set(items: Sequence[Example], retriever: retrieval.Retriever, *, k: int = 3,
                   all_gold: bool = True, join_evidence: bool = True, name: str = "test",
                   **chunk_options) -> list[Example]:
  """GRACE's test set (§4.3): natural top-k, no manipulation; answerable iff all (HotpotQA) or any
  (QASPER, `all_gold=False`) gold chunk was retrieved."""
  pools = [chunk_pool(item, **chunk_options) for item in items]
  retriever.precompute([c for pool in pools for c in pool.chunks])
  out = []
  for item, pool in zip(items, pools):
    ids, answerable = _natural_ids(item, pool, retriever, k, all_gold)
    e = _context_example(item, pool, ids, answerable, name)
    out.append(dataclasses.replace(e, evidence=_references(item.evidence, join_evidence),
                                   meta={**e.meta, "generation_type": "retrieved"}))
  return out
