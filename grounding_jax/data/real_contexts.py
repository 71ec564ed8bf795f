"""Short real-data contexts a 135M model can read, their unanswerable twins, and question splits.

    by_dataset = load_real(DEFAULT_DIR)                        # {"hotpotqa": [...], "musique": ..., "nq": ...}
    parts = split_by_question(by_dataset, test=16, dev=16, seed=0)   # or cross_dataset(by_dataset, "nq", ...)
    items = with_twins(parts["test"], seed=0)                  # short answerable contexts + gold-removed copies

A real question's own context is long (HotpotQA distractor: 10 paragraphs, MuSiQue: 20; ~900-1,500
words) — past what SmolLM2-135M reads. `short_context` keeps the gold passages whole and adds
`num_distractors` of the question's own non-gold passages (NQ-open's oracle file has one passage,
so its distractors come from other questions of the same split), clipped to `max_words` words, in a
seeded order (`distractors="pool"`: other questions' passages only, so a gold-removed twin holds
nothing on its question). NQ's evidence, which its file lacks, is its gold passage's answer sentence
(`with_answer_sentences`). `unanswerable_twin` is the same question with each gold passage replaced
by a distractor (data/contrast.gold_removed: answerable=False), id suffixed "#gold_removed", so
abstention is measured on the very questions whose answers are measured.

Splits are by question, seeded, per dataset (a question and its twin always fall together), or by
dataset: train on two, test on the third. Distractors are drawn from the split's own passages, so
no passage of a held-out question appears in a training context.
"""

from __future__ import annotations

import dataclasses
import pathlib
import zlib
from typing import Mapping, Sequence

import numpy as np

from grounding_jax import text
from grounding_jax.data import contrast
from grounding_jax.data.readers import read_dataset
from grounding_jax.data.schema import Example, Passage

DEFAULT_DIR = pathlib.Path(__file__).resolve().parents[2] / "data" / "real"
# name -> (reader, files): HotpotQA's train and dev samples form one question pool.
FILES = {"hotpotqa": ("hotpotqa", ("hotpotqa_distractor_train_sample.json",
                                   "hotpotqa_distractor_dev_sample.json")),
         "musique": ("musique", ("musique_ans_train_sample.jsonl",)),
         "nq": ("nq_litm", ("nq_open_oracle_lostinthemiddle_sample.jsonl",))}
TWIN_SUFFIX = "#gold_removed"
# Where a short context's distractors come from: the question's own non-gold passages first (HotpotQA's
# and MuSiQue's are retrieved for the question, so they share its entities), or only other
# questions' passages (so a gold-removed twin holds nothing about the question: the synthetic
# world's unanswerable="unrelated").
DISTRACTORS = ("own", "pool")


def load_real(folder: str | pathlib.Path = DEFAULT_DIR, names: Sequence[str] = tuple(FILES)
              ) -> dict[str, list[Example]]:
  """{dataset: answerable Examples with gold passages}, read with the project's readers; those
  without evidence sentences (NQ) get them from their gold passages (`with_answer_sentences`)."""
  out = {}
  for name in names:
    reader, files = FILES[name]
    rows = [ex for f in files for ex in read_dataset(reader, pathlib.Path(folder) / f)]
    out[name] = [with_answer_sentences(ex) for ex in rows if ex.gold_passage_ids and ex.answers]
  return out


def with_answer_sentences(example: Example) -> Example:
  """`example`, or, when it has no evidence, a copy whose evidence is each gold passage's sentence
  that states an answer (text.answer_sentence). NQ-open's oracle passage is marked gold because it
  contains an answer string (`hasanswer`), so that sentence is its evidence; without it a gold
  completion quotes the whole ~100-word passage (recipes/gold.gold_support): 146 SmolLM2 tokens at
  the median, past a 128-token rollout."""
  if any(e for e in example.evidence):
    return example
  sentences = [text.answer_sentence(example.passages[i - 1].text, example.answers, example.question)
               for i in example.gold_passage_ids if 0 < i <= len(example.passages)]
  return dataclasses.replace(example, evidence=tuple(dict.fromkeys(s for s in sentences if s)))


def _rng(example: Example, seed: int) -> np.random.Generator:
  return np.random.default_rng([int(seed), zlib.crc32(f"short|{example.id}".encode())])


def _clip(p: Passage, max_words: int) -> Passage:
  words = p.text.split()
  return p if len(words) <= max_words else dataclasses.replace(p, text=" ".join(words[:max_words]))


def _names_answer(p: Passage, answers: Sequence[str]) -> bool:
  text = p.text.lower()
  return any(a.strip() and a.lower() in text for a in answers)


def short_context(example: Example, pool: Sequence[Passage], *, num_distractors: int = 2,
                  max_words: int = 80, seed: int = 0, distractors: str = "own") -> Example:
  """`example` with its gold passages (whole) and `num_distractors` distractors (clipped to
  `max_words` words): its own non-gold passages first (distractors="own"; "pool": none of them),
  then `pool`'s, none naming an answer; the passages in a seeded order, gold_passage_ids pointing
  at the gold ones."""
  if distractors not in DISTRACTORS:
    raise ValueError(f"distractors={distractors!r}: expected one of {DISTRACTORS}")
  rng = _rng(example, seed)
  gold_ids = sorted(set(example.gold_passage_ids))
  gold = [example.passages[i - 1] for i in gold_ids]
  own = [p for i, p in enumerate(example.passages, 1) if distractors == "own"
         and i not in gold_ids and not _names_answer(p, example.answers)]
  picks = [own[int(i)] for i in rng.permutation(len(own))[:num_distractors]]
  if len(picks) < num_distractors:
    taken = {p.text for p in example.passages}
    for i in rng.permutation(len(pool)):
      p = pool[int(i)]
      if p.text not in taken and not _names_answer(p, example.answers):
        picks.append(p)
        taken.add(p.text)
        if len(picks) == num_distractors:
          break
  passages = gold + [_clip(p, max_words) for p in picks]
  order = rng.permutation(len(passages))
  position = {int(old): new + 1 for new, old in enumerate(order)}
  return dataclasses.replace(
      example, passages=tuple(passages[int(i)] for i in order),
      gold_passage_ids=tuple(sorted(position[j] for j in range(len(gold)))), answerable=True,
      meta={**example.meta, "context": f"gold + {len(picks)} distractors"
            + (" of other questions" if distractors == "pool" else "")})


def unanswerable_twin(example: Example, pool: Sequence[Passage], *, seed: int = 0) -> Example:
  """The short `example` with its gold passages replaced by distractors (answerable=False)."""
  twin = contrast.gold_removed(example, pool, seed=seed)
  return dataclasses.replace(twin, id=f"{example.id}{TWIN_SUFFIX}")


def with_twins(examples: Sequence[Example], *, seed: int = 0, num_distractors: int = 2,
               max_words: int = 80, twins: bool = True, distractors: str = "own") -> list[Example]:
  """Each example's short context, then (twins=True) its unanswerable twin, interleaved. The
  distractors come from `examples`' own passages (clipped), so a split never borrows another's;
  `distractors` as short_context's."""
  pool = tuple(_clip(p, max_words) for p in contrast.distractor_pool(examples))
  out = []
  for ex in examples:
    short = short_context(ex, pool, num_distractors=num_distractors, max_words=max_words, seed=seed,
                          distractors=distractors)
    out.append(short)
    if twins:  # "pool": the twin's replacements leave out the question's own (retrieved) passages too
      own = {p.text for p in ex.passages} if distractors == "pool" else set()
      out.append(unanswerable_twin(short, [p for p in pool if p.text not in own] if own else pool,
                                   seed=seed))
  return out


def split_by_question(by_dataset: Mapping[str, Sequence[Example]], *, test: int, dev: int,
                      seed: int = 0) -> dict[str, list[Example]]:
  """{"train", "dev", "test"}: from each dataset, `test` and `dev` questions drawn at random
  (seeded), the rest to train; each part holds the datasets one after another, in the order given."""
  out = {"train": [], "dev": [], "test": []}
  for k, (name, rows) in enumerate(by_dataset.items()):
    if test + dev >= len(rows):
      raise ValueError(f"{name}: {len(rows)} questions, too few for test={test} + dev={dev} and "
                       "a training part")
    order = np.random.default_rng([int(seed), k]).permutation(len(rows))
    out["test"] += [rows[int(i)] for i in order[:test]]
    out["dev"] += [rows[int(i)] for i in order[test:test + dev]]
    out["train"] += [rows[int(i)] for i in order[test + dev:]]
  return out


def cross_dataset(by_dataset: Mapping[str, Sequence[Example]], held_out: str, *, test: int, dev: int,
                  seed: int = 0) -> dict[str, list[Example]]:
  """{"train", "dev", "test"}: train on every dataset but `held_out` (less `dev` questions of each,
  the dev split), test on `test` questions of `held_out` (seeded)."""
  if held_out not in by_dataset:
    raise ValueError(f"held-out dataset {held_out!r}; choose one of {sorted(by_dataset)}")
  rest = {k: v for k, v in by_dataset.items() if k != held_out}
  parts = split_by_question(rest, test=0, dev=dev, seed=seed)
  rows = by_dataset[held_out]
  order = np.random.default_rng([int(seed), len(by_dataset)]).permutation(len(rows))
  parts["test"] = [rows[int(i)] for i in order[:test]]
  return parts
