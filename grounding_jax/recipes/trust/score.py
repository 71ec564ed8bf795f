"""Trust-Score (Song et al.; used by Ground-GRPO): F1_GR, F1_AC, F1_GC and their mean.

Exact semantics of the Trust-Eval code (`trust_eval` 0.1.6, ALCE-derived), as recorded in
arXiv:2506.15522 App. A and Trust-Eval's code:
  * refusal: fuzzy partial_ratio of the refusal flag vs the output > 85 (`text.is_refusal`);
  * answerability: OR of the shown docs' `answers_found` bits;
  * F1_GR = mean(F1_ref, F1_ans) with empty denominators giving 0;
  * F1_AC = harmonic mean of AC^q averaged over answered (P_AC) and over answerable (R_AC) questions,
    AC^q counting only the doc-supported gold answers: ASQA substring STR-EM, QAMPARI F1 of item
    precision and recall@5, ELI5 / ExpertQA claim NLI;
  * F1_GC = F1 of citation recall and precision averaged over answered responses, ≤ 3 citations per
    sentence, with ALCE's precision rule and Trust-Eval's `answers_found` "contained" exception.
All outputs are percentages. Pass the ANSWER text (the `<answer>` span), not reasoning ([DECISION]).

One deliberate difference: a citation "[0]" counts as out of range (Trust-Eval's code indexes
docs[-1] for it, an off-by-one accident).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Mapping, Sequence

import numpy as np

from grounding_jax import text as text_lib
from grounding_jax.data.schema import Example
from grounding_jax.text.sentences import split_sentences

DATASETS = ("asqa", "qampari", "eli5", "expertqa")
DEFAULT_DATASET = "asqa"  # an example without meta["dataset"] (short answers, e.g. the synthetic world)
AT_MOST_CITATIONS = 3  # Trust-Eval `at_most_citations`


_CITATION_RE = re.compile(r"\[\d+")


def citation_ids(statement: str) -> list[int]:
  """0-based document ids cited in `statement` (Trust-Eval: regex "\\[\\d+", so "[1,2]" gives [0])."""
  return [int(m[1:]) - 1 for m in _CITATION_RE.findall(statement)]


def remove_citations(statement: str) -> str:
  """Trust-Eval's `remove_citations`, verbatim logic."""
  return re.sub(r"\[\d+", "", re.sub(r" \[\d+", "", statement)).replace(" |", "").replace("]", "")


def split_qampari_items(answer: str) -> list[str]:
  """QAMPARI statements: comma-separated items after stripping a trailing "." / "," (Trust-Eval)."""
  items = answer.rstrip().rstrip(".").rstrip(",").split(",")
  return [x.strip() for x in items if x.strip()]


def format_document(passage) -> str:
  """Trust-Eval's premise format for one doc: "Title: {title}\\n{text}"."""
  return f"Title: {passage.title}\n{passage.text}"


@dataclasses.dataclass(frozen=True)
class TrustItem:
  """One evaluation question: shown docs, gold answer alias groups and per-doc `answers_found` bits."""
  question: str
  docs: tuple  # Passage-like objects with .title and .text
  answer_groups: tuple[tuple[str, ...], ...]
  answers_found: np.ndarray  # int [n_docs, n_answers]

  @property
  def supported(self) -> np.ndarray:
    """bool [n_answers]: gold answers some shown doc supports (the calibrated gold set A_G ∩ A_D)."""
    if self.answers_found.size == 0:
      return np.zeros(len(self.answer_groups), bool)
    return self.answers_found.astype(bool).any(axis=0)

  @property
  def answerable(self) -> bool:
    return bool(self.supported.any())

  @classmethod
  def from_example(cls, example: Example, *, ndoc: int = 5) -> "TrustItem":
    """Builds an item from an ALCE-reader Example (meta["answer_groups"], meta["answers_found"])."""
    where = f"example {example.id!r}"
    found = example.meta.get("answers_found")
    if found is None:
      raise ValueError(f"{where}: meta['answers_found'] is missing; Trust-Score needs per-doc answer "
                       "support bits (read the Trust-Score calibrated files with data.readers.alce).")
    groups = example.meta.get("answer_groups")
    if groups is None:
      # One flag per doc (the synthetic generator): all answers are aliases of one gold answer.
      one_flag = all(len(f) == 1 for f in found if f)
      groups = [list(example.answers)] if one_flag else [[a] for a in example.answers]
    docs = tuple(example.passages[:ndoc])
    n = len(groups)
    rows = []
    for i in range(len(docs)):
      bits = list(found[i]) if i < len(found) and found[i] else [0] * n
      if len(bits) != n:
        raise ValueError(f"{where}: answers_found[{i}] has {len(bits)} flags but there are {n} gold "
                         "answer groups; they must align.")
      rows.append(bits)
    af = np.asarray(rows, dtype=np.int64).reshape(len(docs), n)
    return cls(example.question, docs, tuple(tuple(g) for g in groups), af)


def _f1(p: float, r: float) -> float:
  return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _mean100(values: Sequence[float]) -> float:
  return 100.0 * float(np.mean(values)) if len(values) else 0.0


def grounded_refusal(answerable: np.ndarray, refused: np.ndarray) -> dict[str, float]:
  """F1_GR and its parts (Trust-Eval `compute_macro_metrics`). Inputs bool [N]; outputs in %."""
  a, r = np.asarray(answerable, bool), np.asarray(refused, bool)
  if a.shape != r.shape:
    raise ValueError(f"answerable {a.shape} and refused {r.shape} must have the same shape.")

  def ratio(num, den):
    return 100.0 * num / den if den > 0 else 0.0

  ref_p, ref_r = ratio(np.sum(~a & r), np.sum(r)), ratio(np.sum(~a & r), np.sum(~a))
  ans_p, ans_r = ratio(np.sum(a & ~r), np.sum(~r)), ratio(np.sum(a & ~r), np.sum(a))
  ref_f1, ans_f1 = _f1(ref_p, ref_r), _f1(ans_p, ans_r)
  return {"AR": ratio(np.sum(~r), r.size), "F1_GR": (ref_f1 + ans_f1) / 2,
          "refuse_prec": ref_p, "refuse_rec": ref_r, "refuse_f1": ref_f1,
          "answer_prec": ans_p, "answer_rec": ans_r, "answer_f1": ans_f1}


def _str_em(output: str, groups, supported) -> float:
  """ASQA: mean over supported gold answers of "some normalised alias is a substring of the output"."""
  n_out = text_lib.normalize_answer(output)
  hits = [any(text_lib.normalize_answer(a) in n_out for a in g) for g, s in zip(groups, supported) if s]
  return float(np.mean(hits)) if hits else 0.0


def _qampari_f1_top5(output: str, groups, supported) -> float:
  """QAMPARI: F1 of item precision and recall@5 against the supported answers (Trust-Eval em5)."""
  preds = [p for p in map(text_lib.normalize_answer, split_qampari_items(output)) if p]
  answers = [[text_lib.normalize_answer(a) for a in g] for g, s in zip(groups, supported) if s]
  flat = [a for g in answers for a in g]
  prec = sum(p in flat for p in preds) / len(preds) if preds else 0.0
  hits = sum(any(a in preds for a in g) for g in answers)
  rec5 = min(5, hits) / min(5, len(answers)) if answers else 0.0
  return _f1(prec, rec5)


def answer_correctness(outputs: Sequence[str], items: Sequence[TrustItem], dataset: str,
                       nli=None) -> dict[str, float]:
  """P_AC, R_AC (means of AC^q over answered / answerable questions) and F1_AC, in %.

  Outputs have citations removed first; an answered unanswerable question and a refused answerable
  one score 0. ELI5 / ExpertQA need `nli` (an NLIJudge): claim i counts iff NLI(output ⇒ claim).
  """
  ac, refused = answer_correctness_per_item(outputs, items, dataset, nli=nli)
  return answer_correctness_scores(ac, refused, np.array([it.answerable for it in items]))


def answer_correctness_scores(ac: np.ndarray, refused: np.ndarray, answerable: np.ndarray
                              ) -> dict[str, float]:
  """P_AC, R_AC and F1_AC in % from per-question AC^q [N] and the refusal / answerability flags."""
  refused, answerable = np.asarray(refused, bool), np.asarray(answerable, bool)
  p_ac, r_ac = _mean100(ac[~refused]), _mean100(ac[answerable])
  return {"P_AC": p_ac, "R_AC": r_ac, "F1_AC": _f1(p_ac, r_ac) if min(p_ac, r_ac) > 0 else 0.0}


def answer_correctness_per_item(outputs: Sequence[str], items: Sequence[TrustItem], dataset: str,
                                nli=None) -> tuple[np.ndarray, np.ndarray]:
  """(AC^q float [N] in [0, 1], refused bool [N]) as `answer_correctness` computes them; refusal is
  tested on the output with its citations removed."""
  if dataset not in DATASETS:
    raise ValueError(f"dataset={dataset!r}; choose one of {DATASETS}.")
  clean = [remove_citations(o) for o in outputs]
  refused = np.array([text_lib.is_refusal(c) for c in clean])
  answerable = np.array([it.answerable for it in items])
  scored = answerable & ~refused  # the only rows whose AC^q can be non-zero
  ac = np.zeros(len(items))
  if dataset in ("eli5", "expertqa"):
    if nli is None:
      raise ValueError(f"answer correctness on {dataset} needs an NLI judge (nli=...).")
    pairs = [(i, clean[i], items[i].answer_groups[j][0]) for i in np.flatnonzero(scored)
             for j in np.flatnonzero(items[i].supported)]
    entailed = nli.entails([p[1] for p in pairs], [p[2] for p in pairs]) if pairs else []
    for (i, _, _), e in zip(pairs, entailed):
      ac[i] += float(e) / items[i].supported.sum()
  else:
    fn = _str_em if dataset == "asqa" else _qampari_f1_top5
    for i in np.flatnonzero(scored):
      ac[i] = fn(clean[i], items[i].answer_groups, items[i].supported)
  return ac, refused


@dataclasses.dataclass
class _Sentence:
  item: int
  target: str
  refs: list[int]
  joint: int = 0
  credit: float = 0.0


def citation_quality(outputs: Sequence[str], items: Sequence[TrustItem], nli, *, qampari: bool = False,
                     at_most_citations: int | None = AT_MOST_CITATIONS,
                     splitter: Callable[[str], list[str]] = split_sentences) -> dict:
  """Citation recall / precision per answered response and F1_GC (Trust-Eval `compute_citation_metrics`).

  Statements are `splitter(output)` sentences, or for QAMPARI `question + " " + item` per comma item.
  Returns R_cite, P_cite, F1_GC (%) and per-response arrays `recall`, `precision` (NaN where the
  response was refused or had no statement and so is not counted). NLI calls are batched in 3 rounds.
  """
  if len(outputs) != len(items):
    raise ValueError(f"{len(outputs)} outputs for {len(items)} items.")
  sents: list[_Sentence] = []
  counted = np.zeros(len(items), bool)
  n_sents = np.zeros(len(items))
  n_cites = np.zeros(len(items))
  for i, (out, it) in enumerate(zip(outputs, items)):
    if text_lib.is_refusal(out):
      continue
    if qampari:
      raw = [it.question + " " + x.strip() for x in out.rstrip().rstrip(".").rstrip(",").split(",")]
    else:
      raw = splitter(out)
    if not raw:
      continue  # Trust-Eval skips a response without sentences.
    counted[i], n_sents[i] = True, len(raw)
    for s in raw:
      refs = citation_ids(s)
      if refs and all(0 <= r < len(it.docs) for r in refs):
        refs = refs[:at_most_citations] if at_most_citations is not None else refs
        n_cites[i] += len(refs)
      else:
        refs = []  # no citation, or one out of range: joint_entail 0 and nothing counted
      sents.append(_Sentence(i, remove_citations(s).strip(), refs))

  def passage(item, ids):
    return "\n".join(format_document(items[item].docs[d]) for d in ids)

  # Round 1: does the joint set of cited docs entail the sentence (recall)?
  asked = [s for s in sents if s.refs]
  for s, e in zip(asked, _entails(nli, [(passage(s.item, s.refs), s.target) for s in asked])):
    s.joint = int(e)
    s.credit = float(e)  # single citation: precision credit = joint_entail; else 0 unless joint
  # Round 2: for multi-citation supported sentences, does each cited doc alone entail it?
  multi = [s for s in sents if s.joint and len(s.refs) > 1]
  checks = [(s, k) for s in multi for k in range(len(s.refs))]
  alone = _entails(nli, [(passage(s.item, [s.refs[k]]), s.target) for s, k in checks])
  # Round 3: for docs that fail alone, do the other cited docs entail it without them?
  others = {}
  for (s, k), a in zip(checks, alone):
    if not a:
      rest = list(s.refs)
      rest.remove(s.refs[k])
      others[(id(s), k)] = (s, k, rest)
  rest_ok = _entails(nli, [(passage(s.item, rest), s.target) for s, k, rest in others.values()])
  redundant = {key: bool(ok) for key, ok in zip(others, rest_ok)}
  for s in multi:
    s.credit = 0.0
  for s, k in checks:
    key = (id(s), k)
    if key not in redundant or not redundant[key]:
      s.credit += 1.0
      continue
    af = items[s.item].answers_found
    rest = others[key][2]
    contained = bool(af.size) and bool(np.any(af[rest].any(axis=0) & af[s.refs[k]].astype(bool)))
    s.credit += 1.0 if contained else 0.0  # over-citation only when the doc adds no new answer
  entail = np.zeros(len(items))
  credit = np.zeros(len(items))
  for s in sents:
    entail[s.item] += s.joint
    credit[s.item] += s.credit
  recall = np.where(counted, entail / np.maximum(n_sents, 1), np.nan)
  precision = np.where(counted, np.where(n_cites > 0, credit / np.maximum(n_cites, 1), 0.0), np.nan)
  r_cite, p_cite = _mean100(recall[counted]), _mean100(precision[counted])
  return {"R_cite": r_cite, "P_cite": p_cite, "F1_GC": _f1(p_cite, r_cite),
          "recall": recall, "precision": precision}


def _entails(nli, pairs: list[tuple[str, str]]) -> np.ndarray:
  if not pairs:
    return np.zeros(0, bool)
  return np.asarray(nli.entails([p for p, _ in pairs], [h for _, h in pairs]), bool)


def trust_score(outputs: Sequence[str], examples: Sequence[Example | TrustItem], *, nli,
                dataset: str | None = None, ndoc: int = 5,
                at_most_citations: int | None = AT_MOST_CITATIONS) -> dict[str, float]:
  """All Trust-Score numbers for one dataset: AR, F1_GR, F1_AC, F1_GC, TRUST (= their mean), in %,
  and "per_example": the per-question parts they are computed from (`scores_from_parts`).

  Args:
    outputs: the answer text per example (citations included, reasoning stripped).
    examples: ALCE-reader Examples (or TrustItems) of ONE dataset; `dataset` defaults to
      examples[0].meta["dataset"].
    nli: an NLIJudge (Trust-Eval uses TRUE T5-XXL: `judges.Seq2SeqNLIJudge`).
  """
  if len(outputs) != len(examples):
    raise ValueError(f"{len(outputs)} outputs for {len(examples)} examples.")
  if dataset is None:
    metas = [e.meta.get("dataset") for e in examples if isinstance(e, Example)]
    if not metas or len(set(metas)) != 1:
      raise ValueError("pass dataset=...: examples carry meta['dataset'] values "
                       f"{sorted(set(map(str, metas)))}.")
    dataset = metas[0]
  items = [e if isinstance(e, TrustItem) else TrustItem.from_example(e, ndoc=ndoc) for e in examples]
  ac, refused_clean = answer_correctness_per_item(outputs, items, dataset, nli=nli)
  cites = citation_quality(outputs, items, nli, qampari=dataset == "qampari",
                           at_most_citations=at_most_citations)
  parts = {"answerable": np.array([it.answerable for it in items], np.float64),
           "refused": np.array([text_lib.is_refusal(o) for o in outputs], np.float64),
           "refused_clean": refused_clean.astype(np.float64), "ac": ac,
           "cite_recall": cites["recall"], "cite_precision": cites["precision"]}
  return {**scores_from_parts(parts), "per_example": parts}


PARTS = ("answerable", "refused", "refused_clean", "ac", "cite_recall", "cite_precision")


def scores_from_parts(parts: Mapping[str, np.ndarray]) -> dict[str, float]:
  """Trust-Score from per-question parts (float [N] each, `PARTS`): the answerability and refusal
  flags (refusal of the raw output for F1_GR and of the citation-free output for F1_AC), AC^q, and
  citation recall / precision (NaN where a response is not counted). `trust_score` computes its
  numbers with this function, so a subset or bootstrap resample of the parts gives that subset's
  Trust-Score exactly."""
  answerable, refused = parts["answerable"] > 0, parts["refused"] > 0
  result: dict = grounded_refusal(answerable, refused)
  result.update(answer_correctness_scores(np.asarray(parts["ac"], np.float64),
                                          parts["refused_clean"] > 0, answerable))
  recall, precision = np.asarray(parts["cite_recall"]), np.asarray(parts["cite_precision"])
  counted = ~np.isnan(recall)
  r_cite, p_cite = _mean100(recall[counted]), _mean100(precision[counted])
  result.update(R_cite=r_cite, P_cite=p_cite, F1_GC=_f1(p_cite, r_cite))
  result["TRUST"] = (result["F1_GR"] + result["F1_AC"] + result["F1_GC"]) / 3
  return result


def percent_align(reasonings: Sequence[str], answers: Sequence[str], nli) -> float:
  """Ground-GRPO's %Align (arXiv:2506.15522 §4.7, Eq. 8): % of responses whose reasoning entails the final answer.

  Premise = the `<think>` content, hypothesis = the `<answer>` content ([DECISION]).
  """
  if len(reasonings) != len(answers):
    raise ValueError(f"{len(reasonings)} reasonings for {len(answers)} answers.")
  if not reasonings:
    return 0.0
  return 100.0 * float(np.mean(np.asarray(nli.entails(list(reasonings), list(answers)), bool)))


def per_dataset(outputs: Sequence[str], examples: Sequence[Example], *, nli,
                **kwargs) -> Mapping[str, dict[str, float]]:
  """trust_score for each meta["dataset"] present (default "asqa", as the reward reads it), in
  first-seen order."""
  groups: dict[str, list[int]] = {}
  for i, e in enumerate(examples):
    groups.setdefault(e.meta.get("dataset", DEFAULT_DATASET), []).append(i)
  return {d: trust_score([outputs[i] for i in idx], [examples[i] for i in idx], nli=nli, dataset=d,
                         **kwargs) for d, idx in groups.items()}
