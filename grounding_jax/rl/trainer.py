"""The GRPO training loop (DESIGN.md "One GRPO step, as data"), over a list of stages.

    trainer = Trainer(config)           # config: grounding_jax.rl.config.default_config() or a configs/ file
    history = trainer.train()           # list of per-step metric dicts (also in <workdir>/logs)

One step: rollouts (sampler) → host rewards (process pool, timeout) → group advantages → optional DAPO
filtering / refill, overlong shaping, truncation masking → reference and old log-probs → μ passes ×
mini-batches (one optimizer update each) × micro-batches (gradient accumulation) → metrics → checkpoint.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from grounding_jax import checkpoints
from grounding_jax import metrics_writer
from grounding_jax import optim
from grounding_jax import parallel
from grounding_jax.rewards import base as rewards_base
from grounding_jax.rl import advantages as adv_lib
from grounding_jax.rl import data_stream
from grounding_jax.rl import host_batch
from grounding_jax.rl import lear_rollout
from grounding_jax.rl import reward_pool
from grounding_jax.rl import rollout as rollout_lib
from grounding_jax.rl import update as update_lib

RewardSpec = Sequence[tuple[str, float, Callable]]
_PROGRAMS: dict = {}  # (graphdef, optimizer key, UpdateSettings) -> jitted (train_step, logprob_fn)


def _dtype(name: str):
  return {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}[name]


def load_stage_examples(data: ml_collections.ConfigDict) -> list:
  """The dataset of a stage: kind "synthetic" (grounding_jax.data.synthetic) or "jsonl" (a file)."""
  if data.kind == "synthetic":
    from grounding_jax.data import synthetic  # pylint: disable=g-import-not-at-top
    return synthetic.generate_examples(int(data.num_examples), seed=int(data.seed),
                                       answerable_ratio=float(data.answerable_ratio))
  if data.kind == "jsonl":
    from grounding_jax.data import jsonl  # pylint: disable=g-import-not-at-top
    if not data.path:
      raise ValueError("stage data.kind='jsonl' needs data.path")
    return list(jsonl.read_examples(data.path))
  raise ValueError(f"stage data.kind={data.kind!r}; expected 'synthetic' or 'jsonl'")


def _mesh_from_config(axes: ml_collections.ConfigDict):
  """A Mesh over the first prod(sizes) devices (-1 = all remaining), or None for one device."""
  axes = {k: int(v) for k, v in axes.items()}
  if -1 not in axes.values():
    size = int(np.prod(list(axes.values())))
    if size == 1:
      return None
    return parallel.make_mesh(axes, devices=jax.devices()[:size])
  return parallel.make_mesh(axes) if jax.device_count() > 1 else None


class Trainer:
  """GRPO over `config.stages`, resumable from `<workdir>/checkpoints`.

  Args:
    config: see grounding_jax.rl.config.default_config().
    model, tokenizer: an already-loaded policy (else loaded from config.model.path).
    reward_functions: [(name, weight, fn)] for every stage, or {stage name: [...]}; default built with
      grounding_jax.rewards.get_reward from config.reward / stages[i].reward.
    datasets: {stage name: [Example]}; default from stages[i].data.
    prompt_fn: Example -> prompt text; default data.prompts.render_prompt(stages[i].data.recipe, ...).
  """

  def __init__(self, config: ml_collections.ConfigDict, *, model=None, tokenizer=None,
               reward_functions: Optional[RewardSpec | Mapping[str, RewardSpec]] = None,
               datasets: Optional[Mapping[str, Sequence[Any]]] = None,
               prompt_fn: Optional[Callable[[Any], str]] = None):
    self.config = config
    self._check_config()
    self.mesh = _mesh_from_config(config.mesh)
    self.hosts = host_batch.HostBatches(self.mesh)
    if parallel.spanned_processes(self.mesh) != jax.process_count():  # hosts would train apart
      raise ValueError(f"{jax.process_count()} processes share one run, but config.mesh="
                       f"{config.mesh.to_dict()} covers the devices of "
                       f"{parallel.spanned_processes(self.mesh)}; give the mesh all "
                       f"{jax.device_count()} devices (e.g. fsdp=-1)")
    if model is None:
      from grounding_jax import models  # pylint: disable=g-import-not-at-top
      model = models.load_pretrained(config.model.path, dtype=_dtype(config.model.param_dtype),
                                     compute_dtype=_dtype(config.model.compute_dtype),
                                     remat=config.model.remat,
                                     remat_policy=config.model.remat_policy, mesh=self.mesh)
      tokenizer = tokenizer or models.load_tokenizer(config.model.path)
    elif self.mesh is not None:
      model = parallel.shard_model(model, self.mesh)
    if tokenizer is None:
      raise ValueError("a tokenizer is needed: pass tokenizer= or set config.model.path")
    self.model, self.tokenizer = model, tokenizer
    self._reward_functions, self._datasets, self._prompt_fn = reward_functions, datasets, prompt_fn
    self.graphdef, self.params, self.rest = update_lib.split_model(model)
    self.checkpointer = checkpoints.Checkpointer(f"{config.workdir}/checkpoints",
                                                 max_to_keep=config.checkpoint.max_to_keep)
    self.history: list[dict] = []

  # ------------------------------------------------------------------ set-up per stage
  def _check_config(self):
    c = self.config
    n = c.rollout.prompts_per_step * c.rollout.group_size // jax.process_count()
    u = c.update_loop
    if n % u.num_minibatches or (n // u.num_minibatches) % u.micro_batch_size:
      raise ValueError(
          f"rollout rows per host {n} (prompts_per_step × group_size / hosts) must split into "
          f"update_loop.num_minibatches={u.num_minibatches} mini-batches of whole "
          f"update_loop.micro_batch_size={u.micro_batch_size} micro-batches")
    if u.length_multiple < 0:
      raise ValueError(f"update_loop.length_multiple={u.length_multiple} must be >= 0 (0 = no trim)")
    if u.old_logprobs not in ("recompute", "sampler"):
      raise ValueError(f"update_loop.old_logprobs={u.old_logprobs!r}; use 'recompute' or 'sampler'")
    if c.dapo.overlong_shaping and not 0 < c.dapo.overlong_buffer <= c.rollout.max_new_tokens:
      raise ValueError(f"dapo.overlong_buffer={c.dapo.overlong_buffer} must be in "
                       f"(0, rollout.max_new_tokens={c.rollout.max_new_tokens}]")
    if not c.stages:
      raise ValueError("config.stages is empty")

  def _stage_rewards(self, st) -> RewardSpec:
    spec = self._reward_functions
    if isinstance(spec, Mapping):
      spec = spec.get(st.name)
    if spec is not None:
      return list(spec)
    from grounding_jax.rewards import get_reward  # pylint: disable=g-import-not-at-top
    functions = (st.reward.get("functions") or self.config.reward.functions)
    return [(f.name, float(f.weight), get_reward(f.name, **dict(f.get("options", {}))))
            for f in functions]

  def _stage_prompt_fn(self, st):
    if self._prompt_fn is not None:
      return self._prompt_fn
    from grounding_jax.data import prompts  # pylint: disable=g-import-not-at-top
    thinking = self.config.rollout.enable_thinking
    return lambda ex: prompts.render_prompt(st.data.recipe, ex, self.tokenizer,
                                            enable_thinking=thinking)

  def _optimizer(self, st):
    """(optimizer, cache key): a fresh schedule per stage; equal keys share compiled programs."""
    opt_cfg = ml_collections.ConfigDict(self.config.optimizer.to_dict())
    opt_cfg.update(st.optimizer.to_dict())
    u = self.config.update_loop
    updates = st.num_steps * u.num_iterations * u.num_minibatches
    return optim.build_optimizer(opt_cfg, updates), (opt_cfg.to_json(sort_keys=True), updates)

  def _programs(self, optimizer, key, settings):
    """Jitted (train_step, logprob_fn), shared by stages and trainers with the same model structure,
    optimizer config (the key determines the optimizer) and settings, so they compile once."""
    key = (self.graphdef, key, settings)
    if key not in _PROGRAMS:
      _PROGRAMS[key] = (update_lib.make_train_step(self.graphdef, optimizer, settings),
                        update_lib.make_logprob_fn(self.graphdef, settings))
    return _PROGRAMS[key]

  # ------------------------------------------------------------------ the loop
  def train(self, max_steps: Optional[int] = None) -> list[dict]:
    """Runs (or resumes) all stages; returns this call's per-step metrics.

    Args:
      max_steps: stop after this many steps in this call (checkpointing at the stop); None = all.
    """
    c = self.config
    total = sum(st.num_steps for st in c.stages)
    stage_idx, stage_step, global_step, position = 0, 0, 0, 0
    rng = jax.random.key(c.seed)
    use_ref = bool(c.loss.kl_coef)
    restored = None
    if c.checkpoint.resume and self.checkpointer.latest_step() is not None:
      meta = self.checkpointer.read_meta()
      stage_idx, stage_step = meta["stage"], meta["stage_step"]
      global_step, position = meta["step"], meta["data_position"]
      optimizer, _ = self._optimizer(c.stages[stage_idx])
      target = {"params": self.params, "opt_state": optimizer.init(self.params),
                "rng": np.asarray(jax.random.key_data(rng))}
      if use_ref:
        target["ref_params"] = self.params
      restored, _ = self.checkpointer.restore(self.hosts.on_mesh(target, abstract=True))
      self.params = restored["params"]
      rng = jax.random.wrap_key_data(np.asarray(restored["rng"]))
    writer = metrics_writer.MetricsWriter(f"{c.workdir}/logs", total_steps=total,
                                          initial_step=global_step, console=c.logging.console)
    done_here = 0
    try:
      while stage_idx < len(c.stages):
        st = c.stages[stage_idx]
        if stage_step >= st.num_steps:  # a finished stage (e.g. resumed at its final checkpoint)
          stage_idx, stage_step, position, restored = stage_idx + 1, 0, 0, None
          continue
        optimizer, opt_key = self._optimizer(st)
        settings = update_lib.settings_from_config(self.config)
        if restored is not None:  # mid-stage resume: the stage's optimizer state and reference
          opt_state, ref_params = restored["opt_state"], restored.get("ref_params")
          restored = None
        else:  # a new stage: fresh schedule; reference = the stage's initial policy (Lessons §5)
          opt_state = self.hosts.on_mesh(optimizer.init(self.params))
          ref_params = jax.tree.map(jnp.copy, self.params) if use_ref else None
        train_step, logprob_fn = self._programs(optimizer, opt_key, settings)
        pool = reward_pool.RewardPool(self._stage_rewards(st), num_workers=c.reward.num_workers,
                                      timeout_seconds=c.reward.timeout_seconds,
                                      on_error=c.reward.on_error)
        stream = data_stream.ExampleStream(self._datasets[st.name] if self._datasets else
                                           load_stage_examples(st.data), seed=st.data.seed + c.seed,
                                           shuffle=st.data.shuffle, position=position)
        prompt_fn = self._stage_prompt_fn(st)
        try:
          while stage_step < st.num_steps:
            if max_steps is not None and done_here >= max_steps:
              return self.history
            rng, step_key = jax.random.split(rng)
            metrics, opt_state = self._step(step_key, global_step, stream, pool, prompt_fn, settings,
                                            train_step, logprob_fn, opt_state, ref_params)
            stage_step += 1
            global_step += 1
            done_here += 1
            metrics.update({"stage": float(stage_idx)})
            writer.write(global_step, metrics)
            self.history.append({"step": global_step, **metrics})
            last = stage_step == st.num_steps or (max_steps is not None and done_here >= max_steps)
            if global_step % c.checkpoint.every_steps == 0 or last:
              state = {"params": self.params, "opt_state": opt_state,
                       "rng": np.asarray(jax.random.key_data(rng))}
              if use_ref:
                state["ref_params"] = ref_params
              self.checkpointer.save(global_step, state, {
                  "stage": stage_idx, "stage_name": st.name, "stage_step": stage_step,
                  "data_position": stream.position})
        finally:
          pool.close()
        stage_idx, stage_step, position = stage_idx + 1, 0, 0
    finally:
      writer.close()
    self.model = self._merged()
    return self.history

  def _merged(self):
    from flax import nnx  # pylint: disable=g-import-not-at-top
    return nnx.merge(self.graphdef, self.params, self.rest)

  # ------------------------------------------------------------------ one GRPO step
  def _rollout_round(self, key, stream, pool, prompt_fn, model):
    c = self.config
    r = c.rollout
    g = r.group_size
    examples = stream.take(r.prompts_per_step)
    t0 = time.perf_counter()
    if r.kind == "lear":  # LEAR Eq. 4: answers from 3 hard-masked contexts; o_f is trained on
      ls = lear_rollout.sample(model, self.tokenizer, examples, prompt_fn, group_size=g,
                               max_new_tokens=r.max_new_tokens, temperature=r.temperature,
                               top_p=r.top_p, top_k=r.top_k, stop=tuple(r.stop),
                               max_prompt_tokens=r.max_prompt_tokens, seed=key, mesh=self.mesh,
                               options=lear_rollout.LearOptions.from_config(r.lear))
      ro, completions, extras = ls.rollout, ls.completions, ls.extras
    elif r.kind == "standard":
      ro = rollout_lib.sample(model, self.tokenizer, examples, prompt_fn, group_size=g,
                              max_new_tokens=r.max_new_tokens, temperature=r.temperature,
                              top_p=r.top_p, top_k=r.top_k, stop=tuple(r.stop),
                              max_prompt_tokens=r.max_prompt_tokens, seed=key, mesh=self.mesh)
      completions, extras = ro.texts, {}
    else:
      raise ValueError(f"rollout.kind={r.kind!r}; expected 'standard' or 'lear'")
    t1 = time.perf_counter()
    scored = pool(completions, ro.row_examples(), {"lengths": list(ro.lengths),
                                                   "truncated": list(ro.truncated), **extras})
    values = dict(scored.values)
    if c.dapo.overlong_shaping:  # DAPO Eq. 13, added to the reward before normalisation
      pen = rewards_base.overlong_penalty(ro.lengths, r.max_new_tokens, c.dapo.overlong_buffer,
                                          c.dapo.overlong_factor)
      values["overlong"] = pen
      values["reward"] = values["reward"] + pen
    for e in scored.errors[:5]:
      print(f"[reward] {e}", flush=True)
    usable = ~scored.failed.reshape(-1, g).any(axis=1) if c.reward.on_error == "skip" else \
        np.ones(len(examples), bool)
    return ro, values, usable, scored.failed, t1 - t0, time.perf_counter() - t1

  def _step(self, key, global_step, stream, pool, prompt_fn, settings, train_step, logprob_fn,
            opt_state, ref_params):
    c = self.config
    g = c.rollout.group_size
    want = c.rollout.prompts_per_step // jax.process_count()
    model = self._merged()
    t_start, compiled_before = time.perf_counter(), metrics_writer.compile_seconds()
    rounds, values, usable, failed = [], [], [], []
    t_sample = t_reward = 0.0
    max_rounds = 1 + (c.dapo.max_sampling_rounds if c.dapo.dynamic_sampling else 0)
    for i in range(max_rounds):
      ro, vals, use, fail, ts, tr = self._rollout_round(jax.random.fold_in(key, i), stream, pool,
                                                        prompt_fn, model)
      rounds.append(ro), values.append(vals), usable.append(use), failed.append(fail)
      t_sample, t_reward = t_sample + ts, t_reward + tr
      informative = ~adv_lib.zero_variance_groups(np.concatenate([v["reward"] for v in values]), g)
      if not c.dapo.dynamic_sampling or self.hosts.all_hosts(
          (informative & np.concatenate(usable)).sum() >= want):
        break
    # Metrics describe the first round: an unbiased sample of the current policy.
    metrics = self._rollout_metrics(rounds[0], values[0], failed[0])
    metrics["dapo/sampling_rounds"] = float(len(rounds))
    allr = rollout_lib.concat(rounds, pad_id=int(self.tokenizer.pad_token_id or 0))
    keys = set().union(*values)
    allv = {k: np.concatenate([v.get(k, np.zeros(len(rr.texts))) for v, rr in zip(values, rounds)])
            for k in keys}
    all_usable = np.concatenate(usable)
    informative = ~adv_lib.zero_variance_groups(allv["reward"], g)
    groups = rollout_lib.select_groups(all_usable, informative, want) if c.dapo.dynamic_sampling \
        else np.arange(want)
    batch_ro = rollout_lib.take_groups(allr, groups)
    rows = (groups[:, None] * g + np.arange(g)[None]).reshape(-1)
    rewards = allv["reward"][rows]
    a = c.advantage
    advantages = adv_lib.group_advantages(rewards, g, scale=a.scale, std_ddof=a.std_ddof,
                                          std_floor=a.std_floor, eps=a.eps,
                                          leave_one_out=a.leave_one_out)
    loss_mask = batch_ro.completion_mask.copy()
    if c.dapo.mask_truncated:  # DAPO overlong filtering
      loss_mask &= ~batch_ro.truncated[:, None]
    loss_mask &= np.repeat(all_usable[groups], g)[:, None]
    all_adv = self.hosts.gather(advantages)  # metrics describe the global batch, equal on every host
    metrics["advantage/mean"] = float(all_adv.mean())
    metrics["advantage/std"] = float(all_adv.std())
    metrics["advantage/abs_max"] = float(np.abs(all_adv).max())
    metrics["dapo/kept_informative_frac"] = float(self.hosts.gather(informative[groups]).mean())

    batch = dict(prompt_ids=np.repeat(batch_ro.prompt_ids, g, axis=0),
                 prompt_mask=np.repeat(batch_ro.prompt_mask, g, axis=0),
                 completion_ids=batch_ro.completion_ids, loss_mask=loss_mask,
                 advantages=advantages.astype(np.float32))
    if not settings.on_policy and c.update_loop.old_logprobs == "sampler":
      batch["old_logp"] = batch_ro.sampler_logp
    batch = self.hosts.trim(batch, c.update_loop.length_multiple)
    n = len(rows)
    mb = c.update_loop.micro_batch_size
    widths = self.hosts.packed_widths(batch, mb, settings.group_size)  # in batch order
    width = max(widths) if widths else None  # the log-prob passes run at one width
    t0 = time.perf_counter()
    if c.loss.kl_coef:
      batch["ref_logp"] = self.hosts.logprobs(logprob_fn, ref_params, self.rest, batch, mb, width)
    if not settings.on_policy and c.update_loop.old_logprobs == "recompute":
      batch["old_logp"] = self.hosts.logprobs(logprob_fn, self.params, self.rest, batch, mb, width)
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    step_metrics = []
    per_mini = n // c.update_loop.num_minibatches
    perm_rng = np.random.default_rng([c.seed, global_step])
    params = self.params
    rows_per_unit = settings.group_size  # a shared prompt's group moves between mini-batches whole
    for it in range(c.update_loop.num_iterations):
      order = np.arange(n)
      if c.update_loop.num_minibatches > 1:
        units = perm_rng.permutation(n // rows_per_unit)
        order = (units[:, None] * rows_per_unit + np.arange(rows_per_unit)).reshape(-1)
      for m in range(c.update_loop.num_minibatches):
        idx = order[m * per_mini:(m + 1) * per_mini]
        mini = {k: v[idx] for k, v in batch.items()}
        mini_widths = self.hosts.packed_widths(mini, mb, settings.group_size)
        with self.hosts.context():
          params, opt_state, sm = train_step(params, self.rest, opt_state,
                                             self.hosts.device_batch(mini, mb),
                                             packed_width=mini_widths)
        step_metrics.append(sm)
    self.params = params
    step_metrics = jax.device_get(step_metrics)
    t_update = time.perf_counter() - t0
    for k in step_metrics[0]:
      vals = [float(s[k]) for s in step_metrics]
      metrics[k] = min(vals) if k == "ratio_min" else max(vals) if k == "ratio_max" else \
          float(np.mean(vals))
    total_time = time.perf_counter() - t_start
    tokens, loss_tokens = self.hosts.gather(np.array([batch_ro.lengths.sum(), loss_mask.sum()])
                                      .reshape(1, 2)).sum(axis=0)
    metrics.update({"time/sample": t_sample, "time/reward": t_reward, "time/reference": t_ref,
                    "time/update": t_update, "time/step": total_time,
                    "time/compile": metrics_writer.compile_seconds() - compiled_before,
                    "throughput/completion_tokens_per_s": tokens / max(total_time, 1e-9),
                    "throughput/update_tokens_per_s":
                        float(loss_tokens) * c.update_loop.num_iterations / max(t_update, 1e-9)})
    return metrics, opt_state

  def _rollout_metrics(self, ro, values, failed):
    g = ro.group_size
    # Every host's rows (groups stay whole), so logged means/stds/extremes are the global ones.
    values = {k: self.hosts.gather(values[k]) for k in sorted(values)}
    failed, lengths, truncated = (self.hosts.gather(x) for x in (failed, ro.lengths, ro.truncated))
    m = {}
    for k, v in sorted(values.items()):
      name = "reward/mean" if k == "reward" else f"reward/{k}"
      m[name] = float(np.mean(v))
    m["reward/std"] = float(np.std(values["reward"]))
    m["reward/failed_frac"] = float(np.mean(failed))
    m["zero_variance_frac"] = float(adv_lib.zero_variance_groups(values["reward"], g).mean())
    m["completion_length/mean"] = float(lengths.mean())
    m["completion_length/max"] = float(lengths.max())
    m["completion_length/min"] = float(lengths.min())
    m["truncated_frac"] = float(truncated.mean())
    return m


def train(config: ml_collections.ConfigDict, **kwargs) -> list[dict]:
  """Builds a Trainer from `config` (kwargs as Trainer's) and runs every stage; returns step metrics."""
  return Trainer(config, **kwargs).train()
