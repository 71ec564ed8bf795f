"""What launch/build_data.py reports about each split it writes: running counts per split (examples,
answerable / unanswerable / unlabelled, passages, gold passages, prompt characters, per dataset), the
split's manifest entry, and one fixed-width summary table over the splits.

    stats = SplitStats("train")
    for ex, prompt in rows:
      stats.add(ex, prompt)
    manifest["splits"]["train"] = stats.manifest()
    print(format_summary([stats, ...]))
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from grounding_jax.data.schema import Example


@dataclasses.dataclass
class SplitStats:
  """Running counts for one split's summary row and manifest entry."""
  name: str
  examples: int = 0
  answerable: int = 0
  unanswerable: int = 0
  passages: int = 0
  gold: int = 0
  prompt_chars: int = 0
  by_dataset: collections.Counter = dataclasses.field(default_factory=collections.Counter)

  def add(self, ex: Example, prompt: str) -> None:
    self.examples += 1
    self.answerable += ex.answerable is True
    self.unanswerable += ex.answerable is False
    self.passages += len(ex.passages)
    self.gold += len(ex.gold_passage_ids)
    self.prompt_chars += len(prompt)
    dataset = str(ex.meta.get("dataset", "?"))
    self.by_dataset[dataset] += 1
    self.by_dataset[f"{dataset}/answerable"] += ex.answerable is True

  def manifest(self) -> dict[str, Any]:
    datasets = sorted(k for k in self.by_dataset if "/" not in k)
    return {"file": f"{self.name}.jsonl", "examples": self.examples, "answerable": self.answerable,
            "unanswerable": self.unanswerable,
            "unlabelled": self.examples - self.answerable - self.unanswerable,
            "by_dataset": {d: {"examples": self.by_dataset[d],
                               "answerable": self.by_dataset[f"{d}/answerable"]} for d in datasets}}


def format_summary(rows: list[SplitStats]) -> str:
  """A fixed-width table, one line per split."""
  header = ("split", "examples", "answerable", "unanswerable", "unlabelled", "answerable rate",
            "mean passages", "mean gold", "mean prompt chars")
  lines = []
  for s in rows:
    n = max(s.examples, 1)
    labelled = s.answerable + s.unanswerable
    rate = f"{s.answerable / labelled:.3f}" if labelled else "n/a"
    lines.append((s.name, str(s.examples), str(s.answerable), str(s.unanswerable),
                  str(s.examples - labelled), rate, f"{s.passages / n:.2f}", f"{s.gold / n:.2f}",
                  f"{s.prompt_chars / n:.0f}"))
  widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h) for i, h in enumerate(header)]

  def fmt(row) -> str:  # split name left-aligned, numbers right-aligned
    return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

  return "\n".join([fmt(header), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in lines])
