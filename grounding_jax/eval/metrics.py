"""Metrics every recipe's evaluation shares: answer EM / F1 on answerable items, pass@k, majority@k.

  answer_scores / answer_summary   each answer's SQuAD v1.1 EM and token F1 against the gold
              answers, and their means (in %) over the answerable items: the columns answer_em and
              answer_f1 of every harness row, whatever the recipe's own table (a small model's answer
              is often partly right: F1 shows it where EM says 0)
  pass_at_k   the unbiased estimator 1 − C(n−c, k)/C(n, k) (Chen et al. 2021).
  maj_at_k    majority@k (TruthRL, arXiv:2509.25760 Fig. 2) with our voting rule (majority_vote).
Each paper's own metrics live with its recipe (grounding_jax/recipes/<recipe>/).
"""

from __future__ import annotations

import collections
from typing import Callable, Sequence

import numpy as np

from grounding_jax import text as text_lib
from grounding_jax.text import em_f1

__all__ = ["answer_scores", "answer_summary", "em_f1", "maj_at_k", "majority_vote", "pass_at_k"]

ANSWER_METRICS = ("answer_em", "answer_f1")


def answer_scores(answers: Sequence[object], golds: Sequence[Sequence[str]]) -> dict[str, np.ndarray]:
  """{"answer_em", "answer_f1"}: float64 [N] in [0, 1], each answer's SQuAD v1.1 exact match and
  token F1 (text.exact_match / text.token_f1: max over the gold aliases; 0 without gold answers or
  for a non-string answer)."""
  if len(answers) != len(golds):
    raise ValueError(f"{len(answers)} answers for {len(golds)} gold lists.")
  em, f1 = np.zeros(len(answers)), np.zeros(len(answers))
  for i, (a, g) in enumerate(zip(answers, golds)):
    refs = [r for r in g if isinstance(r, str) and r.strip()]
    if isinstance(a, str) and refs:
      em[i], f1[i] = text_lib.exact_match(a, refs), text_lib.token_f1(a, refs)
  return {"answer_em": em, "answer_f1": f1}


def answer_summary(per_example) -> dict[str, float]:
  """{"answer_em", "answer_f1"}: the means (in %) of answer_scores' columns over the rows whose
  "item_answerable" is > 0 (NaN without any). Columns [..., N] with leading axes (the bootstrap's
  resamples) give arrays over those axes."""
  answerable = np.asarray(per_example["item_answerable"], np.float64) > 0
  return {k: as_float(100.0 * subset_mean(per_example[k], answerable)) for k in ANSWER_METRICS}


def subset_mean(values, rows) -> np.ndarray:
  """The mean of `values` over the rows where `rows` is True, along the last axis: NaN where no
  row is (a NaN value among them counts); leading axes are independent sets of rows."""
  values = np.asarray(values, np.float64)
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(rows, values, 0.0).sum(-1) / np.sum(rows, -1)


def as_float(x) -> float | np.ndarray:
  """A 0-d result as a Python float; a batched one (leading axes) as the array."""
  return float(x) if np.ndim(x) == 0 else np.asarray(x)


def pass_at_k(num_samples: Sequence[int] | int, num_correct: Sequence[int] | int, k: int) -> np.ndarray:
  """Unbiased pass@k per problem: 1 − C(n−c, k)/C(n, k).

  Computed as the stable product 1 − ∏_{i=n−c+1}^{n} (1 − k/i).

  Returns float64 [P] (a scalar input gives shape [1]). Requires k ≤ n for every problem.
  """
  n = np.atleast_1d(np.asarray(num_samples, np.int64))
  c = np.atleast_1d(np.asarray(num_correct, np.int64))
  n, c = np.broadcast_arrays(n, c)
  if k < 1 or np.any(n < k) or np.any(c < 0) or np.any(c > n):
    raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n; got k={k}, n={n.tolist()}, c={c.tolist()}.")
  out = np.ones(n.shape)
  for j, (nj, cj) in enumerate(zip(n, c)):
    if nj - cj >= k:
      out[j] = 1.0 - np.prod(1.0 - k / np.arange(nj - cj + 1, nj + 1))
  return out


def majority_vote(answers: Sequence[str], *, normalize: Callable[[str], str] = text_lib.normalize_answer,
                  is_abstention: Callable[[str], bool] = text_lib.is_abstention) -> int:
  """Index of the majority answer (the paper states no voting rule; this is ours).

  Answers are grouped by normalised text; every abstention falls in one "I don't know" group; the
  group with most votes wins, ties going to the group seen first; returns its first member's index.
  """
  if not answers:
    raise ValueError("majority_vote needs at least one answer.")
  keys = ["<abstain>" if is_abstention(a) else normalize(a) for a in answers]
  counts = collections.Counter(keys)
  first = {}
  for i, k in enumerate(keys):
    first.setdefault(k, i)
  best = max(counts, key=lambda k: (counts[k], -first[k]))
  return first[best]


def maj_at_k(answers: Sequence[Sequence[str]], correct: Sequence[Sequence[bool]], k: int,
             **vote_kwargs) -> float:
  """majority@k in %: per question, vote among the first k sampled answers; score the winner.

  `answers[q][j]` is sample j's extracted answer (the `\\boxed{}` content) and `correct[q][j]` its
  verdict; the voted answer is scored by its first occurrence's verdict.
  """
  if len(answers) != len(correct):
    raise ValueError(f"{len(answers)} answer lists for {len(correct)} verdict lists.")
  hits = []
  for q, (a, c) in enumerate(zip(answers, correct)):
    if len(a) < k or len(c) != len(a):
      raise ValueError(f"question {q}: {len(a)} answers / {len(c)} verdicts, need >= k={k} aligned.")
    hits.append(bool(c[majority_vote(list(a[:k]), **vote_kwargs)]))
  return 100.0 * float(np.mean(hits)) if hits else 0.0
