"""LEAR (arXiv:2507.15586; v4 renames it EviOmni): reason, extract rational evidence, answer from masks.

  recipe.py   prompts, parser, the reward (§3.2, Eqs. 5-9), the two-model evaluation (reader answers,
              compression ratio), the Recipe
  rollout.py  the rollout: extract, then answer from three hard-masked contexts (§3.1, Eq. 4)
"""

from grounding_jax.recipes.lear.recipe import RECIPES

__all__ = ["RECIPES"]
