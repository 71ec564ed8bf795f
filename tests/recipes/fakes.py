"""Deterministic judge fakes for tests whose assertions are about the recipe logic around a judge.

Real judges (transformers NLI, LLM judges) live in grounding_jax/judges/ and are tested in
tests/judges/test_nli.py and test_llm.py.
"""

import numpy as np

from grounding_jax import text


class SubstringNLI:
  """premise entails hypothesis iff the normalised hypothesis is a substring of the premise."""

  def __init__(self):
    self.calls = []

  def entails(self, premises, hypotheses):
    self.calls.append((list(premises), list(hypotheses)))
    return np.array([bool(text.normalize_answer(h)) and
                     text.normalize_answer(h) in text.normalize_answer(p)
                     for p, h in zip(premises, hypotheses)], dtype=bool)


class ContainsJudge:
  """A prediction is correct iff it contains a normalised gold alias (records every call)."""

  def __init__(self):
    self.calls = []

  def __call__(self, questions, predictions, golds):
    self.calls.append((list(questions), list(predictions), [list(g) for g in golds]))
    return np.array([any(text.normalize_answer(g) and text.normalize_answer(g) in
                         text.normalize_answer(p) for g in gs)
                     for p, gs in zip(predictions, golds)], dtype=bool)
