"""A run config's evaluation parts: the evals checks and the reward functions of its last stage,
built without the training loop (launch/evaluate.py)."""

import ml_collections
import pytest

from grounding_jax.data.schema import Example
from grounding_jax.eval import from_config
from grounding_jax.rl import config as rl_config


def _fn(name, weight=1.0, **options):
  return ml_collections.ConfigDict(dict(name=name, weight=weight, options=options))


def _config(last_stage_functions=None):
  c = rl_config.default_config()
  c.reward.functions = [_fn("naive")]
  last = dict(reward=dict(functions=last_stage_functions)) if last_stage_functions else {}
  c.stages = [rl_config.stage("first", 1, recipe="truthrl", reward=dict(functions=[_fn("nope")])),
              rl_config.stage("last", 1, recipe="truthrl", **last)]
  return c


def test_the_last_stage_scores_with_its_own_functions_else_the_runs():
  assert [(n, w) for n, w, _ in from_config.last_stage_rewards(_config())] == [("naive", 1.0)]
  rewards = from_config.last_stage_rewards(_config([_fn("truthrl", 2.0, judge="exact_match")]))
  assert [(n, w) for n, w, _ in rewards] == [("truthrl", 2.0)]  # the first stage's never built
  ex = Example(question="Capital of France?", answers=("Paris",), answerable=True)
  assert rewards[0][2](["\\boxed{Paris}"], [ex])["reward"][0] == 1.0


def test_bad_evals_settings_name_the_field():
  c = _config()
  from_config.check_config(c)
  c.evals.batch_size = 0
  with pytest.raises(ValueError, match=r"evals.batch_size=0 must be >= 1"):
    from_config.check_config(c)
  c.evals.batch_size, c.evals.data.kind = 1, "parquet"
  with pytest.raises(ValueError, match=r"evals.data.kind='parquet'; expected one of"):
    from_config.check_config(c)
