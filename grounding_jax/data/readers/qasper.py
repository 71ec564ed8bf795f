"""QASPER reader (official `qasper-{train,dev,test}-v0.3.json`: a JSON object keyed by paper id).

Following GRACE (arXiv:2601.04525 §4.1, and its authors' chunker config): each paper's full text —
title, abstract, then each section as `section_name\\nparagraphs` — joined by blank lines and cut
into 512-token windows with a 64-token overlap; every question of the paper gets all of its chunks
as passages (retrieval picks top-k later). A chunk is gold when an evidence paragraph is a substring
of it or vice versa, or (QASPER only) when the lower-cased word sets overlap with recall or
precision ≥ 0.5 (GRACE `_convert_evidence_to_chunk_ids`; the chunker and the gold test are shared
with `construct.py`).

Answers follow the QASPER evaluator: "Yes"/"No" for boolean, the extractive spans joined by ", ", or
the free-form answer. A question is unanswerable if any annotator said so (GRACE §4.4), and then has
no gold evidence. Evidence is the union over annotators; "FLOAT SELECTED: …" figure/table captions
are not in the paper text, so they are kept only in meta["float_evidence"].
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from grounding_jax.data.construct import chunk_passage, is_gold_chunk
from grounding_jax.data.readers.jsonio import field, iter_records, str_list
from grounding_jax.data.schema import Example, Passage, validate_example

_FLOAT = "FLOAT SELECTED"
GRACE_CHUNK_TOKENS = 512  # GRACE ChunkerConfig.max_length
GRACE_CHUNK_OVERLAP = 64  # GRACE ChunkerConfig.overlap


def paper_text(paper: dict, source: str) -> str:
  """The paper as one string: title, abstract, then `section_name\\nparagraph…` blocks, blank-line
  separated."""
  blocks = [field(paper, "title", str, source, required=False, default=""),
            field(paper, "abstract", str, source, required=False, default="")]
  for i, section in enumerate(field(paper, "full_text", list, source)):
    label = f"full_text[{i}]"
    name = field(section, "section_name", str, source, path=label, required=False, default="")
    paragraphs = str_list(field(section, "paragraphs", list, source, path=label),
                          f"{label}.paragraphs", source)
    blocks.append("\n".join([name] + [p for p in paragraphs if p.strip()]))
  return "\n\n".join(b for b in blocks if b.strip())


def gold_chunk_ids(chunks: list[str], evidence: list[str], *, recall_threshold: float = 0.5,
                   precision_threshold: float = 0.5) -> tuple[int, ...]:
  """1-indexed chunks that hold an evidence paragraph (GRACE's rule, `construct.is_gold_chunk`)."""
  return tuple(i + 1 for i, c in enumerate(chunks)
               if is_gold_chunk(c, evidence, recall_threshold=recall_threshold,
                                precision_threshold=precision_threshold))


def _answer_text(answer: dict, source: str, label: str) -> tuple[str | None, str]:
  """(answer string or None if unanswerable, answer type) per the QASPER evaluator."""
  if field(answer, "unanswerable", bool, source, path=label, required=False, default=False):
    return None, "none"
  yes_no = field(answer, "yes_no", bool, source, path=label, required=False)
  if yes_no is not None:
    return ("Yes" if yes_no else "No"), "boolean"
  spans = str_list(field(answer, "extractive_spans", list, source, path=label, required=False, default=[]),
                   f"{label}.extractive_spans", source)
  if spans:
    return ", ".join(spans), "extractive"
  return field(answer, "free_form_answer", str, source, path=label, required=False, default=""), "abstractive"


def _examples(paper_id: str, paper: dict, source: str, *, chunks: list[str], thresholds) -> Iterator[Example]:
  passages = tuple(Passage(text=c, id=f"{paper_id}:{i}") for i, c in enumerate(chunks))
  for qi, qa in enumerate(field(paper, "qas", list, source)):
    qlabel = f"qas[{qi}]"
    answers, types, evidence, floats, per_annotator = [], [], [], [], []
    unanswerable = False
    for ai, ann in enumerate(field(qa, "answers", list, source, path=qlabel)):
      alabel = f"{qlabel}.answers[{ai}].answer"
      answer = field(ann, "answer", dict, source, path=f"{qlabel}.answers[{ai}]")
      text, kind = _answer_text(answer, source, alabel)
      types.append(kind)
      unanswerable |= text is None
      if text:
        answers.append(text)
      ev = str_list(field(answer, "evidence", list, source, path=alabel, required=False, default=[]),
                    f"{alabel}.evidence", source)
      per_annotator.append(ev)
      for e in ev:
        if e.startswith(_FLOAT):
          floats.append(e)
        elif e.strip():
          evidence.append(e)
    evidence = list(dict.fromkeys(evidence))
    if unanswerable:
      evidence = []  # natural unanswerables have no ground truth (GRACE §4.4)
    meta: dict[str, Any] = {"dataset": "qasper", "paper_id": paper_id, "answer_types": types,
                            "annotator_evidence": per_annotator}
    if floats:
      meta["float_evidence"] = list(dict.fromkeys(floats))
    example = Example(
        question=field(qa, "question", str, source, path=qlabel),
        passages=passages,
        answers=tuple(dict.fromkeys(answers)),
        evidence=tuple(evidence),
        gold_passage_ids=gold_chunk_ids(chunks, evidence, recall_threshold=thresholds[0],
                                        precision_threshold=thresholds[1]),
        answerable=(not unanswerable) if types else None,
        id=field(qa, "question_id", str, source, path=qlabel, required=False, default=f"{paper_id}-{qi}"),
        meta=meta,
    )
    yield validate_example(example, source=f"{source} {qlabel}")


def read_qasper(path: str | os.PathLike, *, tokenizer: Any = None, chunk_tokens: int = GRACE_CHUNK_TOKENS,
                chunk_overlap: int = GRACE_CHUNK_OVERLAP, recall_threshold: float = 0.5,
                precision_threshold: float = 0.5, limit: int | None = None) -> Iterator[Example]:
  """Streams one `Example` per QASPER question, with the paper's chunks as passages.

  Args:
    path: the official json (object keyed by paper id).
    tokenizer: HF tokenizer used to count chunk tokens; None counts whitespace words.
    chunk_tokens, chunk_overlap: GRACE's 512 / 64.
    recall_threshold, precision_threshold: GRACE's word-overlap rule for gold chunks (0.5 / 0.5).
    limit: stop after this many examples (questions).
  """
  n = 0
  for rec in iter_records(path, jsonl=False):
    paper = rec.value
    if not isinstance(paper, dict):
      field(paper, "full_text", list, rec.source)  # raises naming the record
    # Chunks are exact slices of the paper text (construct.chunk_passage), so evidence stays a substring.
    whole = Passage(text=paper_text(paper, rec.source), id=str(rec.key))
    chunks = [c.text for c in chunk_passage(whole, tokenizer=tokenizer, max_tokens=chunk_tokens,
                                            overlap=chunk_overlap) if c.text.strip()]
    for ex in _examples(str(rec.key), paper, rec.source, chunks=chunks,
                        thresholds=(recall_threshold, precision_threshold)):
      if limit is not None and n >= limit:
        return
      yield ex
      n += 1
