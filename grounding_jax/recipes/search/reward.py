"""The search recipes' rewards: Search-R1's exact match, and the grounded variant.

Search-R1 (arXiv:2503.09516 §3.4, "Reward Modeling"): an outcome reward only, r = EM(a_pred, a_gold)
∈ {0, 1}, where a_pred is the `<answer>` the policy gave and EM compares SQuAD-normalised strings
(lower case, no punctuation, no articles, one space) against each gold alias; the paper adds no
format reward. Its code takes the last `<answer>` block of a text that includes the prompt (whose
example `<answer> Beijing </answer>` it skips); our completions exclude the prompt, so the last
block of the completion is the same answer.

The grounded variant (this project's) pays an answer only when the passages the search returned
support it, and pays `I don't know` when they could not have:

| the completion                                                         | reward   | component    |
|------------------------------------------------------------------------|----------|--------------|
| an answer that matches a gold alias (EM) and appears in a retrieved     | +1       | supported    |
| passage; the question is not labelled unanswerable                     |          |              |
| `I don't know` after ≥ 1 search, where nothing retrieved supports an    | +1       | abstain_ok   |
| answer: the question is labelled unanswerable (its corpus lacks the     | (abstain_reward) |      |
| fact), or unlabelled and no retrieved passage holds a gold alias        |          |              |
| `I don't know` otherwise (the corpus holds the answer, or no search)    | 0        | abstain (all IDK) |
| an answer matching gold that no retrieved passage holds, or any answer  | −1       | unsupported  |
| to a question labelled unanswerable                                     | (unsupported_reward) |  |
| a wrong answer                                                          | −1       | wrong        |
| no `<answer>` block                                                     | −1       | no_answer    |

"I don't know" is the project's abstention test (text.is_abstention: "i dont know" in the normalised
answer). "Appears in a retrieved passage": the SQuAD-normalised answer occurs, as whole words, in the
normalised text of the `<information>` blocks the tool inserted. Only a block that directly follows
a `</search>` counts: the sampler stops at every `</search>` and inserts the result there, so the
policy cannot forge one (a caller may instead pass the inserted texts as `information=[...]`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from grounding_jax import text
from grounding_jax.data.schema import Example
from grounding_jax.recipes import reward_fn
from grounding_jax.sampling.tools import ToolFormat
from grounding_jax.text import tags

TOOL_FORMAT = ToolFormat()  # Search-R1's tags: <search> … </search>, <information> … </information>
ANSWER_TAG = "answer"
GROUNDED_OUTCOMES = ("supported", "abstain_ok", "abstain_unjustified", "unsupported", "wrong",
                     "no_answer")


def answer(completion: str) -> str | None:
  """The last `<answer>` block, stripped (None when there is none)."""
  found = tags.blocks(completion, ANSWER_TAG)
  return found[-1].strip() if found else None


def retrieved(completion: str, fmt: ToolFormat = TOOL_FORMAT) -> list[str]:
  """The texts of the result blocks the tool inserted (`ToolFormat.inserted_spans`: each
  `<information>…</information>` that follows a `</search>` with only whitespace between)."""
  out = []
  for start, end in fmt.inserted_spans(completion):
    body = completion[start:end]
    body = body[body.index(fmt.result_open) + len(fmt.result_open):]
    out.append(body[:body.rindex(fmt.result_close)])
  return out


def contains_words(haystack: str, needle: str) -> bool:
  """Does the SQuAD-normalised `needle` occur as whole words in the normalised `haystack`?"""
  needle = text.normalize_answer(needle)
  return bool(needle) and f" {needle} " in f" {text.normalize_answer(haystack)} "


def is_correct(pred: str | None, golds: Sequence[str]) -> bool:
  return pred is not None and text.exact_match(pred, golds) == 1.0


def _information(extra: dict[str, Any], completions: list[str], name: str) -> list[str]:
  if extra.get("information") is None:
    return ["\n".join(retrieved(c)) for c in completions]
  given = reward_fn.require_extra(name, extra, "information", len(completions))
  return [v if isinstance(v, str) else "\n".join(v) for v in given]


class SearchR1Reward(reward_fn.RewardFn):
  """Search-R1's EM reward, 0 / 1. Components: em, has_answer. (Whether and how often a completion
  searched is the sampler's search/… metrics, from the calls it ran: sampling/multiturn.py.)"""

  name = "search"

  @property
  def reward_range(self) -> tuple[float, float]:
    return 0.0, 1.0

  def score(self, completions: list[str], examples: list[Example],
            **extra: Any) -> dict[str, np.ndarray]:
    preds = [answer(c) for c in completions]
    em = np.array([is_correct(p, reward_fn.require_answers(self.name, i, ex))
                   for i, (p, ex) in enumerate(zip(preds, examples))], np.float64)
    has_answer = np.array([p is not None for p in preds], np.float64)
    return {"reward": em, "em": em, "has_answer": has_answer}


class GroundedSearchReward(reward_fn.RewardFn):
  """The grounded variant (module docstring's table). Range [min(unsupported, −1), max(1, abstain)].

  Options: abstain_reward (+1: `I don't know` where nothing retrieved supports an answer),
  unjustified_abstain_reward (0), unsupported_reward (−1). A caller may pass the tool's inserted
  texts as `information=[str or [str]]` per completion instead of reading them from the completion.
  Components: one 0/1 column per outcome in GROUNDED_OUTCOMES and "abstain" (every `I don't
  know`); how often it searched is the sampler's search/… metrics.
  """

  name = "search_grounded"

  def __init__(self, abstain_reward: float = 1.0, unjustified_abstain_reward: float = 0.0,
               unsupported_reward: float = -1.0):
    for key, value in (("abstain_reward", abstain_reward),
                       ("unjustified_abstain_reward", unjustified_abstain_reward),
                       ("unsupported_reward", unsupported_reward)):
      if not -1.0 <= float(value) <= 1.0:
        raise ValueError(f"search_grounded: {key}={value} must be in [-1, 1]")
    self.abstain_reward = float(abstain_reward)
    self.unjustified_abstain_reward = float(unjustified_abstain_reward)
    self.unsupported_reward = float(unsupported_reward)

  @property
  def reward_range(self) -> tuple[float, float]:
    values = (1.0, -1.0, self.abstain_reward, self.unjustified_abstain_reward, self.unsupported_reward)
    return min(values), max(values)

  def outcome(self, completion: str, info: str, example: Example, index: int) -> str:
    golds = reward_fn.require_answers(self.name, index, example)
    pred = answer(completion)
    if pred is None:
      return "no_answer"
    if text.is_abstention(pred):
      supported = (example.answerable is not False
                   and (example.answerable is True or any(contains_words(info, g) for g in golds)))
      return "abstain_ok" if info and not supported else "abstain_unjustified"
    if example.answerable is False:
      return "unsupported"  # the corpus holds no support, whatever the string
    if is_correct(pred, golds):
      return "supported" if contains_words(info, pred) else "unsupported"
    return "wrong"

  def score(self, completions: list[str], examples: list[Example],
            **extra: Any) -> dict[str, np.ndarray]:
    infos = _information(extra, completions, self.name)
    outcomes = [self.outcome(c, info, ex, i)
                for i, (c, info, ex) in enumerate(zip(completions, infos, examples))]
    value = {"supported": 1.0, "abstain_ok": self.abstain_reward,
             "abstain_unjustified": self.unjustified_abstain_reward,
             "unsupported": self.unsupported_reward, "wrong": -1.0, "no_answer": -1.0}
    comp = {k: np.array([o == k for o in outcomes], np.float64) for k in GROUNDED_OUTCOMES}
    comp["abstain"] = comp["abstain_ok"] + comp["abstain_unjustified"]
    return {"reward": np.array([value[o] for o in outcomes], np.float64), **comp}
