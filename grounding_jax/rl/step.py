"""The update schedule of one GRPO step: μ passes × mini-batches (one optimizer update each) ×
micro-batches (exact gradient accumulation), after the reference and old log-prob passes.

    params, opt_state, metrics = Updater(view, settings, programs, hosts).run(batch, ...)

The batch is trimmed to the columns some row needs (update_loop.length_multiple); with shared
prompts, each micro-batch runs its groups' completions packed after their prompt at its own width.
Mini-batches are drawn by a permutation seeded with (seed, global step) and move whole groups.

The log-prob gap monitor (health/logprob_gap_*) compares the sampler's log-probs of the loss tokens
with the trainer's at the same parameters, without an extra pass: with recomputed old log-probs,
those (every row); otherwise the first update's loss pass (on-policy: the whole batch; with
old_logprobs="sampler": the first mini-batch's rows, before any update moves the policy).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import time

import jax
import ml_collections
import numpy as np

from grounding_jax.rl import collect
from grounding_jax.rl import host_batch
from grounding_jax.rl import losses
from grounding_jax.rl import step_perf
from grounding_jax.rl import update as update_lib
from grounding_jax.rl import update_programs
from grounding_jax.sampling import rollout as rollout_lib


@dataclasses.dataclass
class StepResult:
  """params and opt_state after the step's updates, its update metrics, and phase times."""
  params: object
  opt_state: object
  metrics: dict
  reference_seconds: float
  update_seconds: float


class Updater:
  """Runs the update of one GRPO step for one stage.

  Args:
    view: the stage's config (setup.stage_config): loss, update_loop, seed.
    settings: the jitted update's static settings (update.settings_from_config(view)).
    train_step, logprob_fn: the stage's jitted programs (update.make_train_step: one optimizer
      update; update.make_logprob_fn).
    hosts: the host ↔ mesh plumbing.
    perf: records the programs each step runs (their FLOPs and memory, rl/step_perf.py); or None.
  """

  def __init__(self, view: ml_collections.ConfigDict, settings: update_lib.UpdateSettings,
               train_step, logprob_fn, hosts: host_batch.HostBatches,
               perf: step_perf.StepPerf | None = None):
    self.c, self.settings, self.hosts = view, settings, hosts
    self.train_step, self.logprob_fn = train_step, logprob_fn
    self.perf = perf
    self.pending: dict[update_programs.UpdateShape, concurrent.futures.Future] = {}
    self.seen: set[update_programs.UpdateShape] = set()  # gradient programs built or under way

  def _on_call(self, phase: str):
    return None if self.perf is None else (lambda fn, *a, **k: self.perf.record(phase, fn, *a, **k))

  @staticmethod
  def keeps_sampler_logp(view: ml_collections.ConfigDict, settings: update_lib.UpdateSettings
                         ) -> bool:
    """Whether the update's batch carries the sampler's log-probs (the loss pass measures the
    log-prob gap; with recomputed old log-probs the gap is measured on the host instead, and the
    loss needs them only for loss.rollout_correction)."""
    return (settings.on_policy or view.update_loop.old_logprobs != "recompute"
            or settings.loss.rollout_correction != "none")

  def _host_batch(self, gb: collect.GroupBatch) -> dict:
    """The update's inputs as host arrays [N, ...], trimmed to the columns some row needs."""
    c, ro = self.c, gb.rollout
    g = ro.group_size
    batch = dict(prompt_ids=np.repeat(ro.prompt_ids, g, axis=0),
                 prompt_mask=np.repeat(ro.prompt_mask, g, axis=0),
                 completion_ids=ro.completion_ids, loss_mask=gb.loss_mask, advantages=gb.advantages,
                 sampler_logp=ro.sampler_logp)
    if not self.settings.on_policy and c.update_loop.old_logprobs == "sampler":
      batch["old_logp"] = ro.sampler_logp
    return self.hosts.trim(batch, c.update_loop.length_multiple)

  def run(self, gb: collect.GroupBatch, params, rest, opt_state, ref_params, global_step: int
          ) -> StepResult:
    """One GRPO step's optimizer updates from `gb`; `global_step` (the run's GRPO steps before
    this one) seeds the mini-batch permutation and the LoRA dropout masks."""
    c, settings, hosts = self.c, self.settings, self.hosts
    u = c.update_loop
    mb = u.micro_batch_size
    batch = self._host_batch(gb)
    widths = hosts.packed_widths(batch, mb, settings.rows_per_prompt)  # in batch order
    width = max(widths) if widths else None  # the log-prob passes run at one width
    # Leading tokens all prompts share run once per micro-batch (0: none); a mini-batch's rows
    # are the batch's, so they share them too.
    common = hosts.common_prefix(batch, settings.common_prefix_min)
    t0 = time.perf_counter()
    recompute = not settings.on_policy and u.old_logprobs == "recompute"
    # With recomputed old log-probs the gap is measured on the host; the loss keeps the sampler's
    # log-probs only for the rollout correction.
    keep = self.keeps_sampler_logp(c, settings)
    sampler_logp = (batch["sampler_logp"] if keep else batch.pop("sampler_logp")) if recompute else None
    if ref_params is not None:
      batch["ref_logp"] = hosts.logprobs(self.logprob_fn, ref_params, rest, batch, mb, width,
                                         self._on_call("reference"), shared_prefix=common)
    gap = None
    if recompute:
      batch["old_logp"] = hosts.logprobs(self.logprob_fn, params, rest, batch, mb, width,
                                         self._on_call("reference"), shared_prefix=common)
      gap = self._gap(sampler_logp, batch["old_logp"], batch["loss_mask"])
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = len(batch["advantages"])
    per_mini = n // u.num_minibatches
    perm_rng = np.random.default_rng([c.seed, global_step])
    unit = settings.rows_per_prompt  # a shared prompt's group moves between mini-batches whole
    update_metrics = []  # one dict per optimizer update (μ × num_minibatches of them)
    # LoRA adapter dropout (model.lora.dropout) draws fresh masks for every update of every step.
    lora_c = c.model.lora
    dropout = (jax.random.fold_in(jax.random.key(c.seed), global_step)
               if lora_c.rank > 0 and lora_c.dropout > 0 else None)
    for _ in range(u.num_iterations):
      order = np.arange(n)
      if u.num_minibatches > 1:
        order = rollout_lib.group_rows(perm_rng.permutation(n // unit), unit)
      for m in range(u.num_minibatches):
        mini = {k: v[order[m * per_mini:(m + 1) * per_mini]] for k, v in batch.items()}
        mini_widths = hosts.packed_widths(mini, mb, settings.rows_per_prompt)
        self._await(mini, mini_widths, common)
        self._compile_new_widths(params, rest, mini, mini_widths, common)
        with hosts.context():
          device_mini = hosts.device_batch(mini, mb)
          if self.perf is not None:  # each micro-batch's gradient program, as train_step calls it
            for i, micro in enumerate(update_lib.micro_batches(device_mini)):
              self.perf.record("update", self.train_step.accumulate, params, rest, params, micro,
                               packed_width=mini_widths[i] if mini_widths else None,
                               shared_prefix=common)
          params, opt_state, sm = self.train_step(
              params, rest, opt_state, device_mini, packed_width=mini_widths, shared_prefix=common,
              dropout_key=None if dropout is None else jax.random.fold_in(dropout, len(update_metrics)))
        update_metrics.append(sm)
    update_metrics = jax.device_get(update_metrics)
    t_update = time.perf_counter() - t0
    if gap is None:  # measured in the first update's loss pass, before the policy moved
      gap = {k: float(v) for k, v in update_metrics[0].items() if k.startswith("logprob_gap")}
    # Each mini-batch's metrics weigh alike; ratio extremes stay extremes (losses.reduce_metrics).
    metrics = {k: float(v) for k, v in losses.reduce_metrics(
        [{k: (float(v), 1.0) for k, v in sm.items() if not k.startswith("logprob_gap")}
         for sm in update_metrics], xp=np).items()}
    metrics.update(gap)
    metrics["throughput/common_prefix_tokens"] = float(common)  # run once per micro-batch
    return StepResult(params, opt_state, metrics, t_ref, t_update)

  def _await(self, mini: dict, widths, common: int) -> None:
    """Waits for the compiles under way (compiled ahead) of the programs this mini-batch runs;
    the others go on in their thread."""
    needed = {update_programs.UpdateShape(mini["prompt_ids"].shape[1],
                                          mini["completion_ids"].shape[1], w, common)
              for w in (widths or [None])}
    concurrent.futures.wait([self.pending.pop(s) for s in needed if s in self.pending])

  def close(self) -> None:
    """Waits for the compiles still under way (programs no step of the stage ran)."""
    concurrent.futures.wait(list(self.pending.values()))
    self.pending = {}

  def add_pending(self, pending: dict) -> None:
    """Gradient programs compiling ahead ({shape: future}, update_programs.compile_stage): each
    mini-batch that runs one waits for it, and no step compiles it again."""
    self.pending.update(pending)
    self.seen |= set(pending)

  def _compile_new_widths(self, params, rest, mini: dict, widths, common: int) -> None:
    """Compiles the gradient programs a mini-batch needs and no step has built, concurrently
    (one XLA compile keeps ~one core busy; train_step would build them one after another), when
    there are two or more (a run's first GRPO step can need several)."""
    shapes = {update_programs.UpdateShape(mini["prompt_ids"].shape[1], mini["completion_ids"].shape[1],
                                          w, common) for w in (widths or [None])} - self.seen
    self.seen |= shapes
    if len(shapes) < 2:
      return
    mb = self.c.update_loop.micro_batch_size
    concurrent.futures.wait(update_programs.compile_update_programs(
        self.train_step, params, rest, self.hosts, sorted(shapes, key=lambda s: s.packed_width or 0),
        settings=self.settings, micro_batch_size=mb, num_micro=len(mini["advantages"]) // mb,
        threads=min(len(shapes), os.cpu_count() or 1),
        sampler_logp=self.keeps_sampler_logp(self.c, self.settings)))

  def _gap(self, sampler_logp, logp, mask) -> dict:
    """losses.logprob_gap over every host's rows, from this host's host arrays."""
    pairs = losses.logprob_gap(logp, sampler_logp, mask, xp=np)
    mean, peak = pairs["logprob_gap_mean"], pairs["logprob_gap_peak"]
    sums = self.hosts.gather(np.array([[mean[0], mean[1], peak[0]]], np.float64))
    return {"logprob_gap_mean": float(sums[:, 0].sum() / max(sums[:, 1].sum(), 1e-8)),
            "logprob_gap_peak": float(sums[:, 2].max())}
