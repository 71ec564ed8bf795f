"""GRACE reward: every row of a worked-example table of Eq. 1 (arXiv:2601.04525 §3.2), options, malformed data."""

import dataclasses

import numpy as np
import pytest

from grounding_jax.data.schema import Example
from grounding_jax.recipes import get_reward
from grounding_jax.recipes.grace import recipe as grace

SENT = "The Stanegate ran through the natural gap formed by the valleys of the Tyne and Irthing."
EVI = Example(question="Which valleys?", answers=("Tyne and Irthing",), evidence=(SENT,),
              answerable=True, id="evi")
LLM = Example(question="Capital?", answers=("Paris",), evidence=("",), id="llm")  # gt_evidence == [""]

ROWS = [  # (id, completion, example, lenient R, strict R)
    ("1", f"<evidence>{SENT}</evidence><answer>Tyne and Irthing</answer>", EVI, 6.5, 6.5),
    ("2", "<evidence>The Stanegate ran through the valleys of the Tyne and Irthing.</evidence>"
          "<answer>the Tyne and the Irthing rivers</answer>", EVI, 1.5 + 2 * 22 / 27 + 2.0, None),
    ("4", "<llm>I recall it is Paris.</llm><answer>Paris</answer>", LLM, 1.5, 1.5),
    ("5", "<llm>hmm</llm><answer>x</answer>", EVI, 0.5, 0.5),
    ("6", "<evidence>something</evidence><answer>x</answer>", LLM, 0.5, 0.5),
    ("7", "<evidence>a</evidence><llm>b</llm><answer>c</answer>", EVI, 0.0, 0.0),
    ("8", "<evidence>a<answer>c</answer></evidence>", EVI, 0.0, 0.0),
    ("9", "<evidence>a</evidence>", EVI, 0.0, 0.0),
    ("10", "<think>… <evidence>x</evidence> …</think>\n<llm>b</llm><answer>c</answer>", LLM, 1.5, 1.5),
    ("11", f"<answer>Tyne and Irthing</answer><evidence>{SENT}</evidence>", EVI, 6.5, 0.0),
    ("12", "<evidence></evidence><answer></answer>", EVI, 1.5, 1.5),
    ("13", "<answer><llm>b</llm></answer>", LLM, 1.5, 0.0),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_worked_examples(row):
  _, completion, example, lenient, strict = row
  assert get_reward("grace")([completion], [example])["reward"][0] == pytest.approx(lenient)
  if strict is not None:
    out = get_reward("grace", strict_format=True)([completion], [example])
    assert out["reward"][0] == pytest.approx(strict)


def test_row2_components_and_row3():
  out = get_reward("grace")([ROWS[1][1]], [EVI])
  assert out["evidence_rouge"][0] == pytest.approx(0.8148, abs=1e-4)
  assert out["answer_rouge"][0] == pytest.approx(2 / 3)
  assert out["reward"][0] == pytest.approx(5.1296, abs=1e-4)
  ex3 = Example(question="When?", answers=("1981",), evidence=(SENT,), id="r3")
  out = get_reward("grace")([f"<evidence>{SENT}</evidence><answer>21 July 1981</answer>"], [ex3])
  assert out["reward"][0] == pytest.approx(5.0)


def test_batch_components_and_weights():
  comps = [ROWS[0][1], ROWS[2][1], ROWS[3][1], "garbage"]
  exs = [EVI, LLM, EVI, EVI]
  out = get_reward("grace", alpha=1.0, beta=1.0)(comps, exs)
  np.testing.assert_allclose(out["reward"], [3.5, 1.5, 0.5, 0.0])
  np.testing.assert_allclose(out["format"], [0.5, 0.5, 0.5, 0.0])
  np.testing.assert_allclose(out["path"], [1, 1, 0, 0])
  np.testing.assert_allclose(out["llm_path"], [0, 1, 1, 0])
  np.testing.assert_allclose(out["gold_llm"], [0, 1, 0, 0])


def test_answerable_flag_overrides_evidence_and_em_content():
  # answerable=False with evidence present: gold path is <llm> (context lacks the evidence).
  ex = Example(question="q", answers=("a",), evidence=(SENT,), answerable=False, id="x")
  assert get_reward("grace")(["<llm>r</llm><answer>a</answer>"], [ex])["reward"][0] == 1.5
  em = get_reward("grace", content="em")
  assert em([ROWS[1][1]], [EVI])["reward"][0] == pytest.approx(1.5)  # neither matches exactly
  assert em([ROWS[0][1]], [EVI])["reward"][0] == pytest.approx(6.5)


def test_overlong_penalty_row14():
  fn = get_reward("grace", overlong_penalty=True)
  out = fn([ROWS[0][1]] * 3, [EVI] * 3, completion_lengths=[100, 2560, 3072])
  np.testing.assert_allclose(out["overlong"], [0.0, -0.5, -1.0])
  np.testing.assert_allclose(out["reward"], [6.5, 6.0, 5.5])
  assert fn.reward_range == (-1.0, 6.5)
  with pytest.raises(ValueError, match="completion_lengths"):
    fn([ROWS[0][1]], [EVI])


def test_parse_grace_takes_text_after_last_think():
  out = grace.parse("<think>a</think><think>b</think> <llm>x</llm><answer> y </answer>")
  assert out.format_ok and out.path == "llm" and out.answer == " y "


def test_malformed_example_raises():
  bad = Example(question="q", answers=("a",), evidence=(), answerable=True, id="ex-7")
  with pytest.raises(ValueError, match=r"ex-7.*evidence"):
    get_reward("grace")(["<llm>x</llm><answer>a</answer>"], [bad])
  no_answers = Example(question="q", evidence=(SENT,), id="ex-8")
  with pytest.raises(ValueError, match=r"ex-8.*answers"):
    get_reward("grace")(["x"], [no_answers])
  with pytest.raises(ValueError, match="2 completions but 1 examples"):
    get_reward("grace")(["a", "b"], [EVI])
  with pytest.raises(ValueError, match="content"):
    get_reward("grace", content="bleu")


def test_the_answer_is_the_first_answer_block_everywhere():
  """GRACE's evaluator reads the FIRST <answer> block after </think> (`src/evaluator.py`);
  the recipe's answer, its evaluation and the seqio postprocessor (tests/eval/test_seqio_tasks.py) all
  use Grace.answer, so they cannot drift apart again."""
  from grounding_jax.recipes import get_recipe  # pylint: disable=g-import-not-at-top
  completion = "<think><answer>no</answer></think><llm>m</llm><answer>Orsk</answer><answer>Tver</answer>"
  assert get_recipe("grace").answer(completion) == "Orsk"
  ex = Example(question="q", answers=("Orsk",), evidence=(SENT,), answerable=True, id="two")
  assert grace.evaluate([completion], [ex])["em_answerable"] == 100.0
  assert grace.evaluate([completion], [dataclasses.replace(ex, answers=("Tver",))])["em_answerable"] == 0


def test_grace_accuracy_identities():
  correct = np.array([1, 1, 0, 1, 0, 1, 1], bool)
  answerable = np.array([1, 1, 1, 1, 0, 0, 0], bool)
  out = grace.accuracy(correct, answerable)
  assert out["accuracy_answerable"] == pytest.approx(75.0)
  assert out["accuracy_unanswerable"] == pytest.approx(200 / 3)
  # Overall = count-weighted; B. Acc. = plain mean of the two subset accuracies (arXiv:2601.04525 §4.3).
  assert out["overall_accuracy"] == pytest.approx((4 * 75.0 + 3 * 200 / 3) / 7)
  assert out["balanced_accuracy"] == pytest.approx((75.0 + 200 / 3) / 2)
  assert (out["n_answerable"], out["n_unanswerable"]) == (4, 3)


def test_grace_error_analysis():
  sufficient = [1, 1, 1, 0, 1, 0, 0]
  answerable = [1, 1, 1, 1, 0, 0, 0]
  correct = [1, 0, 1, 0, 0, 0, 0]
  out = grace.error_analysis(sufficient, answerable, correct)
  # TP = 3 (C = 2, I = 1), TN = 2, FP = 1, FN = 1.
  assert out["classification_accuracy"] == pytest.approx(100 * 5 / 7)
  assert out["answer_precision"] == pytest.approx(200 / 3)
  assert out["false_positive_rate"] == pytest.approx(100 / 3)


def test_grace_refusal_em():
  preds = ["I don't know", "i DON'T know.", "The provided evidence is not enough to answer the question",
           "I don't know the answer.", "Unanswerable", ""]
  np.testing.assert_array_equal(grace.refusal_em(preds), [True, True, True, False, False, False])
