"""ExampleStream: peek shows what take hands out next, without advancing; stratified orders put
every stratum in every step in proportion."""

import numpy as np
import pytest

from grounding_jax.rl import data_stream


def test_peek_is_the_next_take_across_an_epoch_boundary():
  stream = data_stream.ExampleStream(list(range(10)), seed=3, shuffle=True, position=7)
  ahead = stream.peek(6)  # 3 examples of epoch 0, then 3 of epoch 1's own permutation
  assert stream.position == 7
  assert ahead == stream.take(6) and stream.position == 13
  assert sorted(ahead[3:] + stream.peek(7)) == list(range(10))  # epoch 1 continues where it was


class _Ex:
  def __init__(self, i, answerable):
    self.i, self.answerable = i, answerable

  def __repr__(self):
    return f"_Ex({self.i}, {self.answerable})"


def test_stratified_order_puts_both_kinds_in_every_step_in_the_sets_proportion():
  rng = np.random.default_rng(0)
  labels = rng.permutation([True] * 32 + [False] * 32)  # as a half-and-half set comes, in any order
  examples = [_Ex(i, bool(a)) for i, a in enumerate(labels)]
  stream = data_stream.ExampleStream(examples, seed=5, stratify="answerable")
  for _ in range(20):  # two and a half epochs of 8-prompt steps
    step = stream.take(8)
    assert sum(ex.answerable for ex in step) == 4
  # Every epoch is still a permutation of the whole set, and the order differs between epochs.
  epochs = [stream._order(e) for e in (0, 1)]
  assert all(sorted(o.tolist()) == list(range(64)) for o in epochs)
  assert epochs[0].tolist() != epochs[1].tolist()
  # Unstratified, the same set's 8-prompt steps are binomial draws: some far from 4 + 4.
  plain = data_stream.ExampleStream(examples, seed=5)
  assert {sum(ex.answerable for ex in plain.take(8)) for _ in range(8)} != {4}


def test_stratified_order_keeps_proportions_with_unequal_and_unlabelled_strata():
  examples = ([_Ex(i, True) for i in range(30)] + [_Ex(i, False) for i in range(30, 40)]
              + [_Ex(i, None) for i in range(40, 50)])
  stream = data_stream.ExampleStream(examples, seed=1, stratify="answerable")
  for _ in range(5):  # 3 : 1 : 1 in every window of 10
    step = stream.take(10)
    assert [sum(ex.answerable is a for ex in step) for a in (True, False, None)] == [6, 2, 2]
  # Without shuffling, each stratum keeps its file order.
  fixed = data_stream.ExampleStream(examples, shuffle=False, stratify="answerable").take(50)
  assert [ex.i for ex in fixed if ex.answerable] == list(range(30))


def test_stratify_refuses_unknown_modes_and_unlabelled_data():
  with pytest.raises(ValueError, match="stratify='hops'"):
    data_stream.ExampleStream(list(range(4)), stratify="hops")
  with pytest.raises(ValueError, match="no example has an answerability label"):
    data_stream.ExampleStream([_Ex(i, None) for i in range(4)], stratify="answerable")
