"""Ground-GRPO ("Lessons from Training Grounded LLMs", seed 001, note 001): cited answers or refusals.

The policy writes `<think>…</think><answer>…</answer>` where the answer's statements cite the shown
documents as `[n]`, or the answer is Trust-Score's refusal sentence. Two training stages: stage 1 on
answerable questions, stage 2 on a mix that rewards refusing unanswerable ones
(recipes `trust_stage1`, `trust_stage2`). The reward (Eqs. 1–6, Alg. 1; note §3):

    R = R_tag_count                                         (Eq. 3: 0.25 per tag seen exactly once)
      + [format ok and all 4 tags once] · (1                (Eq. 4)
          + stage 1:                 Σ_statements (R_EM + R_citation)               (Eq. 5)
          + stage 2, answerable:     answered → 0.5 + Σ (R_EM + R_citation); refused → 0
          + stage 2, unanswerable:   refused → r_score (in (0.85, 1]); answered → 0)   (Eq. 6)

R_EM = 0.5 per statement containing a gold answer; R_citation = +0.5 / −0.5 for such a statement
whose cited documents do / do not entail it (no, or out-of-range, citation = incorrect; at most 3
citations are read). r_score = Trust-Score's fuzzy partial ratio of the refusal flag vs the answer
span / 100; refused ⇔ r_score > 0.85 (note §9 A9–A11).

Statements are sentences (`nltk.sent_tokenize` semantics, `grounding_jax.text.sentences`) of the
<answer> span, or comma items for QAMPARI (note §9 A1). "Contains EM" (A2): a normalised gold alias
is a substring of the normalised statement (ASQA, QAMPARI); for ELI5 / ExpertQA (claims as gold)
the statement must entail a gold claim under the NLI judge. The dataset comes from
`example.meta["dataset"]` (default "asqa"). `example.answers` holds the flat alias list (or claims).

NLI: `nli.entails(premises, hypotheses) -> bool[N]`; all pairs of a batch go in ONE call
(deduplicated). Premise = cited documents as "Title: {title}\\n{text}" joined by "\\n" (Trust-Eval);
hypothesis = statement without citations (QAMPARI: question + " " + item).

Optional process reward (§4.7, Eq. 7; note §9 A14): process_reward_weight · NLI(<think> ⇒ <answer>
without citations), added to well-formed completions when the weight is > 0 (off by default). The
paper's NLI score may be a probability; our NLI protocol is binary, so this term is 0 or the weight.

Evaluation: Trust-Score per dataset (AR, F1_AC, F1_GR, F1_GC, TRUST; `trust_score.py`) on the
`<answer>` span.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, Sequence

import numpy as np

from grounding_jax import judges
from grounding_jax import text
from grounding_jax.data.schema import Example
from grounding_jax.recipes import base
from grounding_jax.recipes import gold
from grounding_jax.recipes import trust_prompts
from grounding_jax.recipes import trust_score
from grounding_jax.text import tags

# ------------------------------------------------------------------------------- parser (note §3.2)

TAGS = ("<think>", "</think>", "<answer>", "</answer>")
# What Qwen3's chat template puts at the end of the prompt with enable_thinking=False (the paper's
# "Instruct" variant of the hybrid model): the completion then starts after an empty think block, so
# the reward reads the tags on this prefix + completion (note §2.3, §9 A4, A23).
QWEN3_NO_THINKING_PREFIX = "<think>\n\n</think>\n\n"
_THINK_THEN_ANSWER_RE = re.compile(r"</think>\s*<answer>")


@dataclasses.dataclass(frozen=True)
class TrustOutput:
  tag_count: float  # Eq. 3: fraction of the 4 tags that occur exactly once, in {0, .25, .5, .75, 1}
  format_ok: bool  # Eq. 4: the format matches and the answer is non-empty (note §9 A5)
  answer: str  # stripped <answer> content when format_ok, else ""
  think: str = ""  # stripped <think> content when the format matches


def _think_answer_spans(y: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
  """The (think, answer) content spans of `^\\s*<think>(.*?)</think>\\s*<answer>(.*?)</answer>\\s*$`
  (re.S; note §3.2 / §9 A5: the whole response is think then answer, whitespace around), or None.

  Linear, with the lazy groups' choices found without backtracking: the answer ends at the LAST
  "</answer>" (only whitespace may follow it), and the think block at the first "</think>" that
  whitespace and "<answer>" follow, if that "<answer>" opens before the final "</answer>".
  """
  start = len(y) - len(y.lstrip())
  if not y.startswith("<think>", start):
    return None
  end = y.rfind("</answer>")
  if end < 0 or y[end + len("</answer>"):].strip():
    return None
  m = _THINK_THEN_ANSWER_RE.search(y, start + len("<think>"))
  if m is None or m.end() > end:
    return None
  return (start + len("<think>"), m.start()), (m.end(), end)


def parse(completion: str) -> TrustOutput:
  """Parses a Ground-GRPO response (note §3.2 r_tag_count, r_format, extract_answer)."""
  tag_count = sum(completion.count(t) == 1 for t in TAGS) / len(TAGS)
  spans = _think_answer_spans(completion)
  if spans is None:
    return TrustOutput(tag_count, False, "", "")
  (t0, t1), (a0, a1) = spans
  answer = completion[a0:a1].strip()
  return TrustOutput(tag_count, bool(answer), answer, completion[t0:t1].strip())


def answer(completion: str) -> str:
  """The answer Trust-Score scores: the <answer> span, else the first <answer> block, else the text
  after </think> (note §9 A15)."""
  return answer_with_fallback(completion)[0]


def answer_with_fallback(completion: str) -> tuple[str, bool]:
  """(answer, used_fallback): see `answer`."""
  parsed = parse(completion)
  if parsed.format_ok:
    return parsed.answer, False
  block = tags.first_block(completion, "answer")
  if block is not None:
    return block.strip(), True
  return tags.after_think(completion), True


# ------------------------------------------------------------------------------- reward (Eqs. 1–6)

EM_REWARD, CITE_GOOD, CITE_BAD, ANSWER_BONUS = 0.5, 0.5, -0.5, 0.5  # Eqs. 1, 2, 6
_CLAIM_DATASETS = ("eli5", "expertqa")
_DATASETS = ("asqa", "qampari") + _CLAIM_DATASETS


class TrustReward(base.RewardFn):
  """Ground-GRPO reward, `stage` 1 or 2.

  Range: [0, +inf): stage 1 ≥ 0, 2 + 1.0 per correct well-cited statement (unbounded: the paper sums
  over statements, note §3.3); stage 2 adds 0.5 for answering an answerable question, or up to 1.0
  for refusing an unanswerable one. Malformed text is in [0, 1] (tag count only).

  Components: tag_count, format (0/1), em (Σ R_EM), citation (Σ R_citation), refusal (R_refusal),
  refused (1 if r_score > 0.85), n_statements, process (the optional process reward).

  Options: nli (required: an NLIJudge, a judge spec or an NLI model folder, loaded lazily),
  bad_citation_penalty (False = the §3.4 ablation: −0.5 → 0),
  forced_prefix (text the chat template put before the completion, e.g. "<think>\\n"; tags and format
  are read on prefix + completion, note §9 A4), max_citations (3), refusal_threshold (0.85),
  count_each_gold_once (A3: a statement earns EM only for gold answers no earlier statement hit),
  calibrated_gold (A8: only gold answers some shown document supports, from meta["answers_found"]).
  """

  def __init__(self, stage: int, nli: Any = None, bad_citation_penalty: bool = True,
               forced_prefix: str = "", max_citations: int = 3, refusal_threshold: float = 0.85,
               count_each_gold_once: bool = False, calibrated_gold: bool = False,
               process_reward_weight: float = 0.0):
    if stage not in (1, 2):
      raise ValueError(f"trust: stage={stage!r}; use 1 or 2.")
    if nli is None or nli == "":
      raise ValueError("trust rewards need nli= for the citation reward: an object with "
                       "entails(premises, hypotheses) -> bool[N], a judge spec "
                       "(dict(kind='nli', path=FOLDER), see grounding_jax.judges.from_config) or an NLI "
                       "model folder, e.g. --config.reward.functions[0].options.nli=/models/nli")
    nli = judges.lazy(nli, role="nli")  # a folder or spec from a config: loaded on first use
    if max_citations < 1:
      raise ValueError(f"trust: max_citations={max_citations} must be >= 1.")
    self.stage, self.nli = stage, nli
    self.bad_citation_penalty, self.forced_prefix = bad_citation_penalty, forced_prefix
    self.max_citations, self.refusal_threshold = max_citations, float(refusal_threshold)
    self.count_each_gold_once, self.calibrated_gold = count_each_gold_once, calibrated_gold
    if process_reward_weight < 0:
      raise ValueError(f"trust: process_reward_weight={process_reward_weight} must be >= 0.")
    self.process_reward_weight = float(process_reward_weight)
    self.name = f"trust_stage{stage}"

  @property
  def reward_range(self) -> tuple[float, float]:
    return 0.0, float("inf")

  def _check_example(self, i: int, ex: Example) -> str:
    dataset = (ex.meta or {}).get("dataset", trust_score.DEFAULT_DATASET)
    if dataset not in _DATASETS:
      raise base.example_error(self.name, i, ex, "meta['dataset']", f"is {dataset!r}",
                               f"Use one of {_DATASETS}.")
    if not ex.passages:
      raise base.example_error(self.name, i, ex, "passages", "is empty",
                               "Citations [n] refer to the example's passages.")
    if self.stage == 2 and ex.answerable is None:
      raise base.example_error(self.name, i, ex, "answerable", "is None",
                               "Stage 2 gates the refusal reward on answerability.")
    if self.stage == 1 or ex.answerable:
      base.require_answers(self.name, i, ex)
    return dataset

  def _gold_groups(self, i: int, ex: Example) -> list[list[str]]:
    """Gold answers as alias groups: meta["answer_groups"] (ALCE reader) or one group per answer.

    With calibrated_gold (note §9 A8), only groups some shown document supports (the union of the
    docs' meta["answers_found"] bits), as in Trust-Score's calibrated answer correctness.
    """
    meta = ex.meta or {}
    groups = meta.get("answer_groups")
    if groups is None:
      groups = [[a] for a in ex.answers]
    elif not (isinstance(groups, (list, tuple)) and all(
        isinstance(g, (list, tuple)) and all(isinstance(a, str) for a in g) for g in groups)):
      raise base.example_error(self.name, i, ex, "meta['answer_groups']",
                               "is not a list of alias lists of strings")
    if not self.calibrated_gold:
      return [list(g) for g in groups]
    found = meta.get("answers_found")
    if not isinstance(found, (list, tuple)):
      raise base.example_error(self.name, i, ex, "meta['answers_found']", "is missing",
                               "calibrated_gold needs the per-document answers_found flags.")
    supported = [any(isinstance(f, (list, tuple)) and g < len(f) and f[g] for f in found)
                 for g in range(len(groups))]
    return [list(g) for g, ok in zip(groups, supported) if ok]

  def score(self, completions: list[str], examples: list[Example],
            **extra: Any) -> dict[str, np.ndarray]:
    n = len(completions)
    comp = {k: np.zeros(n) for k in ("tag_count", "format", "em", "citation", "refusal", "refused",
                                     "n_statements", "process")}
    process_pairs: list[tuple[int, int]] = []  # (completion index, NLI pair id)
    pairs: dict[tuple[str, str], int] = {}  # (premise, hypothesis) -> index into the NLI batch
    # Per statement: (completion index, gold groups hit or None (decided by NLI), [(group, pair id)]
    # for NLI-decided hits, citation pair id or None).
    pending: list[tuple[int, set[int] | None, list[tuple[int, int]], int | None]] = []

    def ask(premise: str, hypothesis: str) -> int:
      return pairs.setdefault((premise, hypothesis), len(pairs))

    for i, (completion, ex) in enumerate(zip(completions, examples)):
      dataset = self._check_example(i, ex)
      out = parse(self.forced_prefix + completion)
      comp["tag_count"][i] = out.tag_count
      if not (out.format_ok and out.tag_count == 1.0):
        continue
      comp["format"][i] = 1.0
      if self.process_reward_weight > 0:
        process_pairs.append((i, ask(out.think, trust_score.remove_citations(out.answer).strip())))
      refused = text.is_refusal(out.answer, threshold=100.0 * self.refusal_threshold)
      comp["refused"][i] = refused
      if self.stage == 2:
        if not ex.answerable:
          comp["refusal"][i] = text.refusal_score(out.answer) if refused else 0.0
          continue
        if refused:
          continue
        comp["refusal"][i] = ANSWER_BONUS
      # Correctness: stage 1 always (note §9 A13: no refusal gate), stage 2 when answering.
      groups = self._gold_groups(i, ex)
      norm_groups = [[a for a in map(text.normalize_answer, g) if a] for g in groups]
      if dataset == "qampari":
        statements = trust_score.split_qampari_items(out.answer)
      else:
        statements = text.split_sentences(out.answer)
      comp["n_statements"][i] = len(statements)
      for stmt in statements:
        claim = trust_score.remove_citations(stmt).strip()
        if dataset in _CLAIM_DATASETS:
          hits, em_pairs = None, [(g, ask(claim, alias)) for g, grp in enumerate(groups)
                                  for alias in grp]
        else:
          norm = text.normalize_answer(trust_score.remove_citations(stmt))
          hits = {g for g, grp in enumerate(norm_groups) if any(a in norm for a in grp)}
          em_pairs = []
          if not hits:
            continue  # no EM: no reward and no citation check (Eq. 2 "0 otherwise")
        ids = trust_score.citation_ids(stmt)
        cite = None
        if ids and all(0 <= d < len(ex.passages) for d in ids):
          docs = [ex.passages[d] for d in ids[:self.max_citations]]
          premise = "\n".join(f"Title: {p.title}\n{p.text}" for p in docs)
          hypothesis = f"{ex.question} {claim}" if dataset == "qampari" else claim
          cite = ask(premise, hypothesis)
        pending.append((i, hits, em_pairs, cite))

    verdicts = np.zeros(0, dtype=bool)
    if pairs:
      premises, hypotheses = zip(*pairs)
      verdicts = base.check_judge_output(self.name, "nli.entails",
                                         self.nli.entails(list(premises), list(hypotheses)),
                                         len(pairs))
    bad = CITE_BAD if self.bad_citation_penalty else 0.0
    credited: dict[int, set[int]] = {}
    for i, hits, em_pairs, cite in pending:
      if hits is None:
        hits = {g for g, p in em_pairs if verdicts[p]}
      if self.count_each_gold_once:  # note §9 A3 option: repeating a gold answer earns nothing
        seen = credited.setdefault(i, set())
        hits = hits - seen
        seen |= hits
      if not hits:
        continue
      comp["em"][i] += EM_REWARD
      comp["citation"][i] += CITE_GOOD if (cite is not None and verdicts[cite]) else bad
    for i, pair in process_pairs:
      comp["process"][i] = self.process_reward_weight * verdicts[pair]
    reward = (comp["tag_count"] + comp["format"] + comp["em"] + comp["citation"] + comp["refusal"]
              + comp["process"])
    return {"reward": reward, **comp}


# ------------------------------------------------------------------------------- evaluation (§6.2)

def evaluate(completions: Sequence[str], examples: Sequence[Example], *, nli,
             dataset: str | None = None, **kwargs) -> dict[str, Any]:
  """Trust-Score per dataset (meta["dataset"], or all examples as `dataset`) plus the answer-extraction
  fallback rate in %. `nli` is an NLIJudge or a judge spec (judges.build).

  "per_example" holds the parts of `trust_score.PARTS` for every row (Trust-Score is computed from
  them), "dataset_index" (the row's dataset, in the order of "per_dataset"), "correct" (AC^q) and
  "abstained" (the answer is the refusal, `text.is_refusal`).
  """
  base.check_aligned(completions, examples)
  nli = judges.build(nli, role="nli")
  extracted = [answer_with_fallback(c) for c in completions]
  fallback = 100.0 * np.mean([f for _, f in extracted]) if extracted else 0.0
  if fallback:
    logging.info("trust eval: %.1f%% of completions lacked a well-formed <answer>", fallback)
  answers = [a for a, _ in extracted]
  groups: dict[str, list[int]] = {}
  for i, e in enumerate(examples):
    groups.setdefault(dataset or e.meta.get("dataset", trust_score.DEFAULT_DATASET), []).append(i)
  per_dataset, per = {}, {k: np.zeros(len(examples)) for k in trust_score.PARTS + ("dataset_index",)}
  for d, (name, idx) in enumerate(groups.items()):
    scores = trust_score.trust_score([answers[i] for i in idx], [examples[i] for i in idx], nli=nli,
                                     dataset=name, **kwargs)
    for k, v in scores.pop("per_example").items():
      per[k][idx] = v
    per["dataset_index"][idx] = d
    per_dataset[name] = scores
  per.update(correct=per["ac"].copy(), abstained=per["refused"].copy())
  return {"per_dataset": per_dataset, "answer_fallback_rate": fallback, "per_example": per,
          "answers": answers}


def _one_row(per_dataset: dict[str, dict[str, float]]) -> dict[str, float]:
  """Trust-Score as one row: a dataset's own numbers, or with several datasets their macro mean and
  each dataset's as "<dataset>/<key>"."""
  if len(per_dataset) == 1:
    return dict(next(iter(per_dataset.values())))
  keys = next(iter(per_dataset.values())).keys()
  row = {k: float(np.mean([scores[k] for scores in per_dataset.values()])) for k in keys}
  row.update({f"{name}/{k}": v for name, scores in per_dataset.items() for k, v in scores.items()})
  return row


class Trust(base.Recipe):
  """Ground-GRPO, one recipe per training stage (the reward's `stage`)."""

  paper = "Lessons from Training Grounded LLMs / Ground-GRPO (seed 001, note 001)"
  templates = {"default": trust_prompts.messages}
  # Trust-Eval defaults (note §6.3: T 0.5, top-p 0.95; max_new_tokens raised for reasoning, [INF]).
  eval_decoding = base.Decoding(temperature=0.5, top_p=0.95, max_new_tokens=1024)
  # Keys of each dataset's entry in evaluate()["per_dataset"] (Trust-Score is reported per dataset).
  headline_metric = "TRUST"
  metric_columns = ("AR", "F1_AC", "F1_GR", "F1_GC", "TRUST")

  def __init__(self, stage: int):
    self.stage = stage
    self.name = f"trust_stage{stage}"

  def parse(self, completion: str) -> TrustOutput:
    return parse(completion)

  def answer(self, completion: str) -> str:
    return answer(completion)

  def reward(self, **options: Any) -> TrustReward:
    return TrustReward(stage=options.pop("stage", self.stage), **options)

  def evaluate(self, completions, examples, **kwargs) -> dict[str, Any]:
    return evaluate(completions, examples, **kwargs)

  def gold_completion(self, example: Example, *, style: str = "default") -> str:
    """Ground-GRPO's format (note §2.1): `<think>…</think><answer>…</answer>` whose answer is
    statements citing their documents as `[n][m]` before the period, or Trust-Score's refusal
    sentence when the documents lack the answer. The paper's SFT data are Trust-Align's GPT-4
    answers (note §5, [EXT-TA]), which have no <think> and cannot be rebuilt offline, so [DECISION]:
    the statements are the gold evidence sentences citing the passages that hold them
    (gold.gold_support); without evidence, each gold answer cites the documents whose
    meta["answers_found"] flag it (else the gold passages); QAMPARI answers are one cited item per
    gold answer, comma-separated; ELI5 / ExpertQA state the gold claims. The think names the cited
    documents."""
    self._check_style(style)
    if not gold.has_answer_in_context(example):
      return ("<think>None of the documents contains the answer.</think>"
              f"<answer>{text.REFUSAL_SENTENCE}</answer>")
    gold.gold_answer(self.name, example)  # raises when there are no answers
    dataset = (example.meta or {}).get("dataset", "asqa")
    gold_ids = tuple(example.gold_passage_ids[:3])
    found = (example.meta or {}).get("answers_found")
    statements: list[tuple[tuple[int, ...], str]] = []
    if dataset in _CLAIM_DATASETS:
      statements = [(gold_ids, a.strip()) for a in example.answers if a.strip()]
    elif dataset == "qampari" or not any(e for e in example.evidence):
      groups = (example.meta or {}).get("answer_groups") or [[a] for a in example.answers]
      for g, group in enumerate(groups):  # answers_found flags are per gold group (note §9 A8)
        docs = tuple(d + 1 for d, flags in enumerate(found or [])
                     if isinstance(flags, (list, tuple)) and g < len(flags) and flags[g])
        statements.append(((docs or gold_ids)[:1 if dataset == "qampari" else 3], group[0].strip()))
    else:
      statements = gold.gold_support(example)

    def cite(ids: tuple[int, ...]) -> str:
      return "".join(f"[{i}]" for i in ids)

    if dataset == "qampari":
      answer_ = ", ".join(f"{s} {cite(ids)}".strip() for ids, s in statements) + "."
    else:
      answer_ = " ".join(f"{s.rstrip().rstrip('.')} {cite(ids)}".rstrip() + "." for ids, s in statements)
    cited = sorted({i for ids, _ in statements for i in ids})
    think = (f"Documents {cite(tuple(cited))} state the answer." if cited
             else "The answer follows from the documents.")
    return f"<think>{think}</think><answer>{answer_}</answer>"

  def table(self, result) -> dict[str, float]:
    """The per-dataset numbers as one row (`_one_row`) and the fallback rate."""
    return {**_one_row(result["per_dataset"]), "answer_fallback_rate": result["answer_fallback_rate"]}

  def aggregate(self, per_example) -> dict[str, float]:
    """Trust-Score of each dataset's rows (`trust_score.scores_from_parts`), as one row."""
    index = np.asarray(per_example["dataset_index"])
    per_dataset = {f"{int(d)}": trust_score.scores_from_parts(
        {k: np.asarray(per_example[k])[index == d] for k in trust_score.PARTS})
        for d in np.unique(index)}
    row = _one_row(per_dataset)
    return {k: row[k] for k in self.metric_columns}


RECIPES = {"trust_stage1": Trust(1), "trust_stage2": Trust(2)}
