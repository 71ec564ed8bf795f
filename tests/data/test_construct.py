"""GRACE construction: class balance, gold placement, dedup, determinism, chunking."""

import dataclasses

import pytest

from grounding_jax.data import construct, retrieval, synthetic
from grounding_jax.data.schema import Example, Passage

K = 5


@pytest.fixture(scope="module")
def items():
  # HotpotQA-like knowledge bases: 10 passages per question, 1–2 of them gold.
  ex = synthetic.generate_examples(40, seed=5, answerable_ratio=1.0, two_hop_ratio=0.5,
                                   num_passages=10)
  # Two natural unanswerables (QASPER-style), which must be insufficient in every retriever.
  for i in (3, 17):
    ex[i] = dataclasses.replace(ex[i], answerable=False, gold_passage_ids=(), evidence=())
  return ex


def _retrievers():
  return {"oracle": retrieval.OracleRetriever(), "bm25": retrieval.BM25Retriever(),
          "random": retrieval.RandomRetriever(seed=3),
          "bm25_rerank": retrieval.RerankRetriever(retrieval.BM25Retriever(),
                                                   lambda q, cands: [-len(p.text) for p in cands])}


def _per_retriever(items, name, r, seed=0, k=K):
  pools = [construct.chunk_pool(it) for it in items]
  return pools, construct.construct_for_retriever(items, pools, name, r, k=k, seed=seed)


@pytest.mark.parametrize("name", ["bm25", "random", "bm25_rerank"])
def test_class_balance_with_natural_unanswerables(items, name):
  _, out = _per_retriever(items, name, _retrievers()[name])
  assert sum(not e.answerable for e in out) == len(items) // 2
  assert not out[3].answerable and not out[17].answerable


def test_oracle_follows_the_authors_code(items):
  pools, out = _per_retriever(items, "oracle", retrieval.OracleRetriever())
  for e, it, pool in zip(out, items, pools):
    if it.answerable is False:
      assert e.passages == () and not e.answerable
    else:
      assert e.answerable and e.gold_passage_ids == tuple(range(1, len(pool.gold) + 1))
      assert {p.text for p in e.passages} == {it.passages[g - 1].text for g in it.gold_passage_ids}


@pytest.mark.parametrize("name,k", [("bm25", 1), ("bm25", 3), ("random", 3)])
def test_gold_placement_in_sufficient_and_insufficient_contexts(items, name, k):
  bm25 = _retrievers()[name]  # the same retriever re-derives the ranking below
  pools, out = _per_retriever(items, name, bm25, k=k)
  n_missing_total = 0
  for e, it, pool in zip(out, items, pools):
    bm25.index(pool.chunks)
    keep = max(k, len(pool.gold))
    ranked = [i for i, _ in bm25.search(it.question, max(k + 3, keep))]
    ids = [pool.chunks.index(p) for p in e.passages]
    gold = set(pool.gold)
    if e.answerable:
      # Independent re-derivation: retrieved gold keeps its rank among the best non-gold,
      # missing gold takes the last slots.
      missing = [g for g in pool.gold if g not in ranked]
      best_non_gold = [i for i in ranked if i not in gold][:keep - len(gold)]
      want = [i for i in ranked if i in gold or i in best_non_gold] + missing
      assert ids == want
      assert len(ids) == keep and gold <= set(ids)
      assert list(e.gold_passage_ids) == [j + 1 for j, i in enumerate(ids) if i in gold]
      assert e.evidence == (" ".join(it.evidence),)  # HotpotQA-style: one joined reference
      n_missing_total += len(missing)
    else:
      assert ids == [i for i in ranked if i not in gold][:k]
      assert e.gold_passage_ids == () and e.evidence == ()
  if (name, k) != ("bm25", 3):  # bm25 with 6 candidates of 10 always finds the synthetic gold
    assert n_missing_total > 0  # the forcing path was exercised


def test_rerank_orders_gold_with_candidates(items):
  by_length = lambda q, cands: [-len(p.text) for p in cands]
  r = retrieval.RerankRetriever(retrieval.BM25Retriever(), by_length)
  pools, out = _per_retriever(items, "rr", r)
  for e in out:
    if e.answerable and len(e.passages) == K:
      lengths = [len(p.text) for p in e.passages]
      assert lengths == sorted(lengths)  # gold was reranked with the rest, not appended


def test_dedup_and_determinism(items, capsys):
  a = construct.build_grace_dataset(items, _retrievers(), k=K, dataset="toy")
  printed = capsys.readouterr().out
  assert "bm25" in printed and "insufficient" in printed
  b = construct.build_grace_dataset(items, _retrievers(), k=K, dataset="toy", verbose=False)
  assert a == b
  keys = [(e.question, tuple(p.text for p in e.passages)) for e in a]
  assert len(keys) == len(set(keys))
  # bm25 and bm25_rerank often build the same context for a question; those repeats are dropped.
  assert len(a) < len(items) * len(_retrievers())
  c = construct.build_grace_dataset(items, _retrievers(), k=K, dataset="toy", seed=1, verbose=False)
  assert [e.id for e in c if not e.answerable] != [e.id for e in a if not e.answerable]


def test_dedup_keeps_first_variant():
  p = (Passage("x"), Passage("y"))
  e1 = Example("q", passages=p, meta={"retriever": "a"})
  e2 = Example("q", passages=p, meta={"retriever": "b"})
  e3 = Example("q", passages=p[::-1], meta={"retriever": "b"})
  assert construct.deduplicate([e1, e2, e3]) == [e1, e3]


def test_chunking_512_with_64_overlap():
  words = [f"w{i}" for i in range(1200)]
  chunks = construct.chunk_passage(Passage(" ".join(words), title="T", id="d"))
  got = [c.text.split() for c in chunks]
  assert [len(c) for c in got] == [512, 512, 304]
  assert got[0][-64:] == got[1][:64] and got[1][0] == "w448"
  assert got[-1][-1] == "w1199" and all(c.title == "T" for c in chunks)
  assert construct.chunk_passage(Passage("short text")) == [Passage("short text")]


def test_chunking_with_a_subword_tokenizer():
  from grounding_jax.models import bert
  import transformers
  tok = transformers.AutoTokenizer.from_pretrained(str(bert.minilm_path()), local_files_only=True)
  text = " ".join(f"Veltria{i}" for i in range(300))
  chunks = construct.chunk_passage(Passage(text), tokenizer=tok, max_tokens=100, overlap=10)
  n_tokens = [len(tok(c.text, add_special_tokens=False)["input_ids"]) for c in chunks]
  # A window may start inside a word; re-tokenising that fragment can shift the count by a piece or two.
  assert all(97 <= n <= 103 for n in n_tokens[:-1]) and n_tokens[-1] <= 103
  assert len(chunks) == -(-(len(tok(text, add_special_tokens=False)["input_ids"]) - 10) // 90)
  assert all(c.text in text for c in chunks) and chunks[-1].text.endswith("Veltria299")


def test_gold_chunk_test_matches_the_authors_rules():
  assert construct.is_gold_chunk("A. The capital is Orsk. B.", ["The capital is Orsk."])
  assert construct.is_gold_chunk("capital is Orsk", ["The capital is Orsk."])
  assert not construct.is_gold_chunk("Orsk is cold.", ["The capital is Orsk."])
  assert construct.is_gold_chunk("orsk is the capital city", ["The capital is Orsk."],
                                 recall_threshold=0.5, precision_threshold=0.5)


def test_chunk_pool_keeps_gold_ids_and_narrows_split_gold_passages():
  long_gold = Passage(" ".join(["filler"] * 600 + ["The capital of Veltria is Orsk."] + ["more"] * 600))
  item = Example("What is the capital of Veltria?",
                 passages=(Passage("The capital of Pesk is Dun."), long_gold, Passage("Unrelated.")),
                 evidence=("The capital of Veltria is Orsk.", "no such sentence"),
                 gold_passage_ids=(1, 2))
  pool = construct.chunk_pool(item)
  assert len(pool.chunks) == 2 + 3  # the 1206-word passage splits into 3 windows
  # Passage 1 is gold by id although it does not match the evidence; of passage 2, only the window
  # holding the evidence sentence is gold.
  assert pool.gold[0] == 0
  assert [("Veltria is Orsk." in pool.chunks[i].text) for i in pool.gold[1:]] == [True] * len(pool.gold[1:])
  assert 1 <= len(pool.gold[1:]) <= 2


def test_naive_mode_pairs_gold_only_or_random_distractors(items):
  pools = [construct.chunk_pool(it) for it in items]
  out = construct.construct_naive(items, pools, k=K, dataset="toy")
  assert len(out) == len(items) and {e.meta["retriever"] for e in out} == {"naive"}
  assert sum(not e.answerable for e in out) == len(items) // 2  # the same 50/50 split
  assert not out[3].answerable and not out[17].answerable       # natural unanswerables stay out
  first_slots = set()
  for e, it in zip(out, items):
    pool = construct.chunk_pool(it)
    gold_texts = [pool.chunks[g].text for g in pool.gold]
    if e.answerable:  # exactly the gold chunks: no distractors
      assert [p.text for p in e.passages] == gold_texts
      assert e.gold_passage_ids == tuple(range(1, len(gold_texts) + 1))
    else:             # k non-gold chunks drawn uniformly from the knowledge base
      ids = [pool.chunks.index(p) for p in e.passages]
      assert len(ids) == K and not set(ids) & set(pool.gold) and e.evidence == ()
      first_slots.add(ids[0])
  assert len(first_slots) > 3  # not the first chunks in document order
  # Through the builder: no retriever needed, same contexts (deduplicated: a few synthetic questions
  # repeat with the same gold).
  built = construct.build_grace_dataset(items, {}, k=K, dataset="toy", mode="naive", verbose=False)
  assert sorted(e.id for e in built) == sorted(e.id for e in construct.deduplicate(out))


def test_wo_ab_mode_keeps_natural_top_k_and_labels_by_gold_retrieved(items):
  retrievers = {"bm25": retrieval.BM25Retriever(), "random": retrieval.RandomRetriever(seed=3)}
  out = construct.build_grace_dataset(items, retrievers, k=3, dataset="toy", mode="wo_ab",
                                      shuffle_seed=None, verbose=False)
  by_retriever = {n: [e for e in out if e.meta["retriever"] == n] for n in retrievers}
  for name, r in retrievers.items():
    rows = {e.meta["source_id"]: e for e in by_retriever[name]}
    for it in items:
      if it.id not in rows:  # dropped as a duplicate of an earlier retriever's context
        continue
      pool = construct.chunk_pool(it)
      r.index(pool.chunks)
      want = [i for i, _ in r.search(it.question, 3)]
      e = rows[it.id]
      assert [pool.chunks.index(p) for p in e.passages] == want  # no gold forced in or taken out
      assert e.answerable == (bool(pool.gold) and set(pool.gold) <= set(want))
  # No 50/50 split: the random retriever rarely finds both gold chunks of a two-hop question.
  n_random = len(by_retriever["random"])
  assert sum(e.answerable for e in by_retriever["random"]) < n_random // 2
  with pytest.raises(ValueError, match="mode='both'"):
    construct.build_grace_dataset(items, retrievers, mode="both")

