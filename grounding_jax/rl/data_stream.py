"""A resumable stream of training examples: seeded shuffle per epoch, position = examples consumed.

Multi-host: every host advances the same global position; host h of H takes its contiguous share of
each step's prompts, so a prompt's whole group is sampled, scored and normalised on one host.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np


class ExampleStream:
  """Examples in a seeded order; `take(n)` returns this host's share of the next n (global) examples.

  Args:
    examples: the stage's dataset.
    seed: shuffling seed (epoch e uses permutation rng(seed, e)).
    shuffle: False keeps file order.
    position: examples consumed so far over all hosts (restored from a checkpoint).
  """

  def __init__(self, examples: Sequence[Any], *, seed: int = 0, shuffle: bool = True,
               position: int = 0):
    if not examples:
      raise ValueError("the stage's dataset is empty; check stages[i].data")
    self.examples = list(examples)
    self.seed = int(seed)
    self.shuffle = shuffle
    self.position = int(position)
    self._perm_cache: dict[int, np.ndarray] = {}

  def _order(self, epoch: int) -> np.ndarray:
    if epoch not in self._perm_cache:
      n = len(self.examples)
      self._perm_cache = {epoch: (np.random.default_rng([self.seed, epoch]).permutation(n)
                                  if self.shuffle else np.arange(n))}
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
