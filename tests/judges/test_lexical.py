"""The model-free entailment stand-in (judges.LexicalNLIJudge): word recall of the hypothesis in the
premise, built from a config value as kind "lexical"."""

import pickle

import numpy as np
import pytest

from grounding_jax import judges


def test_word_recall_decides_entailment():
  judge = judges.build("lexical", role="nli")
  premise = "Title: Roum\nRoum is the capital of Stopouskia. It lies on a river."
  out = judge.entails([premise, premise, premise, premise, premise],
                      ["Roum is the capital of Stopouskia.",    # every word: yes
                       "The capital of Stopouskia is Roum",     # order and articles do not matter
                       "Vell is the capital of Stopouskia.",    # a word the premise lacks: no
                       "",                                      # nothing stated: no
                       "!!!"])                                  # nothing after normalising: no
  np.testing.assert_array_equal(out, [True, True, False, False, False])
  half = judges.build({"kind": "lexical", "min_recall": 0.5}, role="nli")
  assert half.entails([premise], ["Vell is the capital of Stopouskia."]).tolist() == [True]


def test_lexical_spec_checks_and_pickles():
  assert isinstance(judges.lazy("lexical", role="nli"), judges.LexicalNLIJudge)  # no model: at once
  with pytest.raises(ValueError, match="role 'nli'"):
    judges.build("lexical", role="correctness")
  with pytest.raises(ValueError, match="min_recall"):
    judges.build({"kind": "lexical", "min_recall": 0.0}, role="nli")
  with pytest.raises(ValueError, match="premises"):
    judges.build("lexical", role="nli").entails(["a"], ["a", "b"])
  judge = pickle.loads(pickle.dumps(judges.LexicalNLIJudge(0.8)))  # reward workers get a copy
  assert judge.min_recall == 0.8
