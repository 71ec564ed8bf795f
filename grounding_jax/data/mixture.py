"""Seeded, answerability-balanced samples of dataset files, mixed into named splits.

The papers train on random subsets of the official files, not on their first rows (GRACE:
`random.Random(123456).sample(range(N), n)` with the indices sorted, as its authors' preprocess.py,
which a first draw on a file reproduces exactly). A paper's mix is a `Preset`; each recipe keeps its
papers' presets (`Recipe.data_presets`, collected by `recipes.data_presets()`). A build is a list of `Draw`s ("n examples of this dataset's train file
into split S, m of them answerable"). Each input file is read twice, streaming: once for its answerability labels, once to
pick the drawn rows, so memory holds the sample, not the file. Each draw uses a fresh
`random.Random(seed)` over the rows of its file that earlier draws did not take; a split made of
several draws is shuffled with `random.Random(seed)`. Every number lands in a report for the manifest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
from typing import Any, Iterable, Mapping, Sequence

from grounding_jax.data import readers
from grounding_jax.data.schema import Example


@dataclasses.dataclass(frozen=True)
class Draw:
  """`count` examples (None = all) of `source`'s `role` file into output split `split`; with
  `answerable`, exactly that many answerable and `count - answerable` unanswerable ones."""
  split: str
  source: str
  role: str = "train"
  count: int | None = None
  answerable: int | None = None

  def __post_init__(self):
    if self.count is not None and self.count < 0:
      raise ValueError(f"{self}: count must be ≥ 0.")
    if self.answerable is not None:
      if self.count is None:
        raise ValueError(f"{self}: answerability balancing needs a count.")
      if not 0 <= self.answerable <= self.count:
        raise ValueError(f"{self}: answerable={self.answerable} must be in [0, count={self.count}].")

  @classmethod
  def parse(cls, spec: str) -> "Draw":
    """"SPLIT=SOURCE:ROLE[:COUNT[:ANSWERABLE]]", e.g. "train=hotpotqa:train:2000",
    "stage2=asqa:train:1000:500", "test=qasper:eval:all"."""
    split, sep, rest = spec.partition("=")
    parts = rest.split(":")
    if not sep or not split or not 2 <= len(parts) <= 4 or not all(parts):
      raise ValueError(f"draw {spec!r}: expected SPLIT=SOURCE:ROLE[:COUNT[:ANSWERABLE]], e.g. "
                       "train=hotpotqa:train:2000 or stage2=asqa:train:1000:500.")
    try:
      count = None if len(parts) < 3 or parts[2] == "all" else int(parts[2])
      answerable = int(parts[3]) if len(parts) == 4 else None
    except ValueError:
      raise ValueError(f"draw {spec!r}: in SPLIT=SOURCE:ROLE[:COUNT[:ANSWERABLE]], COUNT is an "
                       "integer or 'all' and ANSWERABLE an integer.") from None
    return cls(split, parts[0], parts[1], count, answerable)

  def spec(self) -> str:
    tail = "" if self.count is None and self.answerable is None else (
        f":{'all' if self.count is None else self.count}")
    return f"{self.split}={self.source}:{self.role}{tail}" + (
        f":{self.answerable}" if self.answerable is not None else "")


@dataclasses.dataclass(frozen=True)
class Preset:
  """A paper's data mix: its draws (`Draw.parse` specs), seed, hold-out ("SPLIT=FROM:COUNT") and
  whether the multi-retriever context construction (data/construct.py) follows
  (launch/build_data.py --preset=NAME)."""
  recipe: str
  draws: tuple[str, ...]
  seed: int
  holdout: str | None = None
  grace_construct: bool = False


@dataclasses.dataclass(frozen=True)
class Holdout:
  """Moves a seeded sample of `count` examples (or `fraction` of them) of split `source` to `split`."""
  split: str
  source: str = "train"
  count: int | None = None
  fraction: float | None = None

  def size(self, n: int) -> int:
    if self.fraction is not None:
      if not 0 < self.fraction < 1:
        raise ValueError(f"holdout fraction={self.fraction}: must be in (0, 1).")
      return max(1, round(n * self.fraction))
    return min(self.count or 0, n)


def sample_indices(labels: Sequence[bool | None], draw: Draw, *, seed: int,
                   taken: frozenset[int] | set[int] = frozenset()) -> tuple[list[int], dict[str, Any]]:
  """Sorted row indices for `draw` among rows not in `taken`, and what happened, for the manifest.

  Without balancing: `random.Random(seed).sample(free rows, count)`, which for a first draw on a file
  is the GRACE authors' `sample(range(N), count)`. With `draw.answerable`: that many from the free
  answerable rows, then the rest from the free unanswerable ones (unlabelled rows are never drawn).
  A count above what is available takes everything available and reports the shortfall.
  """
  free = [i for i in range(len(labels)) if i not in taken]
  rng = random.Random(seed)
  report: dict[str, Any] = {"rows": len(labels), "free": len(free), "requested": draw.count}
  if draw.answerable is None:
    want = len(free) if draw.count is None else draw.count
    chosen = free if want >= len(free) else rng.sample(free, want)
  else:
    pools = {True: [i for i in free if labels[i] is True], False: [i for i in free if labels[i] is False]}
    report.update(available_answerable=len(pools[True]), available_unanswerable=len(pools[False]),
                  requested_answerable=draw.answerable)
    chosen = []
    for label, want in ((True, draw.answerable), (False, draw.count - draw.answerable)):
      chosen += pools[label] if want >= len(pools[label]) else rng.sample(pools[label], want)
  chosen.sort()
  report["drawn"] = len(chosen)
  report["drawn_answerable"] = sum(labels[i] is True for i in chosen)
  report["drawn_unanswerable"] = sum(labels[i] is False for i in chosen)
  report["shortfall"] = (draw.count - len(chosen)) if draw.count is not None else 0
  return chosen, report


def file_fingerprint(path: str | os.PathLike) -> dict[str, Any]:
  """{"path": absolute path, "bytes": size, "sha256": digest} of an input file."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return {"path": os.path.abspath(path), "bytes": os.path.getsize(path), "sha256": digest.hexdigest()}


@dataclasses.dataclass
class Mixture:
  """The built splits (in memory, or a stream when a split is one whole file) and the report."""
  splits: dict[str, Iterable[Example]]
  sizes: dict[str, int | None]
  draws: list[dict[str, Any]]
  holdout: dict[str, Any] | None = None


def build_mixture(draws: Sequence[Draw], files: Mapping[tuple[str, str], str | os.PathLike], *,
                  seed: int, reader_kwargs: Mapping[str, Any] | None = None,
                  holdout: Holdout | None = None) -> Mixture:
  """Reads, samples and mixes `draws` from `files[(source, role)]`.

  Draws on the same file never share a row (in declaration order). A split with one draw keeps file
  order; one with several is shuffled with `random.Random(seed)`. A split that is one whole file
  (count None, no balancing, no holdout from it) is streamed instead of held in memory.

  Raises:
    ValueError: a draw names a (source, role) with no file; balancing on a file without labels.
  """
  reader_kwargs = dict(reader_kwargs or {})
  for d in draws:
    if (d.source, d.role) not in files:
      have = ", ".join(f"{s}:{r}" for s, r in files) or "none"
      raise ValueError(f"draw {d.spec()!r} needs an input file for {d.source}:{d.role} "
                       f"(--input={d.source}:{d.role}=PATH); inputs given: {have}.")
  read = lambda source, role: readers.read_dataset(source, files[(source, role)], **reader_kwargs)
  split_draws: dict[str, list[Draw]] = {}
  for d in draws:
    split_draws.setdefault(d.split, []).append(d)
  streamed = {s for s, ds in split_draws.items()
              if len(ds) == 1 and ds[0].count is None and ds[0].answerable is None
              and (holdout is None or holdout.source != s)
              and sum(x.source == ds[0].source and x.role == ds[0].role for x in draws) == 1}

  picked: dict[int, list[Example]] = {}   # draw position -> its examples (file order)
  reports: dict[int, dict[str, Any]] = {}
  by_file: dict[tuple[str, str], list[int]] = {}
  for pos, d in enumerate(draws):
    if d.split not in streamed:
      by_file.setdefault((d.source, d.role), []).append(pos)
  for (source, role), positions in by_file.items():
    labels = [ex.answerable for ex in read(source, role)]  # pass 1: labels and the row count
    if any(draws[p].answerable is not None for p in positions) and not any(
        lab is not None for lab in labels):
      raise ValueError(f"{files[(source, role)]}: no answerability labels in {len(labels)} rows, so "
                       f"draws {[draws[p].spec() for p in positions]} cannot balance answerable / "
                       "unanswerable; drop the ANSWERABLE part of the draw.")
    taken: set[int] = set()
    owner: dict[int, int] = {}
    for p in positions:
      rows, reports[p] = sample_indices(labels, draws[p], seed=seed, taken=taken)
      taken.update(rows)
      owner.update(dict.fromkeys(rows, p))
      picked[p] = []
    for i, ex in enumerate(read(source, role)):  # pass 2: keep the drawn rows
      if i in owner:
        picked[owner[i]].append(ex)

  splits: dict[str, Iterable[Example]] = {}
  sizes: dict[str, int | None] = {}
  for name, ds in split_draws.items():
    if name in streamed:
      splits[name], sizes[name] = read(ds[0].source, ds[0].role), None
      continue
    rows = [ex for p, d in enumerate(draws) if d.split == name for ex in picked[p]]
    if len(ds) > 1:
      random.Random(seed).shuffle(rows)
    splits[name], sizes[name] = rows, len(rows)
  report = [{"draw": d.spec(), "file": os.fspath(files[(d.source, d.role)]),
             **reports.get(p, {"drawn": "all (streamed)"})} for p, d in enumerate(draws)]
  mix = Mixture(splits, sizes, report)
  if holdout is not None:
    _apply_holdout(mix, holdout, seed)
  return mix


def _apply_holdout(mix: Mixture, holdout: Holdout, seed: int) -> None:
  if holdout.source not in mix.splits:
    raise ValueError(f"holdout from split {holdout.source!r}, which no draw fills "
                     f"(splits: {sorted(mix.splits)}).")
  if holdout.split in mix.splits:
    raise ValueError(f"holdout into split {holdout.split!r}, which draws already fill; name another.")
  rows = list(mix.splits[holdout.source])
  n = holdout.size(len(rows))
  held = set(random.Random(seed).sample(range(len(rows)), n))
  mix.splits[holdout.split] = [ex for i, ex in enumerate(rows) if i in held]
  mix.splits[holdout.source] = [ex for i, ex in enumerate(rows) if i not in held]
  mix.sizes[holdout.split], mix.sizes[holdout.source] = n, len(rows) - n
  mix.holdout = {"from": holdout.source, "into": holdout.split, "count": n}

