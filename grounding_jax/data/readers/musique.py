"""MuSiQue reader (official `musique_{ans,full}_v1.0_*.jsonl`).

Each record has 20 `paragraphs` ({idx, title, paragraph_text, is_supporting}), the `answer` and its
`answer_aliases`, `answerable` (always true in MuSiQue-Ans; MuSiQue-Full pairs each question with an
unanswerable twin) and `question_decomposition`: one hop per supporting paragraph, {question (earlier
hops' answers as "#k"), answer, paragraph_support_idx}. Paragraphs become passages in file order;
the `is_supporting` ones are the gold ids (1-indexed).

`evidence` is one sentence per hop, in hop order: the sentence of the hop's supporting paragraph
that states the hop's answer (text.answer_sentence, given the hop's question with each "#k" replaced
by hop k's answer; when no sentence contains the answer, the one closest to the question). MuSiQue
annotates paragraphs, not sentences, and ARENA's data code takes a supporting fact to be the whole
paragraph (arXiv:2505.13258 App. B); but a gold completion quotes its evidence (recipes/gold.py),
and whole paragraphs made MuSiQue's ~345 SmolLM2 tokens (median), past a 128-token rollout, where
HotpotQA's supporting sentences make ~120. The hop's own answer is matched, not the question's
`answer_aliases`, which are not always names of it (a date's alias "Maryland Toleration Act"). A
supporting paragraph that no hop names, and every one of a record without `question_decomposition`,
gives its whole text.
"""

from __future__ import annotations

import os
import re
from typing import Iterator

from grounding_jax import text
from grounding_jax.data.readers.jsonio import field, iter_records, str_list
from grounding_jax.data.schema import Example, Passage, validate_example

_HOP_REF = re.compile(r"#(\d+)")


def _hop_evidence(row: dict, source: str, supporting: dict[int, str]) -> list[str]:
  """One sentence per hop of `question_decomposition` whose paragraph (by idx) is supporting, in hop
  order, without repeats; then the whole text of any supporting paragraph no hop names."""
  hops = field(row, "question_decomposition", list, source)
  found, named, answers = [], set(), []
  for k, hop in enumerate(hops):
    label = f"question_decomposition[{k}]"
    answers.append(field(hop, "answer", str, source, path=label))
    question = field(hop, "question", str, source, path=label, required=False, default="")
    # "#k" in a hop's question is hop k's answer (1-based); any other "#k" stays as written.
    question = _HOP_REF.sub(lambda m: answers[int(m.group(1)) - 1]
                            if 0 < int(m.group(1)) <= k else m.group(0), question)
    idx = field(hop, "paragraph_support_idx", int, source, path=label, required=False)
    if idx in supporting:  # not in MuSiQue-Full's unanswerable twins: their paragraph is removed
      found.append(text.answer_sentence(supporting[idx], answers[-1:], question))
      named.add(idx)
  found += [t for idx, t in supporting.items() if idx not in named]
  return list(dict.fromkeys(s for s in found if s))


def _example(row: dict, source: str) -> Example:
  paragraphs = field(row, "paragraphs", list, source)
  passages, gold, supporting = [], [], {}
  for i, para in enumerate(paragraphs):
    label = f"paragraphs[{i}]"
    text_ = field(para, "paragraph_text", str, source, path=label)
    title = field(para, "title", str, source, path=label, required=False, default="")
    idx = field(para, "idx", int, source, path=label, required=False, default=i)
    passages.append(Passage(text=text_, title=title, id=str(idx)))
    if field(para, "is_supporting", bool, source, path=label, required=False, default=False):
      gold.append(i + 1)
      supporting[idx] = text_
  answer = field(row, "answer", str, source, required=False)
  aliases = str_list(field(row, "answer_aliases", list, source, required=False, default=[]),
                     "answer_aliases", source)
  answers = tuple(dict.fromkeys(([answer] if answer else []) + aliases))  # dedup, keep order
  meta = {"dataset": "musique"}
  if row.get("question_decomposition") is not None:
    meta["question_decomposition"] = row["question_decomposition"]
    evidence = _hop_evidence(row, source, supporting)
  else:
    evidence = list(supporting.values())
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
