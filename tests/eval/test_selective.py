"""Selective prediction (eval/selective.py): the risk–coverage curve and AURC equal a slow loop over
every ordering of tied confidences, the binary case its closed form, hand-computed cases their
numbers; the summary's coverage, accuracy among answered items and balanced accuracy are counted by
hand; the bootstrap of several statistics equals one bootstrap per statistic, and a batched one
(every resample in one call) the per-resample loop."""

import itertools
import types

import numpy as np
import pytest

from grounding_jax.eval import bootstrap
from grounding_jax.eval import harness
from grounding_jax.eval import selective


def _slow_aurc(loss, score):
  """Geifman & El-Yaniv's empirical AURC written out: accept the most confident first, the risk of
  the first i, averaged over i; averaged again over every ordering that sorts the scores (ties)."""
  n = len(loss)
  values = []
  for perm in itertools.permutations(range(n)):
    if any(score[perm[j]] < score[perm[j + 1]] for j in range(n - 1)):
      continue  # not an ordering by confidence
    risks = []
    for i in range(1, n + 1):
      risks.append(sum(loss[p] for p in perm[:i]) / i)
    values.append(sum(risks) / n)
  return sum(values) / len(values)


def test_aurc_of_distinct_scores_is_the_hand_computed_area():
  # Accepted in score order: losses 0, 1, 0, 1 -> risks 0, 1/2, 1/3, 2/4.
  loss, score = np.array([1.0, 0.0, 1.0, 0.0]), np.array([0.8, 0.9, 0.1, 0.7])
  cov, risk = selective.risk_coverage(loss, score)
  np.testing.assert_allclose(cov, [0.25, 0.5, 0.75, 1.0])
  np.testing.assert_allclose(risk, [0.0, 0.5, 1 / 3, 0.5])
  assert selective.aurc(loss, score) == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)


@pytest.mark.parametrize("seed", range(6))
def test_aurc_with_ties_equals_the_mean_over_every_tied_ordering(seed):
  rng = np.random.default_rng(seed)
  n = 6
  loss = rng.integers(0, 2, n).astype(float)
  if seed % 2:
    loss = rng.uniform(size=n)  # partial credit: losses in [0, 1]
  score = rng.integers(0, 3, n).astype(float)  # few distinct values: many ties
  assert selective.aurc(loss, score) == pytest.approx(_slow_aurc(list(loss), list(score)))
  perm = rng.permutation(n)  # the row order never matters
  assert selective.aurc(loss[perm], score[perm]) == pytest.approx(selective.aurc(loss, score))


def test_binary_aurc_is_the_closed_form():
  # 5 answered (2 wrong), 3 abstained: (L_a + Σ_{i=n_a+1..n} (L_a + i − n_a)/i) / n.
  answered = np.array([1, 0, 1, 1, 0, 1, 0, 1], bool)
  loss = np.array([0, 1, 1, 0, 1, 0, 1, 1], float)
  n, n_a, l_a = 8, 5, 2.0
  closed = (l_a + sum((l_a + i - n_a) / i for i in range(n_a + 1, n + 1))) / n
  score = selective.confidence(answered)
  assert selective.aurc(loss, score) == pytest.approx(closed)
  assert selective.aurc(loss, score) == pytest.approx(_slow_aurc(list(loss), list(score)))


def test_the_oracle_ranking_has_the_smallest_aurc():
  rng = np.random.default_rng(0)
  loss = rng.integers(0, 2, 40).astype(float)
  oracle = selective.aurc(loss, -loss)  # every right answer first
  n, right = len(loss), int((loss == 0).sum())
  assert 0 < right < n
  # Its value: zero risk while the right ones are accepted, then each wrong one adds to it.
  assert oracle == pytest.approx(sum((i - right) / i for i in range(right + 1, n + 1)) / n)
  for _ in range(20):
    assert selective.aurc(loss, rng.normal(size=40)) >= oracle - 1e-12


def _per(correct, abstained, answerable, conf=None):
  out = {"correct": np.array(correct, float), "abstained": np.array(abstained, float),
         "item_answerable": np.array(answerable, float)}
  if conf is not None:
    out["confidence"] = np.array(conf, float)
  return out


def test_summary_counts_coverage_selective_accuracy_and_balanced_accuracy_by_hand():
  # Answerable: right, wrong, abstained, right. Unanswerable: abstained, answered (GRACE's "correct"
  # on an unanswerable item is its abstention: an answer there must still count as wrong).
  per = _per(correct=[1, 0, 0, 1, 1, 0], abstained=[0, 0, 1, 0, 1, 0],
             answerable=[1, 1, 1, 1, 0, 0], conf=[-0.1, -2.0, -0.5, -0.3, -0.2, -0.4])
  s = selective.summary(per)
  assert s["coverage"] == pytest.approx(100 * 4 / 6)
  assert s["selective_accuracy"] == pytest.approx(100 * 2 / 4)  # 2 right of 4 answered
  assert s["balanced_accuracy"] == pytest.approx(100 * (2 / 4 + 1 / 2) / 2)
  # Ranked: answered by log-prob (-0.1 ok, -0.3 ok, -0.4 wrong, -2.0 wrong), then two abstentions.
  risks = [0, 0, 1 / 3, 2 / 4, 3 / 5, 4 / 6]
  assert s["aurc"] == pytest.approx(100 * np.mean(risks))
  # Without log-probs the answered items tie: the binary closed form.
  binary = selective.summary({k: v for k, v in per.items() if k != "confidence"})
  assert binary["aurc"] == pytest.approx(100 * (2 + 3 / 5 + 4 / 6) / 6)
  assert binary["coverage"] == s["coverage"] and binary["balanced_accuracy"] == s["balanced_accuracy"]


def test_corner_models_score_half_on_balanced_accuracy_and_nan_when_nothing_is_answered():
  answerable = [1, 1, 1, 0]
  refuse_all = selective.summary(_per([0, 0, 0, 0], [1, 1, 1, 1], answerable))
  answer_all = selective.summary(_per([1, 1, 1, 0], [0, 0, 0, 0], answerable))
  assert refuse_all["balanced_accuracy"] == answer_all["balanced_accuracy"] == 50.0
  assert refuse_all["coverage"] == 0 and np.isnan(refuse_all["selective_accuracy"])
  assert refuse_all["aurc"] == 100.0  # every item forced to answer is wrong
  assert answer_all["selective_accuracy"] == 75.0
  # One side only: the mean over the sides present.
  assert selective.summary(_per([1, 0], [0, 0], [1, 1]))["balanced_accuracy"] == 50.0


def test_an_empty_completion_ranks_below_every_answer_with_tokens():
  score = selective.confidence(np.array([True, True, False]), np.array([np.nan, -3.0, -0.1]))
  assert score[1] > score[0] > score[2]


def test_curve_points_are_the_curve_at_fixed_coverages():
  per = _per([1, 0, 1, 1], [0, 0, 0, 1], [1, 1, 1, 1], conf=[-0.1, -0.2, -0.3, -0.4])
  pts = selective.curve_points(per, num_points=4)
  assert pts["coverage"] == [25.0, 50.0, 75.0, 100.0]
  np.testing.assert_allclose(pts["selective_accuracy"], [100, 50, 100 * 2 / 3, 50], atol=1e-4)  # rounded


def test_several_statistics_bootstrap_as_each_alone():
  rng = np.random.default_rng(1)
  n = 30
  a = _per(rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 2, n), rng.normal(size=n))
  b = _per(rng.integers(0, 2, n), rng.integers(0, 2, n), a["item_answerable"], rng.normal(size=n))
  kw = dict(n_resamples=300, seed=4)
  together = bootstrap.paired_bootstraps(a, b, selective.summary, **kw)
  assert set(together) == set(selective.METRICS)
  for m in selective.METRICS:
    alone = bootstrap.paired_bootstrap(a, b, lambda d, m=m: selective.summary(d)[m], **kw)
    assert together[m] == alone, m
    assert together[m].low <= together[m].difference <= together[m].high


def _batch(rng, r, n):
  """r item sets of n items as columns [r, n]: verdicts in {0, 0.5, 1} and a NaN, confidences with
  ties and NaN, a set with no unanswerable item, one with no answerable item, one answering none."""
  per = {"correct": rng.choice([0.0, 0.5, 1.0], (r, n)), "abstained": rng.integers(0, 2, (r, n)) * 1.0,
         "item_answerable": rng.integers(0, 2, (r, n)) * 1.0,
         "confidence": rng.choice([-1.0, -2.0, np.nan, -0.5], (r, n)),
         "answer_em": rng.integers(0, 2, (r, n)) * 1.0, "answer_f1": rng.random((r, n)),
         "searches": rng.integers(0, 3, (r, n)) * 1.0,
         "gold_recall": rng.choice([np.nan, 0.0, 1.0], (r, n))}
  per["correct"][0, 0] = np.nan
  per["item_answerable"][1], per["item_answerable"][2] = 1.0, 0.0
  per["abstained"][3] = 1.0
  per["gold_recall"][4] = np.nan
  return per


def test_batched_statistics_equal_one_call_per_item_set():
  """Every statistic the comparison bootstraps in one call over resamples [R, N] gives, per set,
  what it gives on that set alone."""
  from grounding_jax.eval import metrics  # pylint: disable=g-import-not-at-top
  from grounding_jax.recipes import base  # pylint: disable=g-import-not-at-top
  from grounding_jax.sampling import multiturn  # pylint: disable=g-import-not-at-top
  per = _batch(np.random.default_rng(0), 8, 7)
  recall = lambda d: multiturn.tool_metrics(d["searches"], d["gold_recall"])
  column = lambda d: {"mean": base.column_mean(d["gold_recall"])}
  for statistic in (selective.summary, selective.sides, metrics.answer_summary, recall, column):
    together = statistic(per)
    for i in range(8):
      alone = statistic({k: v[i] for k, v in per.items()})
      for m, value in alone.items():
        assert isinstance(value, float)
        np.testing.assert_allclose(together[m][i], value, rtol=1e-12, atol=1e-12, err_msg=f"{m} {i}")
  np.testing.assert_allclose(selective.risk_coverage(per["correct"][1:], per["confidence"][1:])[1][2],
                             selective.risk_coverage(per["correct"][3], per["confidence"][3])[1])


def test_a_batched_bootstrap_gives_the_per_resample_intervals():
  rng = np.random.default_rng(2)
  both = _batch(rng, 8, 40)
  a, b = ({k: v[i] for k, v in both.items()} for i in (6, 7))
  b["item_answerable"] = a["item_answerable"]
  for k in (1, 4):
    kw = dict(n_resamples=400, seed=3, rows_per_question=k)
    slow = bootstrap.paired_bootstraps(a, b, selective.summary, **kw)
    fast = bootstrap.paired_bootstraps(a, b, selective.summary, batched=True, **kw)
    for m in selective.METRICS:
      assert fast[m].difference == slow[m].difference
      np.testing.assert_allclose([fast[m].low, fast[m].high], [slow[m].low, slow[m].high], rtol=1e-12)
  bootstrap._BATCH_ELEMENTS = 4_000  # pylint: disable=protected-access  (several chunks)
  try:
    chunked = bootstrap.paired_bootstraps(a, b, selective.summary, batched=True, **kw)
  finally:
    bootstrap._BATCH_ELEMENTS = 1_000_000  # pylint: disable=protected-access
  assert chunked == fast


def test_the_harness_confidence_is_the_mean_log_prob_of_the_completion_tokens():
  rollout = types.SimpleNamespace(
      completion_mask=np.array([[1, 1, 0], [1, 1, 1], [0, 0, 0]], bool),
      sampler_logp=np.array([[-1.0, -3.0, 0.0], [-0.5, -0.5, -2.0], [0.0, 0.0, 0.0]], np.float32))
  got = harness._mean_logprobs(rollout)  # pylint: disable=protected-access
  np.testing.assert_allclose(got[:2], [-2.0, -1.0])
  assert np.isnan(got[2])
