"""The naive GRPO baseline of ARENA (arXiv:2505.13258 §4.3): `<think>…</think><answer>…</answer>` + exact match.

ARENA compares with "Naive GRPO": "models are trained to produce <think>…</think> and
<answer>…</answer> format responses with format and accuracy reward" (§4.3; the regex is inferred,
`^<think>[^<]*</think>\\s*<answer>[^<]*</answer>$`, since the authors did not release it).

    reward = r_format + r_accuracy, each 0/1; accuracy = normalised EM of the first <answer> block
    against any gold answer (SQuAD normalisation, or ARENA's with normalization="punct_to_space").

Evaluated like ARENA (EM and F1 with ARENA's normalisation, as fractions) plus the format rate.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from grounding_jax import text
from grounding_jax.data.schema import Example
from grounding_jax.recipes.arena import recipe as arena
from grounding_jax.recipes import base
from grounding_jax.recipes import reward_fn
from grounding_jax.recipes import gold
from grounding_jax.text import tags

# The naive-GRPO baseline prompt (commented out in the same file); trailing space after "**Question**:".
PROMPT = (
    "Answer the question based on the given information. Your response MUST strictly follow this format:\n"
    "\n"
    "<think>\n"
    "[Analyze the question and reason step-by-step. If references help, explain how the information is "
    "used. If references are irrelevant, clarify that and try to answer the question based on your "
    "knowledge.]\n"
    "</think>\n"
    "<answer>\n"
    "[Answer with ONLY a short phrase or single word. No explanations.]\n"
    "</answer>\n"
    "\n"
    "**References**:\n"
    "{references}\n"
    "\n"
    "**Question**: \n"
    "{question}"
)


def _default(ex: Example) -> base.Messages:
  return [{"role": "user", "content": base.fill(PROMPT, references=arena.references(ex.passages),
                                                 question=ex.question)}]


# Inferred (the naive-GRPO regex is not in the ARENA authors' repo). Anchored at 0 with
# [^<]* sections: linear.
_FORMAT_RE = re.compile(r"^<think>[^<]*</think>\s*<answer>[^<]*</answer>$", re.S | re.M)


def parse(completion: str) -> tuple[bool, str]:
  """(format_ok, answer) for the <think>/<answer> baseline; answer is the first <answer> block,
  stripped ("" if there is none)."""
  found = tags.first_block(completion, "answer")
  return _FORMAT_RE.match(completion) is not None, ("" if found is None else found.strip())


class NaiveReward(reward_fn.RewardFn):
  """Format + EM baseline. Range [0, 2]. Components: format, accuracy."""

  name = "naive"

  def __init__(self, normalization: str = "squad"):
    if normalization not in ("squad", "punct_to_space"):
      raise ValueError(f"naive: normalization={normalization!r}; use 'squad' or 'punct_to_space' "
                       "(ARENA's: punctuation becomes a space).")
    self.normalization = normalization

  @property
  def reward_range(self) -> tuple[float, float]:
    return 0.0, 2.0

  def score(self, completions: list[str], examples: list[Example],
            **extra: Any) -> dict[str, np.ndarray]:
    n = len(completions)
    norm = text.NORMALIZERS[self.normalization]
    fmt, acc = np.zeros(n), np.zeros(n)
    for i, (completion, ex) in enumerate(zip(completions, examples)):
      golds = reward_fn.require_answers(self.name, i, ex)
      format_ok, answer = parse(completion)
      fmt[i] = format_ok
      pred = norm(answer)
      acc[i] = any(pred == norm(g) for g in golds)
    return {"reward": fmt + acc, "format": fmt, "accuracy": acc}


def evaluate(completions: Sequence[str], examples: Sequence[Example]) -> dict[str, Any]:
  """EM and F1 (ARENA normalisation, fractions as ARENA reports them) and the format rate; per
  example also "correct" (EM) and "abstained" (`base.says_unanswerable` of the answer)."""
  base.check_aligned(completions, examples)
  parsed = [parse(c) for c in completions]
  answers = [a for _, a in parsed]
  scores = text.em_f1(answers, [list(e.answers) for e in examples], normalizer="punct_to_space",
                      scale=1.0)
  formats = np.array([ok for ok, _ in parsed], np.float64)
  per = {"em": scores["em_per_example"], "f1": scores["f1_per_example"], "format_score": formats,
         "correct": scores["em_per_example"],
         "abstained": np.array([base.says_unanswerable(a) for a in answers], np.float64)}
  return {"em": scores["em"], "f1": scores["f1"],
          "format_score": float(np.mean(formats)) if parsed else 0.0, "per_example": per,
          "answers": answers}


class Naive(base.Recipe):
  name = "naive"
  paper = "Naive GRPO baseline (ARENA, arXiv:2505.13258 §4.3)"
  templates = {"default": _default}
  eval_decoding = arena.Arena.eval_decoding
  headline_metric = "em"
  metric_columns = ("em", "f1", "format_score")

  def parse(self, completion: str) -> tuple[bool, str]:
    return parse(completion)

  def answer(self, completion: str) -> str:
    return parse(completion)[1]

  def reward(self, **options: Any) -> NaiveReward:
    return NaiveReward(**options)

  def evaluate(self, completions, examples, **kwargs) -> dict[str, Any]:
    return evaluate(completions, examples, **kwargs)

  def gold_completion(self, example: Example, *, style: str = "default") -> str:
    """`<think>…</think>\\n<answer>gold answer</answer>`. The baseline has no SFT target in the paper
    (ARENA §4.3) [DECISION]: the think names the references that state the gold evidence; with
    none (the baseline has no abstention) it says the answer is recalled."""
    self._check_style(style)
    answer_ = gold.gold_answer(self.name, example)
    support = gold.gold_support(example) if gold.has_answer_in_context(example) else []
    reason = (" ".join(f"Reference {ids[0]} states that {s}" if ids else s for ids, s in support)
              or "The references do not state it; the answer is recalled.")
    think = gold.no_angle_brackets(f"{reason} So the answer is {answer_}.")
    return f"<think>{think}</think>\n<answer>{gold.no_angle_brackets(answer_)}</answer>"


RECIPES = {"naive": Naive()}
