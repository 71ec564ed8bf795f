"""TruthRL rewards: a unit-test table of the rewards (arXiv:2509.25760 §3.2), judge batching, boxed-answer parsing."""

import numpy as np
import pytest

from grounding_jax.data.schema import Example
from grounding_jax.recipes import get_reward
from grounding_jax.recipes.truthrl import recipe as truthrl
from grounding_jax.text import tags
from ..fakes import ContainsJudge

EM = "exact_match"  # the judge spec of the offline runs (a reward option; see the judge tests below)


def ex(*answers, ook=None, id="t", answerable=None):
  return Example(question="q?", answers=answers, id=id, answerable=answerable,
                 meta={} if ook is None else {"ook": ook})


TABLE = [  # (case, completion, gold, (ternary, binary))
    ("abstain", "<think>..</think> \\boxed{I don't know}", ("Paris",), (0, -1)),
    ("curly apostrophe abstains (decision)", "\\boxed{I don\u2019t know}", ("Paris",), (0, -1)),
    ("substring abstention", "\\boxed{i DON'T know, sorry}", ("Paris",), (0, -1)),
    ("no box", "<think>x</think> Paris", ("Paris",), (-1, -1)),
    ("EM", "\\boxed{The Beatles}", ("beatles",), (1, 1)),
    ("wrong", "\\boxed{Rome}", ("Paris",), (-1, -1)),
    ("invalid question is penalised in training", "\\boxed{invalid question}",
     ("invalid question",), (-1, -1)),
]


@pytest.mark.parametrize("case,completion,gold,expected", TABLE, ids=[t[0] for t in TABLE])
def test_table(case, completion, gold, expected):
  for name, want in zip(("truthrl", "truthrl_binary"), expected):
    assert get_reward(name, judge=EM)([completion], [ex(*gold)])["reward"][0] == want, (case, name)


def test_em_short_circuits_the_judge_and_judge_is_batched():
  judge = ContainsJudge()
  fn = get_reward("truthrl", judge=judge)
  comps = ["\\boxed{The Beatles}", "\\boxed{It was Paris, France}", "\\boxed{I don't know}",
           "\\boxed{Rome}", "no box", "\\boxed{b!}"]
  exs = [ex("beatles"), ex("Paris"), ex("Paris"), ex("Paris"), ex("Paris"), ex("a", "b")]
  out = fn(comps, exs)
  assert len(judge.calls) == 1
  questions, preds, golds = judge.calls[0]
  assert preds == ["It was Paris, France", "Rome"]  # EM hits, abstentions and no-box never judged
  assert golds == [["Paris"], ["Paris"]]
  np.testing.assert_allclose(out["reward"], [1, 1, 0, -1, -1, 1])
  np.testing.assert_allclose(out["correct"], [1, 1, 0, 0, 0, 1])
  np.testing.assert_allclose(out["abstain"], [0, 0, 1, 0, 0, 0])
  np.testing.assert_allclose(out["no_box"], [0, 0, 0, 0, 1, 0])


def test_the_judge_is_required_and_exact_match_warns_with_the_papers_collapse(caplog, monkeypatch):
  for missing in ({}, {"judge": None}):
    with pytest.raises(ValueError, match=r"needs a correctness judge.*options\.judge.*kind='openai'"):
      get_reward("truthrl", **missing)
  monkeypatch.setattr(truthrl, "_warned_exact_match", False)
  with caplog.at_level("WARNING"):
    fn = get_reward("truthrl", judge=dict(kind="exact_match"))
  assert "Table 5" in caplog.text and "96 % abstention" in caplog.text
  out = fn(["\\boxed{It was Paris, France}"], [ex("Paris")])  # the recipe's own EM step only
  assert out["reward"][0] == -1 and out["incorrect"][0] == 1


def test_invalid_question_gold_policy():
  fn = get_reward("truthrl", judge=EM, invalid_question="gold")
  out = fn(["\\boxed{invalid question}"] * 2, [ex("invalid question"), ex("Paris")])
  np.testing.assert_allclose(out["reward"], [1, -1])
  np.testing.assert_allclose(out["invalid_question"], [0, 1])


def test_knowledge_enhanced():
  comps = ["\\boxed{I don't know}", "\\boxed{Paris}", "\\boxed{I don't know}", "\\boxed{Paris}"]
  exs = [ex("Paris", ook=True), ex("Paris", ook=True), ex("Paris", ook=False), ex("Paris", ook=False)]
  np.testing.assert_allclose(get_reward("truthrl_knowledge", judge=EM)(comps, exs)["reward"], [1, -1, 0, 1])
  np.testing.assert_allclose(
      get_reward("truthrl_knowledge", judge=EM, base_scheme="binary")(comps, exs)["reward"], [1, -1, -1, 1])
  with pytest.raises(ValueError, match=r"t2.*meta\['ook'\]"):
    get_reward("truthrl_knowledge", judge=EM)(["x"], [ex("a", id="t2")])


def test_abstain_reward_option_and_missing_answers():
  assert get_reward("truthrl", judge=EM, abstain_reward=0.5)(["\\boxed{I don't know}"],
                                                   [ex("a")])["reward"][0] == 0.5
  with pytest.raises(ValueError, match=r"noans.*answers"):
    get_reward("truthrl", judge=EM)(["\\boxed{x}"], [Example(question="q", id="noans")])


def test_abstain_reward_answerable_prices_only_abstentions_with_the_answer_in_the_passages():
  idk, wrong, right = "\\boxed{I don't know}", "\\boxed{b}", "\\boxed{a}"
  rows = [ex("a", answerable=True), ex("a", answerable=False), ex("a")]
  fn = get_reward("truthrl", judge=EM, abstain_reward_answerable=-0.5)
  np.testing.assert_array_equal(fn([idk] * 3, rows)["reward"], [-0.5, 0.0, 0.0])  # None: unlabelled
  np.testing.assert_array_equal(fn([right, wrong, right], rows)["reward"], [1.0, -1.0, 1.0])
  assert get_reward("truthrl", judge=EM)([idk], rows[:1])["reward"][0] == 0.0  # the paper's default
  with pytest.raises(ValueError, match="abstain_reward_answerable"):
    get_reward("truthrl", judge=EM, abstain_reward_answerable=2.0)


def test_correct_reward_unanswerable_prices_only_right_answers_the_passages_do_not_hold():
  idk, wrong, right = "\\boxed{I don't know}", "\\boxed{b}", "\\boxed{a}"
  rows = [ex("a", answerable=False), ex("a", answerable=True), ex("a")]
  fn = get_reward("truthrl", judge=EM, correct_reward_unanswerable=-1.0, abstain_reward_answerable=-0.5)
  out = fn([right] * 3, rows)
  np.testing.assert_array_equal(out["reward"], [-1.0, 1.0, 1.0])  # None (unlabelled): the paper's
  np.testing.assert_array_equal(out["correct"], [1.0, 1.0, 1.0])  # still a right answer in the logs
  np.testing.assert_array_equal(fn([idk, idk, wrong], rows)["reward"], [0.0, -0.5, -1.0])
  assert get_reward("truthrl", judge=EM)([right], rows[:1])["reward"][0] == 1.0  # the paper's default
  with pytest.raises(ValueError, match="correct_reward_unanswerable"):
    get_reward("truthrl", judge=EM, correct_reward_unanswerable=1.5)


@pytest.mark.parametrize("text,select,expected", [
    ("\\boxed{\\text{New York}}", "last", "\\text{New York}"),
    ("\\boxed{\\text{New York}}", "first_regex", "\\text{New York"),
    ("<think>maybe \\boxed{Rome}</think> \\boxed{Paris}", "last", "Paris"),
    ("<think>maybe \\boxed{Rome}</think> \\boxed{Paris}", "first", "Rome"),
    ("\\boxed{Paris} then \\boxed{Lon", "last", "Paris"),  # the unclosed (truncated) box is skipped
    ("\\boxed{ {a} b }", "first", "{a} b"),
    ("no box here", "last", None),
])
def test_extract_boxed(text, select, expected):
  assert tags.extract_boxed(text, select=select) == expected


@pytest.mark.parametrize("mode,expected", [  # §4.6: (r_out, r_reason) = (1,1),(1,0),(0,1),(-1,1)
    ("multiplicative", [2, 1, 0, -2]), ("additive", [1.5, 1, 0.5, -0.5]),
    ("conditional", [1, 0, 0, -1]),
])
def test_reasoning_enhanced_variants(mode, expected):
  comps = ["\\boxed{Paris}", "\\boxed{Paris}", "\\boxed{I don't know}", "\\boxed{Rome}"]
  fn = get_reward("truthrl", judge=EM, reasoning=mode)
  out = fn(comps, [ex("Paris")] * 4, reasoning_scores=[1, 0, 1, 1])
  np.testing.assert_allclose(out["reward"], expected)
  np.testing.assert_allclose(out["outcome"], [1, 1, 0, -1])
  lo, hi = fn.reward_range
  assert lo <= min(expected) and max(expected) <= hi
  with pytest.raises(ValueError, match="reasoning_scores"):
    fn(comps, [ex("Paris")] * 4)


def test_truthfulness_worked_example():
  # TruthRL (arXiv:2509.25760 §4.1): n = 10, 5 correct, 2 abstain, 3 other → Acc 50, Unc 20, Hall 30, T = 20.
  correct = [1] * 5 + [0] * 5
  abstained = [0] * 5 + [1, 1, 0, 0, 0]
  out = truthrl.truthfulness(correct, abstained)
  assert out == pytest.approx({"accuracy": 50.0, "uncertainty": 20.0, "hallucination": 30.0,
                               "truthfulness": 20.0})
  assert out["truthfulness"] == pytest.approx((2 * 5 + 2 - 10) / 10 * 100)  # CRAG's score form
  # v2's abstention weight sweep: w2 = 0.5 adds half the uncertainty rate.
  assert truthrl.truthfulness(correct, abstained, weights=(1, 0.5, 1))["truthfulness"] == pytest.approx(30.0)
  with pytest.raises(ValueError, match="both correct and abstained"):
    truthrl.truthfulness([1], [1])
