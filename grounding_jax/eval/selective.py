"""Selective prediction: does the model answer where it is right and abstain where it would be wrong?

A selective model (f, g) answers x with f(x) where g(x) = 1 and abstains elsewhere (Geifman &
El-Yaniv 2017, "Selective classification for deep neural networks", arXiv:1705.08500 §2):

  coverage        φ = mean g(x)                          the share of items answered
  selective risk  R = Σ ℓ(f(x), y)·g(x) / Σ g(x)          the loss among the answered items

Letting g accept the items of highest confidence κ(x) first, R against φ is the risk–coverage
curve; AURC is the area under it. On n items sorted by κ, most confident first,
AURC = (1/n) Σ_{i=1..n} R_i with R_i the risk of the i most confident items (the empirical area of
Geifman, Uziel & El-Yaniv 2019, arXiv:1805.08206, which names it AURC). Lower is better.

What the grounded-QA harness puts in (`summary`):
  loss        ℓ = 1 − right. right is the answer's verdict (the recipe's "correct", in [0, 1]) on an
              answerable item and 0 on an unanswerable one (no answer is right where the evidence is
              absent); an abstention, forced to answer, is counted as a wrong answer (ℓ = 1).
  confidence  the model's own decision first: every answered item ranks above every abstention.
              Among answered items, the mean log-prob of the completion's tokens under the sampler
              (log_softmax(logits / T)[token]; T = 1 for greedy decoding), where the harness has it;
              without it (`confidence=None`) the decision alone ranks: the binary case.
  ties        items of equal confidence are accepted together: inside a tied block the curve is its
              expectation over the block's orderings (the block's loss spread evenly over its
              positions), so AURC never depends on row order. Binary case, n_a answered items
              holding loss L_a among n: AURC = (L_a + Σ_{i=n_a+1..n} (L_a + i − n_a)/i) / n.

The metrics (in %, as the harness's other columns):
  coverage            100·φ at the model's own decision (answered items / all items)
  selective_accuracy  100·(1 − R) at that decision: accuracy among answered items (NaN if none)
  aurc                100·AURC over the whole curve, φ from 1/n to 1
  balanced_accuracy   the mean of accuracy on answerable items and abstention on unanswerable ones,
                      over the sides present (a refuse-everything or answer-everything model scores
                      about 50, whatever the answerable share)
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

METRICS = ("coverage", "selective_accuracy", "aurc", "balanced_accuracy")
# The direction in which each metric improves (checkpoint.best_mode must agree; coverage has none).
HIGHER_IS_BETTER = ("selective_accuracy", "balanced_accuracy")
LOWER_IS_BETTER = ("aurc",)


def selection_loss(correct: np.ndarray, abstained: np.ndarray, answerable: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
  """(answered bool [N], loss float64 [N]) of the harness's per-example columns (see the module doc).

  Args:
    correct: float [N], the answer's verdict in [0, 1] (NaN counts as 0).
    abstained: float [N], 1 where the model abstained.
    answerable: float [N], 1 where the item is answerable.
  """
  answered = np.asarray(abstained, np.float64) < 0.5
  right = np.nan_to_num(np.asarray(correct, np.float64), nan=0.0)
  right = np.where(answered & (np.asarray(answerable, np.float64) > 0), right, 0.0)
  return answered, 1.0 - right


def confidence(answered: np.ndarray, mean_logprob: Optional[np.ndarray] = None) -> np.ndarray:
  """float64 [N]: the ranking score. Abstentions −inf; answered items their mean log-prob (a NaN,
  e.g. an empty completion, ranks below every finite one) or, without log-probs, 1 (binary)."""
  answered = np.asarray(answered, bool)
  if mean_logprob is None:
    return np.where(answered, 1.0, -np.inf)
  lp = np.nan_to_num(np.asarray(mean_logprob, np.float64), nan=-np.finfo(np.float64).max,
                     neginf=-np.finfo(np.float64).max)
  return np.where(answered, lp, -np.inf)


def risk_coverage(loss: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """The risk–coverage curve: (coverage [n], risk [n]) at i = 1..n items accepted, most confident
  first (coverage i/n; risk = the mean loss of those i items, in expectation over orderings of tied
  scores). Risk is in the loss's units (1 − accuracy for 0 / 1 losses)."""
  loss, score = np.asarray(loss, np.float64), np.asarray(score, np.float64)
  n = len(loss)
  if n == 0 or score.shape != loss.shape:
    raise ValueError(f"risk_coverage needs n >= 1 aligned losses and scores; got {loss.shape}, "
                     f"{score.shape}")
  order = np.argsort(-score, kind="stable")
  s, l = score[order], loss[order]
  starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])       # first position of each tied block
  sizes = np.diff(np.r_[starts, n])
  block_loss = np.add.reduceat(l, starts)
  before = np.r_[0.0, np.cumsum(block_loss)[:-1]]             # loss accepted before each block
  block = np.repeat(np.arange(len(starts)), sizes)            # each position's block
  i = np.arange(1, n + 1)
  within = i - starts[block]                                   # items of its block accepted so far
  expected = before[block] + within / sizes[block] * block_loss[block]
  return i / n, expected / i


def aurc(loss: np.ndarray, score: np.ndarray) -> float:
  """The area under the risk–coverage curve, (1/n) Σ_i R_i (module doc), in the loss's units."""
  return float(np.mean(risk_coverage(loss, score)[1]))


def summary(per_example: Mapping[str, np.ndarray]) -> dict[str, float]:
  """The METRICS (in %) of the harness's per-example columns: "correct", "abstained",
  "item_answerable" and, where present, "confidence" (the completion's mean log-prob)."""
  answered, loss = selection_loss(per_example["correct"], per_example["abstained"],
                                  per_example["item_answerable"])
  score = confidence(answered, per_example.get("confidence"))
  answerable = np.asarray(per_example["item_answerable"], np.float64) > 0
  sides = []
  if answerable.any():
    sides.append(np.mean(np.asarray(per_example["correct"], np.float64)[answerable]))
  if (~answerable).any():
    sides.append(np.mean(np.asarray(per_example["abstained"], np.float64)[~answerable]))
  return {
      "coverage": 100.0 * float(answered.mean()),
      "selective_accuracy": (100.0 * float(1.0 - loss[answered].mean()) if answered.any()
                             else float("nan")),
      "aurc": 100.0 * aurc(loss, score),
      "balanced_accuracy": 100.0 * float(np.mean(sides)),
  }


def curve_points(per_example: Mapping[str, np.ndarray], num_points: int = 20
                 ) -> dict[str, list[float]]:
  """The risk–coverage curve of `summary`'s inputs at coverages 1/num_points … 1 (the nearest item
  count at or above each), for metrics.json: {"coverage": [...], "selective_accuracy": [...]} in %."""
  answered, loss = selection_loss(per_example["correct"], per_example["abstained"],
                                  per_example["item_answerable"])
  cov, risk = risk_coverage(loss, confidence(answered, per_example.get("confidence")))
  n = len(cov)
  at = sorted({min(n, max(1, int(np.ceil(n * k / num_points)))) - 1
               for k in range(1, num_points + 1)})
  return {"coverage": [round(100.0 * float(cov[j]), 4) for j in at],
          "selective_accuracy": [round(100.0 * float(1.0 - risk[j]), 4) for j in at]}
