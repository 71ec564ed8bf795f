"""One stage of a run: its config view, recipe, optimizer and prompts, and, while it trains, the
parts a GRPO step runs.

    stage = Stage.plan(config, index, run)      # cheap: no data, no programs, no reward functions
    stage.start(run, position, params, rest)    # its data, programs, reward pool, collector, updater
    metrics, params, opt_state = stage.step(run, key, global_step, params, rest, opt_state, ref)
    stage.close()

A stage sees the run's config with its own overrides applied (setup.stage_config) and starts a fresh
optimizer schedule over its own steps. A GRPO step is collection (rl/collect.py: rollouts of the
stage's recipe, rewards, DAPO refill, advantages) then the update (rl/step.py: reference and old
log-probs, μ passes × mini-batches, one optimizer update each).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from grounding_jax import metrics_writer
from grounding_jax import perf as perf_lib
from grounding_jax import recipes
from grounding_jax.rl import abstention
from grounding_jax.rl import collect
from grounding_jax.rl import data_stream
from grounding_jax.rl import host_batch
from grounding_jax.rl import reward_pool
from grounding_jax.rl import rollout_log
from grounding_jax.rl import setup
from grounding_jax.rl import step as step_lib
from grounding_jax.rl import step_perf
from grounding_jax.rl import update as update_lib
from grounding_jax.rl import update_programs


@dataclasses.dataclass(frozen=True)
class Run:
  """What every stage of a run shares: the policy's tokenizer and structure, the mesh and its host
  plumbing, the step profiler, and what the Trainer's caller passed in place of the config's
  reward functions, datasets ({stage name: [Example]}) and prompt renderer, and the tool the policy
  calls when rollout.max_turns > 1 (sampling/tools.Tool, e.g. a retriever)."""
  tokenizer: Any
  graphdef: Any
  mesh: Any
  hosts: host_batch.HostBatches
  perf: Optional[step_perf.StepPerf] = None
  rewards: Optional[setup.RewardSpec | Mapping[str, setup.RewardSpec]] = None
  datasets: Optional[Mapping[str, Sequence[Any]]] = None
  prompt_fn: Optional[Callable[[Any], str]] = None
  tool: Any = None


@dataclasses.dataclass
class Stage:
  """A stage of `config.stages`, planned; `start` adds the parts a step runs, `close` ends them.

  Attributes:
    index: its position in config.stages (logged as the metric "stage").
    spec: config.stages[index] (name, recipe, num_steps, data and its overrides).
    view: the run's config as the stage sees it (setup.stage_config).
    recipe: the stage's recipe (prompts, rollout, stop strings).
    optimizer, optimizer_key: a fresh schedule over the stage's GRPO steps; equal keys share the
      compiled programs (setup.programs).
    settings: the jitted update's static settings (update.settings_from_config(view)).
    prompt_fn: Example -> prompt text (the caller's, or the recipe's through the chat template).
    pool, stream, collector, updater: the reward pool, the stage's example stream, the rollout
      collector and the update schedule; None until `start`.
    last_batch: the last step's groups when that step's readable rollouts are due
      (logging.rollouts_every, rl/rollout_log.py), else None.
  """
  index: int
  spec: ml_collections.ConfigDict
  view: ml_collections.ConfigDict
  recipe: recipes.Recipe
  optimizer: optax.GradientTransformation
  optimizer_key: tuple
  settings: update_lib.UpdateSettings
  prompt_fn: Callable[[Any], str]
  pool: Optional[reward_pool.RewardPool] = None
  stream: Optional[data_stream.ExampleStream] = None
  collector: Optional[collect.Collector] = None
  updater: Optional[step_lib.Updater] = None
  last_batch: Optional[collect.GroupBatch] = None

  @classmethod
  def plan(cls, config: ml_collections.ConfigDict, index: int, run: Run) -> "Stage":
    """Stage `index` of `config.stages`: its view, recipe, optimizer, update settings, prompts."""
    spec = config.stages[index]
    view = setup.stage_config(config, spec)
    recipe = recipes.get_recipe(spec.recipe)
    optimizer, key = setup.optimizer(view, spec.num_steps)
    prompt_fn = run.prompt_fn or setup.prompt_fn(recipe, run.tokenizer, view.rollout.enable_thinking)
    settings = update_lib.settings_from_config(view, setup.samples_per_prompt(view, spec))
    return cls(index, spec, view, recipe, optimizer, key, settings, prompt_fn)

  @property
  def name(self) -> str:
    return self.spec.name

  @property
  def num_steps(self) -> int:
    return self.spec.num_steps

  @property
  def rows_per_step(self) -> int:
    """Completions of a step's first sampling round (prompts × G): the rows its reward metrics cover."""
    return self.view.rollout.prompts_per_step * self.view.rollout.group_size

  def programs(self, run: Run):
    """The stage's jitted (train_step, logprob_fn); train_step is one optimizer update."""
    return setup.programs(run.graphdef, self.optimizer, self.optimizer_key, self.settings)

  def keeps_sampler_logp(self) -> bool:
    """Whether the update's batch carries the sampler's log-probs (step.Updater)."""
    return step_lib.Updater.keeps_sampler_logp(self.view, self.settings)

  def initial_state(self, run: Run, params) -> tuple[Any, Any]:
    """(opt_state, ref_params) as the stage begins: a fresh optimizer state, and a copy of the
    policy as the KL reference when the stage has a KL term (else None)."""
    opt_state = run.hosts.on_mesh(self.optimizer.init(params))
    return opt_state, (jax.tree.map(jnp.copy, params) if self.view.loss.kl_coef else None)

  def rewards(self, run: Run) -> setup.RewardSpec:
    """The stage's [(name, weight, RewardFn)]: the caller's, or built from its view's config."""
    return setup.stage_rewards(run.rewards, self.spec, self.view, run.tokenizer)

  def examples(self, run: Run) -> list:
    """The stage's dataset: the caller's, or read from its `data` section."""
    if run.datasets:
      return run.datasets[self.name]
    return setup.load_stage_examples(self.spec.data)

  def start(self, run: Run, position: int, params, rest, saved: dict | None = None) -> "Stage":
    """Builds the parts a step runs, the stage's data stream at `position` (examples handed out);
    `saved`: the meta of the checkpoint a mid-stage resume continues from (its abstention prices)."""
    view = self.view
    train_step, logprob_fn = self.programs(run)
    self.pool = reward_pool.RewardPool(self.rewards(run), num_workers=view.reward.num_workers,
                                       timeout_seconds=view.reward.timeout_seconds,
                                       on_error=view.reward.on_error)
    seed = self.spec.data.seed + view.seed
    data, contrast = setup.evidence_contrast(self.spec, self.examples(run), seed,
                                             run.tool if view.rollout.max_turns > 1 else None)
    data = setup.fit_prompt_limit(view, self.name, data, self.prompt_fn, run.tokenizer, contrast)
    self.stream = data_stream.ExampleStream(
        data, seed=seed, shuffle=self.spec.data.shuffle, position=position,
        stratify=self.spec.data.get("stratify", ""))
    settings = setup.sampling_settings(view, self.recipe, setup.samples_per_prompt(view, self.spec),
                                       tool=run.tool)
    self.collector = collect.Collector(view, self.recipe, run.tokenizer, run.mesh, run.hosts, self.pool,
                                       self.prompt_fn, settings, contrast,
                                       abstention.AbstentionPrices.from_config(view.abstention, saved))
    self.updater = step_lib.Updater(view, self.settings, train_step, logprob_fn, run.hosts, run.perf)
    if view.update_loop.compile_ahead == "all":
      self.updater.add_pending(self.compile_ahead(run, params, rest, data))
    return self

  def compile_ahead(self, run: Run, params, rest, prompts) -> dict:
    """Starts compiling, in threads, the gradient programs `prompts` can run that no step has
    built (update_programs.compile_stage): all of them (update_loop.compile_ahead="all", the
    stage's data), or the widest ("widest": the next step's prompts); {shape: future}."""
    view, updater = self.view, self.updater
    tokens = step_perf.prompt_tokens(prompts, self.prompt_fn, run.tokenizer,
                                     view.rollout.max_prompt_tokens)
    return update_programs.compile_stage(
        view, updater.settings, updater.train_step, params, rest, run.hosts,
        [len(t) for t in tokens] or [1], self.keeps_sampler_logp(),
        widest_only=view.update_loop.compile_ahead == "widest", skip=updater.seen,
        shared_prefix=update_lib.common_prefix_of(tokens, updater.settings.common_prefix_min))

  def step(self, run: Run, key, global_step: int, params, rest, opt_state, ref_params
           ) -> tuple[dict, Any, Any]:
    """One GRPO step: collect the groups, run the update; returns (metrics, params, opt_state).
    `global_step` (the run's steps before this one) seeds the update's mini-batch order. The step
    numbered perf.profile_step (from 1) is traced into perf.profile_dir when that is set."""
    profile = self.view.perf
    if not (profile.profile_dir and global_step + 1 == profile.profile_step):
      return self._step(run, key, global_step, params, rest, opt_state, ref_params)
    with perf_lib.trace(profile.profile_dir):
      out = self._step(run, key, global_step, params, rest, opt_state, ref_params)
      jax.block_until_ready(out[1:])  # the trace ends when the step's device work does
    return out

  def _step(self, run: Run, key, global_step: int, params, rest, opt_state, ref_params
            ) -> tuple[dict, Any, Any]:
    t_start, compiled_before = time.perf_counter(), metrics_writer.compile_seconds()
    if run.perf is not None:
      run.perf.begin_step()
    view = self.view
    if view.update_loop.compile_ahead == "widest":  # in a thread while this step samples
      self.updater.add_pending(self.compile_ahead(
          run, params, rest, self.stream.peek(view.rollout.prompts_per_step)))
    # The sampler reads the trainer's split directly (no merge and re-split per step).
    gb = self.collector.collect(key, self.stream, (run.graphdef, nnx.merge_state(params, rest)))
    result = self.updater.run(gb, params, rest, opt_state, ref_params, global_step)
    self.last_batch = gb if rollout_log.due(view.logging.rollouts_every, global_step + 1) else None
    metrics = {**gb.metrics, **result.metrics}
    total_time = time.perf_counter() - t_start
    tokens, loss_tokens = run.hosts.gather(
        np.array([gb.rollout.lengths.sum(), gb.loss_mask.sum()]).reshape(1, 2)).sum(axis=0)
    metrics.update({
        "time/sample": gb.sample_seconds, "time/reward": gb.reward_seconds,
        "time/reference": result.reference_seconds, "time/update": result.update_seconds,
        "time/step": total_time, "time/compile": metrics_writer.compile_seconds() - compiled_before,
        "throughput/completion_tokens_per_s": tokens / max(total_time, 1e-9),
        "throughput/update_tokens_per_s": float(loss_tokens) * view.update_loop.num_iterations
        / max(result.update_seconds, 1e-9)})
    if run.perf is not None:
      metrics.update(run.perf.step_metrics(
          {"sample": gb.sample_seconds, "reference": result.reference_seconds,
           "update": result.update_seconds, "step": total_time}, float(tokens)))
    return metrics, result.params, result.opt_state

  def meta(self) -> dict:
    """What a checkpoint's meta keeps of the stage besides its position (abstention prices)."""
    prices = self.collector.prices if self.collector is not None else None
    return prices.meta() if prices is not None else {}

  def close(self) -> None:
    """Stops the reward pool and waits for the compiles still under way."""
    if self.pool is not None:
      self.pool.close()
    if self.updater is not None:
      self.updater.close()
