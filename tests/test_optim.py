"""Learning-rate schedules and the AdamW chain against hand-computed values (GRACE's warm-up in training
steps of 4 updates each, through the trainer's set-up)."""

import importlib.util
import math
import pathlib

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from grounding_jax import optim
from grounding_jax.rl import setup


def _cfg(**kw):
  c = optim.default_optimizer_config()
  c.update(kw)
  return c


def test_warmup_then_cosine():
  s = optim.learning_rate_schedule(_cfg(learning_rate=2e-6, schedule="cosine", warmup_steps=50), 400)
  assert float(s(0)) == 0.0
  np.testing.assert_allclose(s(25), 1e-6, rtol=1e-6)
  np.testing.assert_allclose(s(50), 2e-6, rtol=1e-6)
  # Half-way through the 350 decay steps: 1e-6 (cosine mid-point); the end reaches 0.
  np.testing.assert_allclose(s(225), 1e-6, rtol=1e-5)
  np.testing.assert_allclose(s(400), 0.0, atol=1e-12)


def test_warmup_ratio_and_constant():
  s = optim.learning_rate_schedule(_cfg(learning_rate=1e-5, schedule="constant", warmup_ratio=0.1), 100)
  np.testing.assert_allclose([s(5), s(10), s(99)], [5e-6, 1e-5, 1e-5], rtol=1e-6)
  with pytest.raises(ValueError, match="schedule"):
    optim.learning_rate_schedule(_cfg(schedule="step"), 10)


def test_adamw_step_with_clipping_and_decay_mask():
  cfg = _cfg(learning_rate=0.1, weight_decay=0.5, max_grad_norm=1.0)
  opt = optim.build_optimizer(cfg, 10)
  params = {"w": jnp.ones((2, 2)), "scale": jnp.ones((2,))}
  grads = {"w": jnp.full((2, 2), 3.0), "scale": jnp.full((2,), 4.0)}  # global norm 10 -> scaled 0.1x
  updates, _ = opt.update(grads, opt.init(params), params)
  # First Adam step: m̂/(√v̂+eps) = sign(g) = 1 whatever the clipping; lr 0.1; decay only on the matrix.
  np.testing.assert_allclose(updates["w"], -0.1 * (1 + 0.5 * 1.0), rtol=1e-5)
  np.testing.assert_allclose(updates["scale"], -0.1, rtol=1e-5)
  clipped, _ = optax.clip_by_global_norm(1.0).update(grads, optax.EmptyState())
  assert math.isclose(float(optax.tree.norm(clipped)), 1.0, rel_tol=1e-6)


def test_schedule_counts_training_steps_each_update_of_a_step_shares_its_rate():
  # GRACE (note 000 §5.2): 400 steps, 50 warm-up steps, cosine to 0, 4 optimizer updates per step;
  # VeRL steps the scheduler once per training step.
  cfg = _cfg(learning_rate=2e-6, schedule="cosine", warmup_steps=50)
  assert cfg.schedule_unit == "step"
  s = optim.learning_rate_schedule(cfg, 400, updates_per_step=4)
  want = {0: 0.0, 3: 0.0, 4: 2e-6 / 50, 7: 2e-6 / 50, 100: 1e-6, 199: 2e-6 * 49 / 50, 200: 2e-6,
          203: 2e-6, 4 * 225: 1e-6, 4 * 399 + 3: 2e-6 * 0.5 * (1 + math.cos(math.pi * 349 / 350))}
  for count, lr in want.items():
    np.testing.assert_allclose(float(s(count)), lr, rtol=1e-5, atol=1e-13, err_msg=f"update {count}")


def test_schedule_in_updates_advances_every_update():
  cfg = _cfg(learning_rate=2e-6, schedule="cosine", warmup_steps=50, schedule_unit="update")
  s = optim.learning_rate_schedule(cfg, 400, updates_per_step=4)  # 1,600 updates, 1,550 decaying
  want = {1: 2e-6 / 50, 25: 1e-6, 50: 2e-6, 50 + 775: 1e-6, 1600: 0.0}
  for count, lr in want.items():
    np.testing.assert_allclose(float(s(count)), lr, rtol=1e-5, atol=1e-13, err_msg=f"update {count}")
  with pytest.raises(ValueError, match="schedule_unit"):
    optim.learning_rate_schedule(_cfg(schedule_unit="epoch"), 10)


def test_grace_config_optimizer_steps_at_the_papers_rates():
  # Through the trainer's set-up: AdamW's first moments on a constant gradient make every update
  # exactly −lr (no decay on a vector), so the updates read out the schedule.
  path = pathlib.Path(__file__).resolve().parents[1] / "configs" / "grace.py"
  spec = importlib.util.spec_from_file_location("grace_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  c = module.get_config()
  view = setup.stage_config(c, c.stages[0])
  opt, _ = setup.optimizer(view, c.stages[0].num_steps)
  params = {"b": jnp.zeros((3,))}
  state = opt.init(params)
  lrs = []
  for _ in range(9):
    updates, state = opt.update({"b": jnp.full((3,), 0.5)}, state, params)
    lrs.append(-float(updates["b"][0]))
  np.testing.assert_allclose(lrs, [0.0] * 4 + [4e-8] * 4 + [8e-8], rtol=1e-4, atol=1e-14)


def test_warmup_ratio_rounds_up_as_hf_trainer():
  # Ground-GRPO stage 1 (note 001 §5): 25 steps × 0.1 → ceil(2.5) = 3 warm-up steps ("≈3").
  s = optim.learning_rate_schedule(_cfg(learning_rate=1e-5, schedule="cosine", warmup_ratio=0.1), 25)
  np.testing.assert_allclose([s(1), s(2), s(3)], [1e-5 / 3, 2e-5 / 3, 1e-5], rtol=1e-5)
