"""A resumable stream of training examples: seeded shuffle per epoch, position = examples consumed.

Multi-host: every host advances the same global position; host h of H takes its contiguous share of
each step's prompts, so a prompt's whole group is sampled, scored and normalised on one host.

`stratify="answerable"` interleaves the answerable and unanswerable examples evenly through each
epoch's order, so every step's prompts hold them in the dataset's proportion (4 + 4 of 8 from a
half-and-half set) instead of a binomial draw: with a few prompts a step, an unstratified step
can be 7 unanswerable prompts of 8, and its update then pushes abstention on every prompt.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np

STRATIFY = ("", "answerable")


class ExampleStream:
  """Examples in a seeded order; `take(n)` returns this host's share of the next n (global) examples.

  Args:
    examples: the stage's dataset.
    seed: shuffling seed (epoch e uses permutation rng(seed, e)).
    shuffle: False keeps file order (within each stratum when stratified).
    position: examples consumed so far over all hosts (restored from a checkpoint).
    stratify: "" (off) or "answerable": strata by `example.answerable` (True, False, unlabelled),
      each shuffled on its own and spread evenly through the epoch (module doc).
  """

  def __init__(self, examples: Sequence[Any], *, seed: int = 0, shuffle: bool = True,
               position: int = 0, stratify: str = ""):
    if not examples:
      raise ValueError("the stage's dataset is empty; check stages[i].data")
    if stratify not in STRATIFY:
      raise ValueError(f"stratify={stratify!r}: expected one of {STRATIFY}")
    self.examples = list(examples)
    self.seed = int(seed)
    self.shuffle = shuffle
    self.position = int(position)
    self._perm_cache: dict[int, np.ndarray] = {}
    self._strata = [np.arange(len(self.examples))]
    if stratify == "answerable":
      labels = [getattr(ex, "answerable", None) for ex in self.examples]
      if all(a is None for a in labels):
        raise ValueError("stratify='answerable': no example has an answerability label "
                         "(Example.answerable); give labelled data or leave data.stratify empty")
      self._strata = [idx for label in (True, False, None)
                      if (idx := np.array([i for i, a in enumerate(labels) if a is label], int)).size]

  def _order(self, epoch: int) -> np.ndarray:
    if epoch not in self._perm_cache:
      rng = np.random.default_rng([self.seed, epoch])
      if len(self._strata) == 1:
        order = rng.permutation(self._strata[0]) if self.shuffle else self._strata[0]
      else:
        # Each stratum's k-th of n examples sits at (k + 1/2) / n of the epoch: every window holds
        # each stratum in proportion, up to one example (ties keep the strata's order).
        members = [rng.permutation(idx) if self.shuffle else idx for idx in self._strata]
        place = np.concatenate([(np.arange(m.size) + 0.5) / m.size for m in members])
        order = np.concatenate(members)[np.argsort(place, kind="stable")]
      self._perm_cache = {epoch: order}
    return self._perm_cache[epoch]

  def peek(self, global_count: int) -> list:
    """Every host's next `global_count` examples (what the next take() calls return, all hosts'
    shares in host order), without advancing."""
    n = len(self.examples)
    return [self.examples[self._order(i // n)[i % n]]
            for i in range(self.position, self.position + global_count)]

  def take(self, global_count: int) -> list:
    """This host's share of the next `global_count` examples; advances the global position."""
    hosts, host = jax.process_count(), jax.process_index()
    if global_count % hosts:
      raise ValueError(f"rollout.prompts_per_step={global_count} must divide over {hosts} hosts")
    share = global_count // hosts
    start = self.position + host * share
    n = len(self.examples)
    out = []
    for i in range(start, start + share):
      out.append(self.examples[self._order(i // n)[i % n]])
    self.position += global_count
    return out
