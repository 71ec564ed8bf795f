"""ExampleStream: peek shows what take hands out next, without advancing."""

from grounding_jax.rl import data_stream


def test_peek_is_the_next_take_across_an_epoch_boundary():
  stream = data_stream.ExampleStream(list(range(10)), seed=3, shuffle=True, position=7)
  ahead = stream.peek(6)  # 3 examples of epoch 0, then 3 of epoch 1's own permutation
  assert stream.position == 7
  assert ahead == stream.take(6) and stream.position == 13
  assert sorted(ahead[3:] + stream.peek(7)) == list(range(10))  # epoch 1 continues where it was
