"""The naive GRPO baseline of ARENA (arXiv:2505.13258 §4.3): think / answer format + exact match.

  recipe.py  the prompt (ARENA's references), parser, reward, evaluation and the Recipe
"""

from grounding_jax.recipes.naive.recipe import RECIPES

__all__ = ["RECIPES"]
