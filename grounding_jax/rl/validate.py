"""Validation while training: the held-out evaluation every `evals.every_steps` steps, and the best
checkpoint kept beside the newest.

    validator = build(config, tokenizer, mesh, rewards_fn, prompt_fn)   # None when evals are off
    metrics.update(validator.maybe_run(step, is_last, policy, state_fn, meta))   # eval/<metric>
    checkpointer.save(step, state, {**meta, **validator.meta()})          # the best so far, for resume

The held-out split is `data.splits.held_out(config.evals.data, ...)` (a synthetic run's unasked
questions, or a file), or with evals.split="dev" `data.splits.dev_split` (questions that neither
training nor the held-out split asks: a best checkpoint chosen there is not chosen on the reported
questions). It is loaded and checked against the recipe's evaluator and rewards when the Validator
is built (the Trainer builds it as `train` begins, not with itself), so a bad row stops the run
before its first step; the judges and the BERTScore encoder load at the first validation. Each run
is `eval.harness.evaluate_model` on the current policy; its row is logged as eval/<metric>.

With `checkpoint.best_metric` (e.g. "eval/f1") and `best_mode` ("max" / "min"), a validation that
improves on the best value so far saves the full training state to <workdir>/checkpoints_best (one
kept; `evaluate.py --model=<workdir>@best` reads it). Every validation row has the selective-
prediction metrics (eval/selective.py), so "eval/balanced_accuracy" (mean of accuracy on answerable
and abstention on unanswerable items: neither corner wins) is a choice for every recipe; a mode
against a metric's direction (max on eval/aurc, min on eval/balanced_accuracy) is refused. The best value and step ride in every regular
checkpoint's metadata, so a resumed run compares against the best of the steps before it. LEAR keeps
the best checkpoint on its dev set this way (arXiv:2507.15586 §4.1: "select the best-performing model
on the dev set").
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional

import ml_collections
import numpy as np

from grounding_jax import checkpoints
from grounding_jax.data import splits
from grounding_jax.eval import from_config
from grounding_jax.eval import harness
from grounding_jax.eval import model_ref
from grounding_jax.eval import selective
from grounding_jax.eval.settings import EvalSettings, check_examples

BEST_DIR = model_ref.BEST_CHECKPOINTS
MODES = ("max", "min")


def check_config(c: ml_collections.ConfigDict) -> None:
  """Raises ValueError naming the field when config.evals (eval/from_config.check_config), its
  schedule or checkpoint.best_* cannot run while training."""
  from_config.check_config(c)
  ev, ck = c.evals, c.checkpoint
  if ev.every_steps < 0:
    raise ValueError(f"evals.every_steps={ev.every_steps} must be >= 0 (0 = no validation)")
  if ev.every_steps and ev.data.kind == "jsonl" and not ev.data.path:
    raise ValueError("evals.data.kind='jsonl' needs evals.data.path (e.g. build_data.py's "
                     "heldout.jsonl), or set evals.every_steps=0")
  if ev.split not in splits.EVAL_SPLITS:
    raise ValueError(f"evals.split={ev.split!r}; use one of {splits.EVAL_SPLITS} ('test': the "
                     "held-out questions)")
  if ev.split == "dev" and ev.every_steps and ev.data.kind != "synthetic":
    raise ValueError("evals.split='dev' draws from the synthetic world; with evals.data.kind="
                     f"{ev.data.kind!r} give the dev file as evals.data.path and keep split='test'")
  if ck.best_mode not in MODES:
    raise ValueError(f"checkpoint.best_mode={ck.best_mode!r}; use one of {MODES}")
  if ck.best_metric and not ck.best_metric.startswith("eval/"):
    raise ValueError(f"checkpoint.best_metric={ck.best_metric!r} must name a validation metric, "
                     "e.g. 'eval/f1' (a metric of the held-out evaluation)")
  name = ck.best_metric[len("eval/"):]
  wrong_way = ("min" if name in selective.HIGHER_IS_BETTER else
               "max" if name in selective.LOWER_IS_BETTER else None)
  if ck.best_mode == wrong_way:
    raise ValueError(f"checkpoint.best_metric={ck.best_metric!r} is better when "
                     f"{'higher' if wrong_way == 'min' else 'lower'}, but checkpoint.best_mode="
                     f"{ck.best_mode!r}; set checkpoint.best_mode="
                     f"{'max' if wrong_way == 'min' else 'min'!r}")
  if ck.best_metric and not ev.every_steps:
    raise ValueError(f"checkpoint.best_metric={ck.best_metric!r} needs validation: set "
                     "evals.every_steps > 0")


def build(config: ml_collections.ConfigDict, tokenizer, mesh, rewards: Callable[[], Any],
          prompt_fn: Optional[Callable[[Any], str]] = None, tool=None) -> Optional["Validator"]:
  """The run's Validator, or None when evals.every_steps is 0; checks the config either way.
  `rewards()` builds the [(name, weight, RewardFn)] list, only when validation is on."""
  check_config(config)
  if not config.evals.every_steps:
    return None
  return Validator(config, tokenizer, mesh, rewards(), prompt_fn, console=config.logging.console,
                   tool=tool)


class Validator:
  """Runs the held-out evaluation on a schedule and keeps the best checkpoint.

  Args:
    config: the run config (evals, checkpoint, rollout, stages sections).
    tokenizer, mesh: the policy's.
    rewards: [(name, weight, RewardFn)] of the run's last stage (logged as eval/reward).
    prompt_fn: Example -> prompt text (None = the recipe's, as training renders it).
    console: show the evaluation's progress bar.
    tool: what the policy calls when rollout.max_turns > 1 (the Trainer's).
  """

  def __init__(self, config: ml_collections.ConfigDict, tokenizer, mesh, rewards,
               prompt_fn: Optional[Callable[[Any], str]] = None, console: bool = True, tool=None):
    check_config(config)
    self.every = int(config.evals.every_steps)
    self.settings = EvalSettings.from_config(config)
    train_specs = [st.data for st in config.stages]
    if config.evals.split == "dev":
      self.examples = splits.dev_split(
          config.evals.data, int(config.evals.dev_examples or config.evals.num_examples),
          train_specs, num_test=int(config.evals.num_examples))
    else:
      self.examples = splits.held_out(config.evals.data, int(config.evals.num_examples), train_specs)
    check_examples(self.examples, self.settings, rewards)
    self.tokenizer, self.mesh, self.rewards = tokenizer, mesh, rewards
    self.prompt_fn, self.console, self.tool = prompt_fn, console, tool
    self._options: Optional[dict] = None  # judges and BERTScore encoder: built at the first run
    self.metric, self.mode = config.checkpoint.best_metric, config.checkpoint.best_mode
    self.best_value: Optional[float] = None
    self.best_step: Optional[int] = None
    self._best = (checkpoints.Checkpointer(f"{config.workdir}/{BEST_DIR}", max_to_keep=1,
                                           compress=config.checkpoint.compress)
                  if self.metric else None)
    self._background = checkpoints.writes_in_background(config.checkpoint.background_write)

  def resume(self, meta: Mapping[str, Any]) -> None:
    """Takes the best value and step from a restored checkpoint's metadata."""
    best = meta.get("best") or {}
    if best.get("metric") == self.metric:
      self.best_value, self.best_step = best["value"], best["step"]

  def meta(self) -> dict:
    """What a regular checkpoint records so a resumed run keeps the best so far."""
    if self.best_step is None:
      return {}
    return {"best": {"metric": self.metric, "value": self.best_value, "step": self.best_step}}

  def options(self) -> dict:
    """The evaluator's judge arguments (EvalSettings.evaluate_options), built once."""
    if self._options is None:
      self._options = self.settings.evaluate_options()
    return self._options

  def run(self, policy, step: int) -> dict[str, float]:
    """The held-out evaluation of `policy` (a model or its (graphdef, state) split) as eval/<metric>."""
    result = harness.evaluate_model(policy, self.tokenizer, self.examples, self.settings,
                                    rewards=self.rewards, mesh=self.mesh, name=f"step {step}",
                                    progress=self.console, options=self.options(),
                                    prompt_fn=self.prompt_fn, tool=self.tool,
                                    commit=False)  # as the rollouts sample: their programs serve
    return {f"eval/{k}": v for k, v in result.metrics.items()}

  def improves(self, value: float) -> bool:
    if value is None or not math.isfinite(value):
      return False
    if self.best_value is None:
      return True
    return value > self.best_value if self.mode == "max" else value < self.best_value

  def maybe_run(self, step: int, is_last: bool, policy, state_fn: Callable[[], Any],
                meta: Mapping[str, Any]) -> dict[str, float]:
    """Validates when `step` is due (every `every` steps, and the run's last step); saves the state
    (`state_fn()`) to checkpoints_best when the best metric improves. Returns the eval metrics."""
    if not self.every or not (step % self.every == 0 or is_last):
      return {}
    metrics = self.run(policy, step)
    if self._best is None:
      return metrics
    if self.metric not in metrics:
      raise ValueError(f"checkpoint.best_metric={self.metric!r} is not a validation metric; "
                       f"logged: {sorted(metrics)}")
    value = float(np.asarray(metrics[self.metric]))
    if self.improves(value):
      self.best_value, self.best_step = value, int(step)
      # An exact resume re-runs a step the best folder may already hold from before the stop:
      # the same state, already saved.
      if step not in self._best.all_steps():
        self._best.save(step, state_fn(), {**meta, **self.meta()}, blocking=not self._background)
    return metrics

  def wait(self, *, raise_error: bool = True) -> None:
    """Waits for the best step's background write (Checkpointer.wait)."""
    if self._best is not None:
      self._best.wait(raise_error=raise_error)

  def close(self) -> None:
    if self._best is not None:
      self._best.close()
