"""Ground-GRPO rewards: unit-test vectors of Eqs. 1-6 (arXiv:2506.15522 §2.1) with a substring-entailment NLI fake.

The fake NLI (tests/rewards/fakes.py) is deterministic; the assertions are about the recipe's logic
(gating, per-statement sums, citation checks, batching), not about NLI quality.
"""

import numpy as np
import pytest

from grounding_jax.data.schema import Example, Passage
from grounding_jax import text
from grounding_jax.recipes import get_reward
from ..fakes import SubstringNLI

PASSAGES = (
    Passage("Mawsynram is the rainiest place on Earth.", title="Mawsynram"),
    Passage("Cherrapunji is the second rainiest place.", title="Cherrapunji"),
    Passage("Tutunendo is the third rainiest place.", title="Tutunendo"),
    Passage("Bananas are yellow.", title="Banana"),
)
ANS = Example(question="Which places are the rainiest?", passages=PASSAGES,
              answers=("Mawsynram", "Cherrapunji", "Tutunendo"), answerable=True, id="ans")
UNANS = Example(question="Who won?", passages=PASSAGES, answers=("Nobody",), answerable=False,
                id="unans")


def wrap(answer, think="The documents say so."):
  return f"<think>{think}</think>\n<answer>{answer}</answer>"


GOOD = "Mawsynram is the rainiest place on Earth [1]."
VECTORS = [  # (case, completion, example, stage, expected R)
    ("missing </answer>", "<think>x</think><answer>y", ANS, 2, 0.75),
    ("text after </answer>", "<think>x</think><answer>y</answer> trailing", ANS, 2, 1.0),
    ("unanswerable, exact refusal", wrap(text.REFUSAL_SENTENCE), UNANS, 2, 3.0),
    ("unanswerable, answers", wrap("Bananas are yellow [4]."), UNANS, 2, 2.0),
    ("answerable, exact refusal", wrap(text.REFUSAL_SENTENCE), ANS, 2, 2.0),
    ("answerable, gold + entailing citation", wrap(GOOD), ANS, 2, 3.5),
    ("answerable, citation does not entail", wrap("Mawsynram is the rainiest place on Earth [4]."),
     ANS, 2, 2.5),
    ("answerable, citation missing", wrap("Mawsynram is the rainiest place on Earth."), ANS, 2, 2.5),
    ("answerable, citation out of range", wrap("Mawsynram is the rainiest place on Earth [9]."),
     ANS, 2, 2.5),
    ("answerable, no gold alias", wrap("Bananas are yellow [4]."), ANS, 2, 2.5),
    ("answerable, 3 correct well-cited", wrap(
        "Mawsynram is the rainiest place on Earth [1]. Cherrapunji is the second rainiest place [2]. "
        "Tutunendo is the third rainiest place [3]."), ANS, 2, 5.5),
    ("stage 1, 1 correct well-cited", wrap(GOOD), ANS, 1, 3.0),
    ("stage 1, refusal earns no refusal term", wrap(text.REFUSAL_SENTENCE), ANS, 1, 2.0),
]


@pytest.mark.parametrize("case,completion,example,stage,expected", VECTORS,
                         ids=[v[0] for v in VECTORS])
def test_note_vectors(case, completion, example, stage, expected):
  fn = get_reward(f"trust_stage{stage}", nli=SubstringNLI())
  assert fn([completion], [example])["reward"][0] == pytest.approx(expected), case


def test_components_and_one_nli_call_per_batch():
  nli = SubstringNLI()
  fn = get_reward("trust_stage2", nli=nli)
  completions = [wrap(GOOD), wrap(GOOD), wrap("Cherrapunji is the second rainiest place [1]."),
                 wrap(text.REFUSAL_SENTENCE), "junk"]
  out = fn(completions, [ANS, ANS, ANS, UNANS, ANS])
  assert len(nli.calls) == 1  # one batched call; the duplicate pair is sent once
  assert len(nli.calls[0][0]) == 2
  np.testing.assert_allclose(out["reward"], [3.5, 3.5, 2.5, 3.0, 0.0])
  np.testing.assert_allclose(out["em"], [0.5, 0.5, 0.5, 0, 0])
  np.testing.assert_allclose(out["citation"], [0.5, 0.5, -0.5, 0, 0])
  np.testing.assert_allclose(out["refusal"], [0.5, 0.5, 0.5, 1.0, 0])
  np.testing.assert_allclose(out["refused"], [0, 0, 0, 1, 0])
  premise = nli.calls[0][0][0]
  assert premise == "Title: Mawsynram\nMawsynram is the rainiest place on Earth."


def test_no_nli_call_when_nothing_to_check():
  nli = SubstringNLI()
  get_reward("trust_stage2", nli=nli)([wrap("Bananas [4]."), "x"], [ANS, ANS])
  assert nli.calls == []


def test_bad_citation_penalty_ablation_and_forced_prefix():
  fn = get_reward("trust_stage2", nli=SubstringNLI(), bad_citation_penalty=False)
  assert fn([wrap("Mawsynram is the rainiest place on Earth [4].")], [ANS])["reward"][0] == 3.0
  # R1-distill's template puts "<think>\n" in the prompt: the completion lacks it.
  prefixed = get_reward("trust_stage2", nli=SubstringNLI(), forced_prefix="<think>\n")
  assert prefixed([f"x</think><answer>{GOOD}</answer>"], [ANS])["reward"][0] == pytest.approx(3.5)


def test_at_most_three_citations_are_read():
  nli = SubstringNLI()
  fn = get_reward("trust_stage1", nli=nli)
  fn([wrap("Mawsynram is the rainiest place on Earth [1][2][3][4].")], [ANS])
  assert nli.calls[0][0][0].count("Title:") == 3


def test_qampari_items_and_eli5_claims():
  qampari = Example(question="Rainy places?", passages=PASSAGES, answers=ANS.answers,
                    answerable=True, id="q", meta={"dataset": "qampari"})
  nli = SubstringNLI()
  out = get_reward("trust_stage2", nli=nli)([wrap("Mawsynram [1], Tutunendo [2], Paris [3].")],
                                            [qampari])
  # Items: Mawsynram [1], Tutunendo [2] (both EM), Paris (no EM). QAMPARI hypotheses carry the
  # question, which the substring fake never finds in a document: both citations count as bad.
  assert out["n_statements"][0] == 3
  assert out["em"][0] == 1.0 and out["citation"][0] == -1.0
  assert out["reward"][0] == pytest.approx(2.5)
  assert nli.calls[0][1][0] == "Rainy places? Mawsynram"
  eli5 = Example(question="Why?", passages=PASSAGES, answers=("Mawsynram is the rainiest place",),
                 answerable=True, id="e", meta={"dataset": "eli5"})
  out = get_reward("trust_stage2", nli=SubstringNLI())([wrap(GOOD + " Bananas are yellow [4].")],
                                                       [eli5])
  assert out["em"][0] == 0.5 and out["citation"][0] == 0.5


def test_malformed_examples_and_options_raise():
  with pytest.raises(ValueError, match="nli"):
    get_reward("trust_stage1")
  fn = get_reward("trust_stage2", nli=SubstringNLI())
  no_label = Example(question="q", passages=PASSAGES, answers=("a",), id="nolabel")
  with pytest.raises(ValueError, match=r"nolabel.*answerable"):
    fn([wrap("a")], [no_label])
  no_docs = Example(question="q", answers=("a",), answerable=True, id="nodocs")
  with pytest.raises(ValueError, match=r"nodocs.*passages"):
    fn([wrap("a")], [no_docs])
  no_answers = Example(question="q", passages=PASSAGES, answerable=True, id="noans")
  with pytest.raises(ValueError, match=r"noans.*answers"):
    fn([wrap("a")], [no_answers])
  bad_ds = Example(question="q", passages=PASSAGES, answers=("a",), answerable=True, id="ds",
                   meta={"dataset": "nq"})
  with pytest.raises(ValueError, match=r"ds.*dataset"):
    fn([wrap("a")], [bad_ds])


def test_gold_groups_count_once_and_calibrated():
  meta = {"dataset": "asqa", "answer_groups": [["Mawsynram", "Mausinram"], ["Cherrapunji"]],
          "answers_found": [[1, 0], [0, 0], [0, 0], [0, 0]]}
  ex = Example(question="q", passages=PASSAGES, answers=("Mawsynram", "Mausinram", "Cherrapunji"),
               answerable=True, id="g", meta=meta)
  answer = wrap("Mawsynram is the rainiest place on Earth [1]. Mausinram is the rainiest place on "
                "Earth [1]. Cherrapunji is the second rainiest place [2].")
  plain = get_reward("trust_stage2", nli=SubstringNLI())([answer], [ex])
  assert plain["em"][0] == 1.5  # per statement (the paper): both spellings of group 1 count
  once = get_reward("trust_stage2", nli=SubstringNLI(), count_each_gold_once=True)([answer], [ex])
  assert once["em"][0] == 1.0
  calibrated = get_reward("trust_stage2", nli=SubstringNLI(), calibrated_gold=True)([answer], [ex])
  assert calibrated["em"][0] == 1.0  # Cherrapunji is not supported by any shown document
  no_flags = Example(question="q", passages=PASSAGES, answers=("a",), answerable=True, id="nf")
  with pytest.raises(ValueError, match=r"nf.*answers_found"):
    get_reward("trust_stage1", nli=SubstringNLI(), calibrated_gold=True)([wrap("a")], [no_flags])


def test_process_reward_option():
  nli = SubstringNLI()
  fn = get_reward("trust_stage2", nli=nli, process_reward_weight=1.0)
  consistent = wrap(GOOD, think="I will answer: Mawsynram is the rainiest place on Earth.")
  out = fn([consistent, wrap(GOOD, think="No idea."), "junk"], [ANS] * 3)
  np.testing.assert_allclose(out["process"], [1, 0, 0])
  np.testing.assert_allclose(out["reward"], [4.5, 3.5, 0])
  assert len(nli.calls) == 1  # citation and process pairs share the batch's one call


def test_refusal_reward_answerable_prices_only_refusing_an_answerable_question():
  """0 is the paper's (an answerable refusal earns the format terms only, 2.0); a price moves that one
  cell and nothing else: answering, and refusing an unanswerable question, score as before."""
  completions = [wrap(text.REFUSAL_SENTENCE), wrap(text.REFUSAL_SENTENCE), wrap(GOOD),
                 wrap("Bananas are yellow [4].")]
  examples = [ANS, UNANS, ANS, ANS]
  paper = get_reward("trust_stage2", nli=SubstringNLI())(completions, examples)["reward"]
  priced_fn = get_reward("trust_stage2", nli=SubstringNLI(), refusal_reward_answerable=-0.5)
  priced = priced_fn(completions, examples)["reward"]
  np.testing.assert_allclose(paper, [2.0, 3.0, 3.5, 2.5])
  np.testing.assert_allclose(priced, [1.5, 3.0, 3.5, 2.5])
  assert priced_fn.reward_range == (0.0, float("inf"))  # tags + format (2) − at most 1
  stage1 = get_reward("trust_stage1", nli=SubstringNLI(), refusal_reward_answerable=-0.5)
  assert stage1([wrap(text.REFUSAL_SENTENCE)], [ANS])["reward"][0] == 2.0  # stage 1: no refusal term
  with pytest.raises(ValueError, match="refusal_reward_answerable=0.5"):
    get_reward("trust_stage2", nli=SubstringNLI(), refusal_reward_answerable=0.5)
