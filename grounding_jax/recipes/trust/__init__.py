"""Ground-GRPO, "Lessons from Training Grounded LLMs with Verifiable Rewards" (arXiv:2506.15522).

  recipe.py   the evaluation (Trust-Score per dataset), its data mix, the two Recipes (one per stage)
  prompts.py  Trust-Score's refusal prompt with a think / answer instruction
  reward.py   the response format and the reward (§2.1, Eqs. 1-6): tags, EM, NLI-checked citations,
              the stage-2 refusal reward
  score.py    Trust-Score (AR, F1_GR, F1_AC, F1_GC, TRUST; App. A), as Trust-Eval computes it
Its NLI judge is generic (judges/: a TRUE-style model, or an LLM asked yes / no).
"""

from grounding_jax.recipes.trust.recipe import RECIPES

__all__ = ["RECIPES"]
