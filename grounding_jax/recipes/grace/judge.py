"""GRACE's answer-correctness judge (LJ, arXiv:2601.04525 §4.3): ARENA's prompt with the gold answers
joined by newlines, one user message, and a reply counted correct only when it is exactly "yes".

From the authors' `src/evaluator.py::_LLM_Judge` (the paper states neither the prompt nor the parser;
it attributes the judge to ARENA, whose text recipes/arena/judge.py holds).
"""

from __future__ import annotations

from typing import Sequence

from grounding_jax.judges import prompts as judge_prompts
from grounding_jax.judges.style import JudgeStyle
from grounding_jax.recipes.arena import judge as arena_judge

Messages = judge_prompts.Messages

# GRACE scores unanswerable items by judging the response against these refusals (the authors'
# `src/evaluator.py`; the EM list adds a fourth, recipe.EM_REFUSALS).
GRACE_JUDGE_REFUSALS = (
    "I don't know.",
    "The provided evidence is not enough to answer the question.",
    "I apologize, but I couldn't find an answer to your question in the search results.",
)


def grace_judge_prompt(golds: Sequence[str], response: str) -> str:
  """GRACE's judge prompt: ARENA's text with the gold answers joined by newlines."""
  return arena_judge.JUDGE_HEAD + "\n".join(golds) + arena_judge.JUDGE_MID + response + arena_judge.JUDGE_TAIL


def grace_messages(question: str, golds: Sequence[str], response: str) -> Messages:
  del question
  return [{"role": "user", "content": grace_judge_prompt(golds, response)}]


def parse_yes_no_grace(reply: object) -> bool | None:
  """GRACE's code: correct iff reply.lower() == "yes" exactly, no strip ("Yes." is wrong)."""
  if not isinstance(reply, str):
    return None
  return reply.lower() == "yes"


def _style_messages(question: str, golds: Sequence[str], prediction: str,
                    few_shot: str | None = None) -> Messages:
  del few_shot
  return grace_messages(question, golds, prediction)


# The DeepSeek judge at temperature 0 with 10 new tokens (the authors' code).
STYLE = JudgeStyle(name="grace", messages=_style_messages, parser=parse_yes_no_grace,
                   parsers={"grace": parse_yes_no_grace}, decoding=dict(max_tokens=10, temperature=0.0))
