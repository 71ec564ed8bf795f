"""TruthRL, GRACE, ARENA/LEAR and sampling metrics against hand computations and brute force."""

import itertools
import math

import numpy as np
import pytest

from grounding_jax.eval import metrics


def test_truthfulness_worked_example():
  # TruthRL note §3.4: n = 10, 5 correct, 2 abstain, 3 other → Acc 50, Unc 20, Hall 30, T = 20.
  correct = [1] * 5 + [0] * 5
  abstained = [0] * 5 + [1, 1, 0, 0, 0]
  out = metrics.truthfulness(correct, abstained)
  assert out == pytest.approx({"accuracy": 50.0, "uncertainty": 20.0, "hallucination": 30.0,
                               "truthfulness": 20.0})
  assert out["truthfulness"] == pytest.approx((2 * 5 + 2 - 10) / 10 * 100)  # CRAG's score form
  # v2's abstention weight sweep: w2 = 0.5 adds half the uncertainty rate.
  assert metrics.truthfulness(correct, abstained, weights=(1, 0.5, 1))["truthfulness"] == pytest.approx(30.0)
  with pytest.raises(ValueError, match="both correct and abstained"):
    metrics.truthfulness([1], [1])


def test_grace_accuracy_identities():
  correct = np.array([1, 1, 0, 1, 0, 1, 1], bool)
  answerable = np.array([1, 1, 1, 1, 0, 0, 0], bool)
  out = metrics.grace_accuracy(correct, answerable)
  assert out["accuracy_answerable"] == pytest.approx(75.0)
  assert out["accuracy_unanswerable"] == pytest.approx(200 / 3)
  # Overall = count-weighted; B. Acc. = plain mean of the two subset accuracies (GRACE note §6.3).
  assert out["overall_accuracy"] == pytest.approx((4 * 75.0 + 3 * 200 / 3) / 7)
  assert out["balanced_accuracy"] == pytest.approx((75.0 + 200 / 3) / 2)
  assert (out["n_answerable"], out["n_unanswerable"]) == (4, 3)


def test_grace_error_analysis():
  sufficient = [1, 1, 1, 0, 1, 0, 0]
  answerable = [1, 1, 1, 1, 0, 0, 0]
  correct = [1, 0, 1, 0, 0, 0, 0]
  out = metrics.grace_error_analysis(sufficient, answerable, correct)
  # TP = 3 (C = 2, I = 1), TN = 2, FP = 1, FN = 1.
  assert out["classification_accuracy"] == pytest.approx(100 * 5 / 7)
  assert out["answer_precision"] == pytest.approx(200 / 3)
  assert out["false_positive_rate"] == pytest.approx(100 / 3)


def test_grace_refusal_em():
  preds = ["I don't know", "i DON'T know.", "The provided evidence is not enough to answer the question",
           "I don't know the answer.", "Unanswerable", ""]
  np.testing.assert_array_equal(metrics.grace_refusal_em(preds), [True, True, True, False, False, False])


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


def test_compression_ratio():
  out = metrics.compression_ratio([1000, 600, 500], [50, 20, 0])
  assert out["cr_total"] == pytest.approx(2100 / 70)
  assert out["cr_mean"] == pytest.approx((20 + 30) / 2)
  assert out["n_empty"] == 1


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
