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

from grounding_jax.eval.metrics import as_float, subset_mean

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
  """The risk–coverage curve: (coverage [n], risk [..., n]) at i = 1..n items accepted, most
  confident first (coverage i/n; risk = the mean loss of those i items, in expectation over
  orderings of tied scores). Risk is in the loss's units (1 − accuracy for 0 / 1 losses). Leading
  axes are independent item sets (the bootstrap's resamples, [R, n])."""
  loss, score = np.asarray(loss, np.float64), np.asarray(score, np.float64)
  n = loss.shape[-1] if loss.ndim else 0
  if n == 0 or score.shape != loss.shape:
    raise ValueError(f"risk_coverage needs n >= 1 aligned losses and scores; got {loss.shape}, "
                     f"{score.shape}")
  order = np.argsort(-score, axis=-1, kind="stable")
  s, l = np.take_along_axis(score, order, -1), np.take_along_axis(loss, order, -1)
  pos = np.broadcast_to(np.arange(n), s.shape)
  change = s[..., 1:] != s[..., :-1]
  edge = np.ones(s.shape[:-1] + (1,), bool)
  # Each position's tied block [start, end): its first position, and one past its last.
  start = np.maximum.accumulate(np.where(np.concatenate([edge, change], -1), pos, 0), axis=-1)
  last = np.where(np.concatenate([change, edge], -1), pos + 1, n)
  end = np.flip(np.minimum.accumulate(np.flip(last, -1), axis=-1), -1)
  accepted = np.concatenate([np.zeros_like(edge, np.float64), np.cumsum(l, -1)], -1)  # loss of 0..n
  before = np.take_along_axis(accepted, start, -1)             # loss accepted before the block
  block_loss = np.take_along_axis(accepted, end, -1) - before
  i = np.arange(1, n + 1)
  expected = before + (i - start) / (end - start) * block_loss
  return i / n, expected / i


def aurc(loss: np.ndarray, score: np.ndarray) -> float | np.ndarray:
  """The area under the risk–coverage curve, (1/n) Σ_i R_i (module doc), in the loss's units; an
  array over the leading axes of batched inputs."""
  return as_float(np.mean(risk_coverage(loss, score)[1], axis=-1))


def summary(per_example: Mapping[str, np.ndarray]) -> dict[str, float]:
  """The METRICS (in %) of the harness's per-example columns: "correct", "abstained",
  "item_answerable" and, where present, "confidence" (the completion's mean log-prob). Columns
  [..., N] with leading axes (the bootstrap's resamples) give arrays over those axes."""
  answered, loss = selection_loss(per_example["correct"], per_example["abstained"],
                                  per_example["item_answerable"])
  score = confidence(answered, per_example.get("confidence"))
  two = sides(per_example)
  answerable = np.asarray(per_example["item_answerable"], np.float64) > 0
  present = np.stack([answerable.any(-1), (~answerable).any(-1)])  # the sides with items
  n_answered = answered.sum(-1)
  with np.errstate(invalid="ignore", divide="ignore"):
    return {
        "coverage": as_float(100.0 * answered.mean(-1)),
        "selective_accuracy": as_float(np.where(
            n_answered > 0, 100.0 * (1.0 - np.where(answered, loss, 0.0).sum(-1) / n_answered),
            np.nan)),
        "aurc": 100.0 * aurc(loss, score),
        "balanced_accuracy": as_float(
            np.where(present, np.stack(list(two.values())), 0.0).sum(0) / present.sum(0)),
    }


def sides(per_example: Mapping[str, np.ndarray]) -> dict[str, float]:
  """accuracy_answerable (the mean "correct" over answerable items) and abstention_unanswerable
  (the mean "abstained" over the others), in %, NaN for a side without items; batched as summary."""
  answerable = np.asarray(per_example["item_answerable"], np.float64) > 0
  return {"accuracy_answerable": as_float(100.0 * subset_mean(per_example["correct"], answerable)),
          "abstention_unanswerable": as_float(
              100.0 * subset_mean(per_example["abstained"], ~answerable))}


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
