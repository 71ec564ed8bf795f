"""Examples ⇄ JSONL: the on-disk form the trainer and evaluators read (one `Example` per line).

`read_examples(write_examples(path, xs))` gives back `xs` exactly, as long as each `meta` holds only
JSON types. Rows are validated as they are read; a bad row raises `DataError` naming file:line:field.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Iterator, Sequence

from grounding_jax.data.schema import DataError, Example, example_from_dict, example_to_dict
from grounding_jax.data.readers.jsonio import empty_file_error, jsonl_rows

PROMPT_KEY = "prompt"  # optional rendered prompt stored next to an example (build_data --with_prompts)


def write_examples(path: str | os.PathLike, examples: Iterable[Example], *,
                   prompts: Sequence[str] | None = None) -> int:
  """Writes `examples` to `path` as JSONL (UTF-8, non-ASCII kept); returns the number written.

  `prompts`, if given, must align with `examples`; each is stored under the "prompt" key (ignored by
  `read_examples` unless asked for).
  """
  n = 0
  with open(path, "w", encoding="utf-8") as f:
    for i, ex in enumerate(examples):
      row = example_to_dict(ex)
      if prompts is not None:
        row[PROMPT_KEY] = prompts[i]
      try:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
      except TypeError as e:  # a non-JSON value in meta
        raise DataError(f"example {i} (id={ex.id!r}): field 'meta': not JSON-serialisable ({e})") from e
      n += 1
  if prompts is not None and len(prompts) != n:
    raise ValueError(f"{len(prompts)} prompts for {n} examples written to {path}")
  return n


def read_examples(path: str | os.PathLike, *, limit: int | None = None) -> Iterator[Example]:
  """Streams validated `Example`s from a JSONL file (plain, .gz or .bz2); blank lines are skipped.

  Raises:
    DataError: a bad row (file:line:field), bytes that are not UTF-8 (file:line:column), or a file
      with no examples (naming it).
  """
  yield from (ex for ex, _ in read_examples_with_prompts(path, limit=limit))


def read_examples_with_prompts(path: str | os.PathLike, *, limit: int | None = None
                               ) -> Iterator[tuple[Example, str | None]]:
  """Like `read_examples`, but yields `(example, prompt_or_None)` pairs."""
  n = 0
  for line_no, row in jsonl_rows(path, limit=limit):
    prompt = row.get(PROMPT_KEY) if isinstance(row, dict) else None
    yield example_from_dict(row, source=f"{path}:{line_no}", ignore_keys=(PROMPT_KEY,)), prompt
    n += 1
  if n == 0 and limit != 0:
    raise empty_file_error(path)
