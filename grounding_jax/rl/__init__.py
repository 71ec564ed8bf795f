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

import importlib

# Each name loads its module on first use, so a process that needs one part does not import the
# rest: a reward worker unpickling its function imports rl.reward_pool (numpy) without the trainer,
# jax and transformers (3.7 s a worker on the 2-core CPU).
_EXPORTS = {"group_advantages": "advantages", "zero_variance_groups": "advantages",
            "default_config": "config", "stage": "config", "PolicyLossConfig": "losses",
            "policy_loss": "losses", "Trainer": "trainer", "train": "trainer"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name in _EXPORTS:
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
