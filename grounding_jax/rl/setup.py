"""Setting a run up from its config: checks, the mesh, the policy, and each stage's parts.

A stage sees the run's config with its own overrides applied (`stage_config`): its recipe, reward
functions, loss and optimizer. From that view come the stage's sampling settings, reward functions,
prompt renderer, optimizer and compiled update programs. Nothing here runs a step.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import ml_collections
import numpy as np

from grounding_jax import models
from grounding_jax import optim
from grounding_jax import parallel
from grounding_jax import recipes
from grounding_jax.data import splits
from grounding_jax.models import lora
from grounding_jax.rl.config import checks as config_checks
from grounding_jax.rl import health
from grounding_jax.rl import update as update_lib
from grounding_jax.sampling import rollout as rollout_lib

RewardSpec = Sequence[tuple[str, float, Callable]]
_PROGRAMS: dict = {}  # (graphdef, optimizer key, UpdateSettings) -> jitted (train_step, logprob_fn)


def check_config(c: ml_collections.ConfigDict, *, read_data: bool = True,
                 need_model_path: bool = True) -> None:
  """Every config value checked before any model or data loads (rl/config/checks.py), with the recipe
  registry's checks of reward names and options, stage recipes and their rollout options; raises
  config_checks.ConfigError with one line per bad value."""

  def check_reward(name, options):
    if options.get("tokenizer") == POLICY_TOKENIZER:  # resolved when the stage is built
      options = {**options, "tokenizer": None}
    return recipes.get_reward(name, **options).reward_range

  def check_recipe(name, rollout_options):
    recipes.get_recipe(name).check_rollout_options(rollout_options)

  config_checks.check_config(c, process_count=jax.process_count(), check_reward=check_reward,
                             check_recipe=check_recipe, read_data=read_data,
                             need_model_path=need_model_path)
  problems = []
  for i, st in enumerate(c.stages):  # what the update builds from each stage's view
    try:
      update_lib.settings_from_config(stage_config(c, st))
    except ValueError as e:
      problems.append(f"config.stages[{i}] ({st.name}): {e}")
  if problems:
    raise config_checks.ConfigError(problems)


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
  """(model on the mesh, tokenizer): the given ones, or loaded from config.model.path, with the
  adapters of config.model.lora added unless the model has some; raises
  health.NonFiniteWeightsError when a weight is NaN or inf (naming the tensor)."""
  source = "the model passed to the Trainer" if model is not None else c.model.path
  loaded = model is None
  if model is None:
    model = models.load_pretrained(c.model.path, dtype=models.DTYPES[c.model.param_dtype],
                                   compute_dtype=models.DTYPES[c.model.compute_dtype],
                                   remat=c.model.remat, remat_policy=c.model.remat_policy,
                                   scan_layers=c.model.scan_layers, mesh=mesh)
    tokenizer = tokenizer or models.load_tokenizer(c.model.path)
  adding = c.model.lora.rank > 0 and not lora.has_adapters(model)
  if adding:  # fresh adapters, B = 0: the base model's outputs
    model = lora.add_from_config(model, c.model.lora, c.seed)
  if mesh is not None and (adding or not loaded):  # load_pretrained placed the base weights
    model = parallel.shard_model(model, mesh)
  if tokenizer is None:
    raise ValueError("a tokenizer is needed: pass tokenizer= or set config.model.path")
  health.check_start_weights(model, source)
  return model, tokenizer


def load_stage_examples(data: ml_collections.ConfigDict) -> list:
  """The dataset of a stage: kind "synthetic" (grounding_jax.data.synthetic) or "jsonl" (a file)."""
  return splits.load(data)


# A reward option value naming the policy's tokenizer folder (e.g. LEAR's length reward counts its
# tokens, note 003 §5.2): a path, so the reward pickles to worker processes and loads it there.
POLICY_TOKENIZER = "policy"


def policy_folder(view: ml_collections.ConfigDict, tokenizer=None) -> str:
  """The policy's HF folder: config.model.path when it is a folder, else the folder the given
  tokenizer came from, else "" (e.g. model.path "smollm2" before launch/train.py resolves it)."""
  for path in (view.model.path, getattr(tokenizer, "name_or_path", "")):
    if path and os.path.isdir(path):
      return path
  return ""


def reward_options(options: Mapping[str, Any], policy_path: str) -> dict:
  """A reward's config options with tokenizer="policy" replaced by the policy's folder."""
  out = dict(options)
  if out.get("tokenizer") == POLICY_TOKENIZER:
    if not policy_path:
      raise ValueError("a reward option tokenizer='policy' needs the policy's folder: set "
                       "config.model.path to an HF folder (or give the tokenizer folder itself)")
    out["tokenizer"] = policy_path
  return out


def fit_prompt_limit(view: ml_collections.ConfigDict, name: str, examples: Sequence[Any],
                     prompt_fn: Callable[[Any], str], tokenizer) -> list:
  """The stage's examples under rollout.overlong_prompts: all of them ("truncate": the sampler cuts
  long prompts on the left), or those whose prompt fits in rollout.max_prompt_tokens ("drop"; the
  count dropped is printed)."""
  r = view.rollout
  if r.overlong_prompts != "drop":
    return list(examples)
  kept, dropped = rollout_lib.drop_overlong(examples, prompt_fn, tokenizer, r.max_prompt_tokens)
  print(f"[data] stage {name!r}: dropped {len(dropped)} of {len(examples)} examples whose prompts "
        f"exceed rollout.max_prompt_tokens={r.max_prompt_tokens} (rollout.overlong_prompts='drop')",
        flush=True)
  if not kept:
    raise ValueError(f"stage {name!r}: every prompt is longer than rollout.max_prompt_tokens="
                     f"{r.max_prompt_tokens}; raise the limit or use rollout.overlong_prompts='truncate'")
  return kept


def reward_functions(view: ml_collections.ConfigDict, policy_path: str = "") -> RewardSpec:
  """[(name, weight, RewardFn)] of a stage view's config.reward.functions (`policy_path` resolves
  tokenizer="policy" options; default config.model.path).

  Raises:
    ValueError: a judge spec puts a model on a mesh (`mesh=`) while rewards are scored in worker
      processes: the judge must share the trainer process's devices (reward.num_workers=0).
  """
  for i, f in enumerate(view.reward.functions):
    for key, value in dict(f.get("options", {})).items():
      mesh = value.get("mesh") if hasattr(value, "get") else None
      if mesh and value.get("kind") in ("llm", "nli") and view.reward.num_workers > 0:
        mesh = mesh.to_dict() if hasattr(mesh, "to_dict") else mesh
        raise ValueError(f"config.reward.functions[{i}].options.{key}.mesh={mesh!r} "
                         f"shards the judge over the trainer's devices, but reward.num_workers="
                         f"{view.reward.num_workers} scores rewards in worker processes, which cannot "
                         "share them; set --config.reward.num_workers=0 (or drop the judge's mesh)")
  policy_path = policy_path or policy_folder(view)
  return [(f.name, float(f.weight),
           recipes.get_reward(f.name, **reward_options(f.get("options", {}), policy_path)))
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
  """(optimizer, cache key) of a stage: a fresh schedule over its `num_steps` GRPO steps of
  μ × num_minibatches updates each (optimizer.schedule_unit says which of the two warm-up and decay
  count); equal keys share programs."""
  u = view.update_loop
  per_step = u.num_iterations * u.num_minibatches
  return (optim.build_optimizer(view.optimizer, num_steps, per_step),
          (view.optimizer.to_json(sort_keys=True), num_steps, per_step))


def programs(graphdef, optimizer_, key, settings: update_lib.UpdateSettings):
  """Jitted (train_step, logprob_fn), shared by stages and trainers with the same model structure,
  optimizer config (the key determines the optimizer) and settings, so they compile once."""
  key = (graphdef, key, settings)
  if key not in _PROGRAMS:
    _PROGRAMS[key] = (update_lib.make_train_step(graphdef, optimizer_, settings),
                      update_lib.make_logprob_fn(graphdef, settings))
  return _PROGRAMS[key]


def stage_rewards(given: Optional[RewardSpec | Mapping[str, RewardSpec]], st,
                  view: ml_collections.ConfigDict, tokenizer=None) -> RewardSpec:
  """The stage's reward functions: passed to the Trainer (one list, or one per stage name), else
  built from the stage view's config (tokenizer="policy" options name the policy's folder)."""
  spec = given.get(st.name) if isinstance(given, Mapping) else given
  return list(spec) if spec is not None else reward_functions(view, policy_folder(view, tokenizer))
