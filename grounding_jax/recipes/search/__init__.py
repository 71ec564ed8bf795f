"""Search-R1 (arXiv:2503.09516): the policy searches a corpus inside its rollout, then answers.

  recipe.py  the prompt (Search-R1's template, Table 1), the parser, the gold search traces for SFT,
             the evaluation (EM, F1, supported EM, abstention; the search columns are the
             sampler's) and the two Recipes:
             `search` (Search-R1's EM reward) and `search_grounded` (answers must be supported by
             the retrieved passages; `I don't know` pays where nothing retrieved supports one)
  reward.py  the two rewards and the readers of a completion's answer and tool results
The tool the rollout calls is built from the config's search.* fields (grounding_jax/tools/).
"""

from grounding_jax.recipes.search.recipe import RECIPES

__all__ = ["RECIPES"]
