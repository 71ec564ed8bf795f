"""Run health: non-finite steps, finite checkpoints, and the monitors logged every step (config.health).

    health = RunHealth(config.health, saved=meta.get("health"))   # counts resume with the checkpoint
    health.start_stage(params)                                    # a new stage: its starting norm
    metrics = health.observe(global_step, metrics, params)        # adds health/*; warns; counts skips
    health.stop_if_stuck(global_step, checkpointer)               # NonFiniteRunError after N skips,
                                                                  # FailedRewardsError after N failed
    save_finite(checkpointer, global_step, state, meta | {"health": health.state()})

A step here is a GRPO step, numbered over the run (`global_step`, the logged step); an update is one
of its μ × num_minibatches optimizer updates, and a non-finite one is skipped.

Non-finite values never reach the parameters: the jitted update applies no update when an advantage,
the loss, the gradient, the new parameters or the new optimizer state is NaN or inf (rl/update.py,
`nonfinite/skipped`, `nonfinite/first`), and a reward row that is NaN or inf counts as failed
(rl/reward_pool.py: `reward/failed_frac`, `reward/nonfinite_frac`) and scores as `reward.on_error`
says. Each such step logs one warning naming the step and the first non-finite quantity;
`nonfinite/skipped_updates` is the run's running total of skipped updates. After
`health.max_consecutive_nonfinite` steps in a row with a skipped update the run stops
(NonFiniteRunError); its newest checkpoint holds finite parameters, since `save` refuses any other.

A step whose reward failed on some rows (a judge server down or unreachable, a timeout, a reward
raising; `reward/failed_frac`) logs one warning with how many of its rows failed: `reward.on_error`
scored them, so they taught nothing. After `health.max_failed_steps` steps in a row whose reward
failed on every row the run stops (FailedRewardsError): such a step has no reward signal at all,
and a judge that stays down would otherwise spend the rest of the run's compute on nothing.

Monitors, logged as health/<name>; a warning names the monitor, its value and its bound when it
crosses the bound (once, until it is back within it; None = no bound):
  entropy           mean per-token entropy of the policy over the loss tokens (nats)  ≥ entropy_min
  kl                per-token KL(π ‖ π_ref), loss.kl_estimator (only with a reference)  ≤ kl_max
  clip_frac         share of loss tokens whose ratio the clip held back (low + high)  ≤ clip_frac_max
  logprob_gap_mean  mean |log π_sampler − log π_trainer| of the sampled loss tokens at the sampler's
                    parameters (rl/step.py says which trainer pass)           ≤ logprob_gap_mean_max
  logprob_gap_peak  its largest value over the step's loss tokens             ≤ logprob_gap_peak_max
  param_norm        ‖θ‖₂ over the trainable parameters after the step
  param_norm_ratio  ‖θ‖ / ‖θ at the stage's start‖                           ≤ param_norm_ratio_max
entropy, kl and clip_frac are the update's metrics of the same names (means over the step's updates).

The corner alarm, where the data labels answerability and the stage's recipe names the reward
component that marks an abstention (`Recipe.abstention_component`: GRACE's llm_path, Trust's
refused, TruthRL's abstain), reads the step's split of that component (rl/collect's
answerable/reward/<component>, unanswerable/reward/<component>):
  abstain_answerable    share of sampled completions that abstain on answerable prompts
                        ≤ abstain_answerable_max    (above: the refuse-everything corner)
  abstain_unanswerable  the same on unanswerable prompts
                        ≥ abstain_unanswerable_min  (below: the answer-everything corner)
Each corner warns once per run, on the first step past its bound (a per-step share of a few prompts
is noisy; one line says where the run went). A side with no prompts this step is not logged.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Mapping, Optional

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from grounding_jax import checkpoints
from grounding_jax.rl import abstention
from grounding_jax.rl import update as update_lib

# monitor -> (config.health field, "min" | "max", the metric it reads; None = computed here)
MONITORS = {
    "entropy": ("entropy_min", "min", "entropy"),
    "kl": ("kl_max", "max", "kl"),
    "clip_frac": ("clip_frac_max", "max", "clip_frac"),
    "logprob_gap_mean": ("logprob_gap_mean_max", "max", "logprob_gap_mean"),
    "logprob_gap_peak": ("logprob_gap_peak_max", "max", "logprob_gap_peak"),
    "param_norm_ratio": ("param_norm_ratio_max", "max", None),
}
_MOVED = ("logprob_gap_mean", "logprob_gap_peak")  # logged under health/ only
# The corner alarm: monitor -> (config.health field, "min" | "max", prompts' side, the corner).
CORNERS = {
    "abstain_answerable": ("abstain_answerable_max", "max", "answerable", "refuse-everything"),
    "abstain_unanswerable": ("abstain_unanswerable_min", "min", "unanswerable", "answer-everything"),
}
# update.NONFINITE_QUANTITIES -> (what it is, what to change when it keeps a run from training)
_QUANTITIES = {
    "advantage": ("an advantage", "check the rewards and advantage.eps"),
    "loss": ("the loss", "lower optimizer.learning_rate, or bound the KL term (loss.kl_clamp)"),
    "gradient": ("the gradient", "lower optimizer.learning_rate"),
    "update": ("the updated parameters or optimizer state (update)", "lower optimizer.learning_rate"),
    "?": ("an unknown quantity", "look at the step's metrics"),
}


class NonFiniteRunError(RuntimeError):
  """The run stopped after health.max_consecutive_nonfinite steps in a row skipped an update."""


class FailedRewardsError(RuntimeError):
  """The run stopped after health.max_failed_steps steps in a row whose reward failed on every row."""


class NonFiniteWeightsError(ValueError):
  """The start model holds NaN or inf values (the message names the tensors)."""


@jax.jit
def _param_norm(params) -> jax.Array:
  return optax.tree.norm(jax.tree.map(lambda x: x.astype(jnp.float32), params))


@jax.jit
def _finite_leaves(tree) -> list:
  return [jnp.all(jnp.isfinite(x)) if jnp.issubdtype(x.dtype, jnp.inexact) else jnp.bool_(True)
          for x in jax.tree.leaves(tree)]


def _tensor_name(path) -> str:
  """'layers.0.attn.o_proj' from an nnx state key path (the Variable's `.value` left out)."""
  parts = [getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))) for k in path]
  return ".".join(str(p) for p in parts if p != "value")


def check_start_weights(model: nnx.Module, source: str) -> None:
  """Raises NonFiniteWeightsError naming the tensors of `model` that hold NaN or inf.

  Args:
    model: the start model, as loaded (every nnx state, trainable or not).
    source: where it came from, for the message (config.model.path, or "the model passed in").
  """
  state = nnx.state(model)
  leaves = jax.tree_util.tree_flatten_with_path(state)[0]
  finite = jax.device_get(_finite_leaves(state))
  bad = [_tensor_name(path) for (path, _), ok in zip(leaves, finite) if not ok]
  if getattr(model, "scan_layers", False):  # stacked [layers, ...]: name the layer, as HF does
    stacked = {name: x for (path, x) in leaves
               if (name := _tensor_name(path)) in bad and name.startswith("layers.")}
    per_layer = jax.device_get({k: jnp.all(jnp.isfinite(x), axis=tuple(range(1, x.ndim)))
                                for k, x in stacked.items()})
    bad = [n for n in bad if n not in stacked] + [
        f"layers.{i}.{k[len('layers.'):]}" for k, ok in per_layer.items() for i in np.flatnonzero(~ok)]
  if bad:
    raise NonFiniteWeightsError(
        f"the start model ({source}) has NaN or inf values in {len(bad)} of {len(leaves)} tensors: "
        f"{', '.join(bad[:5])}{' …' if len(bad) > 5 else ''}; training from it would only skip "
        "updates. Re-export the weights (or pick an earlier checkpoint of the run that wrote them)")


def abstention_rates(metrics: Mapping[str, float], component: str) -> dict[str, float]:
  """{"abstain_answerable": …, "abstain_unanswerable": …}: the step's mean of reward component
  `component` (1 where a completion abstains) over each side's rows, read from the answerability
  metrics (`<side>/reward/<component>`, or `<side>/reward/<fn>/<component>` with several reward
  functions: the first by name). Sides without rows, or no component (""), are left out."""
  out = {}
  if not component:
    return out
  for name, (_, _, side, _) in CORNERS.items():
    prefix = f"{side}/reward/"
    value = abstention.component_values(
        {k[len(prefix):]: v for k, v in metrics.items() if k.startswith(prefix)}, component)
    if value is not None:
      out[name] = float(value)
  return out


def save_finite(checkpointer: checkpoints.Checkpointer, step: int, state: Any,
                meta: Mapping[str, Any], *, blocking: bool = True) -> bool:
  """Saves checkpoint `step` unless `state` holds NaN or inf (then logs why and returns False): the
  newest finite checkpoint stays, and rotation cannot drop it. Other write errors propagate
  (a background write's, blocking=False, from the next save or wait)."""
  try:
    checkpointer.save(step, state, meta, blocking=blocking)
  except checkpoints.NonFiniteStateError as e:
    logging.warning("%s; training continues", e)
    return False
  return True


class RunHealth:
  """The trainer's health bookkeeping over a run (see the module docstring).

  Args:
    bounds: config.health.
    saved: what `state()` returned at the checkpoint the run resumes from (None = a new run).
  """

  def __init__(self, bounds: ml_collections.ConfigDict, saved: Optional[Mapping[str, Any]] = None):
    self.bounds = bounds
    saved = dict(saved or {})
    self.skipped_updates = int(saved.get("skipped_updates", 0))
    self.consecutive = int(saved.get("consecutive_nonfinite", 0))
    self.start_norm: Optional[float] = saved.get("start_param_norm")
    self._first_skipped_step: Optional[int] = saved.get("first_skipped_step")
    self.failed_steps = int(saved.get("consecutive_failed_steps", 0))  # every reward row failed
    self._last_quantity: Optional[str] = None
    self._crossed: set[str] = set()
    self._cornered: set[str] = set(saved.get("corners_warned", ()))  # warned once per run

  def state(self) -> dict:
    """JSON-serialisable counts for the checkpoint's metadata (a resumed run continues them)."""
    return {"skipped_updates": self.skipped_updates, "consecutive_nonfinite": self.consecutive,
            "start_param_norm": self.start_norm, "first_skipped_step": self._first_skipped_step,
            "corners_warned": sorted(self._cornered), "consecutive_failed_steps": self.failed_steps}

  def start_stage(self, params) -> None:
    """A stage starts from `params`: param_norm_ratio is measured against their norm."""
    self.start_norm = float(_param_norm(params))

  def observe(self, global_step: int, metrics: Mapping[str, float], params, *,
              abstention: str = "", rows: int = 0) -> dict:
    """`metrics` of step `global_step` with the health/ monitors and nonfinite/skipped_updates added
    (the update's logprob_gap_* move under health/); logs the step's non-finite values, failed
    reward rows and crossings. `abstention`: the stage recipe's `abstention_component` ("" = no
    corner alarm); `rows`: the rows `reward/failed_frac` is a share of (Stage.rows_per_step)."""
    out = {k: v for k, v in metrics.items() if k not in _MOVED}
    values = {name: float(metrics[key]) for name, (_, _, key) in MONITORS.items()
              if key is not None and key in metrics}
    norm = float(_param_norm(params))
    if self.start_norm is None:  # resumed from a checkpoint written before health was recorded
      self.start_norm = norm
    values["param_norm"] = norm
    values["param_norm_ratio"] = norm / max(self.start_norm, 1e-30)
    out.update({f"health/{k}": v for k, v in values.items()})
    self._count_nonfinite(global_step, metrics)
    self._count_failed(global_step, metrics.get("reward/failed_frac", 0.0), rows)
    out["nonfinite/skipped_updates"] = float(self.skipped_updates)
    self._warn_crossings(global_step, values)
    rates = abstention_rates(metrics, abstention)
    out.update({f"health/{k}": v for k, v in rates.items()})
    self._warn_corners(global_step, rates)
    return out

  def _count_nonfinite(self, global_step: int, metrics: Mapping[str, float]) -> None:
    bad_rewards = metrics.get("reward/nonfinite_frac", 0.0)
    if bad_rewards:
      logging.warning("step %d: reward not finite in %.3g%% of the rows (reward/nonfinite_frac); "
                      "they count as failed rows (reward/failed_frac=%.3g) and score as "
                      "reward.on_error says", global_step, 100 * bad_rewards,
                      metrics.get("reward/failed_frac", float("nan")))
    skipped = int(metrics.get("nonfinite/skipped", 0))
    if not skipped:
      self.consecutive, self._first_skipped_step = 0, None
      return
    self.skipped_updates += skipped
    self.consecutive += 1
    if self._first_skipped_step is None:
      self._first_skipped_step = global_step
    self._last_quantity = update_lib.nonfinite_name(metrics.get("nonfinite/first", 0)) or "?"
    limit = self.bounds.max_consecutive_nonfinite
    logging.warning(
        "step %d: %d update(s) skipped, the first non-finite quantity: %s — parameters and "
        "optimizer state are kept from before it (%d step(s) in a row%s; %d update(s) skipped in "
        "this run, nonfinite/skipped_updates)", global_step, skipped,
        _QUANTITIES[self._last_quantity][0],
        self.consecutive,
        f", the run stops at {limit} (health.max_consecutive_nonfinite)" if limit else "",
        self.skipped_updates)

  def _count_failed(self, global_step: int, failed_frac: float, rows: int) -> None:
    self.failed_steps = self.failed_steps + 1 if failed_frac >= 1.0 else 0
    if not failed_frac:
      return
    limit = self.bounds.get("max_failed_steps")
    lost = f"{round(failed_frac * rows)} of {rows} rows" if rows else f"{100 * failed_frac:.3g}% of rows"
    logging.warning("step %d: the reward failed on %s (reward/failed_frac=%.3g; the [reward] lines "
                    "say why): reward.on_error scored them, they taught nothing%s", global_step, lost,
                    failed_frac, f"; every row failed in {self.failed_steps} step(s) in a row, the "
                    f"run stops at {limit} (health.max_failed_steps)" if self.failed_steps and limit
                    else "")

  def stop_if_stuck(self, global_step: int, checkpointer: checkpoints.Checkpointer) -> None:
    """Raises NonFiniteRunError when the last health.max_consecutive_nonfinite steps (0 = never)
    each skipped an update, FailedRewardsError when the last health.max_failed_steps steps each
    had their reward fail on every row."""
    self._stop_if_rewards_failed(global_step, checkpointer)
    limit = self.bounds.max_consecutive_nonfinite
    if not limit or self.consecutive < limit:
      return
    kept = checkpointer.latest_step()
    where = "no checkpoint was written yet" if kept is None else \
        f"the newest checkpoint, {checkpointer.directory / str(kept)}, holds finite parameters"
    steps = f"step {global_step} skipped its update" if self.consecutive == 1 else \
        f"steps {self._first_skipped_step}–{global_step} each skipped their update"
    what, fix = _QUANTITIES[self._last_quantity]
    raise NonFiniteRunError(
        f"stopping at step {global_step}: {steps} as non-finite (health.max_consecutive_nonfinite="
        f"{limit}); at step {global_step} the first non-finite quantity was {what}. "
        f"{where[0].upper() + where[1:]}: {fix}, then re-run with the same workdir to resume")

  def _stop_if_rewards_failed(self, global_step: int, checkpointer: checkpoints.Checkpointer) -> None:
    limit = self.bounds.get("max_failed_steps")
    if not limit or self.failed_steps < limit:
      return
    kept = checkpointer.latest_step()
    where = "no checkpoint was written yet" if kept is None else \
        f"the newest checkpoint is {checkpointer.directory / str(kept)}"
    raise FailedRewardsError(
        f"stopping at step {global_step}: the reward failed on every row of steps "
        f"{global_step - self.failed_steps + 1}–{global_step} (health.max_failed_steps={limit}): a "
        "judge server down or unreachable, or a reward that raises on every completion (the "
        f"[reward] lines above show the error); {where}. Fix it, then re-run with the same workdir "
        "to resume")

  def _warn_crossings(self, global_step: int, values: Mapping[str, float]) -> None:
    for name, (field, side, _) in MONITORS.items():
      bound, value = self.bounds.get(field), values.get(name)
      if bound is None or value is None or not math.isfinite(value):
        continue  # a non-finite step is reported above; its monitors keep their state
      crossed = value < bound if side == "min" else value > bound
      if crossed and name not in self._crossed:
        logging.warning("step %d: health/%s=%.4g is %s health.%s=%g", global_step, name, value,
                        "below" if side == "min" else "above", field, bound)
        self._crossed.add(name)
      elif not crossed and name in self._crossed:
        logging.info("step %d: health/%s=%.4g is back within health.%s=%g", global_step, name, value,
                     field, bound)
        self._crossed.discard(name)

  def _warn_corners(self, global_step: int, rates: Mapping[str, float]) -> None:
    for name, (field, side, prompts, corner) in CORNERS.items():
      bound, rate = self.bounds.get(field), rates.get(name)
      if bound is None or rate is None or name in self._cornered or not math.isfinite(rate):
        continue
      if rate < bound if side == "min" else rate > bound:
        logging.warning("step %d: abstention on %s prompts is %.3g (health/%s), %s health.%s=%g: "
                        "the %s corner (warned once)", global_step, prompts, rate, name,
                        "below" if side == "min" else "above", field, bound, corner)
        self._cornered.add(name)
