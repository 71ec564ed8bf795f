"""GRPO and its kin (DAPO, Dr.GRPO, RLOO) for grounded answering: the algorithm, never a recipe.

    from grounding_jax.rl import default_config, stage, Trainer, train
    config = default_config(); config.model.path = "/path/to/hf_folder"
    history = train(config)

Parts: setup (config → mesh, policy, each stage's parts) · stages (one stage planned and started:
its view, recipe, optimizer, reward pool, stream; one GRPO step) · collect (rollout rounds of the
stage's recipe, rewards, DAPO refill → a GroupBatch) · step (μ × mini × micro update schedule) ·
trainer (the stage loop, resume, checkpoints) · validate (held-out evaluation while training, the
best checkpoint) · health (non-finite steps, finite checkpoints, health/ monitors) · update (the
jitted update and log-prob passes) · update_programs (the update's bucketed shapes, compiled ahead)
· losses · advantages · config/ (every field declared once, its checks, presets for DAPO / Dr.GRPO /
RLOO and runlocal, and overrides: presets and sweep values on a config) · reward_pool · data_stream
· host_batch.
Recipes (prompts, rewards, rollouts) come from grounding_jax.recipes by the stage's `recipe` name;
completion log-probs from grounding_jax.models.logprobs; reward functions and evaluation checks from
a config from grounding_jax.eval.from_config.
"""

from grounding_jax.rl.advantages import group_advantages, zero_variance_groups
from grounding_jax.rl.config import default_config, stage
from grounding_jax.rl.losses import PolicyLossConfig, policy_loss
from grounding_jax.rl.trainer import Trainer, train

__all__ = ["PolicyLossConfig", "Trainer", "default_config", "group_advantages", "policy_loss",
           "stage", "train", "zero_variance_groups"]
