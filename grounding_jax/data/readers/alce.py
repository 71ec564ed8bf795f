"""ALCE / Trust-Score / Trust-Align json reader (ASQA, QAMPARI, ELI5, ExpertQA).

Accepted layouts, all a JSON array of question records (or an ALCE prompt file whose `demos` hold
them):
  - ALCE eval files (`asqa_eval_gtr_top100.json` …): `question`, `docs [{title, text, …}]`, and the
    gold answers as `qa_pairs[*].short_answers` (ASQA), `answers` (QAMPARI: one alias list per
    answer) or `claims` (ELI5);
  - Trust-Score calibrated files (`*_eval_top100_calibrated.json`) and Trust-Align samples, whose docs
    carry `answers_found`: one 0/1 flag per gold answer, set where TRUE NLI found the doc supports it.

Answerability follows Trust-Align's labels, which Ground-GRPO trains on (arXiv:2506.15522 §3): a
question is answerable iff some shown doc has an `answers_found` entry of 1; those docs are the gold
passages. Without `answers_found` anywhere, `answerable` is None. The per-answer alias groups go to
meta["answer_groups"] (EM-recall counts groups, not aliases), and `answers` is their flattened
union.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from grounding_jax.data.readers.jsonio import field, is_jsonl, iter_records, open_text, str_list
from grounding_jax.data.schema import DataError, Example, Passage, validate_example

DATASETS = ("asqa", "qampari", "eli5", "expertqa")


def _answer_groups(row: dict, source: str) -> tuple[list[list[str]], str | None]:
  """Gold answers as alias groups, plus the long-form answer when the record has one."""
  long_answer = row.get("answer") if isinstance(row.get("answer"), str) else None
  if row.get("answers") is not None:
    answers = field(row, "answers", list, source)
    groups = []
    for i, a in enumerate(answers):
      if isinstance(a, str):  # ELI5/ExpertQA claims: one sentence per gold answer
        groups.append([a])
      else:
        groups.append(str_list(a, f"answers[{i}]", source))
    return groups, long_answer
  if row.get("qa_pairs") is not None:
    groups = []
    for i, qa in enumerate(field(row, "qa_pairs", list, source)):
      groups.append(str_list(field(qa, "short_answers", list, source, path=f"qa_pairs[{i}]"),
                             f"qa_pairs[{i}].short_answers", source))
    return groups, long_answer
  if row.get("claims") is not None:
    return [[c] for c in str_list(row["claims"], "claims", source)], long_answer
  if row.get("answer") is not None:
    answer = field(row, "answer", (str, list), source)
    if isinstance(answer, str):
      return [[answer]], long_answer
    return [[a] for a in str_list(answer, "answer", source)], None
  return [], None


def _answers_found(doc: dict, label: str, source: str) -> list[int] | None:
  found = doc.get("answers_found")
  if found is None:
    return None
  if not isinstance(found, list) or not all(isinstance(v, (int, bool)) and int(v) in (0, 1) for v in found):
    raise DataError(f"{source}: field '{label}.answers_found': expected a list of 0/1 flags, "
                    f"got {found!r:.80}")
  return [int(v) for v in found]


def _example(row: dict, source: str, *, dataset: str, ndoc: int | None, index: Any) -> Example:
  question = field(row, "question", str, source)
  docs = field(row, "docs", list, source, required=False, default=[])
  if ndoc is not None:
    docs = docs[:ndoc]
  passages, found_per_doc = [], []
  for i, doc in enumerate(docs):
    label = f"docs[{i}]"
    text = field(doc, "text", str, source, path=label)
    title = field(doc, "title", str, source, path=label, required=False, default="")
    doc_id = doc.get("id", "")
    passages.append(Passage(text=text, title=title, id=str(doc_id)))
    found_per_doc.append(_answers_found(doc, label, source))
  groups, long_answer = _answer_groups(row, source)
  has_labels = any(f is not None for f in found_per_doc)
  gold = tuple(i + 1 for i, f in enumerate(found_per_doc) if f and any(f))
  meta: dict[str, Any] = {"dataset": dataset, "answer_groups": groups}
  if has_labels:
    meta["answers_found"] = [f if f is not None else [] for f in found_per_doc]
  if long_answer is not None:
    meta["long_answer"] = long_answer
  example = Example(
      question=question,
      passages=tuple(passages),
      answers=tuple(dict.fromkeys(a for g in groups for a in g)),
      gold_passage_ids=gold,
      answerable=bool(gold) if has_labels else None,
      id=str(row.get("sample_id") or row.get("id") or f"{dataset}-{index}"),
      meta=meta,
  )
  return validate_example(example, source=source)


def _infer_dataset(path: str) -> str:
  name = os.path.basename(path).lower()
  for d in DATASETS:
    if d in name:
      return d
  raise ValueError(f"{path}: cannot tell which of {DATASETS} this file holds from its name; "
                   "pass dataset=...")


def read_alce(path: str | os.PathLike, *, dataset: str | None = None, ndoc: int | None = None,
              limit: int | None = None) -> Iterator[Example]:
  """Streams `Example`s from an ALCE / Trust-Score / Trust-Align json file.

  Args:
    path: a JSON array of records, JSONL, or an ALCE prompt file (a dict with "demos").
    dataset: one of "asqa", "qampari", "eli5", "expertqa" (selects the prompt instruction later);
      None infers it from the file name.
    ndoc: keep the first `ndoc` docs (Trust-Eval shows 5); answerability is computed over these.
    limit: stop after this many examples.
  """
  p = os.fspath(path)
  dataset = dataset or _infer_dataset(p)
  if dataset not in DATASETS:
    raise ValueError(f"dataset={dataset!r}; choose one of {DATASETS}")
  jsonl = is_jsonl(p)
  with open_text(p) as f:
    is_prompt_file = not jsonl and f.read(64).lstrip().startswith("{")
  if is_prompt_file:
    records = iter_records(p, jsonl=False)
    for rec in records:
      if rec.key == "demos":
        demos = rec.value
        if not isinstance(demos, list):
          raise DataError(f"{rec.source}: field 'demos': expected a list of records")
        for i, row in enumerate(demos[:limit] if limit is not None else demos):
          yield _example(row, f"{rec.source}[{i}]", dataset=dataset, ndoc=ndoc, index=i)
        return
    raise DataError(f"{p}: field 'demos': missing; expected a JSON array of records or an ALCE prompt file")
  n = 0
  for rec in iter_records(p, jsonl=jsonl):
    if limit is not None and n >= limit:
      return
    yield _example(rec.value, rec.source, dataset=dataset, ndoc=ndoc, index=rec.key)
    n += 1
