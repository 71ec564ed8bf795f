"""Ground-GRPO ("Lessons from Training Grounded LLMs", arXiv:2506.15522): cited answers or refusals.

The policy writes `<think>…</think><answer>…</answer>` where the answer's statements cite the shown
documents as `[n]`, or the answer is Trust-Score's refusal sentence. Two training stages: stage 1 on
answerable questions, stage 2 on a mix that rewards refusing unanswerable ones
(recipes `trust_stage1`, `trust_stage2`). The parser and the reward (Eqs. 1–6: tag count, format,
EM and NLI-checked citations per statement, the stage-2 refusal reward) are reward.py's;
here are the evaluation and the recipe (the prompt is prompts.py's).

Evaluation: Trust-Score per dataset (AR, F1_AC, F1_GR, F1_GC, TRUST; `score.py`) on the
`<answer>` span.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from grounding_jax import judges
from grounding_jax import text
from grounding_jax.data import mixture
from grounding_jax.data.schema import Example
from grounding_jax.recipes import base
from grounding_jax.recipes import gold
from grounding_jax.recipes.trust import prompts as trust_prompts
from grounding_jax.recipes.trust import score as trust_score
from grounding_jax.recipes.trust.reward import CLAIM_DATASETS, TrustOutput, TrustReward, parse
from grounding_jax.text import tags

# ------------------------------------------------------------------------------- evaluation (§6.2)

def answer(completion: str) -> str:
  """The answer Trust-Score scores: the <answer> span, else the first <answer> block, else the text
  after </think> ([DECISION])."""
  return answer_with_fallback(completion)[0]


def answer_with_fallback(completion: str) -> tuple[str, bool]:
  """(answer, used_fallback): see `answer`."""
  parsed = parse(completion)
  if parsed.format_ok:
    return parsed.answer, False
  block = tags.first_block(completion, "answer")
  if block is not None:
    return block.strip(), True
  return tags.after_think(completion), True


def evaluate(completions: Sequence[str], examples: Sequence[Example], *, nli,
             dataset: str | None = None, **kwargs) -> dict[str, Any]:
  """Trust-Score per dataset (meta["dataset"], or all examples as `dataset`) plus the answer-extraction
  fallback rate in %. `nli` is an NLIJudge or a judge spec (judges.build).

  "per_example" holds the parts of `trust_score.PARTS` for every row (Trust-Score is computed from
  them), "dataset_index" (the row's dataset, in the order of "per_dataset"), "correct" (AC^q) and
  "abstained" (the answer is the refusal, `text.is_refusal`).
  """
  base.check_aligned(completions, examples)
  nli = judges.build(nli, role="nli")
  extracted = [answer_with_fallback(c) for c in completions]
  fallback = 100.0 * np.mean([f for _, f in extracted]) if extracted else 0.0
  if fallback:
    logging.info("trust eval: %.1f%% of completions lacked a well-formed <answer>", fallback)
  answers = [a for a, _ in extracted]
  groups: dict[str, list[int]] = {}
  for i, e in enumerate(examples):
    groups.setdefault(dataset or e.meta.get("dataset", trust_score.DEFAULT_DATASET), []).append(i)
  per_dataset, per = {}, {k: np.zeros(len(examples)) for k in trust_score.PARTS + ("dataset_index",)}
  for d, (name, idx) in enumerate(groups.items()):
    scores = trust_score.trust_score([answers[i] for i in idx], [examples[i] for i in idx], nli=nli,
                                     dataset=name, **kwargs)
    for k, v in scores.pop("per_example").items():
      per[k][idx] = v
    per["dataset_index"][idx] = d
    per_dataset[name] = scores
  per.update(correct=per["ac"].copy(), abstained=per["refused"].copy())
  return {"per_dataset": per_dataset, "answer_fallback_rate": fallback, "per_example": per,
          "answers": answers}


def _one_row(per_dataset: dict[str, dict[str, float]]) -> dict[str, float]:
  """Trust-Score as one row: a dataset's own numbers, or with several datasets their macro mean and
  each dataset's as "<dataset>/<key>"."""
  if len(per_dataset) == 1:
    return dict(next(iter(per_dataset.values())))
  keys = next(iter(per_dataset.values())).keys()
  row = {k: float(np.mean([scores[k] for scores in per_dataset.values()])) for k in keys}
  row.update({f"{name}/{k}": v for name, scores in per_dataset.items() for k, v in scores.items()})
  return row


_DATASETS = ("asqa", "qampari", "eli5")
# arXiv:2506.15522 §3: per dataset, stage 1 = 100 answerable questions, stage 2 = 1,000 with 500
# unanswerable. The paper states no split or seed: ours are disjoint stages, seed 42.
DATA_PRESETS = {
    "trust": mixture.Preset("trust_stage1", tuple(f"stage1={d}:train:100:100" for d in _DATASETS)
                            + tuple(f"stage2={d}:train:1000:500" for d in _DATASETS), seed=42),
}


class Trust(base.Recipe):
  """Ground-GRPO, one recipe per training stage (the reward's `stage`)."""

  paper = "Lessons from Training Grounded LLMs / Ground-GRPO (arXiv:2506.15522)"
  templates = {"default": trust_prompts.messages}
  # Trust-Eval's defaults (T 0.5, top-p 0.95); max_new_tokens raised for reasoning (our choice).
  eval_decoding = base.Decoding(temperature=0.5, top_p=0.95, max_new_tokens=1024)
  # Keys of each dataset's entry in evaluate()["per_dataset"] (Trust-Score is reported per dataset).
  headline_metric = "TRUST"
  metric_columns = ("AR", "F1_AC", "F1_GR", "F1_GC", "TRUST")
  abstention = "Trust-Score's refusal sentence (fuzzy match > 85)"
  abstention_component = "refused"
  required_judges = ("nli",)

  def __init__(self, stage: int):
    self.stage = stage
    self.name = f"trust_stage{stage}"
    # Trust-Score does not depend on the training stage: "trust" names stage 2's evaluator.
    self.aliases = ("trust",) if stage == 2 else ()
    # Both stages' data are one mix (splits stage1 / stage2), listed once.
    self.data_presets = DATA_PRESETS if stage == 1 else {}

  def parse(self, completion: str) -> TrustOutput:
    return parse(completion)

  def answer(self, completion: str) -> str:
    return answer(completion)

  def reward(self, **options: Any) -> TrustReward:
    return TrustReward(stage=options.pop("stage", self.stage), **options)

  def evaluate(self, completions, examples, **kwargs) -> dict[str, Any]:
    return evaluate(completions, examples, **kwargs)

  def gold_completion(self, example: Example, *, style: str = "default") -> str:
    """Ground-GRPO's format (§2.1): `<think>…</think><answer>…</answer>` whose answer is
    statements citing their documents as `[n][m]` before the period, or Trust-Score's refusal
    sentence when the documents lack the answer. The paper's SFT data are Trust-Align's GPT-4
    answers (§3, Trust-Align's data), which have no <think> and cannot be rebuilt offline, so [DECISION]:
    the statements are the gold evidence sentences citing the passages that hold them
    (gold.gold_support); without evidence, each gold answer cites the documents whose
    meta["answers_found"] flag it (else the gold passages); QAMPARI answers are one cited item per
    gold answer, comma-separated; ELI5 / ExpertQA state the gold claims. The think names the cited
    documents."""
    self._check_style(style)
    if not gold.has_answer_in_context(example):
      return ("<think>None of the documents contains the answer.</think>"
              f"<answer>{text.REFUSAL_SENTENCE}</answer>")
    gold.gold_answer(self.name, example)  # raises when there are no answers
    dataset = (example.meta or {}).get("dataset", "asqa")
    gold_ids = tuple(example.gold_passage_ids[:3])
    found = (example.meta or {}).get("answers_found")
    statements: list[tuple[tuple[int, ...], str]] = []
    if dataset in CLAIM_DATASETS:
      statements = [(gold_ids, a.strip()) for a in example.answers if a.strip()]
    elif dataset == "qampari" or not any(e for e in example.evidence):
      groups = (example.meta or {}).get("answer_groups") or [[a] for a in example.answers]
      for g, group in enumerate(groups):  # answers_found flags are per gold group (Trust-Eval's data)
        docs = tuple(d + 1 for d, flags in enumerate(found or [])
                     if isinstance(flags, (list, tuple)) and g < len(flags) and flags[g])
        statements.append(((docs or gold_ids)[:1 if dataset == "qampari" else 3], group[0].strip()))
    else:
      statements = gold.gold_support(example)

    def cite(ids: tuple[int, ...]) -> str:
      return "".join(f"[{i}]" for i in ids)

    if dataset == "qampari":
      answer_ = ", ".join(f"{s} {cite(ids)}".strip() for ids, s in statements) + "."
    else:
      answer_ = " ".join(f"{s.rstrip().rstrip('.')} {cite(ids)}".rstrip() + "." for ids, s in statements)
    cited = sorted({i for ids, _ in statements for i in ids})
    think = (f"Documents {cite(tuple(cited))} state the answer." if cited
             else "The answer follows from the documents.")
    return f"<think>{think}</think><answer>{answer_}</answer>"

  def table(self, result) -> dict[str, float]:
    """The per-dataset numbers as one row (`_one_row`) and the fallback rate."""
    return {**_one_row(result["per_dataset"]), "answer_fallback_rate": result["answer_fallback_rate"]}

  def aggregate(self, per_example) -> dict[str, float]:
    """Trust-Score of each dataset's rows (`trust_score.scores_from_parts`), as one row."""
    index = np.asarray(per_example["dataset_index"])
    per_dataset = {f"{int(d)}": trust_score.scores_from_parts(
        {k: np.asarray(per_example[k])[index == d] for k in trust_score.PARTS})
        for d in np.unique(index)}
    row = _one_row(per_dataset)
    return {k: row[k] for k in self.metric_columns}


RECIPES = {"trust_stage1": Trust(1), "trust_stage2": Trust(2)}
