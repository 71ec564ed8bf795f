"""Evidence conditions of a question: gold passages removed (replaced in place by distractors from
other examples), or shuffled; seeded and pure."""

import json

import pytest

from grounding_jax.data import contrast
from grounding_jax.data import synthetic
from grounding_jax.data.schema import Example, Passage, example_to_dict, validate_example


@pytest.fixture(scope="module")
def examples():
  return synthetic.generate_examples(40, seed=3)


def test_gold_removed_replaces_each_gold_passage_in_place(examples):
  pool = contrast.distractor_pool(examples)
  for ex in [e for e in examples if e.answerable][:10]:
    out = contrast.gold_removed(ex, pool, seed=0)
    validate_example(out)
    assert out.answerable is False and out.gold_passage_ids == () and out.evidence == ()
    assert out.question == ex.question and out.answers == ex.answers and out.id == ex.id
    assert len(out.passages) == len(ex.passages)
    gold = set(ex.gold_passage_ids)
    own = {p.text for p in ex.passages}
    for i, (new, old) in enumerate(zip(out.passages, ex.passages), start=1):
      if i in gold:  # a distractor from another example, naming none of the answers
        assert new.text not in own and new in pool
        assert not any(a.lower() in new.text.lower() for a in ex.answers)
      else:
        assert new == old
    # Trust-Align's per-passage support vectors: no passage supports an answer any more.
    assert not any(any(row) for row in out.meta["answers_found"])
    assert contrast.gold_removed(ex, pool, seed=0) == out  # seeded: the same every call
  ex = next(e for e in examples if e.answerable)
  draws = {contrast.gold_removed(ex, pool, seed=s).passages for s in range(8)}
  assert len(draws) > 1  # the seed chooses the distractors


def test_gold_shuffled_keeps_the_gold_passages_and_their_ids(examples):
  ex = next(e for e in examples if e.answerable and len(e.gold_passage_ids) == 2)
  outs = [contrast.gold_shuffled(ex, seed=s) for s in range(6)]
  assert len({o.passages for o in outs}) > 1
  for out in outs:
    validate_example(out)
    assert sorted(p.text for p in out.passages) == sorted(p.text for p in ex.passages)
    assert ({out.passages[i - 1] for i in out.gold_passage_ids}
            == {ex.passages[i - 1] for i in ex.gold_passage_ids})
    assert out.answerable is True and out.evidence == ex.evidence
    found = [out.meta["answers_found"][i] for i in range(len(out.passages))]
    assert found == [ex.meta["answers_found"][ex.passages.index(p)] for p in out.passages]


def test_conditions_name_themselves_in_meta(examples):
  pool = contrast.distractor_pool(examples)
  ex = next(e for e in examples if e.answerable)
  names = contrast.CONTRASTS["gold_removed_shuffled"]
  outs = contrast.conditions(ex, names, pool, seed=1)
  assert [o.meta[contrast.CONDITION_KEY] for o in outs] == list(names)
  assert outs[0].passages == ex.passages and outs[0].answerable is True
  assert outs[1].answerable is False


def test_an_example_without_gold_ids_is_a_clear_error(examples):
  ex = Example(question="Where?", passages=(Passage("a"), Passage("b")), answers=("x",), id="q7")
  with pytest.raises(ValueError, match="q7.*no gold_passage_ids.*data.evidence_contrast"):
    contrast.gold_removed(ex, contrast.distractor_pool(examples))
  with pytest.raises(ValueError, match="q7.*no gold_passage_ids"):
    contrast.contrast_questions([ex])
  # Unanswerable examples are left out of a contrast stage's questions, not an error.
  questions, dropped = contrast.contrast_questions(examples)
  assert all(q.answerable for q in questions) and dropped == sum(not e.answerable for e in examples)
  with pytest.raises(ValueError, match="too small"):
    contrast.gold_removed(next(e for e in examples if e.answerable), (), seed=0)


def test_gold_removed_names_the_removed_gold_passages_for_a_search_tool(examples):
  """A gold_removed example carries its gold passages (JSON rows) so that a searching rollout
  withholds them from its corpus (sampling/tools.Withheld); the example still serialises."""
  pool = contrast.distractor_pool(examples)
  ex = next(e for e in examples if e.answerable and len(e.gold_passage_ids) == 2)
  kept, removed = contrast.conditions(ex, ("gold_kept", "gold_removed"), pool, seed=0)
  assert contrast.withheld_passages(kept) == ()
  assert contrast.withheld_passages(removed) == tuple(ex.passages[i - 1]
                                                      for i in sorted(ex.gold_passage_ids))
  json.dumps(example_to_dict(removed))
