"""Evidence conditions of one question, for evidence-contrast groups (rl/collect.py).

    pool = distractor_pool(examples)                        # every passage of the stage's dataset
    removed = gold_removed(example, pool, seed=0)           # answerable=False: gold swapped out
    kept, removed = conditions(example, ("gold_kept", "gold_removed"), pool, seed=0)

A contrast group samples the SAME question under several evidence conditions: the gold passages
kept (the example as given), the gold passages removed (each replaced, in place, by a distractor
from other examples, the example marked answerable=False), and optionally the gold kept with the
passages shuffled. Its samples share one advantage baseline, so the update compares answering with
the evidence against answering without it on the same question (docs/training.md, "Evidence-contrast
groups"). A gold_removed example also names its removed gold passages in `meta[WITHHELD_KEY]`:
where the policy's evidence comes from a search tool (the search recipes, rollout.max_turns > 1),
that prompt's searches skip them (sampling/tools.Withheld), so its corpus holds no gold either.
Pure functions of the Example; the choice of distractors and of the shuffle is seeded by `seed` and
the example's id (or question), so every epoch and every host builds the same prompts.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Sequence

import numpy as np

from grounding_jax.data.schema import Example, Passage

CONDITIONS = ("gold_kept", "gold_removed", "gold_shuffled")
# data.evidence_contrast value -> the conditions of each question's contrast group, in row order.
CONTRASTS = {"": (), "gold_removed": ("gold_kept", "gold_removed"),
             "gold_removed_shuffled": ("gold_kept", "gold_removed", "gold_shuffled")}
CONDITION_KEY = "evidence_condition"  # Example.meta key naming a prompt's condition
# Example.meta key: [{"id", "title", "text"}] the passages a search tool must not return to this
# prompt (a gold_removed prompt's gold passages); JSON rows, so the Example still serialises.
WITHHELD_KEY = "withheld_passages"


def _rng(example: Example, seed: int, salt: str) -> np.random.Generator:
  key = zlib.crc32(f"{salt}|{example.id or example.question}".encode())
  return np.random.default_rng([int(seed), key])


def _require_gold(example: Example) -> None:
  if not example.gold_passage_ids:
    raise ValueError(f"example {example.id!r} ({example.question[:60]!r}): no gold_passage_ids, so "
                     "its gold passages cannot be removed or kept for an evidence-contrast group; "
                     "give every answerable example its 1-indexed gold_passage_ids, or leave "
                     "data.evidence_contrast empty")


def distractor_pool(examples: Sequence[Example]) -> tuple[Passage, ...]:
  """Every distinct passage (by text) of `examples`, in first-seen order: where gold_removed draws
  its replacements."""
  seen, pool = set(), []
  for ex in examples:
    for p in ex.passages:
      if p.text not in seen:
        seen.add(p.text)
        pool.append(p)
  return tuple(pool)


def withheld_passages(example: Example) -> tuple[Passage, ...]:
  """The passages `example`'s searches must not return (`meta[WITHHELD_KEY]`; () = none)."""
  rows = (example.meta or {}).get(WITHHELD_KEY) or ()
  return tuple(Passage(text=r["text"], title=r.get("title", ""), id=r.get("id", "")) for r in rows)


def gold_removed(example: Example, pool: Sequence[Passage], *, seed: int = 0) -> Example:
  """`example` with each gold passage replaced, in place, by a distractor: answerable=False, no gold
  ids or evidence; `meta["answers_found"]` (Trust-Align's per-passage vectors), when present, gets
  zero rows for the replacements; `meta[WITHHELD_KEY]` names the removed gold passages, which a
  search tool then withholds from this prompt (module docstring).

  Distractors are drawn without replacement from `pool` (distractor_pool of the stage's dataset),
  leaving out the example's own passages and any passage that names one of its answers (so the
  removed condition cannot hold the answer by accident).

  Raises:
    ValueError: the example has no gold_passage_ids, or the pool has too few usable passages.
  """
  _require_gold(example)
  own = {p.text for p in example.passages}
  answers = [a.lower() for a in example.answers if a.strip()]
  usable = lambda p: p.text not in own and not any(a in p.text.lower() for a in answers)
  gold = sorted(set(example.gold_passage_ids))
  rng = _rng(example, seed, "gold_removed")
  picks: list[int] = []
  # Draw at random and skip unusable passages (a pool can hold every passage of a large dataset);
  # a pool where few are usable falls back to one pass over it.
  for i in rng.integers(0, max(len(pool), 1), size=64 * len(gold)) if pool else ():
    if int(i) not in picks and usable(pool[int(i)]):
      picks.append(int(i))
      if len(picks) == len(gold):
        break
  if len(picks) < len(gold):
    candidates = [i for i, p in enumerate(pool) if usable(p)]
    if len(candidates) < len(gold):
      raise ValueError(f"example {example.id!r}: {len(candidates)} usable distractors in the pool "
                       f"for {len(gold)} gold passages; the stage's dataset is too small for "
                       "data.evidence_contrast")
    picks = [candidates[int(j)] for j in rng.choice(len(candidates), size=len(gold), replace=False)]
  passages = list(example.passages)
  for pid, j in zip(gold, picks):
    passages[pid - 1] = pool[j]
  meta = dict(example.meta)
  found = meta.get("answers_found")
  if found is not None and len(found) == len(passages):
    found = [list(row) for row in found]
    for pid in gold:
      found[pid - 1] = [0] * len(found[pid - 1])
    meta["answers_found"] = found
  removed = [example.passages[pid - 1] for pid in gold]
  meta[WITHHELD_KEY] = [{"id": p.id, "title": p.title, "text": p.text} for p in removed]
  return dataclasses.replace(example, passages=tuple(passages), gold_passage_ids=(), evidence=(),
                             answerable=False, meta=meta)


def gold_shuffled(example: Example, *, seed: int = 0) -> Example:
  """`example` with its passages in a seeded new order (gold ids and answers_found follow)."""
  _require_gold(example)
  order = _rng(example, seed, "gold_shuffled").permutation(len(example.passages))
  new_position = {int(old): new + 1 for new, old in enumerate(order)}  # 0-indexed old -> 1-indexed
  meta = dict(example.meta)
  found = meta.get("answers_found")
  if found is not None and len(found) == len(order):
    meta["answers_found"] = [list(found[int(i)]) for i in order]
  return dataclasses.replace(
      example, passages=tuple(example.passages[int(i)] for i in order),
      gold_passage_ids=tuple(new_position[pid - 1] for pid in example.gold_passage_ids), meta=meta)


def conditions(example: Example, names: Sequence[str], pool: Sequence[Passage], *,
               seed: int = 0) -> list[Example]:
  """The example under each evidence condition of `names` (CONDITIONS), in that order, each
  naming its condition in `meta[CONDITION_KEY]`."""
  out = []
  for name in names:
    if name == "gold_kept":
      _require_gold(example)
      ex = example
    elif name == "gold_removed":
      ex = gold_removed(example, pool, seed=seed)
    elif name == "gold_shuffled":
      ex = gold_shuffled(example, seed=seed)
    else:
      raise ValueError(f"evidence condition {name!r}: expected one of {CONDITIONS}")
    out.append(dataclasses.replace(ex, meta={**ex.meta, CONDITION_KEY: name}))
  return out


def contrast_questions(examples: Sequence[Example]) -> tuple[list[Example], int]:
  """(the examples a contrast stage draws its questions from, how many were left out): examples
  labelled answerable=False are left out (their gold-removed role is played by each question's
  gold_removed condition); every other example must have gold_passage_ids.

  Raises:
    ValueError: naming the first example without gold_passage_ids, or when none is left.
  """
  kept = [ex for ex in examples if ex.answerable is not False]
  for ex in kept:
    _require_gold(ex)
  if not kept:
    raise ValueError("data.evidence_contrast: every example of the stage is labelled "
                     "answerable=False; contrast groups need answerable questions with gold passages")
  return kept, len(examples) - len(kept)
