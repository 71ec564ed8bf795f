"""The model-free stand-ins: entailment by word recall of the hypothesis in the premise
(judges.LexicalNLIJudge, kind "lexical") and correctness by token F1 (judges.TokenF1Judge, kind
"token_f1"), each built from a config value."""

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


def test_token_f1_judge_counts_partly_right_answers_above_its_threshold():
  judge = judges.build({"kind": "token_f1", "threshold": 0.5})
  assert isinstance(judge, judges.TokenF1Judge) and isinstance(judges.build("token_f1"),
                                                               judges.TokenF1Judge)
  # SQuAD normalisation drops articles and punctuation; F1 by hand: "arthurs magazine" vs
  # "first arthurs magazine": precision 2/3, recall 1 -> 0.8; "magazine" vs "arthurs magazine": 2/3;
  # "new york city" vs "paris": 0; an alias list takes the best; a non-string prediction is "".
  got = judge(["q"] * 5, ["The first Arthur's Magazine.", "magazine", "New York City", "Paris", None],
              [["Arthur's Magazine"], ["Arthur's Magazine"], ["Paris"], ["Lutetia", "paris"], ["x"]])
  assert got.tolist() == [True, True, False, True, False]
  strict = judges.TokenF1Judge(threshold=0.7)
  assert strict(["q"], ["magazine"], [["Arthur's Magazine"]]).tolist() == [False]  # 2/3 < 0.7
  with pytest.raises(ValueError, match="threshold=0"):
    judges.TokenF1Judge(threshold=0)
  with pytest.raises(ValueError, match="answers correctness, not NLI"):
    judges.build({"kind": "token_f1"}, role="nli")
