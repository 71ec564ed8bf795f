"""Ground-GRPO's response format and reward (arXiv:2506.15522 §2.1, Eqs. 1–6).

The policy writes `<think>…</think><answer>…</answer>` (`parse`); the answer's statements cite the
shown documents as `[n]`, or the answer is Trust-Score's refusal sentence. The reward, `stage` 1
(answerable questions) or 2 (a mix that rewards refusing unanswerable ones):

    R = R_tag_count                                         (Eq. 3: 0.25 per tag seen exactly once)
      + [format ok and all 4 tags once] · (1                (Eq. 4)
          + stage 1:                 Σ_statements (R_EM + R_citation)               (Eq. 5)
          + stage 2, answerable:     answered → 0.5 + Σ (R_EM + R_citation); refused → 0
                                     (refusal_reward_answerable, ≤ 0: a price on over-refusal)
          + stage 2, unanswerable:   refused → r_score (in (0.85, 1]); answered → 0)   (Eq. 6)

R_EM = 0.5 per statement containing a gold answer; R_citation = +0.5 / −0.5 for such a statement
whose cited documents do / do not entail it (no, or out-of-range, citation = incorrect; at most 3
citations are read). r_score = Trust-Score's fuzzy partial ratio of the refusal flag vs the answer
span / 100; refused ⇔ r_score > 0.85 (Trust-Eval's refusal test).

Statements are sentences (`nltk.sent_tokenize` semantics, `grounding_jax.text.sentences`) of the
<answer> span, or comma items for QAMPARI ([DECISION]). "Contains EM" ([DECISION]): a normalised gold alias
is a substring of the normalised statement (ASQA, QAMPARI); for ELI5 / ExpertQA (claims as gold)
the statement must entail a gold claim under the NLI judge. The dataset comes from
`example.meta["dataset"]` (default "asqa"). `example.answers` holds the flat alias list (or claims).

NLI: `nli.entails(premises, hypotheses) -> bool[N]`; all pairs of a batch go in ONE call
(deduplicated). Premise = cited documents as "Title: {title}\\n{text}" joined by "\\n" (Trust-Eval);
hypothesis = statement without citations (QAMPARI: question + " " + item).

Optional process reward (§4.7, Eq. 7): process_reward_weight · NLI(<think> ⇒ <answer>
without citations), added to well-formed completions when the weight is > 0 (off by default). The
paper's NLI score may be a probability; our NLI protocol is binary, so this term is 0 or the weight.

The recipe (prompt, evaluation, registry entries) is recipe.py.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from grounding_jax import judges
from grounding_jax import text
from grounding_jax.data.schema import Example
from grounding_jax.recipes import reward_fn
from grounding_jax.recipes.trust import score as trust_score

# ------------------------------------------------------------------------------- parser (Eqs. 3-4)

TAGS = ("<think>", "</think>", "<answer>", "</answer>")
# What Qwen3's chat template puts at the end of the prompt with enable_thinking=False (the paper's
# "Instruct" variant of the hybrid model): the completion then starts after an empty think block, so
# the reward reads the tags on this prefix + completion ([DECISION]).
QWEN3_NO_THINKING_PREFIX = "<think>\n\n</think>\n\n"
_THINK_THEN_ANSWER_RE = re.compile(r"</think>\s*<answer>")


@dataclasses.dataclass(frozen=True)
class TrustOutput:
  tag_count: float  # Eq. 3: fraction of the 4 tags that occur exactly once, in {0, .25, .5, .75, 1}
  format_ok: bool  # Eq. 4: the format matches and the answer is non-empty ([DECISION])
  answer: str  # stripped <answer> content when format_ok, else ""
  think: str = ""  # stripped <think> content when the format matches


def _think_answer_spans(y: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
  """The (think, answer) content spans of `^\\s*<think>(.*?)</think>\\s*<answer>(.*?)</answer>\\s*$`
  (re.S; [DECISION]: the whole response is think then answer, whitespace around), or None.

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
  """Parses a Ground-GRPO response (Eqs. 3-4: r_tag_count, r_format, the answer span)."""
  tag_count = sum(completion.count(t) == 1 for t in TAGS) / len(TAGS)
  spans = _think_answer_spans(completion)
  if spans is None:
    return TrustOutput(tag_count, False, "", "")
  (t0, t1), (a0, a1) = spans
  answer = completion[a0:a1].strip()
  return TrustOutput(tag_count, bool(answer), answer, completion[t0:t1].strip())


# ------------------------------------------------------------------------------- reward (Eqs. 1–6)

EM_REWARD, CITE_GOOD, CITE_BAD, ANSWER_BONUS = 0.5, 0.5, -0.5, 0.5  # Eqs. 1, 2, 6
CLAIM_DATASETS = ("eli5", "expertqa")
_DATASETS = ("asqa", "qampari") + CLAIM_DATASETS


class TrustReward(reward_fn.RewardFn):
  """Ground-GRPO reward, `stage` 1 or 2.

  Range: [0, +inf): stage 1 ≥ 0, 2 + 1.0 per correct well-cited statement (unbounded: the paper sums
  over statements); stage 2 adds 0.5 for answering an answerable question, or up to 1.0
  for refusing an unanswerable one, and refusal_reward_answerable (≤ 0) for refusing an answerable
  one. Malformed text is in [0, 1] (tag count only).

  Components: tag_count, format (0/1), em (Σ R_EM), citation (Σ R_citation), refusal (R_refusal),
  refused (1 if r_score > 0.85), n_statements, process (the optional process reward).

  Options: nli (required: an NLIJudge, a judge spec or an NLI model folder, loaded lazily),
  bad_citation_penalty (False = the §3.4 ablation: −0.5 → 0),
  forced_prefix (text the chat template put before the completion, e.g. "<think>\\n"; tags and format
  are read on prefix + completion), max_citations (3), refusal_threshold (0.85),
  count_each_gold_once (a statement earns EM only for gold answers no earlier statement hit),
  calibrated_gold (only gold answers some shown document supports, from meta["answers_found"]),
  refusal_reward_answerable (stage 2: what refusing an answerable question earns; 0 in the paper, a
  negative value prices over-refusal as configs/demo.py's TruthRL reward does, docs/training.md
  "Evidence-contrast groups").
  """

  def __init__(self, stage: int, nli: Any = None, bad_citation_penalty: bool = True,
               forced_prefix: str = "", max_citations: int = 3, refusal_threshold: float = 0.85,
               count_each_gold_once: bool = False, calibrated_gold: bool = False,
               process_reward_weight: float = 0.0, refusal_reward_answerable: float = 0.0):
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
    if not -1.0 <= float(refusal_reward_answerable) <= 0.0:
      raise ValueError(f"trust: refusal_reward_answerable={refusal_reward_answerable} must be in "
                       "[-1, 0] (0: the paper's; below 0 prices refusing an answerable question).")
    self.refusal_reward_answerable = float(refusal_reward_answerable)
    self.name = f"trust_stage{stage}"

  @property
  def reward_range(self) -> tuple[float, float]:
    return 0.0, float("inf")  # a priced refusal (≥ −1) still has its tag and format terms (2)

  def _check_example(self, i: int, ex: Example) -> str:
    dataset = (ex.meta or {}).get("dataset", trust_score.DEFAULT_DATASET)
    if dataset not in _DATASETS:
      raise reward_fn.example_error(self.name, i, ex, "meta['dataset']", f"is {dataset!r}",
                                    f"Use one of {_DATASETS}.")
    if not ex.passages:
      raise reward_fn.example_error(self.name, i, ex, "passages", "is empty",
                                    "Citations [n] refer to the example's passages.")
    if self.stage == 2 and ex.answerable is None:
      raise reward_fn.example_error(self.name, i, ex, "answerable", "is None",
                                    "Stage 2 gates the refusal reward on answerability.")
    if self.stage == 1 or ex.answerable:
      reward_fn.require_answers(self.name, i, ex)
    return dataset

  def _gold_groups(self, i: int, ex: Example) -> list[list[str]]:
    """Gold answers as alias groups: meta["answer_groups"] (ALCE reader) or one group per answer.

    With calibrated_gold, only groups some shown document supports (the union of the
    docs' meta["answers_found"] bits), as in Trust-Score's calibrated answer correctness.
    """
    meta = ex.meta or {}
    groups = meta.get("answer_groups")
    if groups is None:
      groups = [[a] for a in ex.answers]
    elif not (isinstance(groups, (list, tuple)) and all(
        isinstance(g, (list, tuple)) and all(isinstance(a, str) for a in g) for g in groups)):
      raise reward_fn.example_error(self.name, i, ex, "meta['answer_groups']",
                                    "is not a list of alias lists of strings")
    if not self.calibrated_gold:
      return [list(g) for g in groups]
    found = meta.get("answers_found")
    if not isinstance(found, (list, tuple)):
      raise reward_fn.example_error(self.name, i, ex, "meta['answers_found']", "is missing",
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
          comp["refusal"][i] = self.refusal_reward_answerable
          continue
        comp["refusal"][i] = ANSWER_BONUS
      # Correctness: stage 1 always (no refusal gate, [DECISION]), stage 2 when answering.
      groups = self._gold_groups(i, ex)
      norm_groups = [[a for a in map(text.normalize_answer, g) if a] for g in groups]
      if dataset == "qampari":
        statements = trust_score.split_qampari_items(out.answer)
      else:
        statements = text.split_sentences(out.answer)
      comp["n_statements"][i] = len(statements)
      for stmt in statements:
        claim = trust_score.remove_citations(stmt).strip()
        if dataset in CLAIM_DATASETS:
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
      verdicts = reward_fn.check_judge_output(self.name, "nli.entails",
                                              self.nli.entails(list(premises), list(hypotheses)),
                                              len(pairs))
    bad = CITE_BAD if self.bad_citation_penalty else 0.0
    credited: dict[int, set[int]] = {}
    for i, hits, em_pairs, cite in pending:
      if hits is None:
        hits = {g for g, p in em_pairs if verdicts[p]}
      if self.count_each_gold_once:  # [DECISION] option: repeating a gold answer earns nothing
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
