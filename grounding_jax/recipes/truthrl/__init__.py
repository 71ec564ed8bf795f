"""TruthRL (arXiv:2509.25760): answer in \\boxed{} or abstain with \\boxed{I don't know}; ternary reward.

  recipe.py  prompts, the outcome rewards (ternary, binary, knowledge-enhanced; §3.2, §4.6), the
             evaluation (accuracy, uncertainty, hallucination, truthfulness), the Recipe
  judge.py   the outcome judge (Table 11) and the reasoning-quality judge (Table 12), their few-shot
             blocks and the JSON-score reply parser
The knowledge-boundary probe that labels out-of-knowledge questions is eval/probing.py.
"""

from grounding_jax.recipes.truthrl.recipe import RECIPES

__all__ = ["RECIPES"]
