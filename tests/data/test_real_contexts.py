"""Short real contexts, their unanswerable twins and the question / dataset splits of the real-data
learning run (data/real_contexts.py, launch/real_data_check.py), on the samples in data/real/."""

import functools

import numpy as np
import pytest

from grounding_jax.data import real_contexts as rc


@functools.lru_cache(maxsize=1)
def _real():
  return rc.load_real()


def test_every_dataset_loads_with_gold_passages():
  real = _real()
  assert {k: len(v) for k, v in real.items()} == {"hotpotqa": 153, "musique": 100, "nq": 200}
  assert all(ex.gold_passage_ids and ex.answers for rows in real.values() for ex in rows)


def test_evidence_is_sentences_of_the_gold_passages():
  """HotpotQA's supporting sentences, MuSiQue's hop sentences and NQ's answer sentence (its file has
  none): each inside a gold passage, under half their gold passages' length in all, NQ's naming an
  answer."""
  for name, rows in _real().items():
    for ex in rows:
      gold = [ex.passages[i - 1].text for i in ex.gold_passage_ids]
      assert ex.evidence and all(any(e in g for g in gold) for e in ex.evidence), ex.id
      if name != "hotpotqa":  # one sentence per hop / gold passage (HotpotQA's: as annotated)
        assert len(ex.evidence) <= len(gold), ex.id
    evidence = sum(len(e) for ex in rows for e in ex.evidence)
    passages = sum(len(ex.passages[i - 1].text) for ex in rows for i in ex.gold_passage_ids)
    assert evidence < 0.5 * passages, name
  nq = _real()["nq"]
  named = [any(a.lower() in ex.evidence[0].lower() for a in ex.answers) for ex in nq]
  assert np.mean(named) > 0.95
  first = nq[0]  # "who got the first nobel prize in physics"; the passage's first sentence names him
  assert first.evidence == ("The first Nobel Prize in Physics was awarded in 1901 to Wilhelm Conrad "
                            "R\u00f6ntgen, of Germany, who received 150,782 SEK, which is equal to "
                            "7,731,004 SEK in December 2007.",)


@pytest.mark.parametrize("name", sorted(rc.FILES))
def test_short_context_keeps_the_gold_and_its_twin_loses_it(name):
  rows = _real()[name][:12]
  items = rc.with_twins(rows, seed=3)
  assert len(items) == 2 * len(rows)
  for ex, short, twin in zip(rows, items[::2], items[1::2]):
    gold = {ex.passages[i - 1].text for i in ex.gold_passage_ids}
    assert {short.passages[i - 1].text for i in short.gold_passage_ids} == gold  # gold kept whole
    assert len(short.passages) == len(gold) + 2 and short.answerable is True
    distractors = [p for i, p in enumerate(short.passages, 1) if i not in short.gold_passage_ids]
    assert all(len(p.text.split()) <= 80 for p in distractors)
    assert not any(a.lower() in p.text.lower() for p in distractors for a in ex.answers if a.strip())
    assert twin.id == ex.id + rc.TWIN_SUFFIX and twin.question == ex.question
    assert twin.answerable is False and not twin.gold_passage_ids
    assert not gold & {p.text for p in twin.passages}
  assert rc.with_twins(rows, seed=3) == items  # seeded: the same contexts every time
  # A prompt of the longest context stays a short read for a 135M model.
  assert max(sum(len(p.text.split()) for p in s.passages) for s in items) < 700


def test_pool_distractors_are_other_questions_passages():
  """distractors="pool": neither a short context's distractors nor its twin's passages are any of
  the question's own passages (HotpotQA's and MuSiQue's are retrieved for it); the gold stays."""
  rows = _real()["hotpotqa"][:12] + _real()["musique"][:12]
  items = rc.with_twins(rows, seed=3, distractors="pool")
  for ex, short, twin in zip(rows, items[::2], items[1::2]):
    own = {p.text for p in ex.passages}
    gold = {ex.passages[i - 1].text for i in ex.gold_passage_ids}
    assert {short.passages[i - 1].text for i in short.gold_passage_ids} == gold
    assert len(short.passages) == len(gold) + 2
    assert not own & {p.text for i, p in enumerate(short.passages, 1)
                      if i not in short.gold_passage_ids}
    assert not own & {p.text for p in twin.passages} and twin.answerable is False
  assert items != rc.with_twins(rows, seed=3)  # "own" keeps related distractors
  with pytest.raises(ValueError, match="distractors="):
    rc.short_context(rows[0], (), distractors="related")


def test_splits_are_disjoint_by_question_and_by_dataset():
  real = _real()
  parts = rc.split_by_question(real, test=16, dev=8, seed=0)
  ids = {k: {ex.id for ex in v} for k, v in parts.items()}
  assert len(ids["test"]) == 48 and len(ids["dev"]) == 24
  assert len(ids["train"]) == sum(map(len, real.values())) - 72
  assert not (ids["test"] & ids["train"] or ids["dev"] & ids["train"] or ids["test"] & ids["dev"])
  assert parts == rc.split_by_question(real, test=16, dev=8, seed=0)
  assert parts["test"] != rc.split_by_question(real, test=16, dev=8, seed=1)["test"]
  cross = rc.cross_dataset(real, "nq", test=20, dev=8, seed=0)
  assert {ex.meta["dataset"] for ex in cross["test"]} == {"nq"} and len(cross["test"]) == 20
  assert "nq" not in {ex.meta["dataset"] for ex in cross["train"] + cross["dev"]}
  with pytest.raises(ValueError, match="held-out dataset"):
    rc.cross_dataset(real, "squad", test=4, dev=4)
  with pytest.raises(ValueError, match="too few"):
    rc.split_by_question(real, test=100, dev=100)
