"""Abstention controls (rl/abstention.py): dual prices — the update and the shaping against hand
arithmetic, the config section, and a tiny-model run whose checkpoint carries the prices into the
resumed run; the projection off the shared choice — against a least-squares residual and in the
Collector's batch. The toy two-armed comparisons are in test_evidence_contrast.py."""

import jax
import numpy as np
import pytest

import toy_task
from grounding_jax import checkpoints
from grounding_jax import models
from grounding_jax.rl import abstention
from grounding_jax.rl import collect
from grounding_jax.rl import config as config_lib
from grounding_jax.rl import data_stream
from grounding_jax.rl import host_batch
from grounding_jax.rl import reward_pool
from grounding_jax.rl import setup
from grounding_jax.rl import trainer
from test_evidence_contrast import _prompt, _toy_examples

NAN = float("nan")


def test_update_moves_each_multiplier_by_its_violation_and_clips():
  prices = abstention.AbstentionPrices(max_answerable=0.2, min_unanswerable=0.7, rate=1.0,
                                       max_price=1.0)
  answerable = np.array([1, 1, 1, 1, 0, 0, 0, 0, NAN, NAN])
  abstained = np.array([1, 1, 0, 0, 1, 0, 0, 0, 1, 1], bool)
  prices.update(abstained, answerable)  # answerable 0.5 abstain, unanswerable 0.25
  assert prices.price == pytest.approx(0.3) and prices.bonus == pytest.approx(0.45)
  rewards = np.array([0., 0., 1., -1., 0., -1., -1., -1., 0., 0.])
  shaped = prices.shape(rewards, abstained, answerable)
  np.testing.assert_allclose(shaped, [-0.3, -0.3, 1, -1, 0.45, -1, -1, -1, 0, 0])  # unlabelled kept
  prices.update(~abstained, answerable)  # answerable 0.5 again, unanswerable 0.75: over its bound
  assert prices.price == pytest.approx(0.6) and prices.bonus == pytest.approx(0.4)
  for _ in range(5):
    prices.update(np.ones(10, bool), answerable)
  assert prices.price == 1.0 and prices.bonus == 0.0  # clipped to [0, max_price]
  only_answerable = np.array([1.0, 1.0])
  prices.update(np.zeros(2, bool), only_answerable)  # no unanswerable rows: the bonus stays
  assert prices.price == pytest.approx(0.8) and prices.bonus == 0.0


def test_config_section_off_by_default_and_meta_round_trip():
  c = config_lib.default_config()
  assert abstention.AbstentionPrices.from_config(c.abstention) is None
  c.abstention.control = "dual"
  prices = abstention.AbstentionPrices.from_config(c.abstention)
  assert (prices.max_answerable, prices.min_unanswerable, prices.price) == (0.2, 0.7, 0.0)
  prices.price, prices.bonus = 0.25, 0.5
  again = abstention.AbstentionPrices.from_config(c.abstention, saved={"step": 3, **prices.meta()})
  assert (again.price, again.bonus) == (0.25, 0.5)
  c.abstention.control = "lagrange"
  with pytest.raises(ValueError, match="abstention.control"):
    abstention.AbstentionPrices.from_config(c.abstention)


def test_component_values_finds_the_mark_under_a_reward_name():
  values = {"reward": np.zeros(2), "b/abstain": np.ones(2), "a/other": np.zeros(2)}
  np.testing.assert_array_equal(abstention.component_values(values, "abstain"), [1, 1])
  assert abstention.component_values(values, "refused") is None


class AbstainingShareReward(toy_task.TargetShareReward):
  """The target-word share, with `abstain` 1 where the completion begins with w3 (picklable)."""

  def __call__(self, completions, examples, **extra):
    out = super().__call__(completions, examples)
    out["abstain"] = np.array([float(t.split()[:1] == ["w3"]) for t in completions])
    return out


def _run(tmp_path, model_path, max_steps=None):
  c = toy_task.toy_config(tmp_path, steps=3, prompts=2, group=4, new_tokens=4)
  c.stages = [config_lib.stage("toy", num_steps=3, recipe="truthrl",
                               data=dict(evidence_contrast="gold_removed"))]
  # Targets no sampled share can meet, so both multipliers move every step.
  c.abstention.update(dict(control="dual", max_answerable=0.0, min_unanswerable=1.0, rate=0.25))
  return trainer.Trainer(c, model=models.load_pretrained(model_path),
                         tokenizer=toy_task.make_tokenizer(),
                         reward_functions=[("toy", 1.0, AbstainingShareReward())],
                         datasets={"toy": _toy_examples(12)}, prompt_fn=_prompt).train(
                             max_steps=max_steps)


def test_trainer_shapes_with_the_prices_and_a_resumed_run_continues_them(tiny_checkpoint, tmp_path):
  first = _run(tmp_path, tiny_checkpoint("llama"), max_steps=2)
  price, bonus = (first[-1][f"abstention/{k}"] for k in ("price_answerable", "bonus_unanswerable"))
  a_ans, a_un = (first[-1][f"{side}/reward/abstain"] for side in ("answerable", "unanswerable"))
  before = first[-2]
  assert price == pytest.approx(min(before["abstention/price_answerable"] + 0.25 * a_ans, 1.0))
  assert bonus == pytest.approx(min(before["abstention/bonus_unanswerable"] + 0.25 * (1 - a_un), 1.0))
  assert price > 0 or bonus > 0  # targets no share meets: a multiplier moved
  meta = checkpoints.Checkpointer(tmp_path / "checkpoints").read_meta(2)
  assert meta["abstention_prices"] == pytest.approx([price, bonus])
  resumed = _run(tmp_path, tiny_checkpoint("llama"))  # step 3 from the checkpoint of step 2
  assert [h["step"] for h in resumed] == [3]
  third = resumed[-1]
  assert third["abstention/price_answerable"] == pytest.approx(
      min(price + 0.25 * third["answerable/reward/abstain"], 1.0))
  assert third["abstention/bonus_unanswerable"] == pytest.approx(
      min(bonus + 0.25 * (1 - third["unanswerable/reward/abstain"]), 1.0))


def test_a_recipe_that_marks_no_abstention_is_refused_before_loading():
  c = toy_task.toy_config("/tmp/unused")
  c.abstention.control = "dual"  # the toy stage's recipe is naive: no abstention component
  with pytest.raises(ValueError, match="recipe 'naive' marks no abstention"):
    setup.check_config(c, read_data=False, need_model_path=False)
  c.stages[0].recipe = "truthrl"
  setup.check_config(c, read_data=False, need_model_path=False)


def test_projection_removes_the_shared_choice_and_keeps_each_sides_mean():
  answerable = np.array([1, 1, 1, 1, 0, 0, 0, 0, NAN])
  abstained = np.array([1, 0, 0, 0, 1, 1, 1, 0, 1], bool)
  scores = abstention.shared_choice_scores(abstained, answerable)
  np.testing.assert_allclose(scores, [0.75, -0.25, -0.25, -0.25, 0.25, 0.25, 0.25, -0.75, 0])
  adv = np.array([-1.0, 1.2, 0.3, -0.5, 0.9, 0.8, 1.1, -2.0, 0.4])
  projected, lam, dot = abstention.project_out_shared_choice(adv, scores)
  # the least-squares residual of the advantages on the scores (an independent computation)
  coef = np.linalg.lstsq(scores[:, None], adv, rcond=None)[0][0]
  assert lam == pytest.approx(coef) and dot == pytest.approx(adv @ scores)
  np.testing.assert_allclose(projected, adv - coef * scores)
  assert projected @ scores == pytest.approx(0, abs=1e-12)
  for side in (1, 0):
    rows = answerable == side
    assert projected[rows].mean() == pytest.approx(adv[rows].mean())
  assert projected[-1] == adv[-1]  # unlabelled row untouched
  same = abstention.project_out_shared_choice(adv, np.zeros(9))  # no row's choice varies
  np.testing.assert_array_equal(same[0], adv) and same[1] == 0.0
  # every host's partial sums: two halves give the one-host answer
  halves = [(adv[:4], scores[:4]), (adv[4:], scores[4:])]
  sums = sum(np.array([a @ s, s @ s]) for a, s in halves)
  for a, s in halves:
    got = abstention.project_out_shared_choice(a, s, total=lambda _: sums)[0]
    np.testing.assert_allclose(got, a - coef * s)


class ParityAbstains(toy_task.TargetShareReward):
  """The target-word share, with `abstain` 1 where the first word's number is even (picklable; a
  random tiny model's choice then varies within a step)."""

  def __call__(self, completions, examples, **extra):
    out = super().__call__(completions, examples)
    first = [t.split()[:1] for t in completions]
    out["abstain"] = np.array([float(bool(w) and w[0][1:].isdigit() and int(w[0][1:]) % 2 == 0)
                               for w in first])
    return out


def test_collector_projects_the_batch_advantages(tiny_checkpoint, tmp_path):
  c = toy_task.toy_config(tmp_path, steps=1, prompts=4, group=4, new_tokens=4)
  c.stages = [config_lib.stage("toy", num_steps=1, recipe="truthrl",
                               data=dict(evidence_contrast="gold_removed"))]
  c.advantage.scale = "group"
  c.abstention.control = "project"
  st = c.stages[0]
  view = setup.stage_config(c, st)
  questions, contrast = setup.evidence_contrast(st, _toy_examples(12), seed=5)
  recipe = setup.recipes.get_recipe("truthrl")
  reward = ParityAbstains()
  pool = reward_pool.RewardPool([("toy", 1.0, reward)], num_workers=0)
  settings = setup.sampling_settings(view, recipe, setup.samples_per_prompt(view, st))
  collector = collect.Collector(view, recipe, toy_task.make_tokenizer(), None,
                                host_batch.HostBatches(None), pool, _prompt, settings, contrast)
  batch = collector.collect(jax.random.key(0), data_stream.ExampleStream(questions, seed=0),
                            models.load_pretrained(tiny_checkpoint("llama")))
  ro = batch.rollout
  out = reward(ro.texts, ro.row_examples())
  rewards = out["reward"].reshape(-1, 4)  # one contrast group: 2 gold-kept + 2 gold-removed rows
  mean, std = rewards.mean(1, keepdims=True), rewards.std(1, ddof=1, keepdims=True)
  plain = np.where(std > 0, (rewards - mean) / (std + 1e-4), 0.0).reshape(-1)
  answerable = np.array([float(ex.answerable) for ex in ro.row_examples()])
  abstained = out["abstain"] > 0.5
  scores = np.zeros(len(plain))
  for side in (1, 0):
    scores[answerable == side] = abstained[answerable == side] - abstained[answerable == side].mean()
  assert scores @ scores > 0  # the choice varies in this batch
  lam = (plain @ scores) / (scores @ scores)
  np.testing.assert_allclose(batch.advantages, plain - lam * scores, rtol=1e-5, atol=1e-5)
  assert batch.metrics["abstention/projection"] == pytest.approx(lam, rel=1e-5, abs=1e-6)
  assert batch.metrics["abstention/shared_push"] == pytest.approx(plain @ scores / len(plain),
                                                                  rel=1e-5, abs=1e-6)
