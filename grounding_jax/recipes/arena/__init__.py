"""ARENA (arXiv:2505.13258): name the relevant references, analyse them, answer in a short phrase.

  recipe.py  prompts, parser, the adaptive reward (format + accuracy + relevance + bonus), the
             evaluation (Table 3), its data mix, the Recipe
  judge.py   the LLM judge (Table 8's prompt; the code's substring reply rule)
"""

from grounding_jax.recipes.arena.recipe import RECIPES

__all__ = ["RECIPES"]
