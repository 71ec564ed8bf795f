"""GRACE (arXiv:2601.04525): choose the evidence or your own knowledge, then answer; gated reward.

The policy writes `[<think>…</think>] (<evidence>…</evidence> | <llm>…</llm>) <answer>…</answer>`:
quote the passage text that answers (the `<evidence>` path) or, when the passages do not hold the
answer, recall it (the `<llm>` path). Its parser and reward (Eq. 1, Alg. 1: format, path and
ROUGE-L of evidence and answer, gated on the text after the last `</think>`) are
reward.py's; here are the prompts, the evaluation and the recipe.

Evaluation (§4.3): answerable items by EM (ARENA normalisation), BERTScore-F1 and an LLM
judge; unanswerable items by taking the `<llm>` path (GRACE-format outputs) or refusal EM / judge;
Overall and Balanced accuracy; evidence ROUGE-L (Table 5).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from grounding_jax import text
from grounding_jax.data import mixture
from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import base
from grounding_jax.recipes import gold
from grounding_jax.recipes.grace import baselines as GB
from grounding_jax.recipes.grace import judge as grace_judge
from grounding_jax.recipes.grace.reward import GraceOutput, GraceReward, parse
from grounding_jax.text import tags

# ------------------------------------------------------------------------------- prompts (App. B.2, the authors' strings)
# src/prompts.py key "default". Note the U+2011 non-breaking hyphen in "evidence‑validation", the
# trailing spaces after three sentences, and the 4-space indent before {ref}. Each line is a separate
# literal so that editors cannot strip a trailing space unseen.
SYSTEM = (
    "You are an evidence\u2011validation assistant. For each query, you are given a question wrapped "
    "inside the <question>...</question> tag, and a series of documents as evidence wrapped inside the "
    "<ref>...</ref> tag. To solve these questions, you must follow this **exact** process without "
    "deviation:\n"
    "\n"
    "### Instructions:\n"
    "\n"
    "1. You need to first figure out if the evidences are relevant and useful to the question. \n"
    "\n"
    "    - If the evidences are **NOT** relevant, you should recall your knowledge about this question "
    "and wrap the process of recalling inside the token of <llm>...</llm>. \n"
    "\n"
    "    - If the evidences are relevant, you should select the evidence that is most relevant to the "
    "question and wrap the selected texts inside the token of <evidence>...</evidence>. \n"
    "\n"
    "2. You should then answer the question based on the selected evidence or your knowledge. The answer "
    "should be wrapped inside the token of <answer>...</answer>."
)
USER = (
    "Here is the question and the references: \n"
    "<question>{question}</question>\n"
    "<ref>\n"
    "    {ref}\n"
    "</ref>\n"
)


def references(passages: Sequence[Passage], *, numbered: bool = False, include_titles: bool = True
               ) -> str:
  """GRACE `{ref}`: chunks ("title\\ntext") joined by blank lines; "1.chunk" when numbered (§2.4)."""
  texts = [base.titled(p, include_titles) for p in passages]
  if numbered:
    texts = [f"{i + 1}.{t}" for i, t in enumerate(texts)]
  return "\n\n".join(texts)


def _default(ex: Example, *, numbered: bool = False, include_titles: bool = True) -> base.Messages:
  ref = references(ex.passages, numbered=numbered, include_titles=include_titles)
  return [{"role": "system", "content": SYSTEM},
          {"role": "user", "content": base.fill(USER, question=ex.question, ref=ref)}]


def _baseline(template: Sequence[dict[str, str]], default_numbered: bool):
  """GRACE's baseline message lists (App. A.2–A.4): demos kept, the last user turn filled."""

  def build(ex: Example, *, numbered: bool = default_numbered, include_titles: bool = True
            ) -> base.Messages:
    ref = references(ex.passages, numbered=numbered, include_titles=include_titles)
    messages = [dict(m) for m in template]
    messages[-1]["content"] = base.fill(messages[-1]["content"], question=ex.question, ref=ref)
    return messages

  return build


# ------------------------------------------------------------------------------- evaluation (§6.3)

def answer(completion: str) -> str:
  """GRACE's evaluator (`src/evaluator.py`): the text after the last </think>; the first
  <answer> block if any, else the whole remaining text (so tag-less baselines are scorable)."""
  y = tags.after_think(completion)
  found = tags.first_block(y, "answer")
  return y if found is None else found


# GRACE's unanswerable-subset EM targets (the authors' src/evaluator.py); its judge uses the first three
# (judge.GRACE_JUDGE_REFUSALS).
EM_REFUSALS = (
    "I don't know.",
    "The provided evidence is not enough to answer the question.",
    "I apologize, but I couldn't find an answer to your question in the search results.",
    "Based on the provided context, I cannot answer this question.",
)


def refusal_em(predictions: Sequence[str]) -> np.ndarray:
  """bool [N]: GRACE's unanswerable "Acc.": ARENA-normalised EM against EM_REFUSALS.

  For GRACE-format outputs the paper's signal is the `<llm>` path instead (§4.3).
  """
  targets = {text.normalize_answer_arena(r) for r in EM_REFUSALS}
  return np.array([isinstance(p, str) and text.normalize_answer_arena(p) in targets
                   for p in predictions], bool)


def _bool(x, name: str) -> np.ndarray:
  a = np.asarray(x)
  if a.ndim != 1:
    raise ValueError(f"{name} must be 1-D, got shape {a.shape}.")
  return a.astype(bool)


def accuracy(correct: Sequence[bool], answerable: Sequence[bool]) -> dict[str, float]:
  """GRACE's aggregates in % (§4.3): per-subset judge accuracy, Overall Acc. and B. Acc.

  `correct[i]` is the judge verdict: on answerable items "the answer is right", on unanswerable
  items "the response signals evidence insufficiency". Overall = pooled accuracy; B. Acc. = the mean
  of the two subset accuracies (a missing subset counts as 0 and is reported by its count).
  """
  c, a = _bool(correct, "correct"), _bool(answerable, "answerable")
  if c.shape != a.shape:
    raise ValueError(f"correct {c.shape} and answerable {a.shape} must align.")
  n_ans, n_un = int(a.sum()), int((~a).sum())
  acc_ans = 100.0 * c[a].mean() if n_ans else 0.0
  acc_un = 100.0 * c[~a].mean() if n_un else 0.0
  overall = 100.0 * c.mean() if c.size else 0.0
  return {"accuracy_answerable": acc_ans, "accuracy_unanswerable": acc_un, "overall_accuracy": overall,
          "balanced_accuracy": (acc_ans + acc_un) / 2, "n_answerable": n_ans, "n_unanswerable": n_un}


def error_analysis(predicted_sufficient: Sequence[bool], answerable: Sequence[bool],
                   correct: Sequence[bool]) -> dict[str, float]:
  """GRACE §4.5 / Fig. 3 in %: sufficiency as binary classification (positive = evidence sufficient).

  predicted_sufficient: the model answered from evidence (`<evidence>` path; `<answer>` action for
  agentic baselines); correct: the answer's verdict. TP = C + I, where C / I are the correct /
  incorrect answers among true positives. Returns classification accuracy (TP+TN)/N, answer precision
  C/(C+I) and the false positive rate FP/(FP+TN).
  """
  p, a, c = (_bool(predicted_sufficient, "predicted_sufficient"), _bool(answerable, "answerable"),
             _bool(correct, "correct"))
  if not p.shape == a.shape == c.shape:
    raise ValueError(f"shapes {p.shape}, {a.shape}, {c.shape} must align.")
  tp, tn, fp = p & a, ~p & ~a, p & ~a
  n_c = int((tp & c).sum())

  def pct(num, den):
    return 100.0 * num / den if den else 0.0

  return {"classification_accuracy": pct(tp.sum() + tn.sum(), p.size),
          "answer_precision": pct(n_c, tp.sum()), "false_positive_rate": pct(fp.sum(), fp.sum() + tn.sum())}


def evaluate(completions: Sequence[str], examples: Sequence[Example], *, judge=None,
             bertscorer=None, grace_format: bool = True) -> dict[str, Any]:
  """GRACE's Table 1 numbers in %.

  Answerable items: EM (ARENA normalisation), BERTScore-F1 (`bertscorer`, a BertScorer on
  bert-base-uncased), LJ (`judge`, e.g. LLMCorrectnessJudge(style=judge.STYLE)), and Table 5's evidence
  ROUGE-L (the `<evidence>` content against the gold evidence).
  Unanswerable items: with grace_format (GRACE's own outputs) correct iff the format is valid and the
  `<llm>` path was taken (§4.3); otherwise refusal-string EM and the judge against the
  refusal list. Overall / Balanced accuracy use LJ when a judge is given, else the EM-style verdicts.
  Fig. 3 (`error_analysis`): classification_accuracy, answer_precision and false_positive_rate of
  sufficiency judged by the path taken (a baseline's: answering rather than refusing), with the
  same verdicts; average them over test retrievers as the paper does.
  "per_example" holds each column per row (NaN outside its subset), "answerable", "correct" (the
  verdict), "abstained" (the `<llm>` path, or a refusal string without grace_format) and
  "predicted_sufficient" (Fig. 3's path).
  """
  base.check_aligned(completions, examples)
  answerable = np.array([e.answerable is not False for e in examples])
  preds = [answer(c) for c in completions]
  golds = [list(e.answers) for e in examples]
  ans_idx, un_idx = np.flatnonzero(answerable), np.flatnonzero(~answerable)
  out: dict[str, Any] = {"n_answerable": len(ans_idx), "n_unanswerable": len(un_idx)}
  per: dict[str, np.ndarray] = {"answerable": answerable.astype(np.float64)}
  em = text.em_f1([preds[i] for i in ans_idx], [golds[i] for i in ans_idx], normalizer="punct_to_space")
  out["em_answerable"] = em["em"]
  correct_em = np.zeros(len(examples), bool)
  correct_em[ans_idx] = em["em_per_example"] == 1
  per["em_answerable"] = base.subset_column(correct_em, answerable, 100.0)
  # Table 5's ER: ROUGE-L of the <evidence> content ("" when there is none) vs the gold evidence.
  rouge = np.zeros(len(examples))
  for i in ans_idx:
    evidence = tags.first_block(tags.after_think(completions[i]), "evidence") or ""
    rouge[i] = text.rouge_l_f1(evidence, [r for r in examples[i].evidence if r])
  out["evidence_rouge_l_answerable"] = 100.0 * float(np.mean(rouge[ans_idx])) if len(ans_idx) else 0.0
  per["evidence_rouge_l_answerable"] = base.subset_column(rouge, answerable, 100.0)
  if bertscorer is not None:
    scored = bertscorer.f1([preds[i] for i in ans_idx], [golds[i] for i in ans_idx])
    out["bertscore_f1_answerable"] = scored["bertscore_f1"]
    bert = np.zeros(len(examples))
    bert[ans_idx] = scored["per_example"]
    per["bertscore_f1_answerable"] = base.subset_column(bert, answerable, 100.0)
  parsed = [parse(c) for c in completions]
  took_llm = np.array([p.format_ok and p.path == "llm" for p in parsed])
  abstained = took_llm if grace_format else refusal_em(preds)
  correct_em[un_idx] = abstained[un_idx]
  out["acc_unanswerable"] = 100.0 * correct_em[un_idx].mean() if len(un_idx) else 0.0
  per["acc_unanswerable"] = base.subset_column(correct_em, ~answerable, 100.0)
  verdicts, source = correct_em, "em"
  if judge is not None:
    lj = correct_em.copy()
    if len(ans_idx):
      lj[ans_idx] = judge([examples[i].question for i in ans_idx], [preds[i] for i in ans_idx],
                          [golds[i] for i in ans_idx])
    if len(un_idx) and not grace_format:
      refusals = list(grace_judge.GRACE_JUDGE_REFUSALS)
      lj[un_idx] = judge([examples[i].question for i in un_idx], [preds[i] for i in un_idx],
                         [refusals] * len(un_idx))
    out["lj_answerable"] = 100.0 * lj[ans_idx].mean() if len(ans_idx) else 0.0
    out["lj_unanswerable"] = 100.0 * lj[un_idx].mean() if len(un_idx) else 0.0
    per["lj_answerable"] = base.subset_column(lj, answerable, 100.0)
    per["lj_unanswerable"] = base.subset_column(lj, ~answerable, 100.0)
    verdicts, source = lj, "judge"
  agg = accuracy(verdicts, answerable)
  out.update(overall_accuracy=agg["overall_accuracy"], balanced_accuracy=agg["balanced_accuracy"],
             accuracy_source=source)
  # Fig. 3's error analysis: predicted sufficient = the <evidence> path ("<evidence>" after the last
  # </think>, the authors' path rule; for baselines, an answer that is no refusal); correct = the
  # answer's verdict above.
  if grace_format:
    sufficient = ["<evidence>" in tags.after_think(c) for c in completions]
  else:
    sufficient = ~refusal_em(preds)
  out.update(error_analysis(sufficient, answerable, verdicts))
  sufficient = np.asarray(sufficient, bool)
  per.update(overall_accuracy=100.0 * verdicts.astype(np.float64),
             correct=verdicts.astype(np.float64), abstained=abstained.astype(np.float64),
             predicted_sufficient=sufficient.astype(np.float64),
             classification_accuracy=100.0 * (sufficient == answerable).astype(np.float64))
  out.update(per_example=per, answers=preds)
  return out


# arXiv:2601.04525 §4.1 and the authors' preprocess.py: random.Random(123456).sample, indices sorted;
# HotpotQA 2,000 train / 500 dev, QASPER's full train (2,593) and test (1,451) splits.
DATA_PRESETS = {
    "grace_hotpotqa": mixture.Preset("grace", ("train=hotpotqa:train:2000", "test=hotpotqa:eval:500"),
                                     seed=123456, grace_construct=True),
    "grace_qasper": mixture.Preset("grace", ("train=qasper:train:all", "test=qasper:eval:all"),
                                   seed=123456, grace_construct=True),
}


class Grace(base.Recipe):
  name = "grace"
  paper = "GRACE (arXiv:2601.04525)"
  templates = {
      "default": _default,
      # GRACE's prompted baselines: 3-shot demos (contexts as unnumbered "title\ntext" chunks, like the
      # demos), and ARENA's prompt with abstention, whose "[References starting with numbers]" we meet
      # with GRACE's "1.chunk" numbering [DECISION; the paper does not say which formatter it used].
      "few_shot_hotpotqa": _baseline(GB.GRACE_FEW_SHOT_HOTPOTQA, default_numbered=False),
      "few_shot_qasper": _baseline(GB.GRACE_FEW_SHOT_QASPER, default_numbered=False),
      "arena_baseline": _baseline(GB.GRACE_ARENA_BASELINE, default_numbered=True),
  }
  eval_decoding = base.Decoding(temperature=0.6, top_p=0.9, max_new_tokens=3072)  # Table 2, §6.5
  headline_metric = "overall_accuracy"
  metric_columns = ("em_answerable", "bertscore_f1_answerable", "lj_answerable", "acc_unanswerable",
                    "lj_unanswerable", "overall_accuracy", "balanced_accuracy",
                    "evidence_rouge_l_answerable", "classification_accuracy")
  judge_styles = {"grace": grace_judge.STYLE}
  abstention = "the valid `<llm>` path (GRACE's signal of insufficient evidence)"
  abstention_component = "llm_path"
  data_presets = DATA_PRESETS

  def parse(self, completion: str) -> GraceOutput:
    return parse(completion)

  def answer(self, completion: str) -> str:
    return answer(completion)

  def reward(self, **options: Any) -> GraceReward:
    return GraceReward(**options)

  def evaluate(self, completions, examples, **kwargs) -> dict[str, Any]:
    return evaluate(completions, examples, **kwargs)

  def aggregate(self, per_example) -> dict[str, float]:
    """Means of the columns; B. Acc. = the mean of the verdicts' subset accuracies; Fig. 3's ratios."""
    out = super().aggregate(per_example)
    verdicts, answerable = np.asarray(per_example["overall_accuracy"]), per_example["answerable"] > 0
    out["balanced_accuracy"] = (base.column_mean(verdicts[answerable])
                                + base.column_mean(verdicts[~answerable])) / 2
    if "predicted_sufficient" in per_example:
      out.update(error_analysis(per_example["predicted_sufficient"] > 0, answerable,
                                per_example["correct"] > 0))
    return out

  def gold_completion(self, example: Example, *, style: str = "default") -> str:
    """GRACE's SFT-baseline targets (App. B.3): `<evidence>gold evidence</evidence>
    <answer>gold answer</answer>`, or verbatim `<llm> The question is unanswerable </llm><answer>
    Unanswerable </answer>` on the <llm> path (the reward's gold path). The paper's spacing of the
    evidence target is garbled [DECISION: no padding]; several evidence strings (annotators'
    paragraphs or separate sentences) are joined by a space, as HotpotQA's supporting sentences are;
    without gold evidence, the gold passages' texts stand in [DECISION]."""
    self._check_style(style)
    evidence = [e.strip() for e in example.evidence if isinstance(e, str) and e.strip()]
    answerable = example.answerable if example.answerable is not None else bool(evidence)
    if not answerable:
      return SFT_UNANSWERABLE_TARGET
    if not evidence:
      evidence = [sentence for _, sentence in gold.gold_support(example)]
    answer_ = gold.gold_answer(self.name, example)
    return f"<evidence>{' '.join(evidence)}</evidence><answer>{answer_}</answer>"


SFT_UNANSWERABLE_TARGET = "<llm> The question is unanswerable </llm><answer> Unanswerable </answer>"

RECIPES = {"grace": Grace()}
