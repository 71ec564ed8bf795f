"""Open-domain QA with retrieved passages: DPR retrieval-result json and Lost-in-the-Middle jsonl.

DPR's `dense_retriever.py` writes a JSON array of `{question, answers, ctxs: [{id, title, text,
score, has_answer}]}` for NQ and TriviaQA (LEAR trains on these, top-5, arXiv:2507.15586 §4.1). The
Lost-in-the-Middle NQ-open files are JSONL of `{question, answers, ctxs: [{title, text, hasanswer,
isgold}], nq_annotated_gold}`. `has_answer`/`hasanswer` (the answer string occurs in the passage)
marks the gold passages, and `answerable` is whether any shown passage has it; `isgold` ids go to
meta.
"""

from __future__ import annotations

import os
from typing import Iterator

from grounding_jax.data.readers.jsonio import field, iter_records, str_list
from grounding_jax.data.schema import Example, Passage, validate_example


def _example(row: dict, source: str, *, dataset: str, n_ctx: int | None, index) -> Example:
  question = field(row, "question", str, source)
  answers = str_list(field(row, "answers", list, source), "answers", source)
  ctxs = field(row, "ctxs", list, source, required=False, default=[])
  if n_ctx is not None:
    ctxs = ctxs[:n_ctx]
  passages, gold, is_gold, scores, labelled = [], [], [], [], False
  for i, ctx in enumerate(ctxs):
    label = f"ctxs[{i}]"
    passages.append(Passage(
        text=field(ctx, "text", str, source, path=label),
        title=field(ctx, "title", str, source, path=label, required=False, default=""),
        id=str(field(ctx, "id", (str, int), source, path=label, required=False, default=""))))
    key = "has_answer" if "has_answer" in ctx else "hasanswer"
    has = field(ctx, key, bool, source, path=label, required=False)
    labelled |= has is not None
    if has:
      gold.append(i + 1)
    if field(ctx, "isgold", bool, source, path=label, required=False, default=False):
      is_gold.append(i + 1)
    score = ctx.get("score")
    if score is not None:
      scores.append(float(score))
  meta = {"dataset": dataset}
  if is_gold:
    meta["isgold_passage_ids"] = is_gold
  if scores and len(scores) == len(passages):
    meta["retrieval_scores"] = scores
  example = Example(
      question=question,
      passages=tuple(passages),
      answers=tuple(answers),
      gold_passage_ids=tuple(gold),
      answerable=bool(gold) if labelled else None,
      id=str(row.get("id", row.get("question_id", f"{dataset}-{index}"))),
      meta=meta,
  )
  return validate_example(example, source=source)


def read_dpr(path: str | os.PathLike, *, dataset: str = "nq", n_ctx: int | None = None,
             limit: int | None = None) -> Iterator[Example]:
  """Streams `Example`s from a DPR retrieval-result file (JSON array) or Lost-in-the-Middle JSONL.

  Args:
    path: the file (.json / .jsonl, optionally .gz/.bz2).
    dataset: a label stored in meta["dataset"] ("nq", "triviaqa", …).
    n_ctx: keep the top `n_ctx` passages (LEAR uses 5); answerability is computed over these.
    limit: stop after this many examples.
  """
  n = 0
  for rec in iter_records(path):
    if limit is not None and n >= limit:
      return
    yield _example(rec.value, rec.source, dataset=dataset, n_ctx=n_ctx, index=rec.key)
    n += 1
