"""What every judge shares: the two protocols, pair and input checks, a bounded verdict cache, and
the exact-match correctness judge.

  NLIJudge           entails(premises, hypotheses) -> bool[N]
  CorrectnessJudge   judge(questions, predictions, golds) -> bool[N]
  LexicalNLIJudge    a model-free entailment stand-in (word recall) for offline CPU runs

Judges are host-side and batched: a recipe sends all of a batch's queries in one call. Model output
never makes a judge raise; misaligned or mistyped inputs (a caller's bug) do.
"""

from __future__ import annotations

import collections
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from grounding_jax import text as text_lib

Backend = Callable[[list[str]], list[str]]


@runtime_checkable
class NLIJudge(Protocol):

  def entails(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """bool [N]: does premises[i] entail hypotheses[i]?"""


@runtime_checkable
class CorrectnessJudge(Protocol):

  def __call__(self, questions: Sequence[str], predictions: Sequence[str],
               golds: Sequence[Sequence[str]]) -> np.ndarray:
    """bool [N]: is predictions[i] a correct answer to questions[i] given gold aliases golds[i]?"""


def check_pairs(premises: Sequence[str], hypotheses: Sequence[str]) -> tuple[list[str], list[str]]:
  premises, hypotheses = list(premises), list(hypotheses)
  if len(premises) != len(hypotheses):
    raise ValueError(f"NLI judge got {len(premises)} premises but {len(hypotheses)} hypotheses; "
                     "pass one premise per hypothesis.")
  for name, seq in (("premises", premises), ("hypotheses", hypotheses)):
    for i, s in enumerate(seq):
      if not isinstance(s, str):
        raise TypeError(f"NLI judge: {name}[{i}] is {type(s).__name__}, expected str.")
  return premises, hypotheses


CACHE_SIZE = 100_000  # entries; the oldest are evicted first, so a long run's memory stays bounded


def remember(cache: dict, key, value: bool) -> None:
  cache[key] = value
  if len(cache) > CACHE_SIZE:
    del cache[next(iter(cache))]  # dicts keep insertion order: this is the oldest entry


class CachedNLI:
  """Caches (premise, hypothesis) → bool so repeated pairs (rollouts of one prompt) cost one call."""

  def __init__(self, cache: bool):
    self._cache: dict[tuple[str, str], bool] | None = {} if cache else None
    self.stats: collections.Counter[str] = collections.Counter()

  def _entails_uncached(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
    raise NotImplementedError

  def entails(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """bool [N]; pairs are scored in batches, order preserved."""
    premises, hypotheses = check_pairs(premises, hypotheses)
    out = np.zeros(len(premises), dtype=bool)
    if self._cache is None:
      if premises:
        out[:] = self._entails_uncached(premises, hypotheses)
      return out
    todo: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(zip(premises, hypotheses)):
      if key in self._cache:
        out[i] = self._cache[key]
        self.stats["cache_hits"] += 1
      else:
        todo.setdefault(key, []).append(i)
    if todo:
      keys = list(todo)
      result = self._entails_uncached([k[0] for k in keys], [k[1] for k in keys])
      for key, value in zip(keys, result):
        remember(self._cache, key, bool(value))
        out[todo[key]] = bool(value)
    return out


def check_correctness_inputs(questions, predictions, golds):
  questions, predictions, golds = list(questions), list(predictions), list(golds)
  if not len(questions) == len(predictions) == len(golds):
    raise ValueError(f"correctness judge got {len(questions)} questions, {len(predictions)} predictions "
                     f"and {len(golds)} gold lists; they must align.")
  for i, g in enumerate(golds):
    if isinstance(g, str) or not all(isinstance(a, str) for a in g):
      raise TypeError(f"golds[{i}]={g!r} must be a sequence of gold strings (aliases), e.g. ['Paris'].")
  return questions, predictions, [list(g) for g in golds]


class ExactMatchJudge:
  """Correct iff SQuAD-normalised exact match with any alias (`text.exact_match`)."""

  def __call__(self, questions, predictions, golds) -> np.ndarray:
    _, predictions, golds = check_correctness_inputs(questions, predictions, golds)
    return np.array([text_lib.exact_match(p if isinstance(p, str) else "", g) == 1.0
                     for p, g in zip(predictions, golds)], bool)


class TokenF1Judge:
  """Correct iff SQuAD token F1 with some alias (`text.token_f1`) is at least `threshold`.

  An offline, model-free stand-in for an LLM correctness judge on free-form real answers, where
  exact match is too strict for a small model ("the Arthur's Magazine" against "Arthur's Magazine"
  is wrong by EM, F1 0.8): never a paper's verifier. With exact match, a GRPO group in which no
  sample matches has only abstentions (0) and wrong answers (−1) to compare under TruthRL's
  ternary reward, and abstaining wins (docs/results.md, "The real-data learning run").
  """

  def __init__(self, threshold: float = 0.5):
    if not 0.0 < threshold <= 1.0:
      raise ValueError(f"token_f1 judge: threshold={threshold} must be in (0, 1] (1 = exact tokens).")
    self.threshold = float(threshold)

  def __call__(self, questions, predictions, golds) -> np.ndarray:
    _, predictions, golds = check_correctness_inputs(questions, predictions, golds)
    return np.array([text_lib.token_f1(p if isinstance(p, str) else "", g) >= self.threshold
                     for p, g in zip(predictions, golds)], bool)


class LexicalNLIJudge:
  """An offline entailment stand-in with no model: the premise "entails" the hypothesis iff at least
  `min_recall` of the hypothesis's SQuAD-normalised words (`text.normalize_answer`) occur among the
  premise's. A bag-of-words overlap baseline, blind to negation and paraphrase — plumbing for CPU
  runs whose statements quote their passages (the synthetic world), never a paper's NLI model.

  Why it exists: the 135M SmolLM2 asked yes/no answered "no" to every verbatim-quoted gold statement
  of the trust :runlocal training draw (8 of 8 pairs), so a cited right answer and a wrong one
  earned the same reward.
  """

  def __init__(self, min_recall: float = 1.0):
    if not 0.0 < min_recall <= 1.0:
      raise ValueError(f"lexical NLI judge: min_recall={min_recall} must be in (0, 1].")
    self.min_recall = float(min_recall)

  def entails(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    premises, hypotheses = check_pairs(premises, hypotheses)
    out = np.zeros(len(premises), dtype=bool)
    for i, (p, h) in enumerate(zip(premises, hypotheses)):
      words = text_lib.normalize_answer(h).split()
      if words:
        vocabulary = set(text_lib.normalize_answer(p).split())
        out[i] = sum(w in vocabulary for w in words) >= self.min_recall * len(words)
    return out
