"""Validates a trainer config (rl/config.py) before any model or data is loaded.

    check_config(config)    # raises ConfigError listing every bad value, one line each

Every value is checked against its range, enum, type or divisibility rule, and every stage's data
file is opened and read through (each row validated by data/jsonl.py), so a bad stage-2 file stops
the run before stage 1 trains. Each line names the field, its value and what is allowed:

    config.rollout.group_size=1: must be an integer >= 2 (GRPO's baseline is the group mean: a group
      of one has advantage 0 in every advantage option, so nothing trains)

A pure function of the config and the files it names: it loads no model, reads no weights and
touches no device. Reward names and options, and prompt recipes, belong to the recipe registry; the
caller passes its checks in (`check_reward`, `check_recipe`). How a field is read and a bad value
reported (FieldChecker, ConfigError) is rl/field_checks.py's; this file says what each field must be.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, Callable, Mapping, Optional

import ml_collections

from grounding_jax import models
from grounding_jax import optim
from grounding_jax.data import jsonl
from grounding_jax.data import synthetic
from grounding_jax.data.schema import DataError
from grounding_jax.models import lora
from grounding_jax.models import transformer
from grounding_jax.rl import advantages
from grounding_jax.rl import data_stream
from grounding_jax.rl import losses
from grounding_jax.rl import presets
from grounding_jax.rl import reward_pool
# ConfigError is raised here and caught by callers as config_checks.ConfigError.
from grounding_jax.rl.field_checks import MISSING, ConfigError, FieldChecker
from grounding_jax.sampling import rollout as rollout_lib

# Allowed values of the enums that only the trainer reads, in one place.
MODEL_DTYPES = tuple(models.DTYPES)
OLD_LOGPROBS = ("recompute", "sampler")
DATA_KINDS = ("synthetic", "jsonl")
REMAT_POLICIES = tuple(sorted(transformer._REMAT_POLICIES))  # pylint: disable=protected-access

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
  _check_model(ck, need_model_path)
  _check_mesh(ck)
  _check_rollout(ck, process_count)
  _check_reward(ck, ck.get("reward.functions"), "reward.functions", check_reward)
  _check_advantage(ck)
  _check_dapo(ck)
  _check_loss(ck)
  _check_optimizer(ck, ck.get("optimizer"), "optimizer")
  _check_health(ck)
  _check_stages(ck, check_reward, check_recipe, read_data)
  ck.integer("checkpoint.every_steps", lo=1, why="save every this many steps")
  v = ck.get("checkpoint.max_to_keep")
  if v is not None:
    ck.integer("checkpoint.max_to_keep", lo=1, why="or None to keep every checkpoint")
  ck.boolean("checkpoint.resume")
  ck.boolean("logging.console")
  ck.choice("update_loop.compile_ahead", ("none", "widest", "all"),
            why="gradient programs compiled while step 1 samples")
  ck.boolean("perf.metrics")
  ck.boolean("perf.startup_report")
  cache = ck.value("compile_cache_dir")
  if cache is not MISSING and not isinstance(cache, str):
    ck.bad("compile_cache_dir", cache, "must be a folder path, or '' for no persistent cache")
  ck.integer("seed", lo=0)
  workdir = ck.value("workdir")
  if workdir is not MISSING and not (isinstance(workdir, str) and workdir):
    ck.bad("workdir", workdir, "must be a non-empty path (checkpoints and logs go there)")
  if ck.problems:
    raise ConfigError(ck.problems)


def _message(e: Exception) -> str:
  """The hook's message (a KeyError's str() wraps it in quotes)."""
  return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)


def _check_model(ck: FieldChecker, need_path: bool) -> None:
  ck.choice("model.param_dtype", MODEL_DTYPES)
  ck.choice("model.compute_dtype", MODEL_DTYPES)
  ck.boolean("model.remat")
  ck.choice("model.remat_policy", REMAT_POLICIES)
  ck.boolean("model.scan_layers")
  _check_lora(ck)
  path = ck.value("model.path")
  if not need_path or path is MISSING:
    return
  if not isinstance(path, str) or not path:
    ck.bad("model.path", path, f"must be an HF folder (config.json + safetensors) or "
           f"{presets.SMOLLM2!r}")
  elif path != presets.SMOLLM2 and not os.path.isfile(os.path.join(path, "config.json")):
    ck.bad("model.path", path, f"no config.json there: must be an HF folder (config.json + "
           f"safetensors) or {presets.SMOLLM2!r}")


def _check_lora(ck: FieldChecker) -> None:
  """model.lora (models/lora.py): the adapters' rank, scale, dropout and target projections."""
  if ck.get("model.lora") is MISSING:  # configs written before LoRA: full fine-tuning
    return
  rank = ck.integer("model.lora.rank", lo=0, why="0 = full fine-tuning, no adapters")
  ck.number("model.lora.alpha", lo=0, lo_open=True, why="the adapters' scale is alpha / rank")
  ck.number("model.lora.dropout", lo=0, hi=1, hi_open=True)
  ck.boolean("model.lora.save_base")
  targets = ck.strings("model.lora.targets")
  if targets is not None:
    unknown = [t for t in targets if t not in lora.TARGETS]
    if unknown or not targets or len(set(targets)) != len(targets):
      ck.bad("model.lora.targets", targets, f"must name distinct projections of {lora.ALL_TARGETS}"
             + (f"; unknown {unknown}" if unknown else "") + (
                 " (PEFT's target_modules names)" if rank else ""))


def check_lora(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError naming each bad model.lora value (for trainers without check_config: SFT)."""
  ck = FieldChecker(config)
  _check_lora(ck)
  if ck.problems:
    raise ConfigError(ck.problems)


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


def _check_rollout(ck: FieldChecker, process_count: int) -> None:
  prompts = ck.integer("rollout.prompts_per_step", lo=1, why="prompts per GRPO step, all hosts")
  group = ck.integer("rollout.group_size", lo=2, why="GRPO's baseline is the group mean: a group of "
                     "one has advantage 0 in every advantage option, so nothing trains")
  max_new = ck.integer("rollout.max_new_tokens", lo=1)
  ck.number("rollout.temperature", lo=0, lo_open=True,
            why="the trainer's log-probs are of logits / temperature; 0 would be greedy, and a "
                "greedy group has no variance")
  ck.number("rollout.top_p", lo=0, hi=1, lo_open=True)
  ck.integer("rollout.top_k", lo=0, why="0 = no top-k")
  ck.strings("rollout.stop")
  ck.integer("rollout.max_prompt_tokens", lo=0, why="0 = no limit")
  ck.boolean("rollout.enable_thinking", none_ok=True)
  overlong = ck.choice("rollout.overlong_prompts", rollout_lib.OVERLONG_PROMPTS,
                       why="prompts over rollout.max_prompt_tokens")
  if overlong == "drop" and ck.get("rollout.max_prompt_tokens") == 0:
    ck.bad("rollout.overlong_prompts", overlong, "'drop' needs rollout.max_prompt_tokens > 0")
  options = ck.value("rollout.options")
  if options is not MISSING and not hasattr(options, "items"):
    ck.bad("rollout.options", options, "must be a dict of the recipe's rollout options")
  if prompts and process_count > 1 and prompts % process_count:
    ck.bad("rollout.prompts_per_step", prompts,
           f"must split evenly over the {process_count} hosts (a multiple of {process_count})")
  minis = ck.integer("update_loop.num_minibatches", lo=1)
  micro = ck.integer("update_loop.micro_batch_size", lo=1)
  ck.integer("update_loop.num_iterations", lo=1, why="μ, passes over each rollout batch")
  ck.choice("update_loop.old_logprobs", OLD_LOGPROBS)
  ck.integer("update_loop.length_multiple", lo=0, why="0 keeps the sampler's widths")
  ck.boolean("update_loop.share_prompts")
  if prompts and group and minis and micro and not prompts % process_count:
    rows = prompts * group // process_count
    if rows % minis or (rows // minis) % micro:
      ck.bad("update_loop.micro_batch_size", micro,
             f"the {rows} rollout rows per host (rollout.prompts_per_step={prompts} × "
             f"group_size={group} / {process_count} hosts) must split into "
             f"update_loop.num_minibatches={minis} mini-batches of whole micro-batches; "
             f"use a divisor of {rows // minis if rows % minis == 0 else rows}")
  if max_new:
    _check_overlong(ck, max_new)


def _check_overlong(ck: FieldChecker, max_new: int) -> None:
  if ck.get("dapo.overlong_shaping") is True:
    buffer = ck.get("dapo.overlong_buffer")
    if isinstance(buffer, bool) or not isinstance(buffer, numbers.Integral) or \
        not 0 < buffer <= max_new:
      ck.bad("dapo.overlong_buffer", buffer,
             f"must be an integer in (0, rollout.max_new_tokens={max_new}] when "
             "dapo.overlong_shaping is on (DAPO Eq. 13's L_cache)")


def _check_reward(ck: FieldChecker, functions: Any, field: str,
                  check_reward: Optional[RewardCheck]) -> None:
  on_error = ck.choice("reward.on_error", reward_pool.ON_ERROR,
                       why="'min' scores failed rows at the reward's floor, 'skip' drops their "
                           "groups") if field == "reward.functions" else ck.get("reward.on_error")
  if field == "reward.functions":
    ck.integer("reward.num_workers", lo=0, why="0 = score in the trainer process")
    ck.number("reward.timeout_seconds", lo=0, lo_open=True)
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


def _check_advantage(ck: FieldChecker) -> None:
  ck.choice("advantage.scale", advantages.SCALES)
  ddof = ck.value("advantage.std_ddof")
  if ddof is not MISSING and (isinstance(ddof, bool) or ddof not in (0, 1)):
    ck.bad("advantage.std_ddof", ddof, "must be 0 (population std, LEAR) or 1 (unbiased, TRL)")
  ck.number("advantage.std_floor", lo=0, why="LEAR Eq. 11: 0.1")
  ck.number("advantage.eps", lo=0)
  ck.boolean("advantage.leave_one_out")


def _check_dapo(ck: FieldChecker) -> None:
  ck.boolean("dapo.dynamic_sampling")
  ck.integer("dapo.max_sampling_rounds", lo=0, why="extra rollout rounds per step when refilling")
  ck.boolean("dapo.overlong_shaping")
  if ck.get("dapo.overlong_shaping") is not True:
    ck.integer("dapo.overlong_buffer", lo=0)
  ck.number("dapo.overlong_factor", lo=0)
  ck.boolean("dapo.mask_truncated")


def _check_loss(ck: FieldChecker) -> None:
  ck.number("loss.clip_eps_low", lo=0, hi=1, hi_open=True, why="the ratio floor is 1 − ε_low")
  ck.number("loss.clip_eps_high", lo=0)
  ck.number("loss.dual_clip", lo=1, lo_open=True, none_ok=True, why="GRACE: 10.0")
  ck.number("loss.kl_coef", lo=0, why="β; 0 turns the KL term and the reference model off")
  ck.choice("loss.kl_estimator", losses.KL_ESTIMATORS)
  ck.number("loss.kl_clamp", lo=0, lo_open=True, none_ok=True, why="VeRL low_var_kl: 10")
  ck.number("loss.entropy_coef", lo=0, why="an entropy bonus; 0 = logged only")
  ck.choice("loss.aggregation", losses.AGGREGATIONS)
  ck.integer("loss.micro_batch_rows", lo=0, why="0 = update_loop.micro_batch_size")
  ck.integer("loss.logprob_chunk_size", lo=1)
  ck.boolean("loss.logprob_remat")


def _check_optimizer(ck: FieldChecker, opt: Any, field: str) -> None:
  if opt is MISSING or not hasattr(opt, "items"):
    ck.bad(field, None if opt is MISSING else opt, "must be an optimizer section")
    return
  p = f"{field}."
  ck.number("learning_rate", lo=0, lo_open=True, root=opt, prefix=p)
  ck.choice("schedule", optim.SCHEDULES, root=opt, prefix=p)
  ck.choice("schedule_unit", optim.SCHEDULE_UNITS, why="what warm-up and decay count", root=opt,
            prefix=p)
  ck.integer("warmup_steps", lo=0, root=opt, prefix=p)
  ck.number("warmup_ratio", lo=0, hi=1, root=opt, prefix=p)
  ck.number("min_lr_ratio", lo=0, hi=1, root=opt, prefix=p)
  ck.number("b1", lo=0, hi=1, hi_open=True, root=opt, prefix=p)
  ck.number("b2", lo=0, hi=1, hi_open=True, root=opt, prefix=p)
  ck.number("eps", lo=0, lo_open=True, why="Adam divides by √v + eps", root=opt, prefix=p)
  ck.number("weight_decay", lo=0, root=opt, prefix=p)
  ck.boolean("decay_matrices_only", root=opt, prefix=p)
  ck.number("max_grad_norm", lo=0, none_ok=True, why="0 or None = no clipping", root=opt, prefix=p)


def _check_health(ck: FieldChecker) -> None:
  ck.integer("health.max_consecutive_nonfinite", lo=0, why="0 = never stop")
  for bound in ("entropy_min", "kl_max", "clip_frac_max", "logprob_gap_mean_max",
                "logprob_gap_peak_max"):
    ck.number(f"health.{bound}", lo=0, none_ok=True, why="None = no bound")
  ck.number("health.param_norm_ratio_max", lo=0, lo_open=True, none_ok=True, why="None = no bound")


def _check_stages(ck: FieldChecker, check_reward, check_recipe, read_data: bool) -> None:
  stages = ck.value("stages")
  if stages is MISSING:
    return
  if not isinstance(stages, (list, tuple)) or not stages:
    ck.bad("stages", stages, "must be a non-empty list of rl.config.stage(...)")
    return
  names = [ck.get("name", st) for st in stages]
  for i, st in enumerate(stages):
    p = f"stages[{i}]."
    name = names[i]
    if not isinstance(name, str) or not name:
      ck.bad(p + "name", None if name is MISSING else name, "must be a non-empty string")
    elif names.count(name) > 1:
      ck.bad(p + "name", name, f"must be unique (stages are told apart by name; names: {names})")
    ck.integer("num_steps", lo=1, root=st, prefix=p)
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
        merged.update(dict(overrides))  # Lessons §5: a fresh schedule per stage
        _check_optimizer(ck, merged, p + "optimizer")
    recipe = ck.get("recipe", st)
    if not isinstance(recipe, str) or not recipe:
      ck.bad(p + "recipe", None if recipe is MISSING else recipe, "must name a recipe")
    elif check_recipe is not None:
      options = ck.get("rollout.options")
      try:
        check_recipe(recipe, dict(options) if hasattr(options, "items") else {})
      except (ValueError, KeyError, TypeError) as e:
        ck.bad(p + "recipe", recipe, _message(e))
    _check_data(ck, st, p + "data.", read_data)


def _check_data(ck: FieldChecker, st, p: str, read_data: bool) -> None:
  data = ck.get("data", st)
  if data is MISSING:
    ck.bad(p.rstrip("."), None, "missing (rl.config.stage() builds one)")
    return
  ck.boolean("shuffle", root=data, prefix=p)
  if ck.get("stratify", data) is not MISSING:  # optional: no strata when absent
    ck.choice("stratify", data_stream.STRATIFY, why="answerable: both kinds in every step",
              root=data, prefix=p)
  ck.integer("seed", lo=0, root=data, prefix=p)
  kind = ck.choice("kind", DATA_KINDS, root=data, prefix=p)
  if kind == "synthetic":
    ck.integer("num_examples", lo=1, root=data, prefix=p)
    ck.number("answerable_ratio", lo=0, hi=1, root=data, prefix=p)
    if ck.get("unanswerable", data) is not MISSING:  # optional: "mentions" when absent
      ck.choice("unanswerable", synthetic.UNANSWERABLE_CONTEXTS, root=data, prefix=p)
    if ck.get("num_passages", data) is not MISSING:  # optional: 5 passages a context when absent
      ck.integer("num_passages", lo=2, why="passages a context", root=data, prefix=p)
    if ck.get("num_countries", data) is not MISSING:  # optional: a world of 12 when absent
      ck.integer("num_countries", lo=3, why="the synthetic world's size", root=data, prefix=p)
  elif kind == "jsonl" and read_data:
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
