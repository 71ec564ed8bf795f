"""Run health (rl/health.py), end to end through the trainer on the toy task: non-finite rewards,
start weights and learning rates never reach a checkpoint, are counted and logged, and stop the run
after health.max_consecutive_nonfinite skipped steps; an unwritable checkpoint directory and a bad
stage-2 data file fail before work is lost; the health/ monitors and their warnings."""

import dataclasses
import json
import logging
import pathlib
import shutil

import jax
import numpy as np
import pytest
import safetensors.numpy

import toy_task
from grounding_jax import checkpoints
from grounding_jax import models
from grounding_jax.rl import config as config_lib
from grounding_jax.rl.config import checks as config_checks
from grounding_jax.rl import health
from grounding_jax.rl import losses
from grounding_jax.rl import trainer
from grounding_jax.rl import update


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _start_params(ckpt):
  return _leaves(update.split_model(models.load_pretrained(ckpt))[1])


def _rows(workdir):
  return [json.loads(line) for line in (workdir / "logs" / "metrics.jsonl").read_text().splitlines()]


def _config(workdir, steps=3, **kw):
  """The toy task, 8 rows a step. Runs of equal `steps` and learning rate share compiled programs."""
  c = toy_task.toy_config(workdir, steps=steps, prompts=2, group=4, **kw)
  c.checkpoint.max_to_keep = 1  # rotation must still never drop the newest finite checkpoint
  return c


def _restored_params(workdir, ckpt):
  """The params of the newest checkpoint, verified against its checksums."""
  tr = toy_task.make_trainer(ckpt, workdir, _config(workdir))
  state, meta, step = tr.checkpointer.restore_latest_intact(tr._restore_target)
  return _leaves(state["params"]), step


class NanFirstRow(toy_task.TargetShareReward):
  """NaN for row 0 of every batch, inf for row 5."""

  def __call__(self, completions, examples, **extra):
    out = super().__call__(completions, examples)
    r = out["reward"].copy()
    r[0], r[5] = np.nan, np.inf
    return {"reward": r, "target_share": out["target_share"]}


def test_nan_reward_rows_count_as_failed_and_the_run_trains_on(tiny_checkpoint, tmp_path, caplog):
  ckpt = tiny_checkpoint("llama")
  tr = toy_task.make_trainer(ckpt, tmp_path, _config(tmp_path), reward=NanFirstRow())
  with caplog.at_level(logging.WARNING):
    history = tr.train(max_steps=2)
  for h in history:
    assert h["reward/failed_frac"] == h["reward/nonfinite_frac"] == 2 / 8
    assert np.isfinite(h["reward/mean"]) and h["nonfinite/skipped_updates"] == 0
    assert f"step {h['step']}: reward not finite in 25% of the rows" in caplog.text
  params = _leaves(tr.params)
  assert all(np.isfinite(p).all() for p in params)
  assert any(not np.array_equal(a, b) for a, b in zip(params, _start_params(ckpt)))  # it learned
  saved, step = _restored_params(tmp_path, ckpt)
  assert step == 2
  for a, b in zip(saved, params):
    np.testing.assert_array_equal(a, b)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # lr → float32
def test_an_overflowing_learning_rate_is_skipped_counted_and_stops_the_run(tiny_checkpoint, tmp_path,
                                                                             caplog):
  """lr = 1e39 overflows float32: every update is non-finite and skipped; after
  health.max_consecutive_nonfinite = 2 such steps the run stops, its checkpoint the start weights."""
  ckpt = tiny_checkpoint("llama")
  c = _config(tmp_path, lr=1e39)
  c.health.max_consecutive_nonfinite = 2
  tr = toy_task.make_trainer(ckpt, tmp_path, c)
  with caplog.at_level(logging.WARNING), pytest.raises(health.NonFiniteRunError) as info:
    tr.train()
  assert str(info.value) == (
      "stopping at step 2: steps 1–2 each skipped their update as non-finite "
      "(health.max_consecutive_nonfinite=2); at step 2 the first non-finite quantity was the "
      "updated parameters or optimizer state (update). The newest checkpoint, "
      f"{tmp_path / 'checkpoints' / '1'}, holds finite parameters: lower "
      "optimizer.learning_rate, then re-run with the same workdir to resume")
  assert ("step 1: 1 update(s) skipped, the first non-finite quantity: the updated parameters or "
          "optimizer state (update) — parameters and optimizer state are kept") in caplog.text
  rows = _rows(tmp_path)  # the stopping step is logged too
  assert [(r["step"], r["nonfinite/skipped"], r["nonfinite/skipped_updates"]) for r in rows] == \
      [(1, 1, 1), (2, 1, 2)]
  assert [update.nonfinite_name(r["nonfinite/first"]) for r in rows] == ["update", "update"]
  start = _start_params(ckpt)
  for a, b in zip(_leaves(tr.params), start):  # no update was applied
    np.testing.assert_array_equal(a, b)
  saved, step = _restored_params(tmp_path, ckpt)
  assert step == 1
  for a, b in zip(saved, start):
    np.testing.assert_array_equal(a, b)


def test_nan_start_weights_are_refused_on_load_and_the_previous_checkpoint_stays(
    tiny_chat_model, tmp_path):
  """A start model with one NaN weight fails in Trainer(...), naming the tensor, before any step:
  the workdir's checkpoint from an earlier run is untouched."""
  folder = tmp_path / "nan_model"
  shutil.copytree(tiny_chat_model, folder)
  tensors = safetensors.numpy.load_file(folder / "model.safetensors")
  tensors["model.layers.1.mlp.down_proj.weight"][3, 5] = np.nan
  safetensors.numpy.save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
  work = tmp_path / "run"
  toy_task.make_trainer(tiny_chat_model, work, _config(work)).train(max_steps=1)
  before = _rows(work)
  c = _config(work)
  c.model.path = str(folder)
  # Not resuming: a resumed run takes its weights from the checkpoint and never reads these.
  c.checkpoint.resume = False
  with pytest.raises(health.NonFiniteWeightsError,
                     match=r"the start model \(.*nan_model\) has NaN or inf values in 1 of \d+ "
                           r"tensors: layers\.1\.mlp\.down_proj;"):
    trainer.Trainer(c, tokenizer=toy_task.make_tokenizer(), prompt_fn=toy_task.prompt_fn,
                    reward_functions=[("toy", 1.0, toy_task.TargetShareReward())],
                    datasets={"toy": toy_task.make_examples(8)})
  assert checkpoints.latest_step(work / "checkpoints") == 1 and _rows(work) == before


def test_a_read_only_checkpoint_directory_fails_at_the_next_save_and_keeps_the_last_one(
    tiny_checkpoint, tmp_path, make_read_only):
  ckpt = tiny_checkpoint("llama")
  tr = toy_task.make_trainer(ckpt, tmp_path, _config(tmp_path))
  tr.train(max_steps=1)
  step1 = _leaves(tr.params)
  undo = make_read_only(tmp_path / "checkpoints")
  with pytest.raises(PermissionError, match=f"{tmp_path / 'checkpoints'} is not writable"):
    tr.train(max_steps=1)  # step 2 trains, then its save fails at once (no orbax timeout)
  with pytest.raises(PermissionError, match="not writable"):  # a new run says so before a step
    toy_task.make_trainer(ckpt, tmp_path, _config(tmp_path))
  undo()
  assert [r["step"] for r in _rows(tmp_path)] == [1, 2]
  saved, step = _restored_params(tmp_path, ckpt)
  assert step == 1
  for a, b in zip(saved, step1):
    np.testing.assert_array_equal(a, b)


def test_a_bad_stage_2_data_file_fails_before_stage_1_trains(tiny_chat_model, tmp_path):
  good, bad = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"
  good.write_text("".join(json.dumps({"question": f"w{i} w7", "answers": ["w3"]}) + "\n"
                          for i in range(13, 20)))
  bad.write_text(json.dumps({"question": "w13", "answers": ["w3"]}) + "\n" + '{"question": "w14", \n')
  c = _config(tmp_path / "run")
  c.model.path = str(tiny_chat_model)
  c.stages = [config_lib.stage("one", 2), config_lib.stage("two", 2)]
  c.stages[0].data.update(dict(kind="jsonl", path=str(good)))
  c.stages[1].data.update(dict(kind="jsonl", path=str(bad)))
  with pytest.raises(config_checks.ConfigError, match=r"config\.stages\[1\]\.data\.path=.*s2\.jsonl:2"):
    trainer.Trainer(c, reward_functions=[("toy", 1.0, toy_task.TargetShareReward())],
                    prompt_fn=toy_task.prompt_fn)
  assert not (tmp_path / "run").exists()  # no step ran, no checkpoint or log was written


def test_health_monitors_are_logged_every_step_and_warn_once_per_crossing(tiny_checkpoint, tmp_path,
                                                                          caplog):
  ckpt = tiny_checkpoint("llama")
  c = _config(tmp_path, lr=1e-2)
  c.loss.kl_coef = 0.05  # a reference, so KL is monitored
  c.update_loop.num_iterations = 2  # off-policy: recomputed old log-probs, clipping can happen
  c.health.update(dict(entropy_min=100.0, logprob_gap_peak_max=0.0, kl_max=None,
                       clip_frac_max=None, logprob_gap_mean_max=None, param_norm_ratio_max=None))
  tr = toy_task.make_trainer(ckpt, tmp_path, c)
  with caplog.at_level(logging.WARNING):
    history = tr.train()
  for h in history:
    assert h["health/entropy"] == h["entropy"] and h["health/kl"] == h["kl"]
    assert h["health/clip_frac"] == h["clip_frac"]
    # Recomputed old log-probs vs the sampler's, same parameters, float32: rounding only.
    assert 0 < h["health/logprob_gap_mean"] <= h["health/logprob_gap_peak"] < 1e-4
    assert "logprob_gap_mean" not in h  # logged under health/ only
  start = _start_params(ckpt)
  norm = lambda leaves: np.sqrt(sum(np.sum(np.square(x.astype(np.float64))) for x in leaves))
  np.testing.assert_allclose(history[-1]["health/param_norm"], norm(_leaves(tr.params)), rtol=1e-5)
  np.testing.assert_allclose(history[-1]["health/param_norm_ratio"],
                             norm(_leaves(tr.params)) / norm(start), rtol=1e-5)
  warnings = [r.getMessage() for r in caplog.records if "health/" in r.getMessage()]
  assert len(warnings) == 2, warnings  # one per crossing, not one per step
  assert warnings[0].startswith("step 1: health/entropy=") and "below health.entropy_min=100" in \
      warnings[0]
  assert warnings[1].startswith("step 1: health/logprob_gap_peak=") and \
      "above health.logprob_gap_peak_max=0" in warnings[1]


def _bounds(**kw):
  c = config_lib.default_config().health
  c.update(kw)
  return c


def test_warnings_repeat_only_after_a_monitor_is_back_within_its_bound(caplog):
  h = health.RunHealth(_bounds(clip_frac_max=0.2))
  params = {"w": np.ones(4, np.float32)}
  h.start_stage(params)
  with caplog.at_level(logging.INFO):
    for step, clip in enumerate([0.1, 0.3, 0.5, float("nan"), 0.1, 0.25], start=1):
      h.observe(step, {"clip_frac": clip, "entropy": 1.0}, params)
  lines = [r.getMessage() for r in caplog.records if "clip_frac" in r.getMessage()]
  assert lines == ["step 2: health/clip_frac=0.3 is above health.clip_frac_max=0.2",
                   "step 5: health/clip_frac=0.1 is back within health.clip_frac_max=0.2",
                   "step 6: health/clip_frac=0.25 is above health.clip_frac_max=0.2"]


def test_skip_counts_reset_on_a_finite_step_and_resume_with_the_checkpoint():
  class Latest:  # what stop_if_stuck reads of the run's Checkpointer
    directory = pathlib.Path("/ck")

    def latest_step(self):
      return 4

  params = {"w": np.full(4, 2.0, np.float32)}
  h = health.RunHealth(_bounds(max_consecutive_nonfinite=3))
  h.start_stage(params)
  skipped = {"nonfinite/skipped": 2.0, "nonfinite/first": 3.0}  # two updates, gradient first
  for step, m in enumerate([skipped, skipped, {}, skipped, skipped], start=1):
    out = h.observe(step, m, params)
    h.stop_if_stuck(step, Latest())
  assert out["nonfinite/skipped_updates"] == 8 and h.consecutive == 2
  resumed = health.RunHealth(_bounds(max_consecutive_nonfinite=3), json.loads(json.dumps(h.state())))
  resumed.observe(6, skipped, {"w": np.full(4, 3.0, np.float32)})
  with pytest.raises(health.NonFiniteRunError, match=r"stopping at step 6: steps 4–6 .* was the "
                     r"gradient\. The newest checkpoint, /ck/4, holds finite parameters: lower"):
    resumed.stop_if_stuck(6, Latest())
  assert resumed.observe(7, {}, {"w": np.full(4, 3.0, np.float32)})["health/param_norm_ratio"] == 1.5
  never = health.RunHealth(_bounds(max_consecutive_nonfinite=0))
  for step in range(1, 10):
    never.observe(step, skipped, params)
    never.stop_if_stuck(step, Latest())


def test_a_nonfinite_state_is_not_saved_and_the_newest_finite_checkpoint_stays(tmp_path, caplog):
  ck = checkpoints.Checkpointer(tmp_path / "ck", max_to_keep=1)
  good = {"params": {"w": np.ones(3, np.float32)}}
  assert health.save_finite(ck, 1, good, {})
  with caplog.at_level(logging.WARNING):
    assert not health.save_finite(ck, 2, {"params": {"w": np.array([1, np.nan, 1], np.float32)}}, {})
  assert "not writing checkpoint" in caplog.text and "training continues" in caplog.text
  assert ck.all_steps() == [1]


def test_the_logprob_gap_is_the_mean_and_peak_absolute_difference_over_loss_tokens():
  rng = np.random.default_rng(0)
  logp = rng.normal(size=(4, 6)).astype(np.float32)
  delta = rng.normal(size=(4, 6)).astype(np.float32)
  mask = rng.random((4, 6)) < 0.6
  delta[~mask] = 100.0  # padding never counts
  for xp in (np, jax.numpy):
    pairs = losses.logprob_gap(logp, logp + delta, mask, xp=xp)
    (s, n), (peak, _) = pairs["logprob_gap_mean"], pairs["logprob_gap_peak"]
    np.testing.assert_allclose(float(s) / float(n), np.abs(delta[mask]).mean(), rtol=1e-5)
    np.testing.assert_allclose(float(peak), np.abs(delta[mask]).max(), rtol=1e-6)


def _corner_metrics(answerable, unanswerable, key="abstain"):
  return {"entropy": 1.0, f"answerable/reward/{key}": answerable,
          f"unanswerable/reward/{key}": unanswerable}


def test_the_corner_alarm_logs_both_sides_and_warns_once_per_corner(caplog):
  h = health.RunHealth(_bounds(abstain_answerable_max=0.8, abstain_unanswerable_min=0.1))
  params = {"w": np.ones(4, np.float32)}
  h.start_stage(params)
  # Answerable side: 0.2, 0.5, 0.9 (refuse-everything), back to 0.5, 0.95 again: warned once.
  # Unanswerable side: 0.6, then 0.05 at step 4 (answer-everything): warned once.
  steps = [(0.2, 0.6), (0.5, 0.6), (0.9, 0.6), (0.5, 0.05), (0.95, 0.0)]
  with caplog.at_level(logging.INFO):
    for step, (a, u) in enumerate(steps, start=1):
      out = h.observe(step, _corner_metrics(a, u), params, abstention="abstain")
      assert out["health/abstain_answerable"] == a and out["health/abstain_unanswerable"] == u
  lines = [r.getMessage() for r in caplog.records if "abstention on" in r.getMessage()]
  assert lines == [
      "step 3: abstention on answerable prompts is 0.9 (health/abstain_answerable), above "
      "health.abstain_answerable_max=0.8: the refuse-everything corner (warned once)",
      "step 4: abstention on unanswerable prompts is 0.05 (health/abstain_unanswerable), below "
      "health.abstain_unanswerable_min=0.1: the answer-everything corner (warned once)"]
  assert all(r.levelno == logging.WARNING for r in caplog.records if "abstention on" in r.getMessage())
  # A resumed run does not warn again about a corner it already reported.
  caplog.clear()
  resumed = health.RunHealth(_bounds(abstain_answerable_max=0.8, abstain_unanswerable_min=0.1),
                             json.loads(json.dumps(h.state())))
  with caplog.at_level(logging.WARNING):
    resumed.observe(6, _corner_metrics(1.0, 0.0), params, abstention="abstain")
  assert "abstention on" not in caplog.text


def test_the_corner_alarm_is_off_by_default_and_reads_the_recipe_component(caplog):
  params = {"w": np.ones(4, np.float32)}
  h = health.RunHealth(_bounds())  # defaults: no bound, the rates are still logged
  h.start_stage(params)
  with caplog.at_level(logging.WARNING):
    out = h.observe(1, _corner_metrics(1.0, 0.0), params, abstention="abstain")
  assert out["health/abstain_answerable"] == 1.0 and "abstention on" not in caplog.text
  # No component (a recipe whose reward marks no abstention), or no labelled rows: no keys.
  assert not any(k.startswith("health/abstain") for k in h.observe(2, _corner_metrics(1, 0), params))
  assert not any(k.startswith("health/abstain")
                 for k in h.observe(3, {"entropy": 1.0}, params, abstention="abstain"))
  # Several reward functions log <side>/reward/<fn>/<component>; one side only is one key.
  assert health.abstention_rates({"answerable/reward/truth/refused": 0.25,
                                  "answerable/reward/truth/refused_clean": 0.5}, "refused") == {
                                      "abstain_answerable": 0.25}
  assert health.abstention_rates(_corner_metrics(0.5, 0.5), "") == {}


class MarksAbstention(toy_task.TargetShareReward):
  """The toy reward with an abstention component: 1 where the completion holds the word w3."""

  def __call__(self, completions, examples, **extra):
    out = super().__call__(completions, examples)
    return {**out, "abstained": np.array([float("w3" in c.split()) for c in completions])}


def test_the_trainer_logs_the_abstention_of_the_stage_recipe_on_each_side(tiny_checkpoint, tmp_path,
                                                                          monkeypatch, caplog):
  from grounding_jax import recipes  # pylint: disable=g-import-not-at-top
  c = _config(tmp_path, steps=2)
  c.health.update(dict(abstain_answerable_max=0.0, abstain_unanswerable_min=1.0))
  recipe = type(recipes.get_recipe(c.stages[0].recipe))
  monkeypatch.setattr(recipe, "abstention_component", "abstained")
  labelled = [dataclasses.replace(ex, answerable=i % 2 == 0)
              for i, ex in enumerate(toy_task.make_examples(64))]
  tr = trainer.Trainer(c, model=models.load_pretrained(tiny_checkpoint("llama")),
                       tokenizer=toy_task.make_tokenizer(),
                       reward_functions=[("toy", 1.0, MarksAbstention())],
                       datasets={"toy": labelled}, prompt_fn=toy_task.prompt_fn)
  with caplog.at_level(logging.WARNING):
    history = tr.train()
  expected = []
  for side, crossed, corner in (("answerable", lambda r: r > 0.0, "refuse-everything"),
                                ("unanswerable", lambda r: r < 1.0, "answer-everything")):
    logged = [(h["step"], h[f"health/abstain_{side}"]) for h in history
              if f"{side}/reward/abstained" in h]  # a step may hold one side only
    assert logged, side
    for h in history:
      if f"{side}/reward/abstained" in h:
        assert h[f"health/abstain_{side}"] == h[f"{side}/reward/abstained"]
      else:
        assert f"health/abstain_{side}" not in h
    first = next(((step, r) for step, r in logged if crossed(r)), None)
    if first is not None:
      expected.append((first[0], f"on {side} prompts is {first[1]:.3g} ", corner))
  lines = [r.getMessage() for r in caplog.records if "abstention on" in r.getMessage()]
  assert len(lines) == len(expected) >= 1, lines  # a bound of 0 / 1 fires on a random policy
  for line, (step, text, corner) in zip(lines, sorted(expected, key=lambda e: e[0])):  # log order
    assert line.startswith(f"step {step}: abstention {text}") and f"the {corner} corner" in line

