"""The optax optimizer shared by the RL and SFT trainers: AdamW, warm-up then cosine/constant, clipping.

Schedules count training steps, as the papers do (`schedule_unit="step"`): a GRPO step runs
`updates_per_step` optimizer updates (μ passes × mini-batches; GRACE: 4), and every update of a step
uses that step's learning rate, as VeRL steps its scheduler once per training step (GRACE,
arXiv:2601.04525 App. B.1, Table 2: 50 warm-up steps of 400). `schedule_unit="update"` counts
optimizer updates instead (warm-up and decay advance on every update). The SFT trainer runs one
update per step, where the two agree.
"""

from __future__ import annotations

import math

import jax
import ml_collections
import optax

SCHEDULES = ("cosine", "constant", "linear")
SCHEDULE_UNITS = ("step", "update")


def learning_rate_schedule(config: ml_collections.ConfigDict, total_steps: int,
                           updates_per_step: int = 1) -> optax.Schedule:
  """Linear warm-up from 0 over `warmup_steps` (or `warmup_ratio` · total), then the decay.

  Args:
    config: fields learning_rate, schedule ("cosine" | "constant" | "linear"), schedule_unit
      ("step" | "update": what warmup_steps and the decay length count), warmup_steps, warmup_ratio,
      min_lr_ratio (the cosine/linear floor as a fraction of the peak).
    total_steps: training steps in the run (or stage).
    updates_per_step: optimizer updates per training step.
  Returns:
    lr(count), where count is the optimizer's update count (optax's schedule argument).
  """
  unit = config.get("schedule_unit", "step")
  if unit not in SCHEDULE_UNITS:
    raise ValueError(f"optimizer.schedule_unit={unit!r}; expected one of {SCHEDULE_UNITS}")
  if updates_per_step < 1:
    raise ValueError(f"updates_per_step={updates_per_step} must be >= 1")
  if unit == "update":
    return _schedule(config, total_steps * updates_per_step)
  per_step = _schedule(config, total_steps)
  if updates_per_step == 1:
    return per_step
  return lambda count: per_step(count // updates_per_step)


def _schedule(config: ml_collections.ConfigDict, total: int) -> optax.Schedule:
  """The schedule over `total` units (steps or updates), advancing once per unit."""
  lr = float(config.learning_rate)
  if config.schedule not in SCHEDULES:
    raise ValueError(f"optimizer.schedule={config.schedule!r}; expected one of {SCHEDULES}")
  warmup = int(config.get("warmup_steps", 0) or 0)
  if config.get("warmup_ratio", 0.0):  # HF Trainer (TRL; ARENA, Ground-GRPO): ceil(ratio · total)
    warmup = math.ceil(total * float(config.warmup_ratio))
  warmup = min(warmup, total)
  floor = lr * float(config.get("min_lr_ratio", 0.0))
  decay_steps = max(total - warmup, 1)
  if config.schedule == "constant":
    after = optax.constant_schedule(lr)
  elif config.schedule == "cosine":
    after = optax.cosine_decay_schedule(lr, decay_steps, alpha=floor / lr if lr else 0.0)
  else:
    after = optax.linear_schedule(lr, floor, decay_steps)
  if warmup == 0:
    return after
  return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), after], [warmup])


def _decay_mask(params):
  # Decay matrices only, not norm scales or biases (HF Trainer / nanoGPT convention).
  return jax.tree.map(lambda p: getattr(p, "ndim", 0) >= 2, params)


def build_optimizer(config: ml_collections.ConfigDict, total_steps: int,
                    updates_per_step: int = 1) -> optax.GradientTransformation:
  """AdamW with global-norm clipping and the schedule above.

  Args:
    config: the `optimizer` section: learning_rate, schedule, schedule_unit, warmup_steps /
      warmup_ratio, min_lr_ratio, b1, b2, eps, weight_decay, decay_matrices_only, max_grad_norm (0 or
      None = no clipping).
    total_steps: training steps in the run (or stage).
    updates_per_step: optimizer updates per training step (GRPO: μ × mini-batches; SFT: 1).
  """
  schedule = learning_rate_schedule(config, total_steps, updates_per_step)
  parts = []
  if config.get("max_grad_norm"):
    parts.append(optax.clip_by_global_norm(float(config.max_grad_norm)))
  mask = _decay_mask if config.get("decay_matrices_only", True) else None
  parts.append(optax.adamw(schedule, b1=float(config.get("b1", 0.9)), b2=float(config.get("b2", 0.999)),
                           eps=float(config.get("eps", 1e-8)),
                           weight_decay=float(config.get("weight_decay", 0.0)), mask=mask))
  return optax.chain(*parts)


def default_optimizer_config() -> ml_collections.ConfigDict:
  """Defaults: AdamW(0.9, 0.999, 1e-8), lr 1e-6 constant, no warm-up, wd 0, clip 1.0 (VeRL/TRL);
  warm-up and decay counted in training steps."""
  return ml_collections.ConfigDict(dict(
      learning_rate=1e-6, schedule="constant", schedule_unit="step", warmup_steps=0, warmup_ratio=0.0,
      min_lr_ratio=0.0,
      b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, decay_matrices_only=True, max_grad_norm=1.0))
