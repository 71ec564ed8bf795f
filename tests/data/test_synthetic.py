"""Tests for the synthetic grounded-QA generator: determinism, ratios, and that it measures reading."""

import random
import re
import string

import pytest

from grounding_jax.data import answerability, synthetic
from grounding_jax.data.schema import Example


def _normalize(s: str) -> str:
  # SQuAD v1.1 normalisation, re-derived here so the test does not lean on the code under test.
  s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
  s = re.sub(r"\b(a|an|the)\b", " ", s)
  return " ".join(s.split())


def _em(prediction: str, answers) -> float:
  return float(any(_normalize(prediction) == _normalize(a) for a in answers))


def _reader(example: Example) -> str:
  """A correct rule-based reader: parses facts from the passages, then follows the question's hops."""
  text = " ".join(p.text for p in example.passages)
  capital = dict(re.findall(r"The capital of ([A-Z]\w+) is ([A-Z]\w+)\.", text))
  lives = dict(re.findall(r"([A-Z]\w+ [A-Z]\w+) lives in ([A-Z]\w+)\.", text))
  founder = dict(re.findall(r"([A-Z]\w+) was founded by ([A-Z]\w+ [A-Z]\w+)\.", text))
  q = example.question
  if m := re.fullmatch(r"What is the capital of the country where (.+) lives\?", q):
    return capital.get(lives.get(m[1], ""), "unknown")
  if m := re.fullmatch(r"In which country does the founder of (.+) live\?", q):
    return lives.get(founder.get(m[1], ""), "unknown")
  if m := re.fullmatch(r"What is the capital of (.+)\?", q):
    return capital.get(m[1], "unknown")
  if m := re.fullmatch(r"In which country does (.+) live\?", q):
    return lives.get(m[1], "unknown")
  if m := re.fullmatch(r"Who founded (.+)\?", q):
    return founder.get(m[1], "unknown")
  raise AssertionError(f"unparsed question {q!r}")


@pytest.fixture(scope="module")
def examples():
  return synthetic.generate_examples(200, seed=3, answerable_ratio=0.4, two_hop_ratio=0.3)


def test_same_seed_same_data_and_different_seed_differs():
  a = synthetic.generate_examples(50, seed=7)
  b = synthetic.generate_examples(50, seed=7)
  c = synthetic.generate_examples(50, seed=8)
  assert a == b
  assert [e.question for e in a] != [e.question for e in c]


def test_configured_ratios_and_context_size(examples):
  assert sum(e.answerable for e in examples) == 80
  assert sum(e.meta["hops"] == 2 for e in examples) == 60
  assert all(len(e.passages) == 5 for e in examples)


def test_gold_fields_are_consistent(examples):
  for e in examples:
    if e.answerable:
      assert len(e.gold_passage_ids) == e.meta["hops"]
      gold_text = " ".join(e.passages[i - 1].text for i in e.gold_passage_ids)
      for sentence in e.evidence:
        assert sentence in gold_text
      assert any(a in gold_text for a in e.answers)
    else:
      assert e.gold_passage_ids == () and e.evidence == ()
    assert len(e.answers) == 2
    assert len(e.meta["answers_found"]) == len(e.passages)
    assert answerability.is_answerable(e) == e.answerable  # Ground-GRPO's label agrees


def test_unanswerable_distractors_mention_question_entities(examples):
  hits = 0
  for e in examples:
    if not e.answerable:
      names = set(re.findall(r"[A-Z]\w+(?: [A-Z]\w+)?", e.question)) - {"What", "In", "Who"}
      hits += any(any(n in p.text for n in names) for p in e.passages)
  assert hits >= 0.9 * sum(not e.answerable for e in examples)


def test_unrelated_unanswerable_contexts_name_no_question_entity_and_leave_the_rest_unchanged():
  kw = dict(seed=3, answerable_ratio=0.4, two_hop_ratio=0.3)
  mentions = synthetic.generate_examples(200, **kw)
  unrelated = synthetic.generate_examples(200, unanswerable="unrelated", **kw)
  world = synthetic.build_world(3)
  entities = set(world.capital) | set(world.capital.values()) | set(world.lives_in) | set(world.founder)
  for m, u in zip(mentions, unrelated):
    assert (m.question, m.answers, m.answerable) == (u.question, u.answers, u.answerable)
    if u.answerable:
      assert m == u  # same draw: only the unanswerable contexts differ
      continue
    named = {n for n in entities if n in u.question}
    assert named and not any(n in p.text for n in named for p in u.passages), u.question
    assert not any(a in p.text for a in u.answers for p in u.passages)
    assert _reader(u) == "unknown"
  with pytest.raises(ValueError, match="unanswerable='nothing'"):
    synthetic.generate_examples(4, unanswerable="nothing")


def test_oracle_reader_gets_em_1_and_abstains_without_gold(examples):
  answerable = [e for e in examples if e.answerable]
  assert all(_em(_reader(e), e.answers) == 1.0 for e in answerable)
  # Without gold passages the correct reader cannot find the answer.
  assert all(_reader(e) == "unknown" for e in examples if not e.answerable)


def test_reader_with_shuffled_passages_fails(examples):
  answerable = [e for e in examples if e.answerable]
  rotated = [Example(question=e.question, passages=answerable[(i + 1) % len(answerable)].passages,
                     answers=e.answers) for i, e in enumerate(answerable)]
  em = sum(_em(_reader(e), e.answers) for e in rotated) / len(rotated)
  assert em < 0.2


def test_random_policy_scores_low(examples):
  rng = random.Random(0)
  answerable = [e for e in examples if e.answerable]
  scores = []
  for e in answerable:
    # A random policy that copies a random name from the context.
    names = re.findall(r"[A-Z]\w+(?: [A-Z]\w+)?", " ".join(p.text for p in e.passages))
    scores.append(_em(rng.choice(names), e.answers))
  assert sum(scores) / len(scores) < 0.3


def test_joined_evidence_is_one_reference_per_question():
  joined = synthetic.generate_examples(30, seed=3, two_hop_ratio=1.0, join_evidence=True)
  split = synthetic.generate_examples(30, seed=3, two_hop_ratio=1.0)
  for a, b in zip(joined, split):
    assert a.evidence == ((" ".join(b.evidence),) if b.answerable else ())


def test_bad_config_raises():
  with pytest.raises(ValueError, match="answerable_ratio"):
    synthetic.generate_examples(4, answerable_ratio=1.5)
  with pytest.raises(ValueError, match="num_passages"):
    synthetic.generate_examples(4, num_passages=1)
