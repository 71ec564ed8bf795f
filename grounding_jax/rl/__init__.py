"""GRPO and its kin (DAPO, Dr.GRPO, RLOO) for grounded answering.

    from grounding_jax.rl import default_config, stage, Trainer, train
    config = default_config(); config.model.path = "/path/to/hf_folder"
    history = train(config)

Parts: advantages (host numpy), losses (pure, jitted), logprobs (vocab-chunked), update (jitted step),
rollout / lear_rollout (LEAR's three masked-context answer passes) / reward_pool / data_stream /
host_batch (host side, one host or many), trainer (the loop), config (defaults).
"""

from grounding_jax.rl.advantages import group_advantages, zero_variance_groups
from grounding_jax.rl.config import default_config, stage
from grounding_jax.rl.losses import PolicyLossConfig, policy_loss
from grounding_jax.rl.trainer import Trainer, train

__all__ = ["PolicyLossConfig", "Trainer", "default_config", "group_advantages", "policy_loss",
           "stage", "train", "zero_variance_groups"]
