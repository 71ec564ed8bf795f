"""ARENA (arXiv:2505.13258): name the relevant references, analyse them, answer in a short phrase.

The policy writes `<relevance>[ids]</relevance><analysis>…</analysis><answer>…</answer>`. The
adaptive reward (§3.3; the authors' src/evaluate.py, src/rewards.py) is format + accuracy + relevance + bonus:

    r_format    1 if `<relevance>[^<]*</relevance>\\s*<analysis>[^<]*</analysis>\\s*<answer>[^<]*</answer>`
                matches from the first character (MULTILINE `$`: later lines are tolerated), else 0
    r_accuracy  1 if ARENA-normalised <answer> equals a normalised gold answer, else 0
    r_relevance 1 if the JSON id list in <relevance> equals set(gold_passage_ids), 0.5 if they
                overlap, 0 otherwise (unparsable → 0)
    r_bonus     10 if all three above are 1, else 0
    reward      w_f·r_format + w_a·r_accuracy + w_r·r_relevance + w_b·r_bonus, weights 1 (code)

Accuracy and relevance are extracted independently of the format check, as in the authors' code,
so a mis-formatted output can still earn them. Values: {0, .5, 1, 1.5, 2, 2.5, 13}.

Accuracy variants of the §5.4 ablation: accuracy="f1" (token F1 with ARENA normalisation; the bonus
still needs accuracy == 1, an [INFERRED] choice since that code was not released) and
accuracy="judge" (a CorrectnessJudge on the extracted answer, one batched call; an empty answer is
0 without a call; exact match short-circuits). Setting a weight to 0 gives the §5.3 component
ablations.

Evaluation (§4.2, App. C): EM, F1 and an LLM judge (LJ) as fractions (Table 3), plus the mean format and
relevance scores (Fig. 2).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Sequence

import numpy as np

from grounding_jax import judges
from grounding_jax import text
from grounding_jax.data import mixture
from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import base
from grounding_jax.recipes import reward_fn
from grounding_jax.recipes import gold
from grounding_jax.recipes.arena import judge as arena_judge
from grounding_jax.text import tags

# The correctness judge a config's `style=` may name (Table 8's prompt; LJ and accuracy="judge").
JUDGE_STYLES = {"arena": arena_judge.STYLE}


# ------------------------------------------------------------------------------- prompt (Table 1)
# src/data_generator.py; line 1 ends with a space, the string ends with "</references>\n".
PROMPT = (
    "A conversation between User and Assistant. The user asks a question and give some references. The "
    "assistant should answer the question based on the references. \n"
    "User's input will always contain:\n"
    "\n"
    "<question>\n"
    "[The question to answer]\n"
    "</question>\n"
    "\n"
    "<references>\n"
    "[References starting with numbers]\n"
    "</references>\n"
    "\n"
    "Assistant's response must contain EXACTLY three sections:\n"
    "\n"
    "<relevance>\n"
    "[List ONLY reference numbers that provide useful information in square brackets, e.g. [1,5]]\n"
    "</relevance>\n"
    "\n"
    "<analysis>\n"
    "[Combine information from relevant references to build the answer. Explicitly mention which "
    "references support each claim]\n"
    "</analysis>\n"
    "\n"
    "<answer>\n"
    "[Answer with ONLY a short phrase or single word. No explanations]\n"
    "</answer>\n"
    "\n"
    "**User**:\n"
    "\n"
    "<question>\n"
    "{question}\n"
    "</question>\n"
    "\n"
    "<references>\n"
    "{references}\n"
    "</references>\n"
)


def references(passages: Sequence[Passage]) -> str:
  """ARENA `{references}`: "i. text" per line, 1-based, no titles; a lone passage is unnumbered (§2.5)."""
  if len(passages) == 1:
    return passages[0].text
  return "\n".join(f"{i + 1}. {p.text}" for i, p in enumerate(passages))


def _default(ex: Example) -> base.Messages:
  return [{"role": "user", "content": base.fill(PROMPT, question=ex.question,
                                                 references=references(ex.passages))}]


# SFT-direct's prompt (Appendix D, §4.3): "concatenate the input question with all retrieved
# paragraphs (in their original order) and instruct the model to output a short answer without any
# intermediate reasoning or evidence selection". Its text is not given [DECISION]:
# question, references as ARENA numbers them, then the answer line of ARENA's own prompt.
DIRECT_PROMPT = (
    "{question}\n"
    "\n"
    "{references}\n"
    "\n"
    "Answer the question based on the references. Answer with ONLY a short phrase or single word. "
    "No explanations."
)


def _direct(ex: Example) -> base.Messages:
  return [{"role": "user", "content": base.fill(DIRECT_PROMPT, question=ex.question,
                                                 references=references(ex.passages))}]


# ------------------------------------------------------------------------------- parser (src/evaluate.py)
# `src/rewards.py`: no "<" inside sections, nothing before <relevance>, and MULTILINE "$" tolerates
# text on lines after </answer>. re.match anchors at 0 and [^<]* cannot backtrack into a tag: linear.
_FORMAT_RE = re.compile(
    r"^<relevance>[^<]*</relevance>\s*<analysis>[^<]*</analysis>\s*<answer>[^<]*</answer>$",
    re.S | re.M)


@dataclasses.dataclass(frozen=True)
class ArenaOutput:
  format_ok: bool
  answer: str  # first <answer> block, stripped; "" if none (extracted independently of the format)
  relevance_ids: tuple | None  # sorted set of the JSON list in <relevance>; None if unparsable


def _parse_relevance(content: str | None) -> tuple | None:
  # ARENA: `sorted(set(json.loads(...)))`; any failure (not JSON, not iterable, unhashable,
  # unorderable) scores 0. Strings and floats survive (1.0 == 1 in Python; "1" != 1).
  # A JSON string or object iterates as str, which never equals or overlaps the int gold ids.
  try:
    return tuple(sorted(set(json.loads((content or "").strip()))))
  except Exception:  # noqa: BLE001 - mirrors the authors' bare except; model text may be anything
    return None


def parse(completion: str) -> ArenaOutput:
  """Parses an ARENA response exactly as `format_reward` / `extract_answer` / `extract_support_ids`
  (their regexes `<answer>\\s*(.*?)\\s*</answer>`: the first block, stripped)."""
  answer_ = tags.first_block(completion, "answer")
  return ArenaOutput(format_ok=_FORMAT_RE.match(completion) is not None,
                     answer="" if answer_ is None else answer_.strip(),
                     relevance_ids=_parse_relevance(tags.first_block(completion, "relevance")))


# ------------------------------------------------------------------------------- reward (§3.2)

class ArenaReward(reward_fn.RewardFn):
  """ARENA reward. Range [0, w_f + w_a + w_r + w_b·bonus] = [0, 13] by default.

  Needs example.answers and example.gold_passage_ids (1-indexed into example.passages).
  Components: format, accuracy, relevance, bonus (unweighted values).
  """

  name = "arena"

  def __init__(self, weights: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0),
               bonus: float = 10.0, accuracy: str = "em", judge: Any = None):
    if accuracy not in ("em", "f1", "judge"):
      raise ValueError(f"arena: accuracy={accuracy!r}; use 'em' (the paper), 'f1' or 'judge'.")
    # A spec from a config (its style name resolved here): loaded on first use.
    judge = judges.lazy(judges.with_style(judge, JUDGE_STYLES), role="correctness")
    if accuracy == "judge" and not callable(judge):
      raise ValueError("arena: accuracy='judge' needs judge=<callable(questions, predictions, golds) "
                       "-> bool[N]> or a judge spec such as dict(kind='llm', path=FOLDER, style='arena').")
    self.accuracy, self.judge = accuracy, judge
    weights = tuple(float(w) for w in weights)
    if len(weights) != 4 or min(weights) < 0 or bonus < 0:
      raise ValueError(f"arena: weights={weights} must be 4 non-negative numbers (format, accuracy, "
                       f"relevance, bonus) and bonus={bonus} >= 0.")
    self.weights, self.bonus = weights, float(bonus)

  @property
  def reward_range(self) -> tuple[float, float]:
    w = self.weights
    return 0.0, w[0] + w[1] + w[2] + w[3] * self.bonus

  def _gold_ids(self, i: int, ex: Example) -> set[int]:
    if not ex.gold_passage_ids:
      raise reward_fn.example_error(self.name, i, ex, "gold_passage_ids", "is empty",
                                    "ARENA's relevance reward needs the supporting passage ids.")
    n = len(ex.passages)
    for pid in ex.gold_passage_ids:
      if isinstance(pid, bool) or not isinstance(pid, int) or not 1 <= pid <= n:
        raise reward_fn.example_error(
            self.name, i, ex, "gold_passage_ids", f"holds {pid!r}, outside 1..{n} (len(passages))",
            "Ids are 1-indexed positions in `passages`; an unmatched supporting fact (-1) must be "
            "fixed or the row dropped.")
    return set(ex.gold_passage_ids)

  def score(self, completions: list[str], examples: list[Example],
            **extra: Any) -> dict[str, np.ndarray]:
    n = len(completions)
    comp = {k: np.zeros(n) for k in ("format", "accuracy", "relevance", "bonus")}
    to_judge: list[tuple[int, str]] = []
    for i, (completion, ex) in enumerate(zip(completions, examples)):
      gold_ids = self._gold_ids(i, ex)
      golds = reward_fn.require_answers(self.name, i, ex)
      out = parse(completion)
      comp["format"][i] = out.format_ok
      norm = text.normalize_answer_arena
      if self.accuracy == "f1":
        comp["accuracy"][i] = text.token_f1(out.answer, golds, normalizer=norm)
      else:
        comp["accuracy"][i] = text.exact_match(out.answer, golds, normalizer=norm)
        if self.accuracy == "judge" and comp["accuracy"][i] == 0 and out.answer.strip():
          to_judge.append((i, out.answer))
      ids = out.relevance_ids
      if ids is not None:
        try:
          ids_set = set(ids)
          # Python equality: 1.0 == 1, "1" != 1 (as the authors' code compares).
          comp["relevance"][i] = 1.0 if ids_set == gold_ids else (0.5 if ids_set & gold_ids else 0.0)
        except TypeError:  # unhashable members cannot occur after parsing, but never raise
          comp["relevance"][i] = 0.0
    if to_judge:
      idx = [i for i, _ in to_judge]
      verdicts = reward_fn.check_judge_output(
          self.name, "judge",
          self.judge([examples[i].question for i in idx], [a for _, a in to_judge],
                     [list(examples[i].answers) for i in idx]), len(idx))
      comp["accuracy"][idx] = verdicts.astype(np.float64)
    full = (comp["format"] == 1) & (comp["accuracy"] == 1) & (comp["relevance"] == 1)
    comp["bonus"] = np.where(full, self.bonus, 0.0)
    w = self.weights
    reward = (w[0] * comp["format"] + w[1] * comp["accuracy"] + w[2] * comp["relevance"]
              + w[3] * comp["bonus"])
    return {"reward": reward, **comp}


# ------------------------------------------------------------------------------- evaluation (§6)

def evaluate(completions: Sequence[str], examples: Sequence[Example], *, judge=None) -> dict[str, Any]:
  """ARENA's EM, F1, LJ as fractions (Table 3), plus mean format and relevance scores (Fig. 2).

  "per_example" holds each column per row, "correct" (EM, or the judge's verdict with a judge) and
  "abstained" (ARENA defines none: a refusal or "I don't know" answer, `base.says_unanswerable`).
  """
  base.check_aligned(completions, examples)
  for e in examples:
    if not e.answers:
      raise ValueError(f"arena evaluation: example {e.id!r} has no gold answers.")
  golds = [list(e.answers) for e in examples]
  answers = [parse(c).answer for c in completions]
  out: dict[str, Any] = {}
  scores = text.em_f1(answers, golds, normalizer="punct_to_space", scale=1.0)
  out.update(em=scores["em"], f1=scores["f1"])
  comp = ArenaReward()(list(completions), list(examples))
  out.update(format_score=float(comp["format"].mean()), relevance_score=float(comp["relevance"].mean()))
  per = {"em": scores["em_per_example"], "f1": scores["f1_per_example"], "format_score": comp["format"],
         "relevance_score": comp["relevance"], "correct": scores["em_per_example"],
         "abstained": np.array([base.says_unanswerable(a) for a in answers], np.float64)}
  judge = judges.build(judges.with_style(judge, JUDGE_STYLES), role="correctness")
  if judge is not None:
    lj = np.zeros(len(answers))
    idx = [i for i, a in enumerate(answers) if a.strip()]  # empty extraction scores 0, no call
    if idx:
      lj[idx] = judge([examples[i].question for i in idx], [answers[i] for i in idx],
                      [golds[i] for i in idx])
      # ARENA's code scores a reply with neither "yes" nor "no" 0.5 (src/gpt_eval.py).
      unreadable = np.asarray(getattr(judge, "last_unparseable", np.zeros(len(idx), bool)), bool)
      if unreadable.shape == (len(idx),):
        lj[idx] += 0.5 * unreadable
    out["lj"] = float(lj.mean()) if len(lj) else 0.0
    per["lj"] = per["correct"] = lj
  out.update(per_example=per, answers=answers)
  return out


# arXiv:2505.13258 §4.1, Table 2, and the authors' data code: seed 123456, 500 of the 25k mix held out.
DATA_PRESETS = {
    "arena": mixture.Preset("arena", ("train=hotpotqa:train:10000", "train=2wikimultihopqa:train:10000",
                                      "train=musique:train:5000", "test_hotpotqa=hotpotqa:eval:500",
                                      "test_2wikimultihopqa=2wikimultihopqa:eval:500",
                                      "test_musique=musique:eval:500"),
                            seed=123456, holdout="heldout=train:500"),
}


class Arena(base.Recipe):
  name = "arena"
  paper = "ARENA (arXiv:2505.13258)"
  templates = {"default": _default, "direct": _direct}
  eval_decoding = base.Decoding(temperature=0.9, top_p=1.0, max_new_tokens=1024)  # src/vllm_inference.py
  headline_metric = "em"
  metric_columns = ("em", "f1", "lj", "format_score", "relevance_score")
  judge_styles = JUDGE_STYLES
  data_presets = DATA_PRESETS

  def parse(self, completion: str) -> ArenaOutput:
    return parse(completion)

  def answer(self, completion: str) -> str:
    return parse(completion).answer

  def reward(self, **options: Any) -> ArenaReward:
    return ArenaReward(**options)

  def evaluate(self, completions, examples, **kwargs) -> dict[str, Any]:
    return evaluate(completions, examples, **kwargs)

  def gold_completion(self, example: Example, *, style: str = "default") -> str:
    """style "default": the SFT-reasoning target layout of `src/datamaker_sft.py` (Table 9) —
    `<relevance>\\n[ids]\\n</relevance>\\n\\n<analysis>\\n…\\n</analysis>\\n\\n<answer>\\n…\\n</answer>`
    with ids `str(sorted(set(gold_passage_ids)))`; the paper's analysis is the backbone's own trace
    (Table 9 prompt), which needs a model, so ours [DECISION] names each reference and the gold
    evidence it states. style "direct": SFT-direct's target, the short answer alone (§4.3)."""
    self._check_style(style, ("default", "direct"))
    answer_ = gold.gold_answer(self.name, example)
    if style == "direct":
      return answer_
    if not example.gold_passage_ids:
      raise ValueError(f"recipe 'arena' gold completion: example id={example.id!r} has no "
                       "gold_passage_ids; ARENA's target names the supporting references (its data "
                       "are answerable items: stage data.answerable_ratio=1.0).")
    claims = " ".join(f"Reference {', '.join(map(str, ids))} states that {s}" if ids else s
                      for ids, s in gold.gold_support(example))
    analysis = gold.no_angle_brackets(f"{claims} So the answer is {answer_}.")
    return (f"<relevance>\n{sorted(set(example.gold_passage_ids))}\n</relevance>\n\n"
            f"<analysis>\n{analysis}\n</analysis>\n\n<answer>\n{gold.no_angle_brackets(answer_)}\n</answer>")


RECIPES = {"arena": Arena()}
