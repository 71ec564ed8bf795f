"""Setting a run up from its config: checks, the mesh, the policy, and each stage's parts.

A stage sees the run's config with its own overrides applied (`stage_config`): its recipe, reward
functions, loss and optimizer. From that view come the stage's sampling settings, reward functions,
prompt renderer, optimizer and compiled update programs. Nothing here runs a step.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import ml_collections
import numpy as np

from grounding_jax import models
from grounding_jax import optim
from grounding_jax import parallel
from grounding_jax import recipes
from grounding_jax.data import splits
from grounding_jax.rl import update as update_lib
from grounding_jax.sampling import rollout as rollout_lib

RewardSpec = Sequence[tuple[str, float, Callable]]
_PROGRAMS: dict = {}  # (graphdef, optimizer key, UpdateSettings) -> jitted (train_step, logprob_fn)


def check_config(c: ml_collections.ConfigDict) -> None:
  """Raises ValueError naming the field when the config cannot run (before any model loads)."""
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
  for field in ("compute_dtype", "param_dtype"):
    if c.model[field] not in models.DTYPES:
      raise ValueError(f"model.{field}={c.model[field]!r}; use one of {sorted(models.DTYPES)}")
  for st in c.stages:
    recipes.get_recipe(st.recipe)  # an unknown name fails here, naming the recipes
    stage_config(c, st)  # unknown override fields fail here


def stage_config(config: ml_collections.ConfigDict, st: ml_collections.ConfigDict
                 ) -> ml_collections.ConfigDict:
  """The run's config as stage `st` sees it: its `loss` and `optimizer` fields applied over the run's,
  and its `reward.functions` (when set) in place of the run's."""
  view = copy.deepcopy(config)
  with view.unlocked():
    for section in ("loss", "optimizer"):
      overrides = st[section].to_dict()
      unknown = sorted(set(overrides) - set(view[section]))
      if unknown:
        raise ValueError(f"stages[{st.name!r}].{section} sets unknown fields {unknown}; known: "
                         f"{sorted(view[section])}")
      view[section].update(overrides)
    if st.reward.get("functions"):
      view.reward.functions = st.reward.functions
  return view


def mesh_from_config(axes: ml_collections.ConfigDict):
  """A Mesh over the first prod(sizes) devices (-1 = all remaining), or None for one device."""
  axes = {k: int(v) for k, v in axes.items()}
  if -1 not in axes.values():
    size = int(np.prod(list(axes.values())))
    if size == 1:
      return None
    return parallel.make_mesh(axes, devices=jax.devices()[:size])
  return parallel.make_mesh(axes) if jax.device_count() > 1 else None


def load_policy(c: ml_collections.ConfigDict, mesh, model=None, tokenizer=None):
  """(model on the mesh, tokenizer): the given ones, or loaded from config.model.path."""
  if model is None:
    model = models.load_pretrained(c.model.path, dtype=models.DTYPES[c.model.param_dtype],
                                   compute_dtype=models.DTYPES[c.model.compute_dtype],
                                   remat=c.model.remat, remat_policy=c.model.remat_policy, mesh=mesh)
    tokenizer = tokenizer or models.load_tokenizer(c.model.path)
  elif mesh is not None:
    model = parallel.shard_model(model, mesh)
  if tokenizer is None:
    raise ValueError("a tokenizer is needed: pass tokenizer= or set config.model.path")
  return model, tokenizer


def load_stage_examples(data: ml_collections.ConfigDict) -> list:
  """The dataset of a stage: kind "synthetic" (grounding_jax.data.synthetic) or "jsonl" (a file)."""
  return splits.load(data)


def reward_functions(view: ml_collections.ConfigDict) -> RewardSpec:
  """[(name, weight, RewardFn)] of a stage view's config.reward.functions."""
  return [(f.name, float(f.weight), recipes.get_reward(f.name, **dict(f.get("options", {}))))
          for f in view.reward.functions]


def prompt_fn(recipe: recipes.Recipe, tokenizer, enable_thinking: Optional[bool]
              ) -> Callable[[Any], str]:
  """Example -> the recipe's default prompt through the tokenizer's chat template."""
  return lambda ex: recipe.render_prompt(ex, tokenizer, enable_thinking=enable_thinking)


def sampling_settings(view: ml_collections.ConfigDict, recipe: recipes.Recipe
                      ) -> rollout_lib.SamplingSettings:
  """The rollout's sampling settings; the sampler stops at the recipe's stop strings and the config's."""
  r = view.rollout
  stop = tuple(recipe.stop) + tuple(s for s in r.stop if s not in recipe.stop)
  return rollout_lib.SamplingSettings(
      group_size=r.group_size, max_new_tokens=r.max_new_tokens, temperature=r.temperature,
      top_p=r.top_p, top_k=r.top_k, stop=stop, max_prompt_tokens=r.max_prompt_tokens)


def optimizer(view: ml_collections.ConfigDict, num_steps: int):
  """(optimizer, cache key) of a stage: a fresh schedule over its updates; equal keys share programs."""
  u = view.update_loop
  updates = num_steps * u.num_iterations * u.num_minibatches
  return (optim.build_optimizer(view.optimizer, updates),
          (view.optimizer.to_json(sort_keys=True), updates))


def programs(graphdef, optimizer_, key, settings: update_lib.UpdateSettings):
  """Jitted (train_step, logprob_fn), shared by stages and trainers with the same model structure,
  optimizer config (the key determines the optimizer) and settings, so they compile once."""
  key = (graphdef, key, settings)
  if key not in _PROGRAMS:
    _PROGRAMS[key] = (update_lib.make_train_step(graphdef, optimizer_, settings),
                      update_lib.make_logprob_fn(graphdef, settings))
  return _PROGRAMS[key]


def stage_rewards(given: Optional[RewardSpec | Mapping[str, RewardSpec]], st,
                  view: ml_collections.ConfigDict) -> RewardSpec:
  """The stage's reward functions: passed to the Trainer (one list, or one per stage name), else
  built from the stage view's config."""
  spec = given.get(st.name) if isinstance(given, Mapping) else given
  return list(spec) if spec is not None else reward_functions(view)
