"""The generic judge prompt and reply parser: LLM-as-NLI and the robust yes/no reading.

Prompts are chat messages (lists of {"role", "content"} dicts); `judges.llm` renders them for a
backend. The papers' correctness-judge prompts and their reply parsers live with their recipes
(grounding_jax/recipes/<recipe>/judge.py) and reach the judges as `judges.style.JudgeStyle` objects.

Parsers never raise: they return True / False, or None when the reply cannot be read.
"""

from __future__ import annotations

import re

Messages = list[dict[str, str]]

# --- LLM as NLI judge ---------------------------------------------------------------------------------

NLI_SYSTEM = "You are a careful fact-checker. You answer with a single word: yes or no."


def nli_messages(premise: str, hypothesis: str) -> Messages:
  """Asks whether `premise` entails `hypothesis` (ours; Ground-GRPO's NLI judge is TRUE T5,
  arXiv:2506.15522 §3.4, App. A)."""
  user = (f"Premise:\n{premise}\n\nHypothesis:\n{hypothesis}\n\n"
          "Is the hypothesis fully supported by the premise alone, so that the premise entails it? "
          "Answer \"yes\" or \"no\".")
  return [{"role": "system", "content": NLI_SYSTEM}, {"role": "user", "content": user}]


# --- Reply parsers -------------------------------------------------------------------------------------

_YES_NO_RE = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def parse_yes_no(reply: object) -> bool | None:
  """Robust reading: the first standalone "yes" or "no" after any <think> block; None if neither.

  Accepts "Yes.", "**No**", "Answer: yes", JSON {"answer": "yes"}; never raises (non-str → None).
  """
  if not isinstance(reply, str):
    return None
  text = _THINK_RE.sub(" ", reply)
  m = _YES_NO_RE.search(text)
  if m is None:
    return None
  return m.group(1).lower() == "yes"


# Reply parsers any style may pick by name (judge option `parser=`); styles add their papers' own.
PARSERS = {"robust": parse_yes_no}
