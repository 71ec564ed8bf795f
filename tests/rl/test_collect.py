"""Collection hands every reward the inputs the trainer promises (RewardFn.__call__): GRACE's own
overlong penalty reads `completion_lengths` from a real rollout, and a failed row is never silent."""

import jax
import numpy as np
import pytest

from grounding_jax import models
from grounding_jax.data import synthetic
from grounding_jax.recipes import get_recipe, get_reward
from grounding_jax.rl import collect
from grounding_jax.rl import config as config_lib
from grounding_jax.rl import data_stream
from grounding_jax.rl import host_batch
from grounding_jax.rl import reward_pool
from grounding_jax.rl import setup


@pytest.fixture(scope="module")
def tiny_smollm2(tiny_smollm2_dir):
  return models.load_pretrained(tiny_smollm2_dir), models.load_tokenizer(tiny_smollm2_dir)


def test_grace_overlong_penalty_reads_the_lengths_collection_passes(tiny_smollm2):
  model, tok = tiny_smollm2
  c = config_lib.default_config()
  c.rollout.update(dict(prompts_per_step=2, group_size=2, max_new_tokens=8))
  c.reward.on_error = "raise"  # a missing input would raise, not score 0
  c.stages = [config_lib.stage("grace", num_steps=1, recipe="grace")]
  view = setup.stage_config(c, c.stages[0])
  recipe = get_recipe("grace")
  # The reward's own overlong penalty (not the trainer's shaping), short enough to bite at 8 tokens.
  fn = get_reward("grace", overlong_penalty=True, max_response_length=8, overlong_buffer=4)
  pool = reward_pool.RewardPool([("grace", 1.0, fn)], num_workers=0, on_error="raise")
  collector = collect.Collector(view, recipe, tok, None, host_batch.HostBatches(None), pool,
                                setup.prompt_fn(recipe, tok, None), setup.sampling_settings(view, recipe))
  stream = data_stream.ExampleStream(synthetic.generate_examples(4, seed=1), seed=0)
  batch = collector.collect(jax.random.key(0), stream, model)
  lengths = batch.rollout.lengths
  want = np.minimum(-(lengths - 4) / 4, 0.0)  # DAPO Eq. 13 with L_max 8, buffer 4
  assert batch.metrics["reward/failed_frac"] == 0.0
  np.testing.assert_allclose(batch.metrics["reward/overlong"], want.mean())
  assert batch.metrics["reward/overlong"] < 0  # a random model runs to the limit
  # The answerability split: the step's prompts' labels, and the pooled mean is their weighted mean.
  labels = np.array([ex.answerable for ex in batch.rollout.row_examples()], float)
  assert batch.metrics["answerable_frac"] == labels.mean()
  pooled = sum(batch.metrics.get(f"{side}/reward/mean", 0.0) * share
               for side, share in (("answerable", labels.mean()), ("unanswerable", 1 - labels.mean())))
  np.testing.assert_allclose(pooled, batch.metrics["reward/mean"])


def test_answerability_metrics_average_each_side_and_leave_out_unlabelled_rows():
  values = {"reward": np.array([1.0, -1.0, 0.0, 0.0, -1.0, 1.0]),
            "abstain": np.array([0.0, 0.0, 1.0, 1.0, 0.0, 0.0])}
  answerable = np.array([1.0, 1.0, 0.0, 0.0, 0.0, np.nan])  # the last row unlabelled
  m = collect.answerability_metrics(values, answerable)
  assert m == {"answerable_frac": 2 / 5,
               "answerable/reward/mean": 0.0, "answerable/reward/abstain": 0.0,
               "unanswerable/reward/mean": -1 / 3, "unanswerable/reward/abstain": 2 / 3}
  # One side only: the other is not logged; nothing labelled: nothing logged.
  only = collect.answerability_metrics(values, np.array([1.0] * 6))
  assert only["answerable_frac"] == 1.0 and not any(k.startswith("unanswerable/") for k in only)
  assert collect.answerability_metrics(values, np.full(6, np.nan)) == {}
