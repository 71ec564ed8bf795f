"""One folder per paper recipe: prompts, stop strings, parser, reward, evaluator, judge, rollout, data mix.

    recipe = get_recipe(NAME)                                   # one of available_recipes()
    prompt = recipe.render_prompt(example, tokenizer)          # the paper's prompt, chat-templated
    reward = recipe.reward(**options)                           # a RewardFn
    table = recipe.evaluate(completions, examples, judge=...)   # the paper's metrics

  grace/     GRACE, arXiv:2601.04525                 evidence or own-knowledge path, gated ROUGE-L reward
  trust/     Ground-GRPO (Lessons), arXiv:2506.15522  cited answers (NLI) or refusals; two training stages
  arena/     ARENA, arXiv:2505.13258                 relevance / analysis / answer, EM + relevance + bonus
  lear/      LEAR, arXiv:2507.15586                  reason + extract, answers from hard-masked contexts
  truthrl/   TruthRL, arXiv:2509.25760               boxed answer or "I don't know", ternary reward
  naive/     ARENA's naive GRPO baseline             think / answer format + exact match

Each folder holds everything its paper fixes (recipe.py: prompts, parser, evaluation and the Recipe;
reward.py, judge.py, rollout.py where the paper has one) and nothing else names the recipe: the
layers below take what they need from the Recipe object (judge styles, report footnote, data mixes).
base.py is the Recipe interface, reward_fn.py the RewardFn contract and the example checks every
reward uses, gold.py what every gold completion is built from.

The registry is the `RECIPES` dict of every module or folder in this package: a new recipe is one
new folder (plus a config in configs/); `register_recipe` adds one from outside the package. Reward
names are the recipe names plus each recipe's `reward_variants` (e.g. a "<recipe>_binary" scheme).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from grounding_jax.recipes.base import Decoding, Recipe
from grounding_jax.recipes.reward_fn import RewardFn

_REGISTRY: dict[str, Recipe] = {}


def _discover() -> None:
  for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    module = importlib.import_module(f"{__name__}.{info.name}")
    for name, recipe in getattr(module, "RECIPES", {}).items():
      register_recipe(recipe, name=name)


def register_recipe(recipe: Recipe, *, name: str | None = None) -> None:
  """Adds `recipe` to the registry under `name` (default recipe.name); names must be new."""
  name = name or recipe.name
  if not isinstance(recipe, Recipe):
    raise TypeError(f"register_recipe({name!r}): expected a grounding_jax.recipes.Recipe, got "
                    f"{type(recipe).__name__}.")
  if name in _REGISTRY or name in _reward_variants():
    raise ValueError(f"recipe {name!r} is already registered; pick another name.")
  _REGISTRY[name] = recipe


def available_recipes() -> list[str]:
  """Names accepted by `get_recipe`."""
  return sorted(_REGISTRY)


def get_recipe(name: str) -> Recipe:
  """The recipe registered as `name`; raises ValueError naming the valid choices."""
  if name not in _REGISTRY:
    raise ValueError(f"unknown recipe {name!r}; available: {', '.join(available_recipes())}.")
  return _REGISTRY[name]


def _reward_variants() -> dict[str, tuple[Recipe, dict[str, Any]]]:
  return {variant: (recipe, dict(options)) for recipe in _REGISTRY.values()
          for variant, options in recipe.reward_variants.items()}


def available_rewards() -> list[str]:
  """Names accepted by `get_reward`: every recipe and every recipe's reward variants."""
  return sorted(set(_REGISTRY) | set(_reward_variants()))


def get_reward(name: str, **options: Any) -> RewardFn:
  """The reward of recipe (or reward variant) `name` built with `options`; raises ValueError naming
  the valid choices, or the recipe and the options it rejected."""
  variants = _reward_variants()
  if name in _REGISTRY:
    recipe, defaults = _REGISTRY[name], {}
  elif name in variants:
    recipe, defaults = variants[name]
  else:
    raise ValueError(f"unknown reward {name!r}; available: {', '.join(available_rewards())}.")
  try:
    return recipe.reward(**{**defaults, **options})
  except TypeError as e:  # an unknown option: say which recipe and what it accepts
    raise ValueError(f"reward {name!r}: bad options {sorted(options)}: {e}") from e


def evaluator(name: str) -> Recipe:
  """The recipe whose evaluator `name` names: a registered recipe, or one of a recipe's `aliases`."""
  for recipe in _REGISTRY.values():
    if name in recipe.aliases:
      return recipe
  return get_recipe(name)


def data_presets() -> dict[str, Any]:
  """Every recipe's data mixes (`Recipe.data_presets`): preset name -> data.mixture.Preset."""
  out: dict[str, Any] = {}
  for recipe in _REGISTRY.values():
    for name, preset in recipe.data_presets.items():
      if out.setdefault(name, preset) is not preset:
        raise ValueError(f"data preset {name!r} is defined by two recipes; rename one.")
  return dict(sorted(out.items()))


def render_prompt(name: str, example, tokenizer: Any = None, **kw: Any) -> str:
  """`get_recipe(name).render_prompt(example, tokenizer, **kw)` (see Recipe.render_prompt)."""
  return get_recipe(name).render_prompt(example, tokenizer, **kw)


_discover()

__all__ = ["Decoding", "Recipe", "RewardFn", "available_recipes", "available_rewards", "data_presets",
           "evaluator", "get_recipe", "get_reward", "register_recipe", "render_prompt"]
