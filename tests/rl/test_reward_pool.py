"""The reward pool reports failing / hanging rows by example id and never hangs the loop."""

import dataclasses
import time

import numpy as np
import pytest

from grounding_jax.rl import reward_pool


@dataclasses.dataclass(frozen=True)
class _Ex:
  id: str


class LengthReward:
  """reward = len(text); raises on example 'bad'; hangs on example 'slow'; NaN on example 'nan'
  (module-level: picklable)."""

  reward_range = (0.0, float("inf"))

  def __call__(self, completions, examples, **extra):
    for ex in examples:
      if ex.id == "bad":
        raise ValueError("malformed example")
      if ex.id == "slow":
        time.sleep(60)
    n = np.array([np.nan if ex.id == "nan" else len(c) for c, ex in zip(completions, examples)])
    return {"reward": n, "chars": n}


class ConstReward:

  reward_range = (1.0, 1.0)

  def __call__(self, completions, examples, **extra):
    return {"reward": np.ones(len(completions)), "one": np.ones(len(completions))}


def test_weighted_sum_and_components_in_process():
  pool = reward_pool.RewardPool([("len", 0.5, LengthReward()), ("const", 2.0, ConstReward())],
                                num_workers=0)
  res = pool(["ab", "abcd"], [_Ex("1"), _Ex("2")])
  np.testing.assert_allclose(res.values["reward"], [0.5 * 2 + 2, 0.5 * 4 + 2])
  np.testing.assert_allclose(res.values["len/chars"], [2, 4])
  np.testing.assert_allclose(res.values["const/one"], [1, 1])
  assert not res.failed.any()


def test_failure_and_timeout_in_workers():
  pool = reward_pool.RewardPool([("len", 1.0, LengthReward())], num_workers=2, timeout_seconds=8,
                                chunk_size=2)
  try:
    exs = [_Ex("a"), _Ex("bad"), _Ex("c"), _Ex("d"), _Ex("slow"), _Ex("f")]
    # The 60 s hang comes back as a timed-out failure (not a value), so the pool did not wait for it.
    res = pool(["x", "yy", "zzz", "w", "v", "uu"], exs)
    np.testing.assert_array_equal(res.failed, [False, True, False, False, True, True])
    np.testing.assert_allclose(res.values["reward"], [1, 0, 3, 1, 0, 0])
    assert any("example bad (row 1)" in e and "malformed" in e for e in res.errors)
    assert any("example slow (row 4)" in e and "timed out" in e for e in res.errors)
    # The pool recovers for the next batch.
    res2 = pool(["ab"], [_Ex("ok")])
    np.testing.assert_allclose(res2.values["reward"], [2])
  finally:
    pool.close()


def test_raise_mode_names_the_example():
  pool = reward_pool.RewardPool([("len", 1.0, LengthReward())], num_workers=0, on_error="raise")
  with pytest.raises(RuntimeError, match="example bad"):
    pool(["x", "y"], [_Ex("ok"), _Ex("bad")])


class TernaryReward:
  """TruthRL-like: +1 correct, −1 wrong (every row here is wrong); raises on example 'bad'."""

  reward_range = (-1.0, 1.0)

  def __call__(self, completions, examples, **extra):
    if any(ex.id == "bad" for ex in examples):
      raise TimeoutError("judge timed out")
    return {"reward": -np.ones(len(completions))}


def test_failed_and_nonfinite_rows_score_the_floor_and_never_outrank_a_wrong_answer():
  from grounding_jax.rl import advantages
  pool = reward_pool.RewardPool([("truth", 2.0, TernaryReward()), ("const", 0.5, ConstReward())],
                                num_workers=0)
  assert pool.on_error == "min" and pool.floor == 2.0 * -1 + 0.5 * 1
  res = pool(["a", "b", "c", "d"], [_Ex("1"), _Ex("bad"), _Ex("3"), _Ex("4")])
  np.testing.assert_array_equal(res.failed, [False, True, False, False])
  np.testing.assert_allclose(res.values["reward"], [-1.5] * 4)  # the failed row ties the wrong ones
  assert not advantages.group_advantages(res.values["reward"], 4).any()
  assert any("example bad (row 1)" in e and "judge timed out" in e for e in res.errors)
  # A NaN reward is a failed row too, in every mode, and never reaches the advantages.
  for mode, fill in (("min", 0.0), ("skip", 0.0)):
    res = reward_pool.RewardPool([("len", 1.0, LengthReward())], num_workers=0, on_error=mode)(
        ["xy", "z"], [_Ex("nan"), _Ex("ok")])
    np.testing.assert_array_equal(res.failed, [True, False])
    np.testing.assert_allclose(res.values["reward"], [fill, 1.0])
    assert "example nan (row 0): reward is nan (not finite)" in res.errors
  with pytest.raises(RuntimeError, match="example nan"):
    reward_pool.RewardPool([("len", 1.0, LengthReward())], num_workers=0, on_error="raise")(
        ["xy"], [_Ex("nan")])


def test_min_needs_a_finite_floor_from_every_function():
  class Unbounded:
    reward_range = (-np.inf, 1.0)

  class NoRange:
    pass

  with pytest.raises(ValueError, match=r"reward 'open'.*no finite low bound.*'skip'"):
    reward_pool.RewardPool([("open", 1.0, Unbounded())], num_workers=0)
  with pytest.raises(ValueError, match=r"reward 'open'.*no finite high bound for weight -1"):
    reward_pool.RewardPool([("open", -1.0, LengthReward())], num_workers=0)
  with pytest.raises(ValueError, match=r"reward 'plain' \(NoRange\) has no reward_range"):
    reward_pool.RewardPool([("plain", 1.0, NoRange())], num_workers=0)
  assert reward_pool.RewardPool([("open", 1.0, Unbounded())], num_workers=0, on_error="skip")
  assert reward_pool.reward_floor([("a", 0.0, Unbounded()), ("b", -2.0, ConstReward())]) == -2.0
  with pytest.raises(ValueError, match="'zero' is gone"):
    reward_pool.RewardPool([("len", 1.0, LengthReward())], num_workers=0, on_error="zero")
