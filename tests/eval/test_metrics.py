"""EM / F1 normalisers and the sampling metrics (pass@k, maj@k) against hand computations and brute force.

Each paper's own metrics are tested with its recipe (tests/recipes/<recipe>/)."""

import itertools
import math

import numpy as np
import pytest

from grounding_jax.eval import metrics


def test_em_f1_squad_vs_arena_normalisation():
  preds = ["U.S.", "the Eiffel tower in Paris", "", "new_york"]
  golds = [["US"], ["Eiffel Tower"], ["x"], ["New York"]]
  squad = metrics.em_f1(preds, golds)
  arena = metrics.em_f1(preds, golds, normalizer="punct_to_space", scale=1.0)
  # SQuAD deletes punctuation ("us"); ARENA turns it into spaces ("u s") and "_" into a space.
  np.testing.assert_allclose(squad["em_per_example"], [1, 0, 0, 0])
  np.testing.assert_allclose(arena["em_per_example"], [0, 0, 0, 1])
  # "eiffel tower in paris" vs "eiffel tower": P = 2/4, R = 2/2 → F1 = 2/3.
  assert squad["f1_per_example"][1] == pytest.approx(2 / 3)
  assert arena["f1_per_example"][0] == 0.0
  assert squad["em"] == pytest.approx(25.0) and arena["em"] == pytest.approx(0.25)
  with pytest.raises(TypeError, match="list of aliases"):
    metrics.em_f1(["a"], ["a"])


def _pass_at_k_brute(n, c, k):
  outcomes = [True] * c + [False] * (n - c)
  subsets = list(itertools.combinations(range(n), k))
  return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n,c,k", [(5, 0, 1), (5, 1, 1), (5, 2, 3), (8, 3, 4), (10, 9, 2), (6, 6, 6),
                                   (12, 4, 5)])
def test_pass_at_k_matches_combinatorial_definition(n, c, k):
  assert metrics.pass_at_k(n, c, k)[0] == pytest.approx(_pass_at_k_brute(n, c, k), abs=1e-12)
  assert metrics.pass_at_k(n, c, k)[0] == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))


def test_pass_at_k_vectorised_and_errors():
  out = metrics.pass_at_k([4, 4, 4], [0, 2, 4], 2)
  np.testing.assert_allclose(out, [0.0, 1 - 1 / 6, 1.0])
  with pytest.raises(ValueError, match="k <= n"):
    metrics.pass_at_k(3, 1, 4)


def test_majority_vote_groups_normalised_answers_and_abstentions():
  answers = ["Paris", "I don't know", "paris.", "I don’t know the answer", "Lyon"]
  # "Paris"/"paris." and the two abstentions (curly apostrophe included) tie at 2; Paris came first.
  assert metrics.majority_vote(answers) == 0
  assert metrics.majority_vote(["Lyon", "I don't know", "i dont know!", "Paris"]) == 1
  answers_q = [["A", "B", "B", "A", "A"], ["x", "y", "z", "y", "x"]]
  correct_q = [[True, False, False, True, True], [False, True, False, True, False]]
  # k=3: q0 votes B (2 of 3) → wrong; q1 has a 3-way tie → "x" (first) → wrong.
  assert metrics.maj_at_k(answers_q, correct_q, 3) == 0.0
  # k=5: q0 votes A (3) → right; q1 ties x/y at 2 → x first → wrong.
  assert metrics.maj_at_k(answers_q, correct_q, 5) == 50.0


def _squad_f1(prediction, gold):
  """The SQuAD v1.1 evaluation script's F1, re-derived here independently of grounding_jax.text:
  lowercase, drop punctuation and the articles a/an/the, split on whitespace, then the harmonic mean
  of precision and recall of the shared token multiset."""
  import collections  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top
  import string  # pylint: disable=g-import-not-at-top

  def norm(s):
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())

  p, g = norm(prediction).split(), norm(gold).split()
  same = sum((collections.Counter(p) & collections.Counter(g)).values())
  if same == 0:
    return 0.0
  precision, recall = same / len(p), same / len(g)
  return 2 * precision * recall / (precision + recall)


def test_answer_scores_match_the_squad_formula_and_skip_unanswerable_items():
  answers = ["The Eiffel Tower, Paris", "paris", "Lyon", "I don't know", None, "Rome"]
  golds = [["Paris"], ["Paris", "City of Light"], ["Paris"], [], ["Paris"], ["the city of Rome", "Roma"]]
  out = metrics.answer_scores(answers, golds)
  expected_f1 = [max([_squad_f1(a, g) for g in gs], default=0.0) if isinstance(a, str) else 0.0
                 for a, gs in zip(answers, golds)]
  np.testing.assert_allclose(out["answer_f1"], expected_f1)
  np.testing.assert_allclose(out["answer_f1"][[0, 1, 2, 5]], [0.5, 1.0, 0.0, 0.5])  # by hand
  np.testing.assert_array_equal(out["answer_em"], [0, 1, 0, 0, 0, 0])
  answerable = np.array([1, 1, 1, 0, 1, 1], float)
  summary = metrics.answer_summary({**out, "item_answerable": answerable})
  assert summary["answer_em"] == pytest.approx(100 * 1 / 5)
  assert summary["answer_f1"] == pytest.approx(100 * (0.5 + 1.0 + 0.0 + 0.0 + 0.5) / 5)
  empty = metrics.answer_summary({**out, "item_answerable": np.zeros(6)})
  assert math.isnan(empty["answer_f1"])
  with pytest.raises(ValueError, match="answers for"):
    metrics.answer_scores(["a"], [])
