"""A retrieval corpus: passages as JSONL, one {"id", "title", "text"} object a line.

    passages = read_corpus("corpus.jsonl")          # list[data.schema.Passage]
    write_corpus("corpus.jsonl", synthetic_corpus(world, withheld_entities(world, 0.5)))

Two corpora come with the project: the synthetic world's passages without the facts it withholds
(so its unanswerable questions have no supporting passage anywhere: data/synthetic.py), and the
paragraphs of the real samples in data/real/ (HotpotQA, MuSiQue; `real_corpus`).
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping, Sequence

from grounding_jax.data import splits
from grounding_jax.data import synthetic
from grounding_jax.data.readers import jsonio
from grounding_jax.data.schema import DataError, Example, Passage

FIELDS = ("id", "title", "text")


def _passage(row: Any, where: str) -> Passage:
  if not isinstance(row, dict):
    raise DataError(f"{where}: expected a JSON object with {list(FIELDS)}, got {type(row).__name__}")
  for field in FIELDS:
    if field not in row:
      raise DataError(f"{where}: field {field!r} is missing (rows are {{\"id\", \"title\", \"text\"}})")
    if not isinstance(row[field], str):
      raise DataError(f"{where}: field {field!r} is {type(row[field]).__name__}, expected a string")
  if not row["id"] or not row["text"].strip():
    raise DataError(f"{where}: field {'id' if not row['id'] else 'text'!r} is empty")
  return Passage(text=row["text"], title=row["title"], id=row["id"])


def read_corpus(path: str | os.PathLike) -> list[Passage]:
  """The passages of a JSONL corpus (plain, .bz2 or .gz), in file order. Blank lines are skipped.

  Raises:
    DataError: a row that is not JSON, lacks a field, holds a non-string or empty one, or repeats an
      id (the message names file:line and the field); bytes that are not UTF-8 (file:line:column).
  """
  passages, seen = [], {}
  for line_no, row in jsonio.jsonl_rows(path):
    where = f"{path}:{line_no}"
    p = _passage(row, where)
    if p.id in seen:
      raise DataError(f"{where}: field 'id' {p.id!r} repeats line {seen[p.id]}")
    seen[p.id] = line_no
    passages.append(p)
  if not passages:
    raise DataError(f"{path}: no passages")
  return passages


def write_corpus(path: str | os.PathLike, passages: Iterable[Passage]) -> int:
  """Writes `passages` as JSONL (UTF-8, non-ASCII kept); returns how many."""
  n = 0
  with open(path, "w", encoding="utf-8") as f:
    for p in passages:
      f.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n")
      n += 1
  return n


def synthetic_corpus(world: synthetic.World, withheld: Iterable[str] = ()) -> list[Passage]:
  """Every passage of the world (facts and their red-herring mentions) except the fact passages of
  the `withheld` entities: a question that needs one of those facts has no support in the corpus.
  The mentions stay, so a search for a withheld entity still finds passages naming it."""
  withheld = set(withheld)
  return [p for entity, p in world.passages.items() if entity not in withheld]


def synthetic_corpus_of(spec: Mapping[str, Any]) -> list[Passage]:
  """The corpus of a synthetic data spec (a stage's `data`): its world (seed, num_countries) without
  the facts its `withheld_share` withholds, the same ones its examples are labelled against."""
  options = splits.synthetic_options(spec)
  world = synthetic.build_world(int(spec["seed"]), options["num_countries"])
  return synthetic_corpus(world, synthetic.withheld_entities(world, options["withheld_share"]))


def real_corpus(examples: Sequence[Example]) -> list[Passage]:
  """The distinct paragraphs of real-data examples (read with data.readers, e.g. HotpotQA's and
  MuSiQue's samples in data/real/), in first-seen order; a paragraph shared by questions is kept
  once, under its first id (or "p<n>" when it has none)."""
  out: dict[tuple[str, str], Passage] = {}
  for ex in examples:
    for p in ex.passages:
      key = (p.title, p.text)
      if key not in out:
        out[key] = Passage(text=p.text, title=p.title, id=p.id or f"p{len(out)}")
  ids = [p.id for p in out.values()]
  if len(set(ids)) != len(ids):  # two different paragraphs under one id: number them instead
    return [Passage(text=p.text, title=p.title, id=f"p{i}") for i, p in enumerate(out.values())]
  return list(out.values())
