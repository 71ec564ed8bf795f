"""A multi-turn step's collection: the tool's inserted tokens leave the loss mask (exactly zero
gradient at their logits), the length penalties count the policy's tokens only, and the search
metrics are logged; a missing tool is named before anything runs."""

import copy
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax.data.schema import Example, Passage
from grounding_jax.models import load_tokenizer
from grounding_jax.models import logprobs as logprobs_lib
from grounding_jax.recipes import get_recipe, get_reward
from grounding_jax.rl import collect
from grounding_jax.rl import config as config_lib
from grounding_jax.rl import data_stream
from grounding_jax.rl import host_batch
from grounding_jax.rl import losses
from grounding_jax.rl import reward_pool
from grounding_jax.rl import setup
from scripted_policy import FORMAT, PROMPTS, STOP, DictTool, scripted_model


def _config(max_turns=3):
  c = config_lib.default_config()
  c.rollout.update(dict(prompts_per_step=3, group_size=2, max_new_tokens=24, max_turns=max_turns,
                        temperature=0.05, stop=STOP))  # T = 0.05: the script's margin decides
  c.dapo.update(dict(overlong_shaping=True, overlong_buffer=16))  # bites past 8 tokens
  c.reward.on_error = "raise"
  c.stages = [config_lib.stage("search", num_steps=1, recipe="naive")]
  return c


def _examples():
  """The three scripted prompts' questions; gold passages d9 (never retrieved), d1, and d2 + d7."""
  passages = tuple(Passage(text=f"passage {i}", id=i) for i in ("d1", "d2", "d7", "d9"))
  gold = [(4,), (1,), (2, 3)]
  return [Example(question=f"q{i}", passages=passages, answers=("x",), gold_passage_ids=gold[i],
                  answerable=True, id=str(i)) for i in range(3)]


@pytest.fixture(scope="module")
def step(tiny_checkpoint, smollm2_dir):
  tok = load_tokenizer(smollm2_dir)
  model = scripted_model(tiny_checkpoint, tok)
  c = _config()
  view = setup.stage_config(c, c.stages[0])
  recipe = copy.copy(get_recipe("naive"))
  recipe.tool_format = FORMAT  # the recipe names its tags
  pool = reward_pool.RewardPool([("naive", 1.0, get_reward("naive"))], num_workers=0,
                                on_error="raise")
  prompt_fn = lambda ex: " the story of" * (int(ex.id) + 1) + PROMPTS[int(ex.id)]
  settings = setup.sampling_settings(view, recipe, tool=DictTool())
  collector = collect.Collector(view, recipe, tok, None, host_batch.HostBatches(None), pool,
                                prompt_fn, settings)
  stream = data_stream.ExampleStream(_examples(), seed=0, shuffle=False)
  return model, collector.collect(jax.random.key(0), stream, model)


def test_loss_mask_drops_inserted_tokens_and_lengths_count_policy_tokens(step):
  _, batch = step
  ro = batch.rollout
  assert [len(c) for c in ro.tool_calls] == [0, 0, 1, 1, 2, 2]
  np.testing.assert_array_equal(batch.loss_mask, ro.completion_mask & ro.policy_mask)
  assert (ro.completion_mask & ~ro.policy_mask).sum() == 2 * (2 + 2 * 2)  # " info" + passage
  # Policy tokens 2, 5, 8 (+2, +4 inserted): DAPO's penalty past 24 − 16 = 8 tokens is 0 for all;
  # counting the inserted tokens it would be −0.25 on the last prompt's rows.
  assert ro.sampled_lengths().tolist() == [2, 2, 5, 5, 8, 8]
  assert ro.lengths.tolist() == [2, 2, 7, 7, 12, 12]
  assert batch.metrics["reward/overlong"] == 0.0


def test_search_metrics_are_logged(step):
  m = step[1].metrics
  assert m["search/calls_per_completion"] == pytest.approx(1.0)
  assert m["search/searching_frac"] == pytest.approx(2 / 3)
  assert m["search/gold_recall"] == pytest.approx((0 + 1 + 0.5) / 3)


def test_gradient_at_an_inserted_tokens_logits_is_exactly_zero(step):
  """jax.grad of the policy loss (clipped surrogate + KL + entropy bonus) with respect to the
  hidden states that produce each completion position's logits: exactly 0 where the token was
  inserted by the tool, non-zero on the policy's tokens — for each aggregation (DAPO's token mean,
  GRPO's sequence mean, Dr.GRPO's constant denominator)."""
  model, batch = step
  ro = batch.rollout
  rows = np.repeat(np.arange(ro.num_groups), ro.group_size)
  ids = jnp.concatenate([jnp.asarray(ro.prompt_ids[rows]), jnp.asarray(ro.completion_ids)], 1)
  mask = jnp.concatenate([jnp.asarray(ro.prompt_mask[rows]), jnp.asarray(ro.completion_mask)], 1)
  lp, width = ro.prompt_ids.shape[1], ro.completion_ids.shape[1]
  hidden = jax.lax.stop_gradient(model.hidden_states(ids, mask))[:, lp - 1:lp - 1 + width]
  targets = jnp.asarray(ro.completion_ids)
  advantages = jnp.asarray(batch.advantages) + jnp.array([1.0, -1.0] * 3)  # non-zero everywhere
  inserted = ro.completion_mask & ~ro.policy_mask
  for aggregation in ("token_mean", "seq_mean_token_mean", "seq_sum_constant"):
    cfg = losses.PolicyLossConfig(kl_coef=0.1, entropy_coef=0.01, aggregation=aggregation,
                                  max_completion_length=width)

    def loss(delta):
      logp, entropy = logprobs_lib.token_logprobs(hidden + delta, model.lm_head_kernel(), targets,
                                                  with_entropy=True)
      s, d, _ = losses.policy_loss(logp, jax.lax.stop_gradient(logp) + 0.05, advantages,
                                   jnp.asarray(batch.loss_mask), cfg,
                                   ref_logp=jax.lax.stop_gradient(logp) - 0.1, entropy=entropy)
      return s / d

    grad = np.asarray(jax.grad(loss)(jnp.zeros_like(hidden)))
    per_position = np.abs(grad).sum(axis=-1)
    assert np.all(per_position[inserted] == 0.0), aggregation
    assert np.all(per_position[batch.loss_mask] > 0.0), aggregation


def test_several_turns_without_a_tool_are_named():
  c = _config(max_turns=2)
  view = setup.stage_config(c, c.stages[0])
  with pytest.raises(ValueError, match=r"rollout.max_turns=2 > 1 needs a tool"):
    setup.sampling_settings(view, get_recipe("naive"))
  with pytest.raises(ValueError, match=r"stage 'search': rollout.max_turns=2"):
    setup.check_tool(c, None)
  setup.check_tool(c, DictTool())  # given a tool: fine
  setup.check_tool(_config(max_turns=1), None)  # one turn needs none


def test_evaluation_samples_several_turns_and_reports_the_search_metrics(tiny_checkpoint,
                                                                        smollm2_dir, monkeypatch):
  """The evaluation harness samples through the same multi-turn sampler (settings.max_turns, the
  caller's tool) and reports search/ columns (validation logs them as eval/search/...)."""
  from grounding_jax import recipes  # pylint: disable=g-import-not-at-top
  from grounding_jax.eval import harness  # pylint: disable=g-import-not-at-top
  from grounding_jax.eval.settings import EvalSettings  # pylint: disable=g-import-not-at-top
  tok = load_tokenizer(smollm2_dir)
  model = scripted_model(tiny_checkpoint, tok)
  monkeypatch.setattr(get_recipe("naive"), "tool_format", FORMAT, raising=False)
  settings = EvalSettings(recipe="naive", stop=STOP, max_turns=3, seed=0,
                          decoding=recipes.Decoding(temperature=0.0, max_new_tokens=24))
  prompt_fn = lambda ex: " the story of" * (int(ex.id) + 1) + PROMPTS[int(ex.id)]
  result = harness.evaluate_model(model, tok, _examples(), settings, progress=False,
                                  prompt_fn=prompt_fn, tool=DictTool())
  assert result.metrics["search/calls_per_completion"] == pytest.approx(1.0)
  assert result.metrics["search/searching_frac"] == pytest.approx(2 / 3)
  assert result.metrics["search/gold_recall"] == pytest.approx(0.5)
  assert result.records[2]["completion"].endswith(" info wax finish")
  # Compared with a model that never searched (the same rows, its calls removed): paired intervals
  # of the search metrics, and their Δ columns in the report's table.
  from grounding_jax.eval import comparison, report  # pylint: disable=g-import-not-at-top
  per = result.per_example
  silent = dataclasses.replace(result, name="silent", per_example={
      **per, "searches": np.zeros_like(per["searches"]),
      "gold_recall": np.where(np.isnan(per["gold_recall"]), np.nan, 0.0)})
  iv = comparison.compare([result, silent], "naive", n_resamples=200)[1]
  assert iv["search/searching_frac"].difference == pytest.approx(-2 / 3)
  assert iv["search/calls_per_completion"].difference == pytest.approx(-1.0)
  assert iv["search/gold_recall"].difference == pytest.approx(-0.5)
  assert iv["search/searching_frac"].low <= -2 / 3 <= iv["search/searching_frac"].high
  assert "Δsearching vs first" in report.table("naive", [result, silent], [{}, iv])
