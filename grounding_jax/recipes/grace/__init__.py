"""GRACE (arXiv:2601.04525): quote the evidence or say it is missing, then answer; a gated reward.

  recipe.py     prompts, answer extraction, the evaluation (Table 1, Fig. 3), its data mixes, the Recipe
  reward.py     the response format and the gated reward (§3.2, Eq. 1, Alg. 1)
  baselines.py  the prompted baselines' messages (3-shot demonstrations, ARENA's prompt + abstention)
  judge.py      the LLM judge (LJ): ARENA's prompt with newline-joined golds, an exact "yes" parser
Its training contexts come from data/construct.py (§3.1: several retrievers, balanced sufficiency).
"""

from grounding_jax.recipes.grace.recipe import RECIPES

__all__ = ["RECIPES"]
