"""TruthRL's judges (arXiv:2509.25760 §4.1, Tables 11-12): the CRAG-style outcome judge and the
reasoning-quality judge, their few-shot blocks and the JSON-score reply parser.

The outcome judge is asked once per gold alias, stopping at the first score 1; its reply is read as
the LAST {...} block's "score". The reasoning judge grades the FULL response (think + answer), so
exact match never short-circuits it. Both were Llama-3.3-70B-Instruct at temperature 0, top-p 0.9,
512 tokens in the authors' code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import re
from typing import Sequence

from grounding_jax.judges import prompts as judge_prompts
from grounding_jax.judges.style import JudgeStyle

Messages = judge_prompts.Messages

# Table 11's instructions as restored in the authors' code, identical to TruthRL's `INSTRUCTIONS` (CRAG's step "not sure → 0"
# removed). Kept byte-for-byte, including the trailing space after the last sentence.
TRUTHRL_INSTRUCTIONS = """Assume you are a human expert in grading predictions given by a model. You are given a question and a model prediction. Judge if the prediction matches the ground truth answer by following these steps:
1: Take it as granted that the Ground Truth is always correct.
2: If the Prediction exactly matches the Ground Truth, "score" is 1.
3: If the Prediction does not exactly match the Ground Truth, go through the following steps and likely give a score as 0.
4: If the Ground Truth is a number, "score" is 1 if and only if the Prediction gives a number that almost exactly matches the ground truth.
5: If the Prediction is self-contradictory, "score" must be 0.
6: If the prediction is not answering the question, "score" must be 0.
7: If the prediction is a concise and correct summary of the ground truth, "score" is 1.
8: If ground truth contains a set of items, prediction must contain exactly same items for the score to be 1.
9: Otherwise, "score" is 0.

### Output a JSON blob with an "explanation" field explaining your answer as short as possible and an "score" field with value 1 or 0. 
"""

# Few-shot blocks. The paper's outcome block is CRAG's IN_CONTEXT_EXAMPLES with TruthRL's edits: 36
# examples, 9,478 characters (Table 11); its reasoning block has 3 traces (Table 12). The paper's
# text does not hold them, and the text ships only with the authors' code
# (CC-BY-NC 4.0), so it is not copied here. The judges use the paper's block when it is supplied as
# a file — the judge option `examples_path=`, or the files `truthrl_examples.txt` /
# `truthrl_reasoning_examples.txt` in the folder $GJ_TRUTHRL_PROMPTS — each holding exactly the string
# `IN_CONTEXT_EXAMPLES` / `IN_CONTEXT_EXAMPLES_REASONING` of TruthRL's `evaluation/prompts.py` (UTF-8,
# nothing added). Its SHA-256 (of the authors' string, computed from their release) is checked, so a
# wrong or edited file is refused. Without it, OUR short sets below stand in, with a warning.
TRUTHRL_EXAMPLES_SHA256 = "1279e02a64e4c1a21a4f6115c84af1615f7797c426a4500555d6a82b34bdb658"
TRUTHRL_REASONING_EXAMPLES_SHA256 = "c409de78e69264ab6dff444f6ee9379d590812da9e774c22c900497e4cf8ce45"
PAPER_EXAMPLES_ENV = "GJ_TRUTHRL_PROMPTS"
_PAPER_FILES = {"truthrl": ("truthrl_examples.txt", TRUTHRL_EXAMPLES_SHA256),
                "truthrl_reasoning": ("truthrl_reasoning_examples.txt", TRUTHRL_REASONING_EXAMPLES_SHA256)}

# OUR short outcome set, written from the behaviours Table 11's instructions list (no answer → 0, false premise
# stated → 1, self-contradiction → 0, abbreviation → 1, rounding → 1 / 0, set answers need the same
# items, concise summary → 1, date format mismatch → 0).
TRUTHRL_EXAMPLES = """You should make the judgment based on provided examples.
Examples:
Question: "which river is longer, the danube or the rhine?"
Ground Truth: "the danube"
Prediction: "there is not enough information to say which river is longer."
Output: {"score": 0, "explanation": "The prediction did not provide an answer."}

Question: "in which year did isaac newton win the nobel prize?"
Ground Truth: "invalid question"
Prediction: "isaac newton never won a nobel prize; it did not exist in his lifetime."
Output: {"score": 1, "explanation": "The prediction says the premise is false, so the question is invalid."}

Question: "which is heavier, x or y?"
Ground Truth: "x"
Prediction: "x is heavier. x weighs 3 kg and y weighs 5 kg."
Output: {"score": 0, "explanation": "The prediction is self-contradictory."}

Question: "who wrote hamlet?"
Ground Truth: "william shakespeare"
Prediction: "w. shakespeare"
Output: {"score": 1, "explanation": "w is the abbreviation of william."}

Question: "how tall is the statue?"
Ground Truth: "93 m"
Prediction: "the statue is 92.99 metres tall."
Output: {"score": 1, "explanation": "The number matches the ground truth after rounding."}

Question: "what is the market value of company z?"
Ground Truth: "4.52 billion"
Prediction: "4.1 billion"
Output: {"score": 0, "explanation": "The number does not match the ground truth."}

Question: "which planets have rings?"
Ground Truth: "jupiter, saturn, uranus, neptune"
Prediction: "saturn and uranus"
Output: {"score": 0, "explanation": "The prediction misses items that are in the ground truth."}

Question: "who scored more goals, p or q?"
Ground Truth: "p scored more goals than q, with 31 goals against q's 24."
Prediction: "p"
Output: {"score": 1, "explanation": "The prediction is a concise and correct summary of the ground truth."}

Question: "when was the bridge opened?"
Ground Truth: "1932-03-19"
Prediction: "03/20/1932"
Output: {"score": 0, "explanation": "The prediction does not match the ground truth."}
"""


def truthrl_messages(question: str, gold: str, prediction: str, *,
                     examples: str = TRUTHRL_EXAMPLES) -> Messages:
  """TruthRL's message layout (Table 11, the authors' code): system = INSTRUCTIONS + "\\n" + examples; one gold alias.

  The user message keeps the code's single leading space before "Ground truth" and "Prediction".
  """
  return [{"role": "system", "content": TRUTHRL_INSTRUCTIONS + "\n" + examples},
          {"role": "user", "content": f"Question: {question}\n Ground truth: {gold}\n Prediction: {prediction}\n"}]


# TruthRL's reasoning-quality judge (§4.6, Table 12): the restored INSTRUCTIONS_REASONING verbatim.
TRUTHRL_REASONING_INSTRUCTIONS = """Assume you are a human expert in evaluating the usefulness of model-generated reasoning. You are given a question and a model-generated reasoning. Judge if the reasoning provides precise information to correctly answer the question by following these steps:
1: Evaluate if the reasoning directly addresses the question.
2: Check if the key points in the reasoning are relevant to the query.
3: If the reasoning provides precise and relevant information, "score" is 1.
4: If the reasoning is vague, unrelated, or does not address the question, "score" is 0.

### Output a JSON blob with an "explanation" field explaining your answer as short as possible and a "score" field with value 1 or 0.
"""

# OUR short reasoning set (the paper's 3 traces: see above), of the two behaviours Table 12 names (an
# unsupported guess scores 0; precise, relevant reasoning scores 1).
TRUTHRL_REASONING_EXAMPLES = """You should make the judgment based on provided examples.
Examples:
Question: "how many moons does mars have?"
Ground Truth: "2"
Reasoning: "<think>The references talk about Jupiter's moons and do not mention Mars. Planets usually have several moons, so Mars probably has 2.</think>\nFinal Answer: \\boxed{2}"
Output: {"score": 0, "explanation": "The reasoning relies on an unsubstantiated guess."}

Question: "who painted the mona lisa?"
Ground Truth: "leonardo da vinci"
Reasoning: "<think>Document [1] states that the Mona Lisa was painted by Leonardo da Vinci in the early 16th century.</think>\nFinal Answer: \\boxed{Leonardo da Vinci}"
Output: {"score": 1, "explanation": "The reasoning cites the precise fact that answers the question."}
"""


def truthrl_reasoning_messages(question: str, gold: str, response: str, *,
                               examples: str = TRUTHRL_REASONING_EXAMPLES) -> Messages:
  """TruthRL's reasoning judge layout (Table 12): the FULL response (think + answer) is judged."""
  return [{"role": "system", "content": TRUTHRL_REASONING_INSTRUCTIONS + "\n" + examples},
          {"role": "user", "content": f"Question: {question}\n Ground Truth: {gold}\n Reasoning: {response}\n"}]


def read_paper_examples(path: str | os.PathLike, style: str = "truthrl") -> str:
  """The paper's few-shot block for `style` ("truthrl" | "truthrl_reasoning") from a UTF-8 file,
  checked against the SHA-256 of the authors' string.

  Raises:
    FileNotFoundError: no such file. ValueError: its SHA-256 differs (names the file and both hashes).
  """
  name, want = _PAPER_FILES[style]
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"{path}: no such file; it should hold TruthRL's few-shot block for the "
                            f"{style!r} judge (see recipes/truthrl/judge.py, {name})")
  text = path.read_bytes().decode("utf-8")
  got = hashlib.sha256(text.encode("utf-8")).hexdigest()
  if got != want:
    raise ValueError(f"{path}: SHA-256 {got} is not that of TruthRL's {style!r} few-shot block "
                     f"({want}); the file must hold exactly the authors' string (UTF-8, no added "
                     "newline or BOM)")
  return text


_warned_short_examples: set[str] = set()


def truthrl_examples(style: str = "truthrl", examples_path: str | os.PathLike | None = None) -> str:
  """The few-shot block a TruthRL-style judge uses: the paper's (from `examples_path`, else from
  $GJ_TRUTHRL_PROMPTS/<file> when that variable is set), else our short set, with a warning once."""
  if style not in _PAPER_FILES:
    raise ValueError(f"truthrl_examples: style={style!r}; use one of {sorted(_PAPER_FILES)}")
  if examples_path:
    return read_paper_examples(examples_path, style)
  folder = os.environ.get(PAPER_EXAMPLES_ENV)
  if folder:
    return read_paper_examples(pathlib.Path(folder) / _PAPER_FILES[style][0], style)
  if style not in _warned_short_examples:
    _warned_short_examples.add(style)
    logging.warning("the %s judge uses OUR short few-shot examples, not the paper's block "
                    "(arXiv:2509.25760 Tables 11-12); for an exact reproduction give examples_path= or $%s "
                    "(see grounding_jax/recipes/truthrl/judge.py)", style, PAPER_EXAMPLES_ENV)
  return TRUTHRL_EXAMPLES if style == "truthrl" else TRUTHRL_REASONING_EXAMPLES



_BRACES_RE = re.compile(r"\{[^{}]*\}", re.DOTALL)
_SCORE_RE = re.compile(r'"score"\s*:\s*(\d+)')



def parse_json_score(reply: object) -> bool | None:
  """CRAG/TruthRL parsing (the authors' evaluation code): the LAST {...} block, `"score"\\s*:\\s*(\\d+)`; 1 → True, 0 → False.

  Any other value, no block, or no score → None ("not correct", counted by the caller). If the last
  block has no score we fall back to json-decoding it, then to the last score anywhere in the reply.
  """
  if not isinstance(reply, str):
    return None
  blocks = _BRACES_RE.findall(reply)
  value = None
  if blocks:
    m = _SCORE_RE.search(blocks[-1])
    if m is not None:
      value = m.group(1)
    else:
      try:
        obj = json.loads(blocks[-1])
        if isinstance(obj, dict) and isinstance(obj.get("score"), (int, str)):
          value = str(obj["score"]).strip()
      except (ValueError, RecursionError):
        value = None
  if value is None:
    found = _SCORE_RE.findall(reply)
    value = found[-1] if found else None
  if value == "1":
    return True
  if value == "0":
    return False
  return None



def few_shot_block(examples_path: str | None = None) -> str:
  return truthrl_examples("truthrl", examples_path)


def reasoning_few_shot_block(examples_path: str | None = None) -> str:
  return truthrl_examples("truthrl_reasoning", examples_path)


def _outcome_messages(question: str, golds: Sequence[str], prediction: str,
                      few_shot: str | None = None) -> Messages:
  return truthrl_messages(question, golds[0], prediction, examples=few_shot or TRUTHRL_EXAMPLES)


def _reasoning_messages(question: str, golds: Sequence[str], response: str,
                        few_shot: str | None = None) -> Messages:
  return truthrl_reasoning_messages(question, golds[0], response,
                                    examples=few_shot or TRUTHRL_REASONING_EXAMPLES)


_DECODING = dict(max_tokens=512, temperature=0.0, top_p=0.9)
STYLE = JudgeStyle(name="truthrl", messages=_outcome_messages, parser=parse_json_score,
                   parsers={"json_score": parse_json_score}, per_alias=True,
                   few_shot_block=few_shot_block, decoding=_DECODING)
# `predictions` are FULL responses (think + answer); 1 if any alias gets score 1.
REASONING_STYLE = JudgeStyle(name="truthrl_reasoning", messages=_reasoning_messages,
                             parser=parse_json_score, parsers={"json_score": parse_json_score},
                             per_alias=True, exact_match_shortcut=False,
                             few_shot_block=reasoning_few_shot_block, decoding=_DECODING)
