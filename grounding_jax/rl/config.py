"""The default GRPO configuration; configs/ extend it per recipe.

Sections read in the order of one step (DESIGN.md "One GRPO step, as data"):
  model → rollout → reward → advantage → dapo (filtering / shaping) → loss → update_loop → optimizer
  → checkpoint / logging, and `stages`, the list of training stages run in sequence.

Defaults follow TRL's GRPOTrainer where a paper does not say otherwise (Lessons §5), and every
field below is read by `grounding_jax.rl.trainer` (no no-op flags).
"""

from __future__ import annotations

import ml_collections

from grounding_jax import optim
from grounding_jax.parallel import compile_cache


def stage(name: str, num_steps: int, **overrides) -> ml_collections.ConfigDict:
  """One training stage: `num_steps` GRPO steps on its own data, optionally overriding reward/loss.

  Args:
    name: shown in logs and stored in checkpoints.
    num_steps: GRPO steps (rollout batches) in this stage.
    **overrides: `data` (see default_config().stages[0].data), `reward` (replaces config.reward),
      `optimizer` fields (a fresh schedule starts every stage; Lessons §5: "start a fresh schedule
      per stage, reference = the stage's initial model").
  """
  st = ml_collections.ConfigDict(dict(
      name=name, num_steps=num_steps,
      data=ml_collections.ConfigDict(dict(kind="synthetic", path="", num_examples=256, seed=0,
                                          answerable_ratio=0.5, recipe="naive", shuffle=True)),
      reward=ml_collections.ConfigDict(), optimizer=ml_collections.ConfigDict()))
  for k, v in overrides.items():
    if isinstance(v, dict):
      st[k].update(v)
    else:
      st[k] = v
  return st


def default_config() -> ml_collections.ConfigDict:
  """A small, CPU-runnable GRPO config (TRL-like defaults). Every field is documented inline."""
  c = ml_collections.ConfigDict()
  c.seed = 0                      # PRNG seed of sampling and data order
  c.workdir = "/tmp/grounding_jax_run"  # checkpoints in <workdir>/checkpoints, logs in <workdir>/logs
  # Compiled programs persist here, so a resumed run or a rerun of a config compiles (almost)
  # nothing; per user, shared by runs; "off" disables; env GROUNDING_JAX_COMPILE_CACHE overrides.
  # On a pod: a path every host reads (e.g. gs://...). Set up by launch/train.py.
  c.compile_cache_dir = compile_cache.DEFAULT_DIR

  c.model = ml_collections.ConfigDict(dict(
      path="",                    # HF folder (config.json + safetensors + tokenizer)
      param_dtype="float32",      # master weights
      compute_dtype="float32",    # "bfloat16" on accelerators
      remat=False,                # recompute layer activations in the backward pass
      remat_policy="full",        # with remat: "full" keeps each layer's input only; "save_dots" also
                                  # keeps its weight-matmul outputs (more memory, no matmul recompute)
      scan_layers=True,           # one layer body scanned over stacked weights: compiles ~L x less
                                  # layer code (same numbers); False = a list of layers. Orbax
                                  # checkpoints of the two layouts differ (HF folders do not)
  ))
  c.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=-1, tensor=1))  # -1 = all remaining devices

  c.rollout = ml_collections.ConfigDict(dict(
      prompts_per_step=8,         # prompts per GRPO step over all hosts (each host takes its share)
      group_size=8,               # G completions per prompt (TRL default 8; ARENA 7)
      max_new_tokens=256,
      temperature=1.0,            # the trainer's log-probs use the same temperature
      top_p=1.0,
      top_k=0,
      stop=(),                    # stop strings, e.g. ("</answer>",)
      max_prompt_tokens=0,        # 0 = no limit; otherwise longer prompts are left-truncated
      enable_thinking=ml_collections.FieldReference(None, field_type=bool),  # Qwen3 switch
      kind="standard",            # "standard" | "lear": + LEAR's three answer passes (rl/lear_rollout.py)
      # LEAR Eq. 4 answer passes (kind="lear" only; note 003 §4 defaults, see lear_rollout.LearOptions)
      lear=ml_collections.ConfigDict(dict(
          answer_max_new_tokens=64,   # note §12: 32–64
          answer_prefix="<answer>",   # forced after each context (not trained on); "" = model writes it
          answer_stop=("</answer>",),
          keep_empty_tags=True,       # ctx_r keeps "<extract></extract>", ctx_e "<reason></reason>"
          evidence_context_instruction=True,  # ctx_e = the prompt without passages; False = question only
          # o_r / o_e temperature; None = the rollout's settings, 0 = greedy (o_f always the rollout's)
          masked_temperature=ml_collections.FieldReference(None, field_type=float),
      )),
  ))

  c.reward = ml_collections.ConfigDict(dict(
      # Reward functions summed with weights: total = Σ weight · fn(...)["reward"]. Each fn's
      # components are logged as reward/<name>/<component>.
      functions=[ml_collections.ConfigDict(dict(name="naive", weight=1.0, options={}))],
      num_workers=2,              # process pool size; 0 = score in the trainer process (no timeout)
      timeout_seconds=300.0,      # per rollout batch; a hanging reward never hangs the loop
      on_error="zero",            # failing/hanging rows: "zero" reward | "skip" their groups | "raise"
  ))

  c.advantage = ml_collections.ConfigDict(dict(
      scale="group",              # "group" (GRPO) | "batch" | "none" (Dr.GRPO)
      std_ddof=1,                 # 1 = torch std (TRL, VeRL, ARENA); 0 = population (LEAR)
      std_floor=0.0,              # LEAR Eq. 11: 0.1
      eps=1e-4,                   # TRL/ARENA 1e-4; VeRL 1e-6
      leave_one_out=False,        # RLOO baseline
  ))

  c.dapo = ml_collections.ConfigDict(dict(
      dynamic_sampling=False,     # drop zero-variance groups, refill from further prompts (DAPO §3.2)
      max_sampling_rounds=3,      # cap on extra rollout rounds per step when refilling
      overlong_shaping=False,     # DAPO Eq. 13 soft overlong punishment added to the reward
      overlong_buffer=0,          # L_cache tokens; the limit is rollout.max_new_tokens
      overlong_factor=1.0,
      mask_truncated=False,       # DAPO overlong filtering: truncated completions get no loss
  ))

  c.loss = ml_collections.ConfigDict(dict(
      clip_eps_low=0.2,
      clip_eps_high=0.2,          # DAPO clip-higher: 0.28
      dual_clip=ml_collections.FieldReference(None, field_type=float),  # GRACE: 10.0
      kl_coef=0.0,                # β; 0 skips the reference model entirely
      kl_estimator="k3",          # "k1" | "k2" (ARENA) | "k3"
      kl_clamp=ml_collections.FieldReference(None, field_type=float),   # VeRL low_var_kl: 10
      entropy_coef=0.0,           # entropy bonus; entropy is always logged
      aggregation="token_mean",   # "token_mean" (DAPO) | "seq_mean_token_mean" (GRPO) | "seq_sum_constant"
      logprob_chunk_size=4096,    # vocabulary columns per chunk in the log-prob kernel
      logprob_remat=True,         # recompute chunk logits in the backward pass
  ))

  c.update_loop = ml_collections.ConfigDict(dict(
      num_iterations=1,           # μ: passes over each rollout batch
      num_minibatches=1,          # optimizer updates per pass (rollout rows split evenly)
      micro_batch_size=8,         # rows per gradient-accumulation micro-batch (divides a mini-batch)
      old_logprobs="recompute",   # "recompute" (forward pass before updating, VeRL) | "sampler"
      # The update runs each step's rows at their longest prompt and last loss-bearing completion
      # column, rounded up to buckets (update.prompt_bucket; completions: this multiple x 2^k);
      # 0 keeps the sampler's bucketed widths (prompt bucket + max_new_tokens).
      length_multiple=32,
      # Run each group's prompt once per micro-batch, its G completions packed into one row after
      # it (Transformer.hidden_states_shared_prefix): exact; a prompt costs 1/G and completion padding
      # only what the longest group needs (rounded up to update.packed_bucket). Applies when
      # micro_batch_size is a multiple of group_size (micro-batches then hold whole groups).
      share_prompts=True,
  ))

  c.optimizer = optim.default_optimizer_config()

  c.stages = [stage("grpo", num_steps=10)]

  c.checkpoint = ml_collections.ConfigDict(dict(every_steps=50, max_to_keep=3, resume=True))
  c.logging = ml_collections.ConfigDict(dict(console=True))  # tqdm bar on the console
  return c
