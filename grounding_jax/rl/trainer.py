"""The GRPO training loop over a list of stages: resume, steps, metrics, checkpoints.

    trainer = Trainer(config)     # config: grounding_jax.rl.config.default_config() or a configs/ file
    history = trainer.train()     # list of per-step metric dicts (also in <workdir>/logs)

A GRPO step is its stage's (rl/stages.py: collection, then μ passes × mini-batches of optimizer
updates), counted over the run (`global_step`, the logged step) and within the stage (`stage_step`).
Set-up from the config is rl/setup.py; non-finite steps, finite checkpoints and the health monitors
are rl/health.py. Each stage starts a fresh optimizer schedule and takes its initial policy as the KL
reference (Lessons, arXiv:2506.15522 §2.1, trains stage 2 on from stage 1 and leaves the reset
unsaid; a new TRL trainer resets both). Under LoRA (config.model.lora) the trained
"params" are the adapters: the reference is a copy of the stage's initial adapters over the same
frozen base weights — at the first stage B = 0, i.e. the base model with the adapters off.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import ml_collections
import numpy as np
from flax import nnx

from grounding_jax import checkpoints
from grounding_jax import metrics_writer
from grounding_jax.models import lora
from grounding_jax.rl import health as health_lib
from grounding_jax.rl import host_batch
from grounding_jax.rl import preemption
from grounding_jax.rl import rollout_log
from grounding_jax.rl import setup
from grounding_jax.rl import stages as stages_lib
from grounding_jax.rl import step_perf
from grounding_jax.rl import update as update_lib
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
    tool: what the policy calls when rollout.max_turns > 1 (sampling/tools.Tool: queries ->
      ToolResults, e.g. a retriever); required then.

  Resuming (checkpoint.resume and a checkpoint in the workdir) reads the weights from the newest
  intact checkpoint while the Trainer is built, without reading config.model.path's safetensors
  (its config.json and tokenizer only; not under LoRA, whose frozen base comes from there), so
  `model` is the resumed policy from the start and a preempted run's first step waits on one read
  (issue 35). A `model` passed without weights (nnx.eval_shape) is filled the same way.
  """

  def __init__(self, config: ml_collections.ConfigDict, *, model=None, tokenizer=None,
               reward_functions: Optional[setup.RewardSpec | Mapping[str, setup.RewardSpec]] = None,
               datasets: Optional[Mapping[str, Sequence[Any]]] = None,
               prompt_fn: Optional[Callable[[Any], str]] = None, tool=None):
    self.config = config
    setup.check_config(config, read_data=datasets is None, need_model_path=model is None)
    validate.check_config(config)  # the validator itself is built on first use (`validator`)
    tool = tool if tool is not None else setup.build_tool(config)
    setup.check_tool(config, tool)
    self.mesh = setup.run_mesh(config)
    self.hosts = host_batch.HostBatches(self.mesh)
    self.checkpointer = checkpoints.Checkpointer(f"{config.workdir}/checkpoints",
                                                 max_to_keep=config.checkpoint.max_to_keep,
                                                 compress=config.checkpoint.compress)
    resuming = (model is None and config.checkpoint.resume and not config.model.lora.rank
                and self.checkpointer.latest_step() is not None)
    self.model, self.tokenizer = setup.load_policy(config, self.mesh, model, tokenizer,
                                                   read_weights=not resuming)
    self.graphdef, self.params, self.rest = update_lib.split_model(self.model)
    self.history: list[dict] = []
    self.perf = step_perf.StepPerf(self.model.config, self.mesh) if config.perf.metrics else None
    self.run = stages_lib.Run(self.tokenizer, self.graphdef, self.mesh, self.hosts, self.perf,
                             reward_functions, datasets, prompt_fn, tool)
    self._validator: Optional[validate.Validator] = None
    # (restored, meta, step) and its seconds: the checkpoint read while building, train() starts there
    self._resumed: Optional[tuple[tuple[Any, dict, int], float]] = None
    if not setup.has_weights(self.model):
      self._fill_from_checkpoint()

  @property
  def resumed_step(self) -> Optional[int]:
    """The checkpoint step the Trainer's weights were read from while it was built (None when it
    read config.model.path or was given a model); train() continues from there."""
    return None if self._resumed is None else self._resumed[0][2]

  def _fill_from_checkpoint(self) -> None:
    """The weights of a model built without them, from the newest intact checkpoint (a damaged
    one is moved aside: Checkpointer.restore_latest_intact). Raises ValueError when there is none."""
    t0 = time.perf_counter()
    found = (self.checkpointer.restore_latest_intact(self._restore_target)
             if self.config.checkpoint.resume else None)
    if found is None:
      raise ValueError(f"the Trainer's model has no weights (abstract) and nothing fills them: "
                       f"{self.config.workdir}/checkpoints has no checkpoint to resume from "
                       f"(checkpoint.resume={self.config.checkpoint.resume})")
    self._resumed = (found, time.perf_counter() - t0)
    self.params = found[0]["params"]
    self.model = self.policy()

  @property
  def validator(self) -> Optional[validate.Validator]:
    """The held-out validation (rl/validate.py), None when evals.every_steps is 0; built on first
    use: its split, checks and the last stage's reward functions load then, not with the Trainer."""
    if self._validator is None and self.config.evals.every_steps:  # scored with the last stage's rewards
      last = stages_lib.Stage.plan(self.config, len(self.config.stages) - 1, self.run)
      self._validator = validate.build(self.config, self.tokenizer, self.mesh,
                                       lambda: last.rewards(self.run), self.run.prompt_fn,
                                       self.run.tool)
    return self._validator

  def startup_report(self) -> str:
    """The first stage's widest update and log-prob programs' peak memory per device for this
    mesh (compiled now; rl/step_perf.py), and the sampler's KV cache: does the model fit?"""
    st = stages_lib.Stage.plan(self.config, 0, self.run)
    tokens = step_perf.prompt_tokens(st.examples(self.run), st.prompt_fn, self.tokenizer,
                                     st.view.rollout.max_prompt_tokens)
    return step_perf.stage_report(st.view, st.settings, *st.programs(self.run), self.params, self.rest,
                                  self.hosts, self.model.config, tokens, st.keeps_sampler_logp())

  def train(self, max_steps: Optional[int] = None) -> list[dict]:
    """Runs (or resumes) all stages; returns this call's per-step metrics.

    Args:
      max_steps: stop after this many GRPO steps in this call (checkpointing at the stop); None = all.
    Raises:
      preemption.Preempted: a SIGTERM came; the step under way finished and was checkpointed.
    """
    c = self.config
    validator = self.validator  # built before the first step, so a bad held-out row stops the run
    total = sum(st.num_steps for st in c.stages)
    stage_idx, stage_step, global_step, position, meta = 0, 0, 0, 0, {}
    rng = jax.random.key(c.seed)
    if self._resumed is not None:  # read while the Trainer was built
      restored, restore_seconds = self._resumed
      self._resumed = None
    else:
      t_restore = time.perf_counter()
      restored = self.checkpointer.restore_latest_intact(self._restore_target) \
          if c.checkpoint.resume else None
      restore_seconds = time.perf_counter() - t_restore
    # Set-up seconds spent before a step, logged with it (time/restore: the checkpoint restore;
    # time/stage_setup: the stage's data, programs, sampler and reward pool; time/checkpoint: the
    # step before's save).
    setup_times = {"time/restore": restore_seconds} if restored is not None else {}
    if restored is not None:  # the newest intact checkpoint (a corrupt newer one is moved aside)
      restored, meta, _ = restored
      stage_idx, stage_step = meta["stage"], meta["stage_step"]
      global_step, position = meta["step"], meta["data_position"]
      self.params = restored["params"]
      if "base" in restored:  # model.lora.save_base: the frozen weights as checkpointed
        self.rest = nnx.merge_state(self.rest, restored["base"])
      rng = jax.random.wrap_key_data(np.asarray(restored["rng"]))
      if validator is not None:
        validator.resume(meta)
    health = health_lib.RunHealth(c.health, meta.get("health"))  # non-finite steps, monitors
    writer = metrics_writer.MetricsWriter(f"{c.workdir}/logs", total_steps=total,
                                          initial_step=global_step, console=c.logging.console,
                                          wandb_options=c.logging.wandb.to_dict(),
                                          run_config=c.to_dict() if c.logging.wandb.project else None)
    rollouts = rollout_log.RolloutLog(c.workdir, c.logging.rollouts_every, writer)
    done_here = 0  # GRPO steps run by this call
    guard = preemption.Guard()  # SIGTERM: finish the step, checkpoint it, raise Preempted
    completed = False  # returning normally: a failed background checkpoint write is raised
    background = checkpoints.writes_in_background(c.checkpoint.background_write)
    try:
      for stage_idx in range(stage_idx, len(c.stages)):
        if stage_step >= c.stages[stage_idx].num_steps:  # finished (resumed at its last checkpoint)
          stage_step, position, restored = 0, 0, None
          continue
        t_stage = time.perf_counter()
        st = stages_lib.Stage.plan(c, stage_idx, self.run).start(
            self.run, position, self.params, self.rest, meta if restored is not None else None)
        setup_times["time/stage_setup"] = time.perf_counter() - t_stage
        if restored is not None:  # mid-stage resume: the stage's optimizer state and reference
          opt_state, ref_params = restored["opt_state"], restored.get("ref_params")
          restored = None
        else:  # a new stage: fresh schedule; reference = the stage's initial policy
          opt_state, ref_params = st.initial_state(self.run, self.params)
          health.start_stage(self.params)
        try:
          while stage_step < st.num_steps:
            if max_steps is not None and done_here >= max_steps:
              completed = True
              return self.history
            rng, step_key = jax.random.split(rng)
            metrics, self.params, opt_state = st.step(self.run, step_key, global_step, self.params,
                                                      self.rest, opt_state, ref_params)
            stage_step, global_step, done_here = stage_step + 1, global_step + 1, done_here + 1
            metrics, setup_times = {**metrics, "stage": float(stage_idx), **setup_times}, {}
            metrics = health.observe(global_step, metrics, self.params, rows=st.rows_per_step,
                                     abstention=st.recipe.abstention_component)
            meta = {"stage": stage_idx, "stage_name": st.name, "stage_step": stage_step,
                    "data_position": st.stream.position, **st.meta()}
            state = lambda: self._state(opt_state, rng, ref_params)  # pylint: disable=cell-var-from-loop
            if validator is not None:  # eval/<metric> on the held-out split; the best checkpoint
              metrics.update(validator.maybe_run(global_step, global_step == total, (
                  self.graphdef, nnx.merge_state(self.params, self.rest)), state, meta))
              meta.update(validator.meta())
            writer.write(global_step, metrics)
            rollouts.write(global_step, st.name, st.last_batch, st.recipe, st.prompt_fn,
                           st.view.rollout.group_size)
            self.history.append({"step": global_step, **metrics})
            health.stop_if_stuck(global_step, self.checkpointer)  # after N bad steps in a row
            last = stage_step == st.num_steps or (max_steps is not None and done_here >= max_steps)
            stop = guard.agreed(self.hosts) and global_step < total  # all stop after one step
            if global_step % c.checkpoint.every_steps == 0 or last or stop:  # only finite states
              t_save = time.perf_counter()
              health_lib.save_finite(self.checkpointer, global_step, state(),
                                     {**meta, "health": health.state()},
                                     blocking=last or stop or not background)
              # How long the save held training (a background write: the copy and checksums),
              # logged with the next step.
              setup_times["time/checkpoint"] = time.perf_counter() - t_save
            if stop:
              raise guard.preempted(global_step, self.checkpointer)
        finally:
          st.close()
        stage_step, position = 0, 0
      completed = True
    finally:
      guard.close()
      writer.close()
      # Background checkpoint writes end before train() does; their errors are raised only when
      # nothing else is (a run stopped by another exception logs them).
      try:
        self.checkpointer.wait(raise_error=completed)
      finally:
        if validator is not None:
          validator.wait(raise_error=completed)
    self.model = self.policy()
    return self.history

  def _restore_target(self, meta: dict):
    """The abstract training state of the stage a checkpoint's `meta` was written in."""
    st = stages_lib.Stage.plan(self.config, meta["stage"], self.run)
    rng = jax.random.key(self.config.seed)
    ref = self.params if st.view.loss.kl_coef else None
    leaves = jax.tree.leaves(self.params)
    if all(checkpoints.uncommitted(x) for x in leaves):
      # One device, nothing placed: the optimizer state's shapes suffice (restored uncommitted, as
      # optimizer.init would make it); a concrete init would zero a second copy of the state (Adam:
      # 2x the params).
      opt_state = jax.eval_shape(st.optimizer.init, self.params)
    elif any(isinstance(x, jax.ShapeDtypeStruct) for x in leaves):  # placed, without weights
      shapes = jax.eval_shape(st.optimizer.init, self.params)
      placed = jax.jit(st.optimizer.init).lower(self.params).compile().output_shardings
      opt_state = jax.tree.map(lambda s, p: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=p),
                               shapes, placed)
    else:
      opt_state = st.optimizer.init(self.params)
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


def train(config: ml_collections.ConfigDict, **kwargs) -> list[dict]:
  """Builds a Trainer from `config` (kwargs as Trainer's) and runs every stage; returns step metrics."""
  return Trainer(config, **kwargs).train()
