"""ARENA's answer-correctness judge: its prompt (arXiv:2505.13258 Table 8) and its reply parser.

The strings are the authors' `src/gpt_eval.py`, which GRACE's `src/evaluator.py::_LLM_Judge` reuses
with the gold answers joined by newlines (recipes/grace/judge.py). The judge never sees the question.
"""

from __future__ import annotations

from typing import Sequence

from grounding_jax.judges import prompts as judge_prompts
from grounding_jax.judges.style import JudgeStyle

Messages = judge_prompts.Messages

# ARENA `src/gpt_eval.py` (arXiv:2505.13258 Table 8). Straight apostrophes, "\n" after the first block,
# "\n\n\n\n" between blocks.
JUDGE_HEAD = ("*************Consider a knowledge Q&A RAG task to test the capability of a testing model, "
              "the correct answer list is:*************\n")
JUDGE_MID = "\n\n\n\n*************Here is the model's response:*************\n"
JUDGE_TAIL = ("\n\n\n\n*************Please check if the model's answer is correct. As long as the model's "
              "answer hits any item (or synonym) in the correct answer list, it can be considered correct. "
              "You only need to answer \"yes\" or \"no\".*************")
# ARENA sends this system message (GRACE sends the prompt as a single user message).
ARENA_SYSTEM = "You are an intelligent AI assistant."


def arena_judge_prompt(golds: Sequence[str], response: str) -> str:
  """ARENA's judge prompt. `{correct_answer}` is Python's `str(list_of_labels)` (Table 8)."""
  return JUDGE_HEAD + str(list(golds)) + JUDGE_MID + response + JUDGE_TAIL


def arena_messages(question: str, golds: Sequence[str], response: str) -> Messages:
  del question  # ARENA's judge never sees the question.
  return [{"role": "system", "content": ARENA_SYSTEM},
          {"role": "user", "content": arena_judge_prompt(golds, response)}]


def parse_yes_no_arena(reply: object) -> bool | None:
  """ARENA's code: 'yes' in reply.lower() → 1, elif 'no' in it → 0, else 0.5 (here None)."""
  if not isinstance(reply, str):
    return None
  r = reply.lower()
  if "yes" in r:
    return True
  if "no" in r:
    return False
  return None


def _style_messages(question: str, golds: Sequence[str], prediction: str,
                    few_shot: str | None = None) -> Messages:
  del few_shot
  return arena_messages(question, golds, prediction)


# The robust first yes/no word reads the replies by default; `parser="arena"` picks the code's
# substring rule. GPT-4o at temperature 0 (Table 8); max_tokens is not stated: 16 fits "yes" / "no".
STYLE = JudgeStyle(name="arena", messages=_style_messages, parser=judge_prompts.parse_yes_no,
                   parsers={"arena": parse_yes_no_arena},
                   decoding=dict(max_tokens=16, temperature=0.0))
