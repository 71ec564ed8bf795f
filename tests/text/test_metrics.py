"""Tests for grounding_jax/text/metrics.py against independent references.

References: rouge-score 0.1.2 itself, a direct transcription of the SQuAD v1.1 evaluation script,
scores recorded from HotpotQA's official evaluation script, fuzzywuzzy scores tabulated in the
Ground-GRPO note §3.3, and the worked examples in the notes.
"""

import collections
import json
import pathlib
import re
import string

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from grounding_jax.eval import metrics as eval_metrics
from grounding_jax.text import metrics as text

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
SCORER = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


# --- SQuAD v1.1 evaluation script, transcribed (the reference for EM / F1). ---------------------

def squad_normalize(s):
  def remove_articles(t):
    return re.sub(r"\b(a|an|the)\b", " ", t)

  def white_space_fix(t):
    return " ".join(t.split())

  def remove_punc(t):
    exclude = set(string.punctuation)
    return "".join(ch for ch in t if ch not in exclude)

  return white_space_fix(remove_articles(remove_punc(s.lower())))


def squad_f1(prediction, ground_truth):
  prediction_tokens = squad_normalize(prediction).split()
  ground_truth_tokens = squad_normalize(ground_truth).split()
  common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(prediction_tokens)
  recall = 1.0 * num_same / len(ground_truth_tokens)
  return (2 * precision * recall) / (precision + recall)


def squad_em(prediction, ground_truth):
  return squad_normalize(prediction) == squad_normalize(ground_truth)


def hotpot_sentences():
  data = json.loads((FIXTURES / "hotpotqa_dev_12.json").read_text())
  sents = [s for ex in data for _, para in ex["context"] for s in para]
  return data, sents


WORDS = st.sampled_from(["The", "the", "a", "an", "running", "runs", "ran", "U.S.", "Tyne", "river",
                         "rivers", "1981", "café", "naïve", "İstanbul", "don't", "—", ",", "  ",
                         "\n", "K", "ß", "généralement", "connected", "connection", "x"])
MIXED_TEXT = st.one_of(st.text(max_size=60), st.lists(WORDS, max_size=25).map(" ".join))


# --- normalisation, EM, F1 ----------------------------------------------------------------------

@pytest.mark.parametrize("raw,expected", [
    ("The Beatles", "beatles"), ("U.S.", "us"), ("  An  apple, a day!", "apple day"),
    ("Smith's", "smiths"), ("the theatre", "theatre"), ("", ""),
])
def test_normalize_answer_examples(raw, expected):
  assert text.normalize_answer(raw) == expected


@pytest.mark.parametrize("raw,expected", [  # ARENA note §3.4
    ("U.S.", "u s"), ("The Beatles", "beatles"), ("Smith's", "smith s"), ("New_York", "new york"),
    ("A-ha", "ha"), ("1,000", "1 000"),
])
def test_normalize_answer_arena_examples(raw, expected):
  assert text.normalize_answer_arena(raw) == expected


@hypothesis.given(MIXED_TEXT, st.lists(MIXED_TEXT, min_size=1, max_size=3))
@hypothesis.settings(max_examples=150, deadline=None)
def test_em_f1_match_squad_script(pred, golds):
  assert text.normalize_answer(pred) == squad_normalize(pred)
  assert text.exact_match(pred, golds) == float(max(squad_em(pred, g) for g in golds))
  assert text.token_f1(pred, golds) == pytest.approx(max(squad_f1(pred, g) for g in golds))


def test_em_f1_empty_answers_are_zero():
  assert text.exact_match("x", []) == 0.0
  assert text.token_f1("x", []) == 0.0
  assert text.token_f1("", [""]) == 0.0  # SQuAD v1.1: no common tokens -> 0


def test_hotpot_f1_matches_the_official_script():
  # Scores recorded by running hotpot_evaluate_v1.py (fixtures/README.md) on HotpotQA dev golds.
  rows = json.loads((FIXTURES / "hotpot_official_scores.json").read_text())
  for r in rows:
    assert text.hotpot_f1(r["prediction"], [r["gold"]]) == pytest.approx(r["f1"]), r
  got = eval_metrics.em_f1([r["prediction"] for r in rows], [[r["gold"]] for r in rows],
                           normalizer="hotpot", scale=1.0)
  np.testing.assert_allclose(got["em_per_example"], [r["em"] for r in rows])
  np.testing.assert_allclose(got["f1_per_example"], [r["f1"] for r in rows])
  # The rule is what differs from SQuAD: a closed answer is right or wrong, never half right.
  squad = text.em_f1(["yes, it is", "no way"], [["yes"], ["no"]], scale=1.0)["f1_per_example"]
  np.testing.assert_allclose(squad, [0.5, 2 / 3])
  assert sum(r["f1"] != pytest.approx(squad_f1(r["prediction"], r["gold"])) for r in rows) >= 4


CLOSED_TEXT = st.one_of(MIXED_TEXT, st.lists(st.sampled_from(
    ["yes", "Yes.", "no", "NO", "noanswer", "no answer", "the", "it", "is", ","]), max_size=3).map(" ".join))


@hypothesis.given(CLOSED_TEXT, st.lists(CLOSED_TEXT, min_size=1, max_size=3))
@hypothesis.settings(max_examples=150, deadline=None)
def test_hotpot_f1_is_squad_f1_away_from_closed_answers(pred, golds):
  closed = {"yes", "no", "noanswer"}
  want = max((0.0 if squad_normalize(pred) != squad_normalize(g) and
              closed & {squad_normalize(pred), squad_normalize(g)} else squad_f1(pred, g))
             for g in golds)
  assert text.hotpot_f1(pred, golds) == pytest.approx(want)


# --- ROUGE-L ------------------------------------------------------------------------------------

def test_rouge_l_matches_rouge_score_on_real_text():
  data, sents = hotpot_sentences()
  paragraphs = [" ".join(para) for ex in data for _, para in ex["context"]]
  pairs = [(sents[i], sents[(7 * i + 3) % len(sents)]) for i in range(0, len(sents), 5)]
  pairs += [(paragraphs[i], paragraphs[i + 1] + " " + paragraphs[i]) for i in range(0, 40, 4)]
  pairs += [(ex["answer"], ex["question"]) for ex in data]
  for pred, ref in pairs:
    want = SCORER.score(ref, pred)["rougeL"].fmeasure
    assert text.rouge_l_f1(pred, [ref]) == pytest.approx(want, abs=1e-12), (pred, ref)
    assert text.rouge_tokenize(pred) == SCORER._tokenizer.tokenize(pred)


@hypothesis.given(MIXED_TEXT, st.lists(MIXED_TEXT, max_size=3))
@hypothesis.settings(max_examples=300, deadline=None)
def test_rouge_l_matches_rouge_score_on_unicode(pred, refs):
  want = max((SCORER.score(r, pred)["rougeL"].fmeasure for r in refs), default=0.0)
  assert text.rouge_l_f1(pred, refs) == pytest.approx(want, abs=1e-12)


def test_rouge_l_grace_worked_examples():
  # GRACE note §3.7 rows 2 and 3.
  ref = "The Stanegate ran through the natural gap formed by the valleys of the Tyne and Irthing."
  pred = "The Stanegate ran through the valleys of the Tyne and Irthing."
  assert text.rouge_l_f1(pred, [ref]) == pytest.approx(2 * (11 / 11) * (11 / 16) / (1 + 11 / 16))
  assert text.rouge_l_f1(pred, [ref]) == pytest.approx(0.8148, abs=1e-4)
  assert text.rouge_l_f1("the Tyne and the Irthing rivers", ["Tyne and Irthing"]) == pytest.approx(2 / 3)
  assert text.rouge_l_f1("21 July 1981", ["1981"]) == pytest.approx(0.5)
  assert text.rouge_l_f1("", ["a"]) == 0.0
  assert text.rouge_l_f1("a b", []) == 0.0
  assert text.rouge_l_f1("x", ["", "x"]) == 1.0  # max over references


# --- refusal (fuzzywuzzy partial_ratio) and abstention -------------------------------------------

# Ground-GRPO note §3.3: fuzzywuzzy==0.18.0 + python-Levenshtein scores vs the flag and the sentence.
FUZZY_TABLE = [
    (text.REFUSAL_SENTENCE, 100, 100),
    ("I'm sorry, but I couldn't find an answer to your question in the search results.", 78, 90),
    ("I apologize, but I could not find an answer to your question in the search results.", 95, 97),
    ("I apologize, but I couldn't find the answer.", 100, 100),
    ("The provided documents do not contain the answer.", 55, 55),
    ("Josef Bican scored 805 goals [1][2].", 42, 42),
    ("Mawsynram holds the record [3]. I apologize, but I couldn't find an answer to the second part.",
     100, 77),
    ("", 0, 0),
]


@pytest.mark.parametrize("answer,vs_flag,vs_sentence", FUZZY_TABLE)
def test_refusal_scores_match_fuzzywuzzy_table(answer, vs_flag, vs_sentence):
  assert text.refusal_score(answer) == vs_flag / 100
  assert text.refusal_score(answer, text.REFUSAL_SENTENCE) == vs_sentence / 100
  assert text.is_refusal(answer) == (vs_flag > 85)


def test_partial_ratio_edge_cases():
  assert text.partial_ratio("", "") == 100  # fuzzywuzzy checks equality before emptiness
  assert text.partial_ratio("abc", "") == 0
  assert text.partial_ratio("abc", "xxabcxx") == 100
  assert text.partial_ratio("abcd", "abxd") == text.partial_ratio("abxd", "abcd")


@hypothesis.given(st.text(max_size=80), st.text(max_size=80))
@hypothesis.settings(max_examples=300, deadline=None)
def test_partial_ratio_is_bounded_and_total(a, b):
  r = text.partial_ratio(a, b)
  assert isinstance(r, int) and 0 <= r <= 100
  assert isinstance(text.is_refusal(a), bool)


@pytest.mark.parametrize("boxed,expected", [  # TruthRL note §3.4 table
    ("I don't know", True), ("I don\u2019t know", True), ("i DON'T know, sorry", True),
    ("I don't know the exact date", True), ("The Beatles", False), ("invalid question", False),
])
def test_is_abstention(boxed, expected):
  assert text.is_abstention(boxed) is expected


def test_partial_ratio_matches_recorded_fuzzywuzzy_outputs():
  rows = json.loads((FIXTURES / "fuzzywuzzy_partial_ratio.json").read_text())["rows"]
  assert len(rows) == 250
  for a, b, want in rows:
    assert text.partial_ratio(a, b) == want, (a, b)


@hypothesis.given(st.one_of(st.text(max_size=80), st.sampled_from([r[0] for r in FUZZY_TABLE])),
                  st.sampled_from([text.REFUSAL_FLAG, text.REFUSAL_SENTENCE, "abc"]),
                  st.sampled_from([85.0, 50.0, 95.0]))
@hypothesis.settings(max_examples=300, deadline=None)
def test_is_refusal_fast_path_agrees_with_exact_score(answer, reference, threshold):
  exact = text.refusal_score(answer, reference) * 100 > threshold
  assert text.is_refusal(answer, reference=reference, threshold=threshold) == exact
