"""The default GRPO configuration; configs/ extend it per recipe.

Sections read in the order of one step (DESIGN.md "One GRPO step, as data"):
  model → rollout → reward → advantage → dapo (filtering / shaping) → loss → update_loop → optimizer
  → evals (held-out validation) → checkpoint / logging, and `stages`, the list of training stages run
  in sequence.

Defaults follow TRL's GRPOTrainer where a paper does not say otherwise (Lessons §5), and every
field below is read by the trainer (grounding_jax/rl/: setup, collect, step, trainer; no no-op flags).
Named algorithm variants (DAPO, Dr.GRPO, RLOO) are one call each in grounding_jax.rl.presets.
"""

from __future__ import annotations

import ml_collections

from grounding_jax import optim
from grounding_jax.models import lora
from grounding_jax.parallel import compile_cache


def stage(name: str, num_steps: int, *, recipe: str = "naive", **overrides) -> ml_collections.ConfigDict:
  """One training stage: `num_steps` GRPO steps of a recipe on its own data, optionally overriding the
  run's reward, loss and optimizer sections.

  Args:
    name: shown in logs and stored in checkpoints.
    num_steps: GRPO steps (rollout batches) in this stage.
    recipe: the stage's recipe (grounding_jax.recipes.get_recipe): its prompt, stop strings and
      rollout; the reward functions are named in config.reward (or the stage's `reward`).
    **overrides: `data` fields (see default_config().stages[0].data); `reward` (a section replacing
      config.reward.functions, e.g. dict(functions=[...])); `loss` and `optimizer` fields, applied over
      the run's sections for this stage (a fresh schedule starts every stage; Lessons §5: "start a
      fresh schedule per stage, reference = the stage's initial model").
  """
  st = ml_collections.ConfigDict(dict(
      name=name, num_steps=num_steps, recipe=recipe,
      # kind "synthetic": the offline world (data/synthetic.py) — its seed and size (num_countries),
      # how many questions, the answerable share, what fills an unanswerable context ("mentions" or
      # "unrelated") and the passages per context. stratify="answerable": every step's prompts hold
      # both kinds in the data's proportion (rl/data_stream.py); "" draws them as the shuffle falls.
      data=ml_collections.ConfigDict(dict(
          kind="synthetic", path="", num_examples=256, seed=0, num_countries=12,
          answerable_ratio=0.5, unanswerable="mentions", num_passages=5, shuffle=True,
          stratify="")),
      reward=ml_collections.ConfigDict(), loss=ml_collections.ConfigDict(),
      optimizer=ml_collections.ConfigDict()))
  for k, v in overrides.items():
    if k not in st:
      raise ValueError(f"stage({name!r}): unknown override {k!r}; use data, reward, loss or optimizer.")
    st[k].update(dict(v))
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
      # LoRA (models/lora.py): rank > 0 trains adapters on `targets` only; the optimizer and the
      # checkpoints hold just the adapters, and the KL reference is the stage's initial adapters
      # over the same frozen weights (no second copy of the model when kl_coef > 0).
      lora=lora.config_section(),
  ))
  c.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=-1, tensor=1))  # -1 = all remaining devices

  c.rollout = ml_collections.ConfigDict(dict(
      prompts_per_step=8,         # prompts per GRPO step over all hosts (each host takes its share)
      group_size=8,               # G completions per prompt (TRL default 8; ARENA 7)
      max_new_tokens=256,
      temperature=1.0,            # the trainer's log-probs use it too (loss.logprob_temperature)
      top_p=1.0,
      top_k=0,
      stop=(),                    # stop strings besides the recipe's own (Recipe.stop)
      max_prompt_tokens=0,        # 0 = no limit; longer prompts are handled by overlong_prompts:
      overlong_prompts="truncate",  # "truncate": lose tokens on the left (VeRL truncation='left');
                                  # "drop": left out of the stage's data before any step (TruthRL)
      enable_thinking=ml_collections.FieldReference(None, field_type=bool),  # Qwen3 switch
      options=ml_collections.ConfigDict(),  # the recipe's rollout options (Recipe.rollout), e.g. LEAR's
  ))

  c.reward = ml_collections.ConfigDict(dict(
      # Reward functions summed with weights: total = Σ weight · fn(...)["reward"]. Each fn's
      # components are logged as reward/<name>/<component>.
      functions=[ml_collections.ConfigDict(dict(name="naive", weight=1.0, options={}))],
      num_workers=2,              # process pool size; 0 = score in the trainer process (no timeout)
      timeout_seconds=300.0,      # per rollout batch; a hanging reward never hangs the loop
      # Rows whose reward raises, hangs or is NaN/inf: "min" scores them at the reward's floor (from
      # each function's reward_range), so a failure never outranks a wrong answer | "skip" drops
      # their groups | "raise" stops the run.
      on_error="min",
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
                                  # (Dr.GRPO) | "micro_token_mean" (TRL ≤ 0.18: each group of
                                  # micro_batch_rows rows is its own token mean, groups averaged)
      micro_batch_rows=0,         # "micro_token_mean" group size (0 = update_loop.micro_batch_size)
      # T of the update's log-probs (trained, old and reference): "sampling" = rollout.temperature,
      # or a number (ARENA's authors: 1.0 while sampling at 0.9, note 002 §3.6).
      logprob_temperature=ml_collections.FieldReference("sampling", field_type=object),
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
      # Gradient programs compiled in a thread while a step samples (rl/update_programs.py):
      # "widest": the one a step most likely runs, its prompts' bucket at the widest completion and
      # packed widths (any group whose completions fill over 3/4 of G x max_new_tokens needs it),
      # when no step built it yet: launch/bench_grpo_step.py's step 1 took 55.7 s instead of
      # 71.1 s on the loaded 2-core CPU. Its cost: one program per prompt bucket that a run of
      # short completions never uses (a resumed run reads it from the compilation cache).
      # "all": every program the stage can run (prompt buckets x completion x packed buckets: 24
      # for the bench, whose step 1 then took 170 s instead of 67 s: worth it only where cores idle
      # while an accelerator samples); "none".
      compile_ahead="widest",
  ))

  # Per-step perf/ metrics (rl/step_perf.py): TFLOP of sample / reference / update, achieved
  # FLOP/s, MFU against the device's peak, tokens/s per device, peak memory per device of the
  # compiled update programs. startup_report: launch/train.py prints the widest programs' memory
  # per device for the configured mesh before step 1 (compiles the widest gradient program).
  c.perf = ml_collections.ConfigDict(dict(metrics=True, startup_report=True))

  # schedule_unit="step": warmup_steps, warmup_ratio and the decay count GRPO steps, each of μ ×
  # num_minibatches updates at one learning rate (VeRL / TRL); "update" counts optimizer updates.
  c.optimizer = optim.default_optimizer_config()

  c.stages = [stage("grpo", num_steps=10)]

  # Run health (rl/health.py). The update skips any step whose advantages, loss, gradient or updated
  # parameters / optimizer state are not finite (rl/update.py, metrics nonfinite/*); the trainer
  # stops the run after `max_consecutive_nonfinite` such steps in a row. The monitors are logged
  # every step as health/<name>, and a warning names the one that crosses its bound (None = no
  # bound). Validated by rl/config_checks.py.
  c.health = ml_collections.ConfigDict(dict(
      max_consecutive_nonfinite=3,  # 0 = never stop (every such step is still skipped and logged)
      entropy_min=0.01,             # nats per token: below it the policy has collapsed
      kl_max=1.0,                   # per-token KL(π ‖ π_ref) (k3), when kl_coef > 0
      clip_frac_max=0.2,            # share of tokens the ratio clip held back (PPO rule of thumb)
      logprob_gap_mean_max=0.1,     # mean |log π_sampler − log π_trainer| of the same tokens
      logprob_gap_peak_max=5.0,     # its largest value over the step's tokens
      param_norm_ratio_max=2.0,     # ‖θ‖ / ‖θ at the stage's start‖: a runaway learning rate
  ))

  # Held-out evaluation (grounding_jax.eval.harness): run by launch/evaluate.py, and by the trainer
  # every `every_steps` steps and at the end, logged as eval/<metric> (off by default).
  c.evals = ml_collections.ConfigDict(dict(
      every_steps=0,              # validate during training every N steps and after the last; 0 = never
      recipe="",                  # "" = the last stage's recipe (its evaluator, prompt and decoding)
      num_examples=100,           # held-out questions (0 = all of a jsonl file)
      # kind "synthetic": the training world's questions that no synthetic stage asks (seed seeds the
      # draw; the contexts as a stage's data fields say); kind "jsonl": a file of Examples
      # (build_data.py's test.jsonl / heldout.jsonl).
      data=ml_collections.ConfigDict(dict(kind="synthetic", path="", seed=0, answerable_ratio=0.5,
                                          unanswerable="mentions", num_passages=5)),
      # None = the recipe's paper decoding (Recipe.eval_decoding); num_samples > 1 adds pass@k, maj@k.
      decoding=ml_collections.ConfigDict(dict(
          temperature=ml_collections.FieldReference(None, field_type=float),
          top_p=ml_collections.FieldReference(None, field_type=float),
          max_new_tokens=ml_collections.FieldReference(None, field_type=int),
          num_samples=1)),
      batch_size=32,              # questions per sampler call
      # When every question's prompt begins with at least this many equal tokens (chat template and
      # the recipe's instructions), a batch prefills them once and each decode step reads them once
      # (sampling.generate_ids); 0 = every prompt runs whole. Greedy outputs equal to rounding.
      shared_prefix_min_tokens=32,
      judges=ml_collections.ConfigDict(),  # Recipe.evaluate judges by name: nli=FOLDER or spec (trust),
                                  # judge=dict(kind="llm", path=...) (grace / arena / truthrl LJ)
      bertscore="",               # GRACE: a BERT folder for BERTScore-F1 (bert-base-uncased in the paper)
      reader_max_new_tokens=64,   # the two-model protocol's reader (evaluate.py --reader, LEAR)
      seed=0,                     # sampling seed of the evaluation
  ))

  c.checkpoint = ml_collections.ConfigDict(dict(
      every_steps=50, max_to_keep=3, resume=True,
      best_metric="",             # e.g. "eval/f1": also keep the best-scoring step in
                                  # <workdir>/checkpoints_best (needs evals.every_steps > 0)
      best_mode="max",            # "max" or "min"
  ))
  c.logging = ml_collections.ConfigDict(dict(console=True))  # tqdm bar on the console
  return c
