"""Checks a trainer config before any model or data is loaded.

    check_config(config)    # raises ConfigError listing every bad value, one line each

Each field's own rule (type, range, choices) is generated from its declaration (rl/config/fields.py,
models/lora.py); this file holds the rules between fields, written by hand, and reads every stage's
data file through (each row validated by data/jsonl.py), so a bad stage-2 file stops the run before
stage 1 trains. Each line names the field, its value and what is allowed:

    config.rollout.group_size=1: must be an integer >= 2 (GRPO's baseline is the group mean: a group
      of one has advantage 0 in every advantage option, so nothing trains)

A pure function of the config and the files it names: it loads no model, reads no weights and
touches no device. Reward names and options, and prompt recipes, belong to the recipe registry; the
caller passes its checks in (`check_reward`, `check_recipe`).
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, Callable, Mapping, Optional

import ml_collections

from grounding_jax import config_fields
from grounding_jax.data import contrast
from grounding_jax.config_fields import MISSING, ConfigError, FieldChecker
from grounding_jax.data import jsonl
from grounding_jax.data.schema import DataError
from grounding_jax.models import gguf_convert
from grounding_jax.models import lora
from grounding_jax.rl.config import fields

__all__ = ["ConfigError", "RecipeCheck", "RewardCheck", "check_config"]

# check_reward(name, options) raises ValueError/KeyError for an unknown name or bad options, and may
# return the reward's (low, high) range so that reward.on_error="min" is checked for a finite floor.
RewardCheck = Callable[[str, Mapping[str, Any]], Optional[tuple[float, float]]]
# check_recipe(name, rollout_options) raises ValueError/KeyError for a recipe the registry does not
# know, or rollout options (config.rollout.options) its rollout does not take.
RecipeCheck = Callable[[str, Mapping[str, Any]], None]


def check_config(config: ml_collections.ConfigDict, *, process_count: int = 1,
                 check_reward: Optional[RewardCheck] = None,
                 check_recipe: Optional[RecipeCheck] = None,
                 read_data: bool = True, need_model_path: bool = True) -> None:
  """Checks every value of a trainer config; raises one ConfigError listing all bad values.

  Args:
    config: a trainer config (grounding_jax.rl.config.default_config() or a configs/ file).
    process_count: hosts of the run (jax.process_count()): prompts and rows must split over them.
    check_reward: the recipe registry's reward check (see RewardCheck); None skips names/options.
    check_recipe: the recipe registry's check of stages[i].recipe and config.rollout.options; None
      skips them.
    read_data: open and validate every jsonl stage file (False when the caller passes datasets:
      the data paths are then not looked at).
    need_model_path: model.path must name an HF folder (False when the caller passes a model).
  Raises:
    ConfigError: one line per invalid value, each naming the field, the value and what is allowed.
  """
  ck = FieldChecker(config)
  config_fields.check(ck, fields.FIELDS)
  lora.check_fields(ck)
  _check_optimizer(ck, ck.get("optimizer"), "optimizer")
  # The rules between fields.
  if need_model_path:
    _check_model_path(ck)
  _check_mesh(ck)
  _check_rollout(ck, process_count)
  if ck.get("loss.rollout_correction") not in (MISSING, "none"):
    problem = rollout_correction_problem(config)
    if problem:
      ck.bad("loss.rollout_correction", ck.get("loss.rollout_correction"), problem)
  _check_reward(ck, ck.get("reward.functions"), "reward.functions", check_reward)
  _check_stages(ck, check_reward, check_recipe, read_data)
  if ck.problems:
    raise ConfigError(ck.problems)


def _message(e: Exception) -> str:
  """The hook's message (a KeyError's str() wraps it in quotes)."""
  return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)


def _check_model_path(ck: FieldChecker) -> None:
  path, smollm2 = ck.value("model.path"), gguf_convert.SMOLLM2
  if path is MISSING:
    return
  if not isinstance(path, str) or not path:
    ck.bad("model.path", path, f"must be an HF folder (config.json + safetensors) or {smollm2!r}")
  elif path != smollm2 and not os.path.isfile(os.path.join(path, "config.json")):
    ck.bad("model.path", path, f"no config.json there: must be an HF folder (config.json + "
           f"safetensors) or {smollm2!r}")


def _check_mesh(ck: FieldChecker) -> None:
  mesh = ck.value("mesh")
  if mesh is MISSING:
    return
  sizes = dict(mesh.items()) if hasattr(mesh, "items") else {}
  if not sizes:
    ck.bad("mesh", mesh, "must map axis names (data, fsdp, tensor) to sizes")
  for axis, size in sizes.items():
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or (size < 1 and size != -1):
      ck.bad(f"mesh.{axis}", size, "must be an integer >= 1, or -1 for all remaining devices")
  if sum(1 for s in sizes.values() if s == -1) > 1:
    ck.bad("mesh", dict(sizes), "at most one axis may be -1 (all remaining devices)")


def _valid(ck: FieldChecker, field: str, lo: int) -> Optional[int]:
  """The field's value when it is an integer >= lo (its own check reported it otherwise)."""
  v = ck.get(field)
  ok = isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= lo
  return int(v) if ok else None


def _check_rollout(ck: FieldChecker, process_count: int) -> None:
  """Prompts split over hosts, rows into mini- and micro-batches; dropping overlong prompts needs a
  limit; DAPO's overlong buffer fits the completion limit."""
  if ck.get("rollout.overlong_prompts") == "drop" and ck.get("rollout.max_prompt_tokens") == 0:
    ck.bad("rollout.overlong_prompts", "drop", "'drop' needs rollout.max_prompt_tokens > 0")
  prompts, group = _valid(ck, "rollout.prompts_per_step", 1), _valid(ck, "rollout.group_size", 2)
  minis = _valid(ck, "update_loop.num_minibatches", 1)
  micro = _valid(ck, "update_loop.micro_batch_size", 1)
  if prompts and process_count > 1 and prompts % process_count:
    ck.bad("rollout.prompts_per_step", prompts,
           f"must split evenly over the {process_count} hosts (a multiple of {process_count})")
  if prompts and group and minis and micro and not prompts % process_count:
    rows = prompts * group // process_count
    if rows % minis or (rows // minis) % micro:
      ck.bad("update_loop.micro_batch_size", micro,
             f"the {rows} rollout rows per host (rollout.prompts_per_step={prompts} × "
             f"group_size={group} / {process_count} hosts) must split into "
             f"update_loop.num_minibatches={minis} mini-batches of whole micro-batches; "
             f"use a divisor of {rows // minis if rows % minis == 0 else rows}")
  max_new = _valid(ck, "rollout.max_new_tokens", 1)
  if max_new and ck.get("dapo.overlong_shaping") is True:
    buffer = ck.get("dapo.overlong_buffer")
    if isinstance(buffer, bool) or not isinstance(buffer, numbers.Integral) or \
        not 0 < buffer <= max_new:
      ck.bad("dapo.overlong_buffer", buffer,
             f"must be an integer in (0, rollout.max_new_tokens={max_new}] when "
             "dapo.overlong_shaping is on (DAPO Eq. 13's L_cache)")


def rollout_correction_problem(c: ml_collections.ConfigDict) -> Optional[str]:
  """Why loss.rollout_correction cannot run under `c` (a run's or a stage's config), or None.

  The correction weighs the trainer's old log-probs against the sampler's log-probs of the same
  tokens (every rollout carries the sampler's): the old ones must be the trainer's (recomputed, or
  the loss pass's own when μ = 1 with one mini-batch), at the sampler's temperature.
  """
  loss, u = c.loss, c.update_loop
  if loss.rollout_correction == "none":
    return None
  on_policy = u.num_iterations == 1 and u.num_minibatches == 1
  if not on_policy and u.old_logprobs == "sampler":
    return ("the trainer's old log-probs are not available: update_loop.old_logprobs='sampler' "
            "makes the old log-probs the sampler's own, so every weight would be 1; set "
            "update_loop.old_logprobs='recompute'")
  t = loss.logprob_temperature
  if t != "sampling" and isinstance(t, (int, float)) and float(t) != float(c.rollout.temperature):
    return (f"the sampler's log-probs are at rollout.temperature={c.rollout.temperature}, the "
            f"trainer's at loss.logprob_temperature={t}, so their ratio is not the mismatch; set "
            "loss.logprob_temperature='sampling'")
  return None


def _check_reward(ck: FieldChecker, functions: Any, field: str,
                  check_reward: Optional[RewardCheck]) -> None:
  """Each reward function's entry, and (through the registry's hook) its name and options; with
  reward.on_error='min', a finite floor to score failed rows at."""
  on_error = ck.get("reward.on_error")
  if functions is MISSING or not isinstance(functions, (list, tuple)) or not functions:
    ck.bad(field, functions if functions is not MISSING else None,
           "must be a non-empty list of {name, weight, options} (presets.reward_fn)")
    return
  for i, fn in enumerate(functions):
    where = f"{field}[{i}]"
    name = ck.get("name", fn)
    weight = ck.number("weight", root=fn, prefix=f"{where}.")
    options = ck.get("options", fn)
    if not isinstance(name, str) or not name:
      ck.bad(f"{where}.name", None if name is MISSING else name, "must name a reward")
      continue
    if options is MISSING:
      options = {}
    if not hasattr(options, "items"):
      ck.bad(f"{where}.options", options, "must be a dict of the reward's keyword options")
      continue
    if check_reward is None:
      continue
    try:
      bounds = check_reward(name, dict(options))
    except (ValueError, KeyError, TypeError) as e:
      ck.bad(f"{where}.name", name, _message(e))
      continue
    if on_error == "min" and bounds is not None and weight:
      bound = bounds[0] if weight > 0 else bounds[1]
      if not math.isfinite(bound):
        ck.bad(f"{where}.name", name,
               f"its reward_range {tuple(bounds)} has no finite {'low' if weight > 0 else 'high'} "
               "bound, so reward.on_error='min' has no floor to score failed rows at; set "
               "reward.on_error='skip' or 'raise'")


def _check_optimizer(ck: FieldChecker, opt: Any, field: str) -> None:
  if opt is MISSING or not hasattr(opt, "items"):
    ck.bad(field, None if opt is MISSING else opt, "must be an optimizer section")
    return
  config_fields.check(ck, fields.OPTIMIZER, root=opt, prefix=f"{field}.")


def _check_stages(ck: FieldChecker, check_reward, check_recipe, read_data: bool) -> None:
  """Each stage's fields; unique names; its reward, loss and optimizer overrides as the trainer
  applies them (rl/setup.stage_config); its recipe through the registry's hook; its data file."""
  stages = ck.value("stages")
  if stages is MISSING:
    return
  if not isinstance(stages, (list, tuple)) or not stages:
    ck.bad("stages", stages, "must be a non-empty list of rl.config.stage(...)")
    return
  names = [ck.get("name", st) for st in stages]
  for i, st in enumerate(stages):
    p = f"stages[{i}]."
    data = ck.get("data", st)
    own = [f for f in fields.STAGE if data is not MISSING or not f.path.startswith("data.")]
    config_fields.check(ck, own, root=st, prefix=p)
    if data is MISSING:
      ck.bad(p + "data", None, "missing (rl.config.stage() builds one)")
    if isinstance(names[i], str) and names[i] and names.count(names[i]) > 1:
      ck.bad(p + "name", names[i], f"must be unique (stages are told apart by name; names: {names})")
    functions = ck.get("reward.functions", st)
    if functions not in (MISSING, None) and functions != []:
      _check_reward(ck, functions, p + "reward.functions", check_reward)
    for section in ("optimizer", "loss"):  # what the trainer builds (rl/setup.stage_config)
      overrides, base = ck.get(section, st), ck.get(section)
      if overrides in (MISSING, None) or not len(overrides) or not hasattr(base, "to_dict"):
        continue
      unknown = sorted(set(overrides) - set(base))
      if unknown:
        ck.bad(p + section, dict(overrides), f"sets unknown fields {unknown}; known: {sorted(base)}")
      elif section == "optimizer":
        merged = ml_collections.ConfigDict(base.to_dict())
        merged.update(dict(overrides))  # a fresh schedule per stage (fields.STAGE)
        _check_optimizer(ck, merged, p + "optimizer")
    recipe = ck.get("recipe", st)
    if check_recipe is not None and isinstance(recipe, str) and recipe:
      options = ck.get("rollout.options")
      try:
        check_recipe(recipe, dict(options) if hasattr(options, "items") else {})
      except (ValueError, KeyError, TypeError) as e:
        ck.bad(p + "recipe", recipe, _message(e))
    if data is not MISSING and read_data and ck.get("kind", data) == "jsonl":
      _check_data_file(ck, data, p + "data.")
    if data is not MISSING:
      _check_contrast(ck, data, p + "data.")


def _check_contrast(ck: FieldChecker, data, p: str) -> None:
  """Evidence-contrast groups split each question's G samples evenly over its conditions; with a
  search tool (rollout.max_turns > 1) the conditions are the corpus's, so the prompt's passage
  order (gold_shuffled) is none of them."""
  value = ck.get("evidence_contrast", data)
  names = contrast.CONTRASTS.get(value)
  group = _valid(ck, "rollout.group_size", 2)
  if names and group and group % len(names):
    ck.bad(p + "evidence_contrast", value,
           f"splits each question's rollout.group_size={group} samples over {len(names)} evidence "
           f"conditions {names}: use a group_size that is a multiple of {len(names)}")
  turns = _valid(ck, "rollout.max_turns", 1)
  if names and "gold_shuffled" in names and turns and turns > 1:
    ck.bad(p + "evidence_contrast", value,
           f"with rollout.max_turns={turns} the policy reads its passages from the search tool, "
           "whose results a shuffled prompt does not change (gold_shuffled); use 'gold_removed' "
           "(the gold_removed rows search the corpus without their question's gold passages)")


def _check_data_file(ck: FieldChecker, data, p: str) -> None:
  path = ck.get("path", data)
  if not isinstance(path, str) or not path:
    ck.bad(p + "path", None if path is MISSING else path,
           "must name a JSONL file of examples (launch/build_data.py writes one)")
  elif not os.path.isfile(path):
    ck.bad(p + "path", path, "no such file; check the path (launch/build_data.py writes one)")
  else:
    try:
      for _ in jsonl.read_examples(path):  # every row validated, file:line:field on error
        pass
    except (DataError, OSError) as e:
      ck.bad(p + "path", path, str(e))
