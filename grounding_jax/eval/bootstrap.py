"""Paired bootstrap intervals: how much better is model B than model A on the same questions?

    iv = paired_bootstrap(per_a, per_b, statistic=lambda d: recipe.aggregate(d)["f1"])
    iv.difference, iv.low, iv.high          # B − A on the whole sample, and its 95 % percentile interval

Both models answered the same N questions (rows aligned). Each of `n_resamples` resamples draws N
question indices with replacement (numpy's default_rng(seed), one [n_resamples, N] draw), takes THE
SAME indices from both models — the pairing, which removes the between-question variance the two
share — and records statistic(B rows) − statistic(A rows). The interval is the (1 − confidence)/2 and
(1 + confidence)/2 percentiles of those differences (numpy's linear interpolation; Efron &
Tibshirani 1993, §13.3). With several samples per question (`rows_per_question` k > 1) a question's k
rows are resampled together.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Optional, Union

import numpy as np

PerExample = Union[np.ndarray, Mapping[str, np.ndarray]]


@dataclasses.dataclass(frozen=True)
class Interval:
  """statistic(B) − statistic(A) on the full sample and its bootstrap percentile interval."""
  difference: float
  low: float
  high: float
  confidence: float
  n_resamples: int

  @property
  def excludes_zero(self) -> bool:
    return self.low > 0 or self.high < 0

  def __str__(self) -> str:
    return f"{self.difference:+.4g} [{self.low:+.4g}, {self.high:+.4g}]"


def resample_indices(num_questions: int, n_resamples: int, seed: int) -> np.ndarray:
  """int64 [n_resamples, num_questions]: question indices drawn with replacement."""
  if num_questions < 1:
    raise ValueError("the bootstrap needs at least one question.")
  return np.random.default_rng(seed).integers(0, num_questions, size=(n_resamples, num_questions))


def _rows(x: PerExample, rows: np.ndarray) -> PerExample:
  if isinstance(x, Mapping):
    return {k: np.asarray(v)[rows] for k, v in x.items()}
  return np.asarray(x)[rows]


def _num_rows(x: PerExample) -> int:
  if isinstance(x, Mapping):
    lengths = {len(np.asarray(v)) for v in x.values()}
    if len(lengths) != 1:
      raise ValueError(f"per-example columns have different lengths {sorted(lengths)}.")
    return lengths.pop()
  return len(np.asarray(x))


def _resampled_rows(a: PerExample, b: PerExample, rows_per_question: int, n_resamples: int,
                    seed: int, confidence: float) -> np.ndarray:
  """int64 [n_resamples, N]: the rows of each resample (a question's k rows drawn together)."""
  n_rows, k = _num_rows(a), int(rows_per_question)
  if _num_rows(b) != n_rows:
    raise ValueError(f"the models have {n_rows} and {_num_rows(b)} rows; pair them on the same ones.")
  if k < 1 or n_rows % k:
    raise ValueError(f"{n_rows} rows do not split into questions of rows_per_question={k}.")
  if not 0 < confidence < 1:
    raise ValueError(f"confidence={confidence} must be in (0, 1).")
  questions = resample_indices(n_rows // k, n_resamples, seed)
  return (questions[:, :, None] * k + np.arange(k)).reshape(n_resamples, -1)  # [R, N]


def _interval(full: float, diffs: np.ndarray, confidence: float, n_resamples: int) -> Interval:
  tail = 100.0 * (1.0 - confidence) / 2
  if np.isnan(diffs).all():  # the statistic is undefined on every resample (e.g. an empty subset)
    return Interval(full, float("nan"), float("nan"), confidence, n_resamples)
  low, high = np.nanpercentile(diffs, [tail, 100.0 - tail])
  return Interval(full, float(low), float(high), confidence, n_resamples)


def paired_bootstrap(a: PerExample, b: PerExample,
                     statistic: Optional[Callable[[PerExample], float]] = None, *,
                     n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0,
                     rows_per_question: int = 1) -> Interval:
  """The paired-bootstrap interval of statistic(b) − statistic(a).

  Args:
    a, b: per-example values of the two models on the same rows, in the same order: float [N]
      arrays, or dicts of such columns (e.g. `evaluate(...)["per_example"]`).
    statistic: rows -> number (e.g. lambda d: recipe.aggregate(d)["em"]); None = the mean of an
      array, computed for all resamples at once.
    n_resamples: bootstrap resamples (10,000 puts the 2.5 % tail on 250 draws).
    confidence: the interval's coverage.
    seed: seeds the index draw; the same seed gives the same interval.
    rows_per_question: k rows per question (question-major, as a k-sample evaluation writes them).
  """
  rows = _resampled_rows(a, b, rows_per_question, n_resamples, seed, confidence)
  if statistic is None:
    if isinstance(a, Mapping) or isinstance(b, Mapping):
      raise ValueError("pass statistic= for per-example dicts (the mean applies to arrays).")
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    full = float(b.mean() - a.mean())
    diffs = np.concatenate([(b[chunk] - a[chunk]).mean(axis=1)
                            for chunk in np.array_split(rows, max(1, n_resamples // 1000))])
  else:
    full = float(statistic(b) - statistic(a))
    diffs = np.array([statistic(_rows(b, r)) - statistic(_rows(a, r)) for r in rows], np.float64)
  return _interval(full, diffs, confidence, n_resamples)


def paired_bootstraps(a: PerExample, b: PerExample,
                      statistics: Callable[[PerExample], Mapping[str, float]], *,
                      n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0,
                      rows_per_question: int = 1, batched: bool = False) -> dict[str, Interval]:
  """`paired_bootstrap` of several statistics computed together: {name: Interval} of
  statistics(b)[name] − statistics(a)[name], every name on the same resamples (the same draw as
  `paired_bootstrap` with the same seed). batched=True: `statistics` also takes columns [R, N] (R
  resamples' rows) and returns {name: float [R]} — as selective.summary does — and is called once
  per chunk of resamples instead of once per resample (the same intervals, ~50× sooner)."""
  rows = _resampled_rows(a, b, rows_per_question, n_resamples, seed, confidence)
  full_a, full_b = statistics(a), statistics(b)
  names = list(full_b)
  if batched:
    chunks = np.array_split(rows, max(1, rows.size // _BATCH_ELEMENTS))
    diffs = np.concatenate([_differences(statistics, a, b, r, names) for r in chunks])
  else:
    diffs = np.stack([_differences(statistics, a, b, r, names) for r in rows])
  return {m: _interval(float(full_b[m] - full_a[m]), diffs[..., i], confidence, n_resamples)
          for i, m in enumerate(names)}


# Per-example values per chunk of a batched bootstrap (8 MB a float64 column).
_BATCH_ELEMENTS = 1_000_000


def _differences(statistics, a: PerExample, b: PerExample, rows: np.ndarray,
                 names: list[str]) -> np.ndarray:
  """float64 [..., len(names)]: statistics(b) − statistics(a) on `rows` ([N] or [R, N])."""
  sa, sb = statistics(_rows(a, rows)), statistics(_rows(b, rows))
  return np.stack([np.broadcast_to(np.asarray(sb[m], np.float64) - np.asarray(sa[m], np.float64),
                                   rows.shape[:-1]) for m in names], -1)
