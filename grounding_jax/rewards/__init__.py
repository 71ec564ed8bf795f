"""The old home of the rewards, kept so `from grounding_jax.rewards import get_reward` keeps working.

Rewards now live with their recipes (grounding_jax/recipes/<recipe>/: one folder per paper, holding
its prompts, parser, RewardFn, judge style and evaluator); shared text metrics in grounding_jax.text;
the judge mechanism in grounding_jax.judges. `get_reward(name, **options)` is
`get_recipe(name).reward(**options)` (or a recipe's reward variant, `Recipe.reward_variants`).
"""

from grounding_jax.recipes import available_rewards, get_reward
from grounding_jax.recipes.reward_fn import RewardFn

__all__ = ["RewardFn", "available_rewards", "get_reward"]
