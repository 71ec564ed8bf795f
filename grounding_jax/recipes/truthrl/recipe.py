"""TruthRL (arXiv:2509.25760): answer in `\\boxed{}` or abstain with `\\boxed{I don't know}`.

The policy reasons in `<think>…</think>` and boxes its answer; the ternary reward (+1 correct, 0
abstain, −1 otherwise) makes abstaining better than hallucinating. Its outcome rewards are ternary,
binary and knowledge-enhanced (§3.2, §4.6). Evaluation (§2.1, §4.1): accuracy,
uncertainty (abstention), hallucination and truthfulness T = Acc − Hall, with an LLM judge (greedy).

Each completion is classified (the authors' order of checks):
  1. extract the `\\boxed{}` answer (default: the last box, balanced braces, our choice);
     none → NO_BOX;
  2. normalised answer contains "i dont know" (curly apostrophes fixed) → ABSTAIN (never judged);
  3. contains "invalid question" → INVALID_Q (invalid_question="penalize", the training code), or,
     with "gold", only when no gold alias contains it (the evaluation code);
  4. normalised exact match with a gold alias → CORRECT (short-circuits the judge);
  5. otherwise the correctness judge decides CORRECT / INCORRECT.
All judge queries of a batch go in ONE call `judge(questions, predictions, golds) -> bool[N]`.

The judge is a required reward option (`judge=`): the paper's verifier is an LLM judge
(Llama-3.3-70B-Instruct behind an OpenAI-compatible server, §4.1), and Table 5
shows that training with string matching instead collapses to ~96 % abstention. Exact match must be
asked for (judge=dict(kind="exact_match") or "exact_match"; step 4 is then the whole verifier) and is
logged as a warning that cites that result.

Rewards: ternary +1 / abstain_reward (0) / −1; binary +1 / −1; knowledge-enhanced: on
out-of-knowledge questions (example.meta["ook"] True) +1 for ABSTAIN and −1 for anything else (even a
correct answer), elsewhere the base scheme (ternary or binary).

Reasoning-enhanced variants (TruthRL §4.6, Table 8) combine the outcome r_out with a 0/1
reasoning-quality score r_reason that the caller passes as `reasoning_scores=[...]` (from the
Table 12 reasoning judge, run outside this recipe): multiplicative r_out·(1 + r_reason), additive
r_out + λ·r_reason (λ = 0.5), conditional r_out·r_reason if r_out = 1 else r_out.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from grounding_jax import judges
from grounding_jax import text
from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import base
from grounding_jax.recipes import reward_fn
from grounding_jax.recipes import gold
from grounding_jax.recipes.truthrl import judge as truthrl_judge
from grounding_jax.text import tags

# ------------------------------------------------------------------------------- prompts (Tables 9-10, evaluation/model.py)
# evaluation/prompts.py: PROMPT_* end with "\n"; BOX_FORMAT has no trailing newline.
PROMPT_RETRIEVAL = (
    "You are given a Question, References and the time when it was asked in the Pacific Time Zone (PT), "
    "referred to as \"Query Time\". The query time is formatted as \"mm/dd/yyyy, hh:mm:ss PT\". The "
    "references may or may not help answer the question. Your task is to answer the question based on "
    "factual information in the references or your own knowledge.\n"
    "Please adhere to the following guidelines when formulating the answer:\n"
    "1. If the question contains a false premise or assumption, answer \"invalid question\".\n"
    "2. If you are uncertain or don't know the answer, answer \"I don't know\".\n"
)
PROMPT_NO_RETRIEVAL = (
    "You are given a Question and the time when it was asked in the Pacific Time Zone (PT), referred to "
    "as \"Query Time\". The query time is formatted as \"mm/dd/yyyy, hh:mm:ss PT\". Your task is to answer "
    "the question based on factual information in your own knowledge.\n"
    "Please adhere to the following guidelines when formulating the answer:\n"
    "1. If the question contains a false premise or assumption, answer \"invalid question\".\n"
    "2. If you are uncertain or don't know the answer, answer \"I don't know\".\n"
)
BOX_FORMAT = (
    "Please reason step by step and then provide the final answer. The reasoning process must be enclosed "
    "within <think> </think> tags. The final answer MUST be put in \\boxed{}. For example, \\boxed{I don't "
    "know}, \\boxed{invalid question}, \\boxed{3 times}, \\boxed{New York}, etc."
)
REFERENCE_CHAR_BUDGET = 80000  # format_prompts stops adding references past 80,000 characters


def references(passages: Sequence[Passage], *, char_budget: int = REFERENCE_CHAR_BUDGET) -> list[str]:
  """TruthRL reference blocks "<DOC>\\nDocument [i]: text\\n</DOC>", stopping at the character budget."""
  refs, total = [], 0
  for i, p in enumerate(passages):
    block = f"<DOC>\nDocument [{i + 1}]: {p.text}\n</DOC>"
    if total + len(block) > char_budget:
      break
    refs.append(block)
    total += len(block)
  return refs


def _default(ex: Example, *, retrieval: bool = True, query_time: str | None = None,
             char_budget: int = REFERENCE_CHAR_BUDGET) -> base.Messages:
  # evaluation/model.py::format_prompts. Datasets without a query time (NQ, HotpotQA, MuSiQue) omit the
  # "### Query Time" section unless `query_time` is given (our choice).
  query_time = query_time or ex.meta.get("query_time")
  user = f"### Question\n{ex.question}\n"
  if query_time:
    user += f"### Query Time\n{query_time}\n"
  if retrieval:
    task = PROMPT_RETRIEVAL + "\n" + BOX_FORMAT
    user += "### References\n" + "\n".join(references(ex.passages, char_budget=char_budget))
  else:
    task = PROMPT_NO_RETRIEVAL + "\n" + BOX_FORMAT
  return [{"role": "user", "content": task + "\n" + user}]


def _no_retrieval(ex: Example, **kw: Any) -> base.Messages:
  return _default(ex, retrieval=False, **kw)


# ------------------------------------------------------------------------------- reward (§3.2)

OUTCOMES = ("correct", "abstain", "incorrect", "no_box", "invalid_question")
# The judges a config's `style=` may name: the outcome judge (Table 11, the default) and the
# reasoning-quality judge (Table 12).
JUDGE_STYLES = {"truthrl": truthrl_judge.STYLE, "truthrl_reasoning": truthrl_judge.REASONING_STYLE}
_SCHEMES = ("ternary", "binary", "knowledge_enhanced")


_EXACT_MATCH_WARNING = (
    "TruthRL with an exact-match verifier (judge kind 'exact_match'): the paper reports that training "
    "with a string-matching verifier collapses to T = -3.6, H = 3.6, i.e. ~96 %% abstention and ~0 %% "
    "accuracy (TruthRL Table 5), and it evaluates with an LLM judge (Table 6). For the "
    "paper's setting give %s=dict(kind='openai', base_url=..., model='meta-llama/Llama-3.3-70B-Instruct'"
    ") or dict(kind='llm', path=FOLDER).")
_JUDGE_OPTION = "config.reward.functions[i].options.judge"
_warned_exact_match = False


def _warn_exact_match() -> None:
  global _warned_exact_match
  if not _warned_exact_match:
    _warned_exact_match = True
    logging.warning(_EXACT_MATCH_WARNING, _JUDGE_OPTION)


class TruthRLReward(reward_fn.RewardFn):
  """TruthRL outcome reward. Range [−1, 1] (ternary with abstain_reward in [−1, 1]).

  Options: scheme ("ternary" | "binary" | "knowledge_enhanced"), base_scheme (the scheme on non-OOK
  questions under knowledge_enhanced), judge (required: a CorrectnessJudge, or a judge spec for
  judges.build such as dict(kind="openai", ...), dict(kind="llm", path=...) or "exact_match"),
  abstain_reward (0; the v2 sweep used −0.5 / 0 / +0.5), abstain_reward_answerable (None = abstain_reward,
  the paper; else the reward of an abstention on a question whose passages hold the answer,
  example.answerable True: ours, against the refusal corner, docs/training.md),
  correct_reward_unanswerable (None = 1.0, the paper's; else the reward of a right answer on a
  question whose passages do NOT hold it, example.answerable False — e.g. the gold_removed copy of
  an evidence-contrast group, whose answer can only come from what the policy memorised of earlier
  steps: ours, so that only answers the passages support pay, docs/training.md), invalid_question
  ("penalize" | "gold"), box ("last" | "first" | "first_regex"; see text.tags.extract_boxed).
  Components: one 0/1 column per outcome in OUTCOMES.
  """

  def __init__(self, scheme: str = "ternary", base_scheme: str = "ternary", judge: Any = None,
               abstain_reward: float = 0.0, invalid_question: str = "penalize", box: str = "last",
               abstain_reward_answerable: float | None = None, reasoning: str | None = None,
               reasoning_weight: float = 0.5, correct_reward_unanswerable: float | None = None):
    if scheme not in _SCHEMES:
      raise ValueError(f"truthrl: scheme={scheme!r}; use one of {_SCHEMES}.")
    if base_scheme not in ("ternary", "binary"):
      raise ValueError(f"truthrl: base_scheme={base_scheme!r}; use 'ternary' or 'binary'.")
    if invalid_question not in ("penalize", "gold"):
      raise ValueError(f"truthrl: invalid_question={invalid_question!r}; use 'penalize' (training "
                       "code) or 'gold' (evaluation code).")
    if box not in ("last", "first", "first_regex"):
      raise ValueError(f"truthrl: box={box!r}; use 'last', 'first' or 'first_regex'.")
    if not -1.0 <= abstain_reward <= 1.0:
      raise ValueError(f"truthrl: abstain_reward={abstain_reward} must be in [-1, 1].")
    if abstain_reward_answerable is not None and not -1.0 <= abstain_reward_answerable <= 1.0:
      raise ValueError(f"truthrl: abstain_reward_answerable={abstain_reward_answerable} must be None "
                       "or in [-1, 1].")
    if correct_reward_unanswerable is not None and not -1.0 <= correct_reward_unanswerable <= 1.0:
      raise ValueError(f"truthrl: correct_reward_unanswerable={correct_reward_unanswerable} must be "
                       "None or in [-1, 1].")
    if reasoning not in (None, "multiplicative", "additive", "conditional"):
      raise ValueError(f"truthrl: reasoning={reasoning!r}; use None, 'multiplicative', 'additive' "
                       "or 'conditional'.")
    if judge is None or judge == "" or judge == {}:
      raise ValueError(
          "reward 'truthrl' needs a correctness judge: set the reward option judge= "
          f"({_JUDGE_OPTION}), e.g. dict(kind='openai', base_url='http://judge:8000/v1', "
          "model='meta-llama/Llama-3.3-70B-Instruct', style='truthrl') (the paper's verifier), "
          "dict(kind='llm', path=FOLDER, style='truthrl') on our sampler, or dict(kind='exact_match') "
          "(string matching; the paper's Table 5 shows training with it collapses to ~96 % abstention).")
    # A spec from a config (its style name resolved here): loaded on first use.
    judge = judges.lazy(judges.with_style(judge, JUDGE_STYLES), role="correctness")
    if not callable(judge):
      raise ValueError("truthrl: judge must be callable(questions, predictions, golds) -> bool[N] or a "
                       "judge spec such as dict(kind='llm', path=FOLDER, style='truthrl').")
    # Exact match is the recipe's own step 4; the judge then adds nothing and is not called.
    self.exact_match_only = isinstance(judge, judges.ExactMatchJudge)
    if self.exact_match_only:
      _warn_exact_match()
    self.scheme, self.base_scheme, self.judge = scheme, base_scheme, judge
    self.abstain_reward, self.invalid_question, self.box = float(abstain_reward), invalid_question, box
    self.abstain_reward_answerable = (None if abstain_reward_answerable is None
                                      else float(abstain_reward_answerable))
    self.correct_reward_unanswerable = (None if correct_reward_unanswerable is None
                                        else float(correct_reward_unanswerable))
    self.reasoning, self.reasoning_weight = reasoning, float(reasoning_weight)
    self.name = {"ternary": "truthrl", "binary": "truthrl_binary",
                 "knowledge_enhanced": "truthrl_knowledge"}[scheme]

  @property
  def reward_range(self) -> tuple[float, float]:
    if self.reasoning == "multiplicative":
      return -2.0, 2.0
    if self.reasoning == "additive":
      return -1.0 + min(self.reasoning_weight, 0.0), 1.0 + max(self.reasoning_weight, 0.0)
    return -1.0, 1.0

  def _classify_without_judge(self, completion: str, golds: tuple[str, ...]) -> tuple[str, str]:
    """(outcome or "judge", boxed answer)."""
    pred = tags.extract_boxed(completion, select=self.box)
    if pred is None:
      return "no_box", ""
    npred = text.normalize_answer_truthrl(pred)
    if text.is_abstention(pred):
      return "abstain", pred
    norm_golds = [text.normalize_answer_truthrl(g) for g in golds]
    if "invalid question" in npred:
      if self.invalid_question == "penalize" or not any("invalid question" in g for g in norm_golds):
        return "invalid_question", pred
    if npred in norm_golds:
      return "correct", pred
    return "judge", pred

  def _outcome_reward(self, outcome: str, scheme: str) -> float:
    if outcome == "correct":
      return 1.0
    if outcome == "abstain" and scheme == "ternary":
      return self.abstain_reward
    return -1.0

  def score(self, completions: list[str], examples: list[Example],
            **extra: Any) -> dict[str, np.ndarray]:
    n = len(completions)
    outcomes: list[str] = []
    queries: list[tuple[int, str]] = []
    ook = np.zeros(n, dtype=bool)
    for i, (completion, ex) in enumerate(zip(completions, examples)):
      golds = reward_fn.require_answers(self.name, i, ex)
      if self.scheme == "knowledge_enhanced":
        ook[i] = reward_fn.require_meta(self.name, i, ex, "ook", bool)
      outcome, pred = self._classify_without_judge(completion, golds)
      if outcome == "judge":
        queries.append((i, pred))
        outcome = "incorrect"
      outcomes.append(outcome)
    if queries and not self.exact_match_only:
      idx = [i for i, _ in queries]
      verdicts = reward_fn.check_judge_output(
          self.name, "judge",
          self.judge([examples[i].question for i in idx], [p for _, p in queries],
                     [list(examples[i].answers) for i in idx]), len(idx))
      for i, ok in zip(idx, verdicts):
        if ok:
          outcomes[i] = "correct"
    reward = np.zeros(n)
    for i, outcome in enumerate(outcomes):
      if self.scheme == "knowledge_enhanced" and ook[i]:
        reward[i] = 1.0 if outcome == "abstain" else -1.0
      else:
        scheme = self.base_scheme if self.scheme == "knowledge_enhanced" else self.scheme
        reward[i] = self._outcome_reward(outcome, scheme)
        if (outcome == "abstain" and scheme == "ternary" and self.abstain_reward_answerable is not None
            and examples[i].answerable is True):
          reward[i] = self.abstain_reward_answerable
        if (outcome == "correct" and self.correct_reward_unanswerable is not None
            and examples[i].answerable is False):
          reward[i] = self.correct_reward_unanswerable
    comp = {k: np.array([o == k for o in outcomes], dtype=np.float64) for k in OUTCOMES}
    if self.reasoning is not None:
      r_reason = np.asarray(reward_fn.require_extra(self.name, extra, "reasoning_scores", n), np.float64)
      if not np.all((r_reason == 0) | (r_reason == 1)):
        raise ValueError(f"reward {self.name!r}: reasoning_scores must be 0/1 per completion.")
      comp["outcome"], comp["reasoning"] = reward, r_reason
      reward = combine_reasoning(reward, r_reason, self.reasoning, self.reasoning_weight)
    return {"reward": reward, **comp}


def combine_reasoning(r_out: np.ndarray, r_reason: np.ndarray, mode: str,
                      weight: float = 0.5) -> np.ndarray:
  """TruthRL §4.6 reasoning-enhanced rewards; r_out, r_reason float[N] (r_reason in {0, 1})."""
  if mode == "multiplicative":
    return r_out * (1.0 + r_reason)
  if mode == "additive":
    return r_out + weight * r_reason
  if mode == "conditional":
    return np.where(r_out == 1.0, r_out * r_reason, r_out)
  raise ValueError(f"combine_reasoning: mode={mode!r}.")


# ------------------------------------------------------------------------------- evaluation (§6.2)

def truthfulness(correct: Sequence[bool], abstained: Sequence[bool], *,
                 weights: tuple[float, float, float] = (1.0, 0.0, 1.0)) -> dict[str, float]:
  """TruthRL's Acc / Unc / Hall / T in %, from per-question outcomes (bool [N] each).

  Every response that is neither correct nor an abstention is a hallucination, including outputs
  with no `\\boxed{}` (TruthRL's code). weights = (w1, w2, w3); the paper uses (1, 0, 1).
  """
  c, a = np.asarray(correct), np.asarray(abstained)
  if c.ndim != 1 or a.ndim != 1:
    raise ValueError(f"correct {c.shape} and abstained {a.shape} must be 1-D.")
  c, a = c.astype(bool), a.astype(bool)
  if c.shape != a.shape:
    raise ValueError(f"correct {c.shape} and abstained {a.shape} must align.")
  if np.any(c & a):
    raise ValueError(f"rows {np.flatnonzero(c & a)[:5].tolist()} are both correct and abstained.")
  n = max(c.size, 1)
  acc, unc = 100.0 * c.sum() / n, 100.0 * a.sum() / n
  hall = 100.0 * (c.size - c.sum() - a.sum()) / n
  w1, w2, w3 = weights
  return {"accuracy": acc, "uncertainty": unc, "hallucination": hall,
          "truthfulness": w1 * acc + w2 * unc - w3 * hall}


def evaluate(completions: Sequence[str], examples: Sequence[Example], *, judge=None,
             weights: tuple[float, float, float] = (1.0, 0.0, 1.0)) -> dict[str, Any]:
  """TruthRL's Acc / Unc / Hall / T in % (evaluation policy: a gold "invalid question" counts).

  `judge`: a CorrectnessJudge or spec (the paper: an LLM judge); None scores by exact match alone
  (reported as "judge": "exact_match"). "per_example" holds each column per row (100 · the outcome;
  T = w1·Acc + w2·Unc − w3·Hall per row), "correct" and "abstained" (`\boxed{I don't know}`).
  """
  base.check_aligned(completions, examples)
  judge = judges.build(judges.with_style(judge if judge is not None else "exact_match", JUDGE_STYLES),
                       role="correctness")
  reward = TruthRLReward(judge=judge, invalid_question="gold")
  comp = reward(list(completions), list(examples))
  correct, abstained = comp["correct"] == 1, comp["abstain"] == 1
  out = truthfulness(correct, abstained, weights=weights)
  out["no_box_rate"] = 100.0 * float(comp["no_box"].mean()) if len(completions) else 0.0
  out["judge"] = "exact_match" if reward.exact_match_only else "llm"
  w1, w2, w3 = weights
  acc, unc = 100.0 * correct, 100.0 * abstained
  hall = 100.0 * (~correct & ~abstained)
  out["per_example"] = {"accuracy": acc, "uncertainty": unc, "hallucination": hall,
                        "truthfulness": w1 * acc + w2 * unc - w3 * hall,
                        "correct": correct.astype(np.float64), "abstained": abstained.astype(np.float64)}
  out["answers"] = [tags.extract_boxed(c) or "" for c in completions]
  return out


class TruthRL(base.Recipe):
  name = "truthrl"
  paper = "TruthRL (arXiv:2509.25760)"
  templates = {"default": _default, "no_retrieval": _no_retrieval}
  eval_decoding = base.Decoding(temperature=0.0, max_new_tokens=2048)  # greedy, as the authors' code
  reward_variants = {"truthrl_binary": {"scheme": "binary"},
                     "truthrl_knowledge": {"scheme": "knowledge_enhanced"}}
  headline_metric = "truthfulness"
  metric_columns = ("truthfulness", "hallucination", "accuracy", "uncertainty")
  judge_styles = JUDGE_STYLES
  required_judges = ("judge",)
  abstention = "\\boxed{I don't know}"
  abstention_component = "abstain"

  def parse(self, completion: str) -> str | None:
    return tags.extract_boxed(completion)

  def answer(self, completion: str) -> str:
    return tags.extract_boxed(completion) or ""

  def reward(self, **options: Any) -> TruthRLReward:
    return TruthRLReward(**options)

  def evaluate(self, completions, examples, **kwargs) -> dict[str, Any]:
    return evaluate(completions, examples, **kwargs)

  def gold_completion(self, example: Example, *, style: str = "default") -> str:
    """TruthRL's SFT baseline target: `<think>…</think>` then `\\boxed{gold answer}`, or
    `\\boxed{I don't know}` when the context lacks the answer or the question is out of the model's
    knowledge (meta["ook"]: R-Tuning's relabelling). The paper says only "the ground-truth response"
    for its SFT baseline; [DECISION] this layout, with an empty or short think. Ours cites
    the documents that state the gold evidence, as the prompt numbers them (`Document [i]`)."""
    self._check_style(style)
    if not gold.has_answer_in_context(example) or (example.meta or {}).get("ook") is True:
      return ("<think>None of the documents states the answer to the question.</think>\n"
              "\\boxed{I don't know}")
    answer_ = gold.gold_answer(self.name, example)
    facts = " ".join(f"Document [{ids[0]}] states: {s}" if ids else s
                     for ids, s in gold.gold_support(example))
    return f"<think>{facts} So the answer is {answer_}.</think>\n\\boxed{{{answer_}}}"


RECIPES = {"truthrl": TruthRL()}
