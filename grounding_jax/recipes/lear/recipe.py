"""LEAR (arXiv:2507.15586): reason, extract rational evidence, and answer from masked contexts.

The policy writes `<reason>r</reason><extract>e</extract>` (stop "</extract>", Table 10), then answers
three times from hard-masked contexts (Eq. 4, rollout.py); only ỹ = {r, e, o_f} is trained on.
At evaluation a separate reader answers from (q, e) alone (Table 7; EM / F1 and the compression ratio
CR of the extracts, §4.1). The reward (§3.2, Eqs. 5–9):

    R = 0.8 · R_ans + 0.1 · R_len + 0.1 · R_fmt                                   (Eq. 9)
    R_ans = mean(F1(a, o_r), F1(a, o_e), F1(a, o_f))                              (Eq. 5)
    R_len = mean(R_len_r, R_len_e)                                                (Eqs. 6–7)
    R_len_r = σ((L_r/L_e − 1)/τ) if L_r ≥ L_e else σ((1 − L_e/L_r)/τ)
    R_len_e = 1 if 1 − L_e/L_P ≥ ω else max(1 − L_e/L_P, 0)^γ
    R_fmt = 1 if ỹ = rollout + o_f is <reason>…</reason><extract>…</extract><answer>…</answer>

The completion is the extractor rollout `<reason>r</reason><extract>e</extract>` (sampled until the
stop string `</extract>`; pass it with the stop string). The three answer passes come in as extras,
one string per completion, each the text of a `<answer>…</answer>` generation (include the forced
"<answer>" prefix and the "</answer>" stop string):
    answers_rationale  o_r, generated from (q, P, r) with e hard-masked
    answers_evidence   o_e, generated from (q, e) with P and r hard-masked
    answers_full       o_f, generated from the full context (q, P, r, e)

Decisions where the paper is silent: F1 is SQuAD unigram F1, max over gold aliases; a pass without an
<answer> block scores 0. Lengths are token counts of the tag contents with `tokenizer` (a tokenizer
folder, loaded on first use in whichever process scores, or an object with
`encode(text, add_special_tokens=False)`; the policy's tokens are the natural unit, which configs
name as tokenizer="policy", resolved by the trainer), or whitespace words when tokenizer is None; L_P
is the summed length of the example's passage texts; lengths are floored at 1 and the Eq. 7 base
clamped at 0. When the rollout lacks a complete <reason> or <extract> block, R_len = 0. τ and γ are
unreported in the paper (tuned over {.1,.2,.5,1} and {.1,.3,.5,.8,1}); defaults 0.5 / 0.5.
`answer_passes` picks the passes R_ans averages (Table 6's ablation; default all three).
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from grounding_jax import text
from grounding_jax.data.schema import Example, Passage
from grounding_jax.models.tokenizer import load_tokenizer
from grounding_jax.recipes import base
from grounding_jax.recipes import reward_fn
from grounding_jax.recipes import gold
from grounding_jax.recipes.lear import rollout as lear_rollout
from grounding_jax.text import tags

# ------------------------------------------------------------------------------- prompts (Table 10)
# Line breaks as in the extracted paper text; curly apostrophes kept.
EXTRACT_PROMPT = (  # Table 10, the policy prompt; generation stops at "</extract>"
    "You are a highly skilled knowledge reasoner and extractor.\n"
    "Your task is to carefully read the given question and passages to reason how the passages lead to "
    "the answer and extract relevant information that may be used to answer the question. Follow these "
    "steps: 1. In the <reason></reason> tag, perform the following steps. Question Analysis: Analyze the "
    "question to understand the specific information they are seeking. Identify the key concepts, "
    "entities, and relationships involved. Passage Analysis: For each passage, carefully read and identify "
    "sentences or phrases that are useful for answering the given question. 2. In the <extract></extract> "
    "tag, synthesize useful information from the passages into a coherent narrative. Organize the "
    "information logically and concisely. 3. In <answer></answer> tags, give a short answer to the given "
    "question, based on the passages, reasoning information, and extracted knowledge. If none of them "
    "work, please answer the question based on your knowledge. Question: {question} Passages: {passages}"
)
READER_PROMPT = (  # Table 7, retrieval-augmented QA (the reader); {document} = passages or evidence
    "You are a helpful assistant. Your task is:\n"
    "1. Read the given question and use the documents provided to answer the question. 2. If the "
    "documents don\u2019t work, please answer the question based on your own knowledge. Question: "
    "{question} Document: {document} Answer:"
)
CLOSED_BOOK_PROMPT = (  # Table 8, baseline "Zero"
    "You are a helpful assistant. Your task is:\n"
    "1. Read the given question and then answer the question directly. 2. Give a short answer to the "
    "question based on your own knowledge. Question: {question} Answer:"
)
COT_PROMPT = (  # Table 9, baseline "CoT"
    "You are a helpful assistant. Your task is:\n"
    "Read the given documents, and answer the question below. Question: {question} Document: {document} "
    "Let\u2019s think step by step."
)

STOP = ("</extract>",)  # Table 10 caption: generation terminates at '</extract>'
ANSWER_STOP = ("</answer>",)  # the three answer passes stop at the closing tag
ANSWER_PASSES = ("rationale", "evidence", "full")  # o_r, o_e, o_f: R_ans averages their F1 (Eq. 5)


def passages_text(passages: Sequence[Passage], *, include_titles: bool = True) -> str:
  """LEAR `{passages}`: "Passage i: title\\ntext" per line ([DECISION]; the paper is silent)."""
  return "\n".join(f"Passage {i + 1}: {base.titled(p, include_titles)}" for i, p in enumerate(passages))


def _extractor(ex: Example, *, include_titles: bool = True) -> base.Messages:
  return [{"role": "user", "content": base.fill(EXTRACT_PROMPT, question=ex.question,
                                                 passages=passages_text(ex.passages,
                                                                        include_titles=include_titles))}]


def _reader(ex: Example, *, document: str | None = None, include_titles: bool = True) -> base.Messages:
  if document is None:  # "Full" setting: the reader sees all passages
    document = passages_text(ex.passages, include_titles=include_titles)
  return [{"role": "user", "content": base.fill(READER_PROMPT, question=ex.question, document=document)}]


def _closed_book(ex: Example) -> base.Messages:
  return [{"role": "user", "content": base.fill(CLOSED_BOOK_PROMPT, question=ex.question)}]


def _cot(ex: Example, *, include_titles: bool = True) -> base.Messages:
  document = passages_text(ex.passages, include_titles=include_titles)
  return [{"role": "user", "content": base.fill(COT_PROMPT, question=ex.question, document=document)}]


# ------------------------------------------------------------------------------- parser (Eq. 8)

_TAGS = ("<reason>", "</reason>", "<extract>", "</extract>", "<answer>", "</answer>")
# The self-contained sequence ỹ = rollout + o_f [DECISION], non-empty contents.
_FORMAT_RE = re.compile(
    r"^\s*<reason>(.+?)</reason>\s*<extract>(.+?)</extract>\s*<answer>(.+?)</answer>\s*$", re.S)


def format_ok(rollout: str, answer_full: str) -> bool:
  """Eq. 8 on ỹ = rollout + o_f: the three blocks in order, non-empty, each tag exactly once (the
  counts are checked first: with each tag once the regex cannot backtrack, so this is linear)."""
  y = rollout + answer_full
  return all(y.count(t) == 1 for t in _TAGS) and _FORMAT_RE.match(y) is not None


def answer(text_: str) -> str:
  """The <answer> content of a completion or answer pass ("" when it has none)."""
  return tags.first_block(text_, "answer") or ""


def reader_answer(output: str) -> str:
  """A reader's answer: its <answer> block, else the whole output (a reader prompted without tags
  answers plainly, Table 7)."""
  found = tags.first_block(output, "answer")
  return output if found is None else found


# ------------------------------------------------------------------------------- reward (Eqs. 5–9)

def _sigmoid(x: float) -> float:
  if x >= 0:
    return 1.0 / (1.0 + math.exp(-x))
  z = math.exp(x)  # stable for very negative x
  return z / (1.0 + z)


def length_reward_rationale(len_rationale: float, len_evidence: float, tau: float) -> float:
  """Eq. 6 in [0, 1]: longer rationale than evidence earns more; 0.5 when equal."""
  l_r, l_e = max(len_rationale, 1), max(len_evidence, 1)
  x = (l_r / l_e - 1.0) if l_r >= l_e else (1.0 - l_e / l_r)
  return _sigmoid(x / tau)


def length_reward_evidence(len_evidence: float, len_passages: float, omega: float,
                           gamma: float) -> float:
  """Eq. 7 in [0, 1]: 1 when the evidence compresses the passages by ≥ ω, else (1 − L_e/L_P)^γ."""
  c = 1.0 - len_evidence / max(len_passages, 1)
  if c >= omega:
    return 1.0
  return max(c, 0.0) ** gamma


class LearReward(reward_fn.RewardFn):
  """LEAR reward. Range [0, w_ans + w_len + w_fmt] = [0, 1] by default.

  Extras (required, length N): answers_rationale, answers_evidence, answers_full (see module doc).
  Components: answer, f1_rationale, f1_evidence, f1_full, length, len_reward_rationale,
  len_reward_evidence, format, len_rationale, len_evidence, len_passages (the L_* counts).

  Options: tau, gamma, omega (Eqs. 6-7), weights (Eq. 9), tokenizer (None = whitespace words; a
  tokenizer folder, loaded lazily so the reward pickles as a path; or an object with encode),
  answer_passes (which of "rationale", "evidence", "full" R_ans averages; Table 6).
  """

  name = "lear"

  def __init__(self, tau: float = 0.5, gamma: float = 0.5, omega: float = 0.9,
               weights: tuple[float, float, float] = (0.8, 0.1, 0.1), tokenizer: Any = None,
               answer_passes: Sequence[str] = ANSWER_PASSES):
    if tau <= 0 or gamma < 0 or not 0 <= omega <= 1:
      raise ValueError(f"lear: need tau > 0, gamma >= 0, 0 <= omega <= 1; got tau={tau}, "
                       f"gamma={gamma}, omega={omega}.")
    weights = tuple(float(w) for w in weights)
    if len(weights) != 3 or min(weights) < 0:
      raise ValueError(f"lear: weights={weights} must be 3 non-negative numbers (answer, length, "
                       "format).")
    self._tokenizer_path = None
    if tokenizer == "policy":
      raise ValueError("lear: tokenizer='policy' names the policy's tokenizer in a config; the trainer "
                       "resolves it to config.model.path (eval/from_config.py). Pass a tokenizer folder here.")
    if isinstance(tokenizer, str):
      if not os.path.isdir(tokenizer):
        raise ValueError(f"lear: tokenizer={tokenizer!r} is not a folder; give a tokenizer folder "
                         "(e.g. the policy's HF folder), 'policy' in a config, or None for words.")
      self._tokenizer_path, tokenizer = tokenizer, None
    elif tokenizer is not None and not callable(getattr(tokenizer, "encode", None)):
      raise ValueError("lear: tokenizer must be a folder, an object with encode(text, "
                       "add_special_tokens=False), or None (whitespace words).")
    passes = tuple(answer_passes)
    if not passes or len(set(passes)) != len(passes) or not set(passes) <= set(ANSWER_PASSES):
      raise ValueError(f"lear: answer_passes={answer_passes!r}; choose a non-empty subset of "
                       f"{ANSWER_PASSES} (Table 6).")
    self.tau, self.gamma, self.omega = float(tau), float(gamma), float(omega)
    self.weights, self.tokenizer, self.answer_passes = weights, tokenizer, passes

  def __getstate__(self):
    # Pickled to reward workers: a tokenizer loaded from a folder travels as its path.
    state = dict(self.__dict__)
    if self._tokenizer_path is not None:
      state["tokenizer"] = None
    return state

  @property
  def reward_range(self) -> tuple[float, float]:
    return 0.0, sum(self.weights)

  def _length(self, s: str) -> int:
    if self.tokenizer is None and self._tokenizer_path is not None:
      self.tokenizer = load_tokenizer(self._tokenizer_path)
    if self.tokenizer is None:
      return len(s.split())
    return len(self.tokenizer.encode(s, add_special_tokens=False))

  def score(self, completions: list[str], examples: list[Example],
            **extra: Any) -> dict[str, np.ndarray]:
    n = len(completions)
    passes = {k: reward_fn.require_extra(self.name, extra, k, n) for k in lear_rollout.ANSWER_EXTRAS}
    for key, values in passes.items():
      for i, v in enumerate(values):
        if not isinstance(v, str):
          raise ValueError(f"reward 'lear': {key}[{i}] is {type(v).__name__}, expected str.")
    comp = {k: np.zeros(n) for k in (
        "answer", "f1_rationale", "f1_evidence", "f1_full", "length", "len_reward_rationale",
        "len_reward_evidence", "format", "len_rationale", "len_evidence", "len_passages")}
    passage_lengths: dict[tuple, int] = {}
    for i, (completion, ex) in enumerate(zip(completions, examples)):
      golds = reward_fn.require_answers(self.name, i, ex)
      if not ex.passages:
        raise reward_fn.example_error(self.name, i, ex, "passages", "is empty",
                                      "L_P (Eq. 7) is the length of the retrieved passages.")
      if ex.passages not in passage_lengths:
        passage_lengths[ex.passages] = sum(self._length(p.text) for p in ex.passages)
      l_p = passage_lengths[ex.passages]
      comp["len_passages"][i] = l_p
      for key, name in zip(lear_rollout.ANSWER_EXTRAS, ("f1_rationale", "f1_evidence", "f1_full")):
        answer = tags.first_block(passes[key][i], "answer")
        comp[name][i] = 0.0 if answer is None else text.token_f1(answer, golds)
      rollout = lear_rollout.parse_rollout(completion)
      if rollout.rationale is not None and rollout.evidence is not None:
        l_r, l_e = self._length(rollout.rationale), self._length(rollout.evidence)
        comp["len_rationale"][i], comp["len_evidence"][i] = l_r, l_e
        comp["len_reward_rationale"][i] = length_reward_rationale(l_r, l_e, self.tau)
        comp["len_reward_evidence"][i] = length_reward_evidence(l_e, l_p, self.omega, self.gamma)
      comp["format"][i] = format_ok(completion, passes["answers_full"][i])
    comp["answer"] = sum(comp[f"f1_{p}"] for p in self.answer_passes) / len(self.answer_passes)
    comp["length"] = (comp["len_reward_rationale"] + comp["len_reward_evidence"]) / 2.0
    w = self.weights
    reward = w[0] * comp["answer"] + w[1] * comp["length"] + w[2] * comp["format"]
    return {"reward": reward, **comp}


# ------------------------------------------------------------------------------- evaluation (§9)

def compression_ratio(passage_lengths: Sequence[int], evidence_lengths: Sequence[int]) -> dict[str, float]:
  """LEAR's CR (§4.1, Table 4): total passage length / total evidence length, plus the mean of per-example
  ratios. Lengths are counts in one unit (the reader's tokens are the natural unit). Examples whose
  evidence is empty are left out of the per-example mean (their ratio is infinite), counted in "n_empty".
  """
  lp = np.asarray(passage_lengths, np.float64)
  le = np.asarray(evidence_lengths, np.float64)
  if lp.shape != le.shape or lp.ndim != 1:
    raise ValueError(f"passage_lengths {lp.shape} and evidence_lengths {le.shape} must be 1-D and align.")
  if np.any(lp < 0) or np.any(le < 0):
    raise ValueError("lengths must be non-negative.")
  nz = le > 0
  return {"cr_total": float(lp.sum() / le.sum()) if le.sum() > 0 else float("inf"),
          "cr_mean": float(np.mean(lp[nz] / le[nz])) if nz.any() else float("inf"),
          "n_empty": int((~nz).sum())}


def evaluate(rollouts: Sequence[str], examples: Sequence[Example], *,
             reader_outputs: Sequence[str] | None = None,
             length_fn: Callable[[str], int] | None = None,
             normalizer: str = "squad") -> dict[str, Any]:
  """LEAR's Table 4: EM / F1 (%) of the reader's answers, CR of the extracts.

  The paper names no EM / F1 script ([DECISION]): SQuAD's by default; normalizer="hotpot"
  scores its HotpotQA dev rows with HotpotQA's official rule (text.em_f1).

  `rollouts` are the extractor's `<reason>…</reason><extract>…</extract>` outputs. `reader_outputs`
  are the downstream reader's answers given (q, extracted evidence) (the two-model protocol); without
  them the extractor's own `<answer>` block (if it wrote one) is scored. `length_fn` counts length
  units (default whitespace words; the reader's tokens are the natural unit, e.g.
  `lambda s: len(tokenizer.encode(s))`). "per_example" holds EM / F1 (%), the passage and evidence
  lengths CR is computed from, "correct" (EM) and "abstained" (`base.says_unanswerable`; LEAR defines
  no abstention).
  """
  base.check_aligned(rollouts, examples)
  answered = rollouts if reader_outputs is None else reader_outputs
  base.check_aligned(answered, examples)
  for e in examples:
    if not e.answers:
      raise ValueError(f"lear evaluation: example {e.id!r} has no gold answers.")
  count = length_fn or (lambda s: len(s.split()))
  answers = [reader_answer(r) for r in answered]
  out: dict[str, Any] = dict(text.em_f1(answers, [list(e.answers) for e in examples],
                                        normalizer=normalizer))
  em, f1 = out.pop("em_per_example"), out.pop("f1_per_example")
  evidence = [lear_rollout.parse_rollout(r).evidence or "" for r in rollouts]
  passages = ["\n".join(p.text for p in e.passages) for e in examples]
  lp = np.array([count(p) for p in passages], np.float64)
  le = np.array([count(e) for e in evidence], np.float64)
  out.update(compression_ratio(lp, le))
  out["per_example"] = {"em": 100.0 * em, "f1": 100.0 * f1, "passage_length": lp, "evidence_length": le,
                        "correct": em,
                        "abstained": np.array([base.says_unanswerable(a) for a in answers], np.float64)}
  out["answers"] = answers
  return out


class Lear(base.Recipe):
  name = "lear"
  paper = "LEAR (arXiv:2507.15586)"
  templates = {"default": _extractor, "reader": _reader, "closed_book": _closed_book, "cot": _cot}
  stop = STOP
  # Greedy extraction; 768 new tokens as the paper's latency setting (§4.4).
  eval_decoding = base.Decoding(temperature=0.0, max_new_tokens=768)
  headline_metric = "f1"
  metric_columns = ("em", "f1", "cr_total")
  rollout_extras = lear_rollout.ANSWER_EXTRAS

  def parse(self, completion: str) -> lear_rollout.RationaleEvidence:
    return lear_rollout.parse_rollout(completion)

  def answer(self, completion: str) -> str:
    return answer(completion)

  def reward(self, **options: Any) -> LearReward:
    return LearReward(**options)

  def evaluate(self, completions, examples, **kwargs) -> dict[str, Any]:
    return evaluate(completions, examples, **kwargs)

  def gold_completion(self, example: Example, *, style: str = "default") -> str:
    """LEAR's extractor output `<reason>…</reason><extract>…</extract>` (Table 10; it stops at
    "</extract>"; the answer comes from the separate passes). LEAR has no SFT warm-up (§3); its
    pilot SFT used DeepSeek-R1 traces (§2.2, Table 1), so the target is ours [DECISION]: the
    extract is the gold evidence (the rational evidence an answer follows from), and the reason says
    which passage states each sentence and what it answers, so it is longer than the extract as the
    length reward asks (Eq. 6). Without the answer in the passages the extract says so.

    style "reader": the downstream reader's target, the gold answer alone — Table 7's prompt ends
    in "Answer:" and the paper's LoRA readers "predict the golden answer a" (§4.1; trained with
    template "reader", configs/lear.py:reader)."""
    self._check_style(style, ("default", "reader"))
    if style == "reader":
      return gold.gold_answer(self.name, example)
    if not gold.has_answer_in_context(example):
      return (f"<reason>The question asks: {example.question} None of the passages states the "
              "answer.</reason><extract>None of the passages answers the question.</extract>")
    answer_ = gold.gold_answer(self.name, example)
    support = gold.gold_support(example)
    steps = " ".join(f"Passage {ids[0]} states that {s}" if ids else s for ids, s in support)
    return (f"<reason>The question asks: {example.question} {steps} So the answer is {answer_}."
            f"</reason><extract>{' '.join(s for _, s in support)}</extract>")

  def check_rollout_options(self, options: Mapping[str, Any]) -> None:
    lear_rollout.LearOptions.from_config(options)  # unknown fields and bad values raise, named

  def aggregate(self, per_example) -> dict[str, float]:
    """EM and F1 means; CR from the summed lengths."""
    out = super().aggregate(per_example)
    cr = compression_ratio(per_example["passage_length"], per_example["evidence_length"])
    out.update(cr_total=cr["cr_total"], cr_mean=cr["cr_mean"])
    return out

  def reader_prompt(self, example, completion, tokenizer=None) -> str:
    """Table 7's reader prompt with the extract as its document (the two-model protocol)."""
    evidence = lear_rollout.parse_rollout(completion).evidence or ""
    return base.render(self.messages(example, template="reader", document=evidence), tokenizer)

  def evaluate_inputs(self, round_) -> dict[str, Any]:
    """Without a separate reader the policy is its own: o_e, its answer from (q, e) alone (Eq. 4)."""
    return {"reader_outputs": list(round_.extras["answers_evidence"])}

  def rollout(self, model, tokenizer, examples, prompt_fn, settings, *, seed, mesh=None,
              options: Mapping[str, Any] | None = None) -> lear_rollout.LearSample:
    """LEAR Eq. 4: the r/e rollout, then answers from three hard-masked contexts (rollout.py);
    `options` are LearOptions fields (config.rollout.options)."""
    return lear_rollout.sample(model, tokenizer, examples, prompt_fn, settings, seed=seed, mesh=mesh,
                               options=lear_rollout.LearOptions.from_config(options or {}))


RECIPES = {"lear": Lear()}
