"""MuSiQue reader (official `musique_{ans,full}_v1.0_*.jsonl`).

Each record has 20 `paragraphs` ({idx, title, paragraph_text, is_supporting}), the `answer` and its
`answer_aliases`, and `answerable` (always true in MuSiQue-Ans; MuSiQue-Full pairs each question
with an unanswerable twin). Paragraphs become passages in file order; the `is_supporting` ones are
the gold ids (1-indexed) and, since MuSiQue has no sentence-level annotation, their texts are the
`evidence` (ARENA's data code treats a MuSiQue supporting fact as the whole paragraph;
arXiv:2505.13258 App. B).
"""

from __future__ import annotations

import os
from typing import Iterator

from grounding_jax.data.readers.jsonio import field, iter_records, str_list
from grounding_jax.data.schema import Example, Passage, validate_example


def _example(row: dict, source: str) -> Example:
  paragraphs = field(row, "paragraphs", list, source)
  passages, gold, evidence = [], [], []
  for i, para in enumerate(paragraphs):
    label = f"paragraphs[{i}]"
    text = field(para, "paragraph_text", str, source, path=label)
    title = field(para, "title", str, source, path=label, required=False, default="")
    idx = field(para, "idx", int, source, path=label, required=False, default=i)
    passages.append(Passage(text=text, title=title, id=str(idx)))
    if field(para, "is_supporting", bool, source, path=label, required=False, default=False):
      gold.append(i + 1)
      evidence.append(text)
  answer = field(row, "answer", str, source, required=False)
  aliases = str_list(field(row, "answer_aliases", list, source, required=False, default=[]),
                     "answer_aliases", source)
  answers = tuple(dict.fromkeys(([answer] if answer else []) + aliases))  # dedup, keep order
  meta = {"dataset": "musique"}
  if "question_decomposition" in row:
    meta["question_decomposition"] = row["question_decomposition"]
  example = Example(
      question=field(row, "question", str, source),
      passages=tuple(passages),
      answers=answers,
      evidence=tuple(evidence),
      gold_passage_ids=tuple(gold),
      answerable=field(row, "answerable", bool, source, required=False),
      id=field(row, "id", str, source),
      meta=meta,
  )
  return validate_example(example, source=source)


def read_musique(path: str | os.PathLike, *, limit: int | None = None) -> Iterator[Example]:
  """Streams `Example`s from a MuSiQue jsonl file (also .bz2/.gz, or a JSON array)."""
  n = 0
  for record in iter_records(path):
    if limit is not None and n >= limit:
      return
    yield _example(record.value, record.source)
    n += 1
