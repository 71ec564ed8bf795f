"""Each paper's evaluation end to end on hand-built examples with hand-computed numbers.

Judges are deterministic rules here: the assertions are about the evaluation's bookkeeping.
"""

import numpy as np
import pytest
from rouge_score import rouge_scorer

from grounding_jax.data.schema import Example, Passage
from grounding_jax import recipes
from grounding_jax.eval import paper_eval
from grounding_jax.recipes.lear import recipe as lear
from grounding_jax.recipes.trust import recipe as trust
from grounding_jax import text
from grounding_jax.recipes.arena import judge as arena_judge


class RuleJudge:
  """Correct iff the prediction contains the first gold alias, case-insensitively; records calls."""

  def __init__(self):
    self.calls = []

  def __call__(self, questions, predictions, golds):
    self.calls.append(list(predictions))
    return np.array([g[0].lower() in p.lower() for p, g in zip(predictions, golds)], bool)


def _ex(q, answers, answerable=True, passages=("some passage text",), gold=(1,), **meta):
  return Example(question=q, passages=tuple(Passage(t, f"T{i}") for i, t in enumerate(passages)),
                 answers=tuple(answers), gold_passage_ids=tuple(gold) if answerable else (),
                 answerable=answerable, id=q, meta=meta)


def test_grace_eval():
  examples = [_ex("q1", ["Paris"]), _ex("q2", ["Rome"]), _ex("q3", ["Oslo"]),
              _ex("q4", [], answerable=False), _ex("q5", [], answerable=False)]
  completions = [
      "<think>x</think><evidence>e</evidence><answer>Paris</answer>",          # EM 1, LJ 1
      "<evidence>e</evidence><answer>It is Rome, Italy</answer>",             # EM 0, LJ 1
      "Oslo.",                                                                 # tag-less: whole text, EM 1
      "<think>hm</think><llm>unsure</llm><answer>maybe</answer>",             # <llm> path: correct
      "<evidence>e</evidence><answer>I don't know.</answer>",                  # evidence path: wrong
  ]
  out = paper_eval.evaluate("grace", completions, examples, judge=RuleJudge())
  assert out["em_answerable"] == pytest.approx(200 / 3)
  assert out["lj_answerable"] == pytest.approx(100.0)
  assert out["acc_unanswerable"] == pytest.approx(50.0) and out["lj_unanswerable"] == pytest.approx(50.0)
  assert out["overall_accuracy"] == pytest.approx(80.0) and out["balanced_accuracy"] == pytest.approx(75.0)
  assert out["accuracy_source"] == "judge"
  # Fig. 3: q1, q2 take the evidence path on answerable items (TP, both judged right), q3 answers
  # without it (FN), q4 takes <llm> on an unanswerable one (TN), q5 takes <evidence> there (FP).
  assert out["classification_accuracy"] == pytest.approx(60.0)
  assert out["answer_precision"] == pytest.approx(100.0)
  assert out["false_positive_rate"] == pytest.approx(50.0)
  # Baseline scoring: refusal-string EM, and the judge against GRACE's refusal list.
  judge = RuleJudge()
  base = paper_eval.evaluate("grace", completions, examples, judge=judge, grace_format=False)
  assert base["acc_unanswerable"] == pytest.approx(50.0)  # "I don't know." matches; "maybe" does not
  assert judge.calls[-1] == ["maybe", "I don't know."]
  # A baseline is "sufficient" when it answers rather than refuses: q1-q4 answer, q5 refuses.
  assert base["classification_accuracy"] == pytest.approx(80.0)  # TP 3 + TN 1; FP q4 ("maybe")
  assert base["false_positive_rate"] == pytest.approx(50.0)
  no_judge = paper_eval.evaluate("grace", completions, examples)
  assert no_judge["accuracy_source"] == "em" and "lj_answerable" not in no_judge
  assert no_judge["overall_accuracy"] == pytest.approx(60.0)
  assert no_judge["answer_precision"] == pytest.approx(50.0)  # EM verdicts: q2's answer is not EM


def test_grace_evidence_rouge_l_table5():
  # Table 5's ER (arXiv:2601.04525 App. C.1): ROUGE-L F1 (rouge-score, stemming) of the <evidence>
  # content after </think> against the gold evidence, max over references, averaged over answerable items (0 when
  # a response quotes no evidence). Reference: rouge-score itself, and a worked example of GRACE's reward.
  scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
  gold = "The Stanegate ran through the natural gap formed by the valleys of the Tyne and Irthing."
  quote = "The Stanegate ran through the valleys of the Tyne and Irthing."
  qasper = ("We use BERT as the encoder.", "Results are in Table 2 on the test set.")
  examples = [Example("q1", answers=("Tyne and Irthing",), evidence=(gold,), answerable=True),
              Example("q2", answers=("BERT",), evidence=qasper, answerable=True),
              Example("q3", answers=("x",), evidence=(gold,), answerable=True),
              Example("q4", answers=(), answerable=False)]
  completions = [f"<think>t</think><evidence>{quote}</evidence><answer>Tyne and Irthing</answer>",
                 "<evidence>We use a BERT encoder.</evidence><answer>BERT</answer>",
                 f"<think><evidence>{quote}</evidence></think><llm>recall</llm><answer>x</answer>",
                 f"<evidence>{quote}</evidence><answer>y</answer>"]   # unanswerable: not in ER
  out = paper_eval.evaluate("grace", completions, examples)
  assert scorer.score(gold, quote)["rougeL"].fmeasure == pytest.approx(0.8148, abs=1e-4)
  want = [scorer.score(gold, quote)["rougeL"].fmeasure,
          max(scorer.score(r, "We use a BERT encoder.")["rougeL"].fmeasure for r in qasper), 0.0]
  assert out["evidence_rouge_l_answerable"] == pytest.approx(100 * np.mean(want))


def test_arena_eval():
  examples = [_ex("q1", ["Paris"], passages=("a", "b"), gold=(2,)), _ex("q2", ["U.S."], gold=(1,))]
  completions = ["<relevance>[2]</relevance>\n<analysis>a</analysis>\n<answer>Paris</answer>",
                 "<relevance>[1, 2]</relevance><analysis>b</analysis><answer>the us army</answer>"]
  judge = RuleJudge()
  out = paper_eval.evaluate("arena", completions, examples, judge=judge)
  # q2: ARENA normalisation gives "u s" vs "us army": EM 0, F1 0; judge: "u.s." not in "the us army".
  assert out["em"] == pytest.approx(0.5) and out["f1"] == pytest.approx(0.5)
  assert out["format_score"] == pytest.approx(1.0)
  assert out["relevance_score"] == pytest.approx(0.75)  # exact 1, partial overlap 0.5 (id 2 of [1, 2])
  assert out["lj"] == pytest.approx(0.5)
  # With an LLM judge, a reply with neither "yes" nor "no" earns ARENA's half credit.
  from grounding_jax import judges
  llm = judges.LLMCorrectnessJudge(lambda prompts: ["maybe"] * len(prompts), style=arena_judge.STYLE, parser="arena")
  out = paper_eval.evaluate("arena", completions, examples, judge=llm)
  assert out["lj"] == pytest.approx((1 + 0.5) / 2)  # q1 exact match (no call), q2 unreadable


def test_truthrl_eval_worked_example():
  # TruthRL (arXiv:2509.25760 §4.1): 10 questions, 5 correct, 2 abstain, 3 other → Acc 50, Unc 20, Hall 30, T 20.
  examples = [_ex(f"q{i}", ["Paris"]) for i in range(10)]
  completions = (["<think>.</think> \\boxed{Paris}"] * 5 + ["\\boxed{I don't know}", "\\boxed{I don’t know}"]
                 + ["\\boxed{Lyon}", "no box at all", "\\boxed{invalid question}"])
  out = paper_eval.evaluate("truthrl", completions, examples)
  assert out["accuracy"] == 50 and out["uncertainty"] == 20 and out["hallucination"] == 30
  assert out["truthfulness"] == 20 and out["no_box_rate"] == 10 and out["judge"] == "exact_match"
  judged = paper_eval.evaluate("truthrl", completions, [_ex(f"q{i}", ["Lyon city"]) for i in range(10)],
                               judge=lambda q, p, g: np.array(["lyon" in x.lower() for x in p]))
  assert judged["accuracy"] == 10 and judged["judge"] == "llm"


def test_trust_eval_extracts_answers_and_reports_fallback():
  meta = {"dataset": "asqa", "answer_groups": [["fact_a"]], "answers_found": [[1]]}
  examples = [_ex("q1", ["fact_a"], passages=("fact_a",), **meta),
              _ex("q2", ["fact_a"], passages=("fact_a",), **meta)]

  class AllTrue:
    def entails(self, premises, hypotheses):
      return np.ones(len(premises), bool)

  completions = ["<think>r</think><answer>It is fact_a [1].</answer>", "It is fact_a [1]."]
  out = paper_eval.evaluate("trust", completions, examples, nli=AllTrue())
  assert out["answer_fallback_rate"] == pytest.approx(50.0)
  asqa = out["per_dataset"]["asqa"]
  assert asqa["F1_AC"] == pytest.approx(100.0) and asqa["F1_GC"] == pytest.approx(100.0)
  assert trust.answer_with_fallback(
      "<think>I apologize, but I couldn't find an answer</think> Yes [1].") == ("Yes [1].", True)
  assert text.is_refusal("I apologize, but I couldn't find an answer")


def test_lear_eval():
  examples = [_ex("q1", ["Paris"], passages=("one two three four five six", "seven eight nine ten")),
              _ex("q2", ["Rome"], passages=("a b c d e",))]
  rollouts = ["<reason>r</reason><extract>two words</extract>", "<reason>r</reason><extract></extract>"]
  readers = ["<answer>Paris</answer>", "the city of Rome"]
  out = lear.evaluate(rollouts, examples, reader_outputs=readers)
  assert out["em"] == pytest.approx(50.0)
  assert out["f1"] == pytest.approx(100 * (1 + 2 * (1 / 3) * 1 / (1 / 3 + 1)) / 2)
  assert out["cr_total"] == pytest.approx(15 / 2) and out["n_empty"] == 1
  # By recipe name, the reader's outputs are an option of LEAR's evaluator.
  by_name = paper_eval.evaluate("lear", rollouts, examples, reader_outputs=readers)
  assert recipes.get_recipe("lear").table(by_name) == recipes.get_recipe("lear").table(out)
  # HotpotQA's official rule on request: a yes / no gold is all or nothing.
  yes = [_ex("q3", ["yes"])]
  squad = lear.evaluate(["<extract>e</extract>"], yes, reader_outputs=["yes, it is"])
  hotpot = lear.evaluate(["<extract>e</extract>"], yes, reader_outputs=["yes, it is"], normalizer="hotpot")
  assert squad["f1"] == pytest.approx(50.0) and hotpot["f1"] == 0.0


class WordNLI:
  """Entailed iff every normalised word of the hypothesis occurs in the premise."""

  def entails(self, premises, hypotheses):
    return np.array([set(text.normalize_answer(h).split()) <= set(text.normalize_answer(p).split())
                     for p, h in zip(premises, hypotheses)], bool)


def test_oracle_completions_on_synthetic_data_score_perfectly():
  """An oracle that answers from the gold passage and abstains otherwise gets each paper's best score."""
  from grounding_jax.data import synthetic
  examples = synthetic.generate_examples(24, seed=3, answerable_ratio=0.5)
  n_ans = sum(e.answerable for e in examples)
  final = [next((j + 1 for j, f in enumerate(e.meta["answers_found"]) if f[0]), 1) for e in examples]
  grace = [f"<think>t</think><evidence>{' '.join(e.evidence)}</evidence><answer>{e.answers[0]}</answer>"
           if e.answerable else "<think>t</think><llm>unsure</llm><answer>a guess</answer>" for e in examples]
  out = paper_eval.evaluate("grace", grace, examples, judge=RuleJudge())
  assert out["overall_accuracy"] == 100.0 and out["em_answerable"] == 100.0
  boxed = [f"<think>t</think> \\boxed{{{e.answers[0]}}}" if e.answerable else "\\boxed{I don't know}"
           for e in examples]
  out = paper_eval.evaluate("truthrl", boxed, examples)
  assert out["accuracy"] == pytest.approx(100 * n_ans / 24) and out["hallucination"] == 0.0
  assert out["truthfulness"] == pytest.approx(out["accuracy"])
  trust = [f"<think>t</think><answer>{e.answers[0]} [{k}].</answer>" if e.answerable
           else f"<think>t</think><answer>{text.REFUSAL_SENTENCE}</answer>" for e, k in zip(examples, final)]
  res = paper_eval.evaluate("trust", trust, examples, nli=WordNLI(), dataset="asqa")["per_dataset"]["asqa"]
  assert res["F1_GR"] == res["F1_AC"] == res["F1_GC"] == res["TRUST"] == pytest.approx(100.0)
  answerable = [e for e in examples if e.answerable]
  arena = [f"<relevance>{list(e.gold_passage_ids)}</relevance>\n<analysis>a</analysis>\n<answer>{e.answers[0]}</answer>"
           for e in answerable]
  out = paper_eval.evaluate("arena", arena, answerable)
  assert out["em"] == out["f1"] == out["format_score"] == out["relevance_score"] == 1.0
