"""Answerability labels (Ground-GRPO) and out-of-knowledge labels (TruthRL).

Ground-GRPO (arXiv:2506.15522 §3, on Trust-Align's data): each document carries `answers_found`, a
0/1 vector over the gold answers (TRUE-NLI support); a question is answerable iff any entry of the
union over the shown documents is 1.

TruthRL (arXiv:2509.25760 §3.1): "For each training question, we sample 256 responses, and the
question is marked as OOK if none of the responses is correct." The probe itself samples the policy
(grounding_jax.eval.probing); `relabel_unknown` writes its result: OOK questions are relabelled
"I don't know" for the SFT / knowledge-enhanced baselines; the default ternary TruthRL reward does
not use the labels. Labels are model-specific: probe each backbone in the retrieval condition it
will be trained in.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from grounding_jax.data.schema import Example

IDK_ANSWER = "I don't know"


def answers_found_union(example: Example, *, num_docs: int | None = 5) -> list[int]:
  """Per gold answer: 1 if any of the first `num_docs` documents supports it (Trust-Align's union).

  Reads `example.meta["answers_found"]`: one 0/1 list per passage, aligned with `example.answers`.
  Raises ValueError naming the example when the field is missing or ragged.
  """
  found = example.meta.get("answers_found")
  if found is None:
    raise ValueError(f"example {example.id!r}: meta['answers_found'] is missing; Ground-GRPO "
                     "answerability needs the per-document 0/1 vectors of Trust-Align data.")
  docs = list(found)[:num_docs] if num_docs is not None else list(found)
  if not docs:
    return []
  widths = {len(d) for d in docs}
  if len(widths) != 1:
    raise ValueError(f"example {example.id!r}: meta['answers_found'] rows have lengths {sorted(widths)}; "
                     "each document needs one 0/1 entry per gold answer.")
  return [int(any(int(d[j]) for d in docs)) for j in range(widths.pop())]


def is_answerable(example: Example, *, num_docs: int | None = 5) -> bool:
  """Ground-GRPO / Trust-Align: answerable iff any document supports any gold answer."""
  return any(answers_found_union(example, num_docs=num_docs))


def found_answers(example: Example, *, num_docs: int | None = 5) -> tuple[str, ...]:
  """The gold answers some shown document supports (Trust-Score's calibrated gold set)."""
  union = answers_found_union(example, num_docs=num_docs)
  if union and len(union) != len(example.answers):
    raise ValueError(f"example {example.id!r}: {len(union)} answers_found entries per document but "
                     f"{len(example.answers)} answers.")
  return tuple(a for a, f in zip(example.answers, union) if f)


def label_answerability(examples: Sequence[Example], *, num_docs: int | None = 5,
                        overwrite: bool = False) -> list[Example]:
  """Sets `answerable` from `answers_found`; keeps an existing label unless `overwrite`."""
  out = []
  for e in examples:
    if e.answerable is None or overwrite:
      e = dataclasses.replace(e, answerable=is_answerable(e, num_docs=num_docs))
    out.append(e)
  return out


def relabel_unknown(examples: Sequence[Example], known: Sequence[bool], *,
                    idk_answer: str = IDK_ANSWER, relabel_answers: bool = True) -> list[Example]:
  """Sets `meta["ook"]` (TruthRL's `out_of_knowledge`, the key `truthrl_knowledge` reads); OOK
  questions get `answers=(idk_answer,)` (TruthRL's SFT relabelling), with the originals kept in
  `meta["original_answers"]`. The ternary reward keeps the original answers, so pass it the
  `meta["ook"]` flags only (e.g. `relabel_answers=False`)."""
  if len(known) != len(examples):
    raise ValueError(f"{len(known)} known flags for {len(examples)} examples.")
  out = []
  for e, k in zip(examples, known):
    meta = {**e.meta, "ook": not bool(k)}
    if k or not relabel_answers:
      out.append(dataclasses.replace(e, meta=meta))
    else:
      meta["original_answers"] = list(e.answers)
      out.append(dataclasses.replace(e, answers=(idk_answer,), meta=meta))
  return out
