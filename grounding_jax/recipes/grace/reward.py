"""GRACE's response format and reward (arXiv:2601.04525 §3.2, Eq. 1, Alg. 1): the authors' `src/custom_reward_v2.py`.

The policy writes `[<think>…</think>] (<evidence>…</evidence> | <llm>…</llm>) <answer>…</answer>`
(`parse`). The reward is gated on the text after the last `</think>`:

    R = 0                                     invalid format
        R_f                                   valid format, wrong path          (0.5)
        R_f + R_p                             correct <llm> path                (1.5)
        R_f + R_p + α·RL(evidence) + β·RL(answer)   correct <evidence> path     (1.5 … 6.5)

RL is ROUGE-L F1 (rouge-score, stemming, max over references). α = 2, β = 3 from the authors' code
(the paper gives none). Gold path: `<llm>` when `example.answerable is False`, `<evidence>` when it
is True; when it is None, the authors' rule: `<llm>` iff the example has no non-empty gold evidence
(`gt_evidence == [""]`). References: `example.evidence` (HotpotQA: one string, the supporting
sentences joined by " "; QASPER: the annotators' paragraphs) and `example.answers`.

The recipe (prompts, evaluation, registry entry) is recipe.py.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

import numpy as np

from grounding_jax import text
from grounding_jax.data.schema import Example
from grounding_jax.recipes import reward_fn
from grounding_jax.text import tags

# ------------------------------------------------------------------------------- parser (the authors' code)

@dataclasses.dataclass(frozen=True)
class GraceOutput:
  post_think: str  # text after the LAST "</think>", stripped (the whole text if there is none)
  format_ok: bool
  path: str | None  # "evidence" or "llm" when format_ok, else None
  evidence: str | None  # <evidence> content, not stripped (authors' code), when path == "evidence"
  answer: str | None  # <answer> content, not stripped, when format_ok


_TAGS = ("<llm>", "</llm>", "<evidence>", "</evidence>", "<answer>", "</answer>")
_STRICT_RE = re.compile(r"\s*(?:<evidence>.*?</evidence>|<llm>.*?</llm>)\s*<answer>.*?</answer>\s*", re.S)


def parse(completion: str, *, strict_format: bool = False) -> GraceOutput:
  """Parses a GRACE response (`src/custom_reward_v2.py`).

  Lenient (default, the authors' code): exactly 4 of the six tag strings in total, a complete
  <answer> block, exactly one complete <llm> or <evidence> block, and no "<answer>" inside that
  block; order and surrounding text are not checked. strict_format additionally requires the
  order block-then-answer with only whitespace around (the paper's wording; §3.3 "strict mode").
  The path is "evidence" iff "<evidence>" occurs in the post-think text; tags inside <think> are
  ignored because only the text after the last "</think>" is read (Alg. 1 line 1).
  """
  y = tags.after_think(completion)
  bad = GraceOutput(y, False, None, None, None)
  if tags.count_tags(y, _TAGS) != 4:
    return bad
  # With exactly 4 tags, each complete block's tags occur once, so these are the blocks themselves.
  llm, evidence, answer = (tags.first_block(y, t) for t in ("llm", "evidence", "answer"))
  if answer is None or (llm is None) == (evidence is None):
    return bad
  if "<answer>" in (llm if llm is not None else evidence):
    return bad
  if strict_format and _STRICT_RE.fullmatch(y) is None:
    return bad
  if evidence is not None:
    return GraceOutput(y, True, "evidence", evidence, answer)
  return GraceOutput(y, True, "llm", None, answer)


# ------------------------------------------------------------------------------- reward (Eq. 1)

class GraceReward(reward_fn.RewardFn):
  """GRACE reward. Range [0, format_reward + path_reward + α + β] (6.5 by default); minus up to
  `overlong_factor` when the overlong penalty is on.

  Components: format (0 / R_f), path (0 / R_p), evidence_rouge, answer_rouge (0 unless the correct
  evidence path), llm_path (1 if a valid response took the <llm> path), gold_llm (1 if the gold path
  is <llm>), overlong (≤ 0).

  The optional DAPO overlong penalty (GRACE Table 2: 3072 / 1024 / 1.0) reads the extra
  `completion_lengths` (response token counts, which the trainer passes); leave it off when the
  trainer applies its own overlong shaping (config.dapo.overlong_shaping).
  """

  name = "grace"

  def __init__(self, alpha: float = 2.0, beta: float = 3.0, format_reward: float = 0.5,
               path_reward: float = 1.0, strict_format: bool = False, content: str = "rouge",
               overlong_penalty: bool = False, max_response_length: int = 3072,
               overlong_buffer: int = 1024, overlong_factor: float = 1.0):
    if content not in ("rouge", "em"):
      raise ValueError(f"grace: content={content!r}; use 'rouge' (the paper) or 'em' (App. C.1 "
                       "ablation).")
    if min(alpha, beta, format_reward, path_reward) < 0:
      raise ValueError("grace: alpha, beta, format_reward and path_reward must be >= 0.")
    if overlong_penalty and not 0 < overlong_buffer <= max_response_length:
      raise ValueError(f"grace: overlong_buffer={overlong_buffer} must be in (0, "
                       f"max_response_length={max_response_length}].")
    self.alpha, self.beta = float(alpha), float(beta)
    self.format_reward, self.path_reward = float(format_reward), float(path_reward)
    self.strict_format, self.content = strict_format, content
    self.overlong_penalty = overlong_penalty
    self.max_response_length, self.overlong_buffer = max_response_length, overlong_buffer
    self.overlong_factor = float(overlong_factor)

  @property
  def reward_range(self) -> tuple[float, float]:
    low = -self.overlong_factor if self.overlong_penalty else 0.0
    return low, self.format_reward + self.path_reward + self.alpha + self.beta

  def _gold_path(self, i: int, ex: Example) -> str:
    has_evidence = any(isinstance(e, str) and e for e in ex.evidence)
    if ex.answerable is None:
      gold = "evidence" if has_evidence else "llm"
    else:
      gold = "evidence" if ex.answerable else "llm"
    if gold == "evidence":
      if not has_evidence:
        raise reward_fn.example_error(self.name, i, ex, "evidence", "is empty for an answerable example",
                                      "GRACE scores <evidence> against gold evidence sentences.")
      reward_fn.require_answers(self.name, i, ex)
    return gold

  def _similarity(self, prediction: str, references_: Sequence[str]) -> float:
    refs = [r for r in references_ if r]
    if self.content == "em":
      return text.exact_match(prediction, refs)
    return text.rouge_l_f1(prediction, refs)

  def score(self, completions: list[str], examples: list[Example],
            **extra: Any) -> dict[str, np.ndarray]:
    n = len(completions)
    comp = {k: np.zeros(n) for k in ("format", "path", "evidence_rouge", "answer_rouge", "llm_path",
                                     "gold_llm", "overlong")}
    for i, (completion, ex) in enumerate(zip(completions, examples)):
      gold = self._gold_path(i, ex)
      comp["gold_llm"][i] = gold == "llm"
      out = parse(completion, strict_format=self.strict_format)
      if not out.format_ok:
        continue
      comp["format"][i] = self.format_reward
      comp["llm_path"][i] = out.path == "llm"
      if out.path != gold:
        continue
      comp["path"][i] = self.path_reward
      if out.path == "evidence":
        comp["evidence_rouge"][i] = self._similarity(out.evidence, ex.evidence)
        comp["answer_rouge"][i] = self._similarity(out.answer, ex.answers)
    reward = (comp["format"] + comp["path"] + self.alpha * comp["evidence_rouge"]
              + self.beta * comp["answer_rouge"])
    if self.overlong_penalty:
      lengths = reward_fn.require_extra(self.name, extra, "completion_lengths", n)
      comp["overlong"] = reward_fn.overlong_penalty(lengths, self.max_response_length,
                                                    self.overlong_buffer, self.overlong_factor)
      reward = reward + comp["overlong"]
    return {"reward": reward, **comp}
