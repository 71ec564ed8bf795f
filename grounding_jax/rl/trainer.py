"""The GRPO training loop over a list of stages: resume, steps, metrics, checkpoints.

    trainer = Trainer(config)           # config: grounding_jax.rl.config.default_config() or a configs/ file
    history = trainer.train()           # list of per-step metric dicts (also in <workdir>/logs)

A step (DESIGN.md "One GRPO step, as data") is collection (rl/collect.py: rollouts of the stage's
recipe, rewards, DAPO refill, advantages) then the update (rl/step.py: reference and old log-probs,
μ × mini-batches × micro-batches). Set-up from the config is rl/setup.py; non-finite steps, finite
checkpoints and the health monitors are rl/health.py. Each stage starts a fresh optimizer schedule
and takes its initial policy as the KL reference (Lessons §5). Under LoRA (config.model.lora) the
trained "params" are the adapters: the reference is a copy of the stage's initial adapters over the
same frozen base weights — at the first stage B = 0, i.e. the base model with the adapters off.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from grounding_jax import checkpoints
from grounding_jax import metrics_writer
from grounding_jax import parallel
from grounding_jax import recipes
from grounding_jax.models import lora
from grounding_jax.rl import collect
from grounding_jax.rl import data_stream
from grounding_jax.rl import health as health_lib
from grounding_jax.rl import host_batch
from grounding_jax.rl import reward_pool
from grounding_jax.rl import setup
from grounding_jax.rl import step as step_lib
from grounding_jax.rl import step_perf
from grounding_jax.rl import update as update_lib
from grounding_jax.rl import update_programs
from grounding_jax.rl import validate


class Trainer:
  """GRPO over `config.stages`, resumable from `<workdir>/checkpoints`.

  Args:
    config: see grounding_jax.rl.config.default_config().
    model, tokenizer: an already-loaded policy (else loaded from config.model.path).
    reward_functions: [(name, weight, fn)] for every stage, or {stage name: [...]}; default built with
      grounding_jax.recipes.get_reward from config.reward / stages[i].reward.
    datasets: {stage name: [Example]}; default from stages[i].data.
    prompt_fn: Example -> prompt text; default the stage recipe's prompt through the chat template.
  """

  def __init__(self, config: ml_collections.ConfigDict, *, model=None, tokenizer=None,
               reward_functions: Optional[setup.RewardSpec | Mapping[str, setup.RewardSpec]] = None,
               datasets: Optional[Mapping[str, Sequence[Any]]] = None,
               prompt_fn: Optional[Callable[[Any], str]] = None):
    self.config = config
    setup.check_config(config, read_data=datasets is None, need_model_path=model is None)
    self.mesh = setup.mesh_from_config(config.mesh)
    self.hosts = host_batch.HostBatches(self.mesh)
    if parallel.spanned_processes(self.mesh) != jax.process_count():  # hosts would train apart
      raise ValueError(f"{jax.process_count()} processes share one run, but config.mesh="
                       f"{config.mesh.to_dict()} covers the devices of "
                       f"{parallel.spanned_processes(self.mesh)}; give the mesh all "
                       f"{jax.device_count()} devices (e.g. fsdp=-1)")
    self.model, self.tokenizer = setup.load_policy(config, self.mesh, model, tokenizer)
    self._reward_functions, self._datasets, self._prompt_fn = reward_functions, datasets, prompt_fn
    self.graphdef, self.params, self.rest = update_lib.split_model(self.model)
    self.checkpointer = checkpoints.Checkpointer(f"{config.workdir}/checkpoints",
                                                 max_to_keep=config.checkpoint.max_to_keep)
    self.history: list[dict] = []
    self.perf = step_perf.StepPerf(self.model.config, self.mesh) if config.perf.metrics else None
    last = config.stages[-1]  # held-out validation (rl/validate.py) scores with the last stage's rewards
    self.validator = validate.build(config, self.tokenizer, self.mesh, lambda: setup.stage_rewards(
        reward_functions, last, setup.stage_config(config, last), self.tokenizer), prompt_fn)

  def _stage(self, st, position: int):
    """(view, collector, updater, optimizer, pool, stream) of stage `st`, its data at `position`."""
    view = setup.stage_config(self.config, st)
    recipe = recipes.get_recipe(st.recipe)
    optimizer, opt_key = setup.optimizer(view, st.num_steps)
    settings = update_lib.settings_from_config(view)
    train_step, logprob_fn = setup.programs(self.graphdef, optimizer, opt_key, settings)
    rewards = setup.stage_rewards(self._reward_functions, st, view, self.tokenizer)
    pool = reward_pool.RewardPool(rewards, num_workers=view.reward.num_workers,
                                  timeout_seconds=view.reward.timeout_seconds,
                                  on_error=view.reward.on_error)
    prompt_fn = self._prompt_fn or setup.prompt_fn(recipe, self.tokenizer,
                                                    view.rollout.enable_thinking)
    data = self._datasets[st.name] if self._datasets else setup.load_stage_examples(st.data)
    data = setup.fit_prompt_limit(view, st.name, data, prompt_fn, self.tokenizer)
    stream = data_stream.ExampleStream(data, seed=st.data.seed + view.seed, shuffle=st.data.shuffle,
                                       position=position, stratify=st.data.get("stratify", ""))
    collector = collect.Collector(view, recipe, self.tokenizer, self.mesh, self.hosts, pool, prompt_fn,
                                  setup.sampling_settings(view, recipe))
    updater = step_lib.Updater(view, settings, train_step, logprob_fn, self.hosts, self.perf)
    if view.update_loop.compile_ahead == "all":
      updater.add_pending(self._compile_ahead(view, updater, collector, data))
    return view, collector, updater, optimizer, pool, stream

  def _compile_ahead(self, view, updater: step_lib.Updater, collector: collect.Collector,
                     prompts) -> dict:
    """Starts compiling, in threads, the gradient programs `prompts` can run that no step has
    built (update_programs.compile_stage): all of them (update_loop.compile_ahead="all", the
    stage's data), or the widest ("widest": the next step's prompts); {shape: future}."""
    lengths = step_perf.prompt_lengths(prompts, collector.prompt_fn, self.tokenizer,
                                       view.rollout.max_prompt_tokens)
    return update_programs.compile_stage(
        view, updater.settings, updater.train_step, self.params, self.rest, self.hosts, lengths,
        step_lib.Updater.keeps_sampler_logp(view, updater.settings),
        widest_only=view.update_loop.compile_ahead == "widest", skip=updater.seen)

  def startup_report(self) -> str:
    """The first stage's widest update and log-prob programs' peak memory per device for this
    mesh (compiled now; rl/step_perf.py), and the sampler's KV cache: does the model fit?"""
    st = self.config.stages[0]
    view = setup.stage_config(self.config, st)
    optimizer, opt_key = setup.optimizer(view, st.num_steps)
    settings = update_lib.settings_from_config(view)
    programs = setup.programs(self.graphdef, optimizer, opt_key, settings)
    prompt_fn = self._prompt_fn or setup.prompt_fn(recipes.get_recipe(st.recipe), self.tokenizer,
                                                    view.rollout.enable_thinking)
    data = self._datasets[st.name] if self._datasets else setup.load_stage_examples(st.data)
    lengths = step_perf.prompt_lengths(data, prompt_fn, self.tokenizer, view.rollout.max_prompt_tokens)
    return step_perf.stage_report(view, settings, *programs, self.params, self.rest, self.hosts,
                                  self.model.config, lengths,
                                  step_lib.Updater.keeps_sampler_logp(view, settings))

  def train(self, max_steps: Optional[int] = None) -> list[dict]:
    """Runs (or resumes) all stages; returns this call's per-step metrics.

    Args:
      max_steps: stop after this many steps in this call (checkpointing at the stop); None = all.
    """
    c = self.config
    total = sum(st.num_steps for st in c.stages)
    stage_idx, stage_step, global_step, position = 0, 0, 0, 0
    rng = jax.random.key(c.seed)
    t_restore = time.perf_counter()
    restored = self.checkpointer.restore_latest_intact(self._restore_target) \
        if c.checkpoint.resume else None
    # Set-up seconds spent before a step, logged with it (time/restore: this call's checkpoint
    # restore; time/stage_setup: the stage's data, programs, sampler and reward pool).
    setup_times = {"time/restore": time.perf_counter() - t_restore} if restored is not None else {}
    health = health_lib.RunHealth(c.health)  # non-finite steps and monitors (rl/health.py)
    if restored is not None:  # the newest intact checkpoint (a corrupt newer one is moved aside)
      restored, meta, _ = restored
      health = health_lib.RunHealth(c.health, meta.get("health"))
      stage_idx, stage_step = meta["stage"], meta["stage_step"]
      global_step, position = meta["step"], meta["data_position"]
      self.params = restored["params"]
      if "base" in restored:  # model.lora.save_base: the frozen weights as checkpointed
        self.rest = nnx.merge_state(self.rest, restored["base"])
      rng = jax.random.wrap_key_data(np.asarray(restored["rng"]))
      if self.validator is not None:
        self.validator.resume(meta)
    writer = metrics_writer.MetricsWriter(f"{c.workdir}/logs", total_steps=total,
                                          initial_step=global_step, console=c.logging.console)
    done_here = 0
    try:
      while stage_idx < len(c.stages):
        st = c.stages[stage_idx]
        if stage_step >= st.num_steps:  # a finished stage (e.g. resumed at its final checkpoint)
          stage_idx, stage_step, position, restored = stage_idx + 1, 0, 0, None
          continue
        t_stage = time.perf_counter()
        view, collector, updater, optimizer, pool, stream = self._stage(st, position)
        setup_times["time/stage_setup"] = time.perf_counter() - t_stage
        if restored is not None:  # mid-stage resume: the stage's optimizer state and reference
          opt_state, ref_params = restored["opt_state"], restored.get("ref_params")
          restored = None
        else:  # a new stage: fresh schedule; reference = the stage's initial policy (Lessons §5)
          opt_state = self.hosts.on_mesh(optimizer.init(self.params))
          ref_params = jax.tree.map(jnp.copy, self.params) if view.loss.kl_coef else None
          health.start_stage(self.params)
        try:
          while stage_step < st.num_steps:
            if max_steps is not None and done_here >= max_steps:
              return self.history
            rng, step_key = jax.random.split(rng)
            metrics, opt_state = self._step(step_key, global_step, collector, updater, stream,
                                            opt_state, ref_params)
            stage_step, global_step, done_here = stage_step + 1, global_step + 1, done_here + 1
            metrics["stage"] = float(stage_idx)
            metrics.update(setup_times)
            setup_times = {}
            metrics = health.observe(global_step, metrics, self.params)
            meta = {"stage": stage_idx, "stage_name": st.name, "stage_step": stage_step,
                    "data_position": stream.position}
            state = lambda: self._state(opt_state, rng, ref_params)  # pylint: disable=cell-var-from-loop
            if self.validator is not None:  # eval/<metric> on the held-out split; the best checkpoint
              metrics.update(self.validator.maybe_run(global_step, global_step == total, (
                  self.graphdef, nnx.merge_state(self.params, self.rest)), state, meta))
              meta.update(self.validator.meta())
            writer.write(global_step, metrics)
            self.history.append({"step": global_step, **metrics})
            health.stop_if_stuck(global_step, self.checkpointer)  # after N skipped steps in a row
            last = stage_step == st.num_steps or (max_steps is not None and done_here >= max_steps)
            if global_step % c.checkpoint.every_steps == 0 or last:  # never non-finite parameters
              health_lib.save_finite(self.checkpointer, global_step, state(),
                                     {**meta, "health": health.state()})
        finally:
          pool.close()
          updater.close()
        stage_idx, stage_step, position = stage_idx + 1, 0, 0
    finally:
      writer.close()
    self.model = self.policy()
    return self.history

  def _restore_target(self, meta: dict):
    """The abstract training state of the stage a checkpoint's `meta` was written in."""
    view = setup.stage_config(self.config, self.config.stages[meta["stage"]])
    optimizer, _ = setup.optimizer(view, self.config.stages[meta["stage"]].num_steps)
    rng = jax.random.key(self.config.seed)
    ref = self.params if view.loss.kl_coef else None
    if all(not x.committed for x in jax.tree.leaves(self.params)):
      # One device, nothing placed: the optimizer state's shapes suffice (restored uncommitted, as
      # optimizer.init would make it); a concrete init zeroed a second copy of the state (Adam:
      # 2x the params, ~0.5 s of SmolLM2's resume).
      opt_state = jax.eval_shape(optimizer.init, self.params)
    else:
      opt_state = optimizer.init(self.params)
    return self.hosts.on_mesh(self._state(opt_state, rng, ref), abstract=True)

  def _state(self, opt_state, rng, ref_params) -> dict:
    """The checkpointed training state (the reference only when the stage has a KL term). Under
    LoRA, params / opt_state / ref_params are the adapters'; the frozen base weights are added
    only with model.lora.save_base (else resuming re-reads them from model.path)."""
    state = {"params": self.params, "opt_state": opt_state,
             "rng": np.asarray(jax.random.key_data(rng))}
    if ref_params is not None:
      state["ref_params"] = ref_params
    if lora.has_adapters(self.model) and self.config.model.lora.save_base:
      state["base"] = nnx.filter_state(self.rest, nnx.Param)
    return state

  def policy(self):
    """The current policy as a model."""
    return nnx.merge(self.graphdef, self.params, self.rest)

  def _step(self, key, global_step: int, collector: collect.Collector, updater: step_lib.Updater,
            stream: data_stream.ExampleStream, opt_state, ref_params) -> tuple[dict, Any]:
    """One GRPO step: collect the groups, update the policy; returns (metrics, opt_state)."""
    t_start, compiled_before = time.perf_counter(), metrics_writer.compile_seconds()
    if self.perf is not None:
      self.perf.begin_step()
    view = updater.c
    if view.update_loop.compile_ahead == "widest":  # in a thread while this step samples
      updater.add_pending(self._compile_ahead(view, updater, collector,
                                              stream.peek(view.rollout.prompts_per_step)))
    # The sampler reads the trainer's split directly (no merge and re-split per step).
    policy = (self.graphdef, nnx.merge_state(self.params, self.rest))
    gb = collector.collect(key, stream, policy)
    result = updater.run(gb, self.params, self.rest, opt_state, ref_params, global_step)
    self.params = result.params
    metrics = {**gb.metrics, **result.metrics}
    total_time = time.perf_counter() - t_start
    tokens, loss_tokens = self.hosts.gather(
        np.array([gb.rollout.lengths.sum(), gb.loss_mask.sum()]).reshape(1, 2)).sum(axis=0)
    metrics.update({
        "time/sample": gb.sample_seconds, "time/reward": gb.reward_seconds,
        "time/reference": result.reference_seconds, "time/update": result.update_seconds,
        "time/step": total_time, "time/compile": metrics_writer.compile_seconds() - compiled_before,
        "throughput/completion_tokens_per_s": tokens / max(total_time, 1e-9),
        "throughput/update_tokens_per_s": float(loss_tokens) * self.config.update_loop.num_iterations
        / max(result.update_seconds, 1e-9)})
    if self.perf is not None:
      metrics.update(self.perf.step_metrics(
          {"sample": gb.sample_seconds, "reference": result.reference_seconds,
           "update": result.update_seconds, "step": total_time}, float(tokens)))
    return metrics, result.opt_state


def train(config: ml_collections.ConfigDict, **kwargs) -> list[dict]:
  """Builds a Trainer from `config` (kwargs as Trainer's) and runs every stage; returns step metrics."""
  return Trainer(config, **kwargs).train()
