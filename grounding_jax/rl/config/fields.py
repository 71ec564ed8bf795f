"""Every field of the RL trainer's config, declared once: path, default, type, allowed values, meaning.

Sections read in the order of one step (DESIGN.md "One GRPO step, as data"): model → rollout →
reward → abstention (prices) → advantage → dapo (filtering / shaping) → loss → update_loop →
optimizer → stages → health → evals (held-out validation) → checkpoint / logging. `default_config()` builds the ConfigDict from
these declarations and configs/*.py extend it; rl/config/checks.py checks a config against them (the
simple rules are generated from `Field`; the rules between fields are written there by hand);
docs/config.md is their table.

Defaults follow TRL's GRPOTrainer where a paper does not say otherwise (as Lessons, arXiv:2506.15522
§3.1, trains with it), and every field is read by the trainer (no no-op flags). Named algorithm
variants (DAPO, Dr.GRPO, RLOO) are one call each in rl/config/presets.py.
"""

from __future__ import annotations

import ml_collections

from grounding_jax import checkpoints
from grounding_jax import config_fields
from grounding_jax import models
from grounding_jax import optim
from grounding_jax import tools
from grounding_jax.config_fields import Field
from grounding_jax.data import contrast
from grounding_jax.data import splits
from grounding_jax.data import synthetic
from grounding_jax.models import attention
from grounding_jax.models import lora
from grounding_jax.models import packed
from grounding_jax.models import transformer
from grounding_jax.parallel import compile_cache
from grounding_jax.rl import abstention
from grounding_jax.rl import advantages
from grounding_jax.rl import data_stream
from grounding_jax.rl import losses
from grounding_jax.rl import reward_pool
from grounding_jax.sampling import engine
from grounding_jax.sampling import rollout as rollout_lib

# Allowed values of the enums that only the trainer reads, in one place.
MODEL_DTYPES = tuple(models.DTYPES)
OLD_LOGPROBS = ("recompute", "sampler")
GPU_GEMMS = ("cublas", "xla")
DATA_KINDS = ("synthetic", "jsonl")
COMPILE_AHEAD = ("none", "widest", "all")
REMAT_POLICIES = tuple(sorted(transformer._REMAT_POLICIES))  # pylint: disable=protected-access
_NO_BOUND = dict(lo=0, none_ok=True, why="None = no bound")
_OPT = optim.default_optimizer_config()  # the optimizer's defaults live with it (SFT shares them)
_SYNTHETIC = ("kind", "synthetic")       # checked only for the synthetic world

# One training stage (`stage()`): GRPO steps of a recipe on its own data, optionally overriding the
# run's reward, loss and optimizer sections (a fresh schedule starts every stage, and the KL
# reference is the stage's initial model: Lessons, arXiv:2506.15522, does not say; it is what a new
# TRL trainer per stage does).
STAGE = (
    Field("name", "grpo", str, "shown in logs and stored in checkpoints; unique", nonempty=True),
    Field("num_steps", 10, int, "GRPO steps (rollout batches) in this stage", lo=1),
    Field("recipe", "naive", str, "the stage's recipe (grounding_jax.recipes.get_recipe): its prompt, "
          "stop strings and rollout; its rewards are named in reward.functions", nonempty=True,
          why="the name of a recipe"),
    Field("data.kind", "synthetic", str, "'synthetic': the offline world (data/synthetic.py); "
          "'jsonl': a file of Examples", choices=DATA_KINDS),
    Field("data.path", "", str, "the JSONL file (kind 'jsonl', launch/build_data.py writes one); "
          "every row is read and validated before step 1", check=False),
    Field("data.num_examples", 256, int, "questions drawn from the synthetic world", lo=1,
          when=_SYNTHETIC),
    Field("data.seed", 0, int, "seeds the synthetic world and the data order", lo=0),
    Field("data.num_countries", 12, int, "the synthetic world's size", lo=3, optional=True,
          when=_SYNTHETIC, why="the synthetic world's size"),
    Field("data.answerable_ratio", 0.5, float, "share of questions whose context holds the answer",
          lo=0, hi=1, when=_SYNTHETIC),
    Field("data.unanswerable", "mentions", str, "what fills an unanswerable context: passages that "
          "mention the entity, or unrelated ones", choices=synthetic.UNANSWERABLE_CONTEXTS,
          optional=True, when=_SYNTHETIC),
    Field("data.num_passages", 5, int, "passages per context", lo=2, optional=True, when=_SYNTHETIC,
          why="passages a context"),
    Field("data.withheld_share", 0.0, float, "share of the world's facts a search corpus leaves out "
          "(search.corpus='synthetic'): answerable questions need only kept facts, unanswerable "
          "ones a withheld fact; 0 = any question either way", lo=0, hi=1, hi_open=True,
          optional=True, when=_SYNTHETIC, why="1 would leave no answerable fact"),
    Field("data.shuffle", True, bool, "shuffle the data order"),
    Field("data.stratify", "", str, "'answerable': every step's prompts hold both kinds in the data's "
          "proportion (rl/data_stream.py); '' draws them as the shuffle falls",
          choices=data_stream.STRATIFY, optional=True, why="answerable: both kinds in every step"),
    # Evidence-contrast groups (docs/training.md): one question's G samples under gold-kept and
    # gold-removed evidence share one advantage baseline. On the shares of a demo world's step 1
    # (TruthRL ternary +1 / 0 / −1; unanswerable 70 % abstain, 30 % wrong; answerable 47 % right,
    # 30 % wrong, 23 % abstain; population std), A = an abstention's advantage and "pull" the
    # group's mean push on a shared abstain logit (+ = towards abstaining everywhere):
    #   option                        A unans   A ans    pull unans   pull ans   ratio
    #   advantage.scale="group"        +0.65    −0.20      +0.46      −0.045     10.1
    #   advantage.scale="batch"        +0.41    −0.23      +0.29      −0.054      5.4
    #   advantage.scale="none"         +0.30    −0.17      +0.21      −0.039      5.4
    #   evidence_contrast, "group"     +0.09    +0.09      +0.29      −0.054      5.4
    # Per-group std doubles the unanswerable side's pull; the other options keep the objective's
    # own 5.4 : 1 (an evidence-blind policy does better abstaining), so the choice still drifts
    # unless the evidence-conditioned part learns faster (tests/rl/test_evidence_contrast.py).
    Field("data.evidence_contrast", "", str, "'gold_removed': each question's G samples split "
          "over its gold-kept and gold-removed prompts (G/2 each) with one advantage baseline; "
          "with a search tool (rollout.max_turns > 1) the gold-removed rows search the corpus "
          "without the question's gold passages; 'gold_removed_shuffled' adds a gold-shuffled "
          "prompt (G/3 each; no search); '' = off (data/contrast.py, rl/collect.py)",
          choices=tuple(contrast.CONTRASTS), optional=True,
          why="the evidence conditions of a contrast group"),
    Field("reward", {}, dict, "dict(functions=[...]) replaces config.reward.functions in this stage",
          check=False),
    Field("loss", {}, dict, "loss fields set over config.loss in this stage", check=False),
    Field("optimizer", {}, dict, "optimizer fields set over config.optimizer in this stage",
          check=False),
)


def stage(name: str, num_steps: int, *, recipe: str = "naive", **overrides) -> ml_collections.ConfigDict:
  """One training stage (fields: STAGE): `num_steps` GRPO steps of `recipe` on its own data.

  Args:
    name: shown in logs and stored in checkpoints.
    num_steps: GRPO steps (rollout batches) in this stage.
    recipe: the stage's recipe (grounding_jax.recipes.get_recipe).
    **overrides: `data` fields; `reward` (a section replacing config.reward.functions, e.g.
      dict(functions=[...])); `loss` and `optimizer` fields, applied over the run's sections for
      this stage.
  """
  st = config_fields.build(STAGE, dict(name=name, num_steps=num_steps, recipe=recipe))
  for k, v in overrides.items():
    if k not in st:
      raise ValueError(f"stage({name!r}): unknown override {k!r}; use data, reward, loss or optimizer.")
    st[k].update(dict(v))
  return st


MODEL = (
    Field("model.path", "", str, "HF folder (config.json + safetensors + tokenizer), or 'smollm2'",
          check=False),
    Field("model.param_dtype", "float32", str, "dtype of the master weights", choices=MODEL_DTYPES),
    Field("model.compute_dtype", "float32", str, "dtype of the activations ('bfloat16' on "
          "accelerators)", choices=MODEL_DTYPES),
    Field("model.remat", False, bool, "recompute layer activations in the backward pass"),
    Field("model.remat_policy", "full", str, "with remat: 'full' keeps each layer's input only; "
          "'save_dots' also keeps its weight-matmul outputs (more memory, no matmul recompute)",
          choices=REMAT_POLICIES),
    Field("model.scan_layers", True, bool, "one layer body scanned over stacked weights: about L "
          "times less layer code to compile, same numbers; False = a list of layers (Orbax "
          "checkpoints of the two layouts differ, HF folders do not)"),
    Field("model.attention", "auto", str, "the attention kernel (models/attention.py): 'xla' (jnp "
          "programs), 'cudnn' (cuDNN fused attention, GPU only), or 'auto': cuDNN on a GPU where the "
          "dtype (bf16/fp16) and shapes allow, else 'xla'",
          choices=attention.IMPLEMENTATIONS),
    Field("model.packed_attention", "auto", str, "how the update attends a group's completions "
          "packed after its prompt (models/packed.py): 'rows' (each completion a row over [prompt "
          "| itself]), 'blocks' (the stream in blocks of 64 queries over the columns they can "
          "need), 'stream' (one block-diagonal mask over the packed stream), or 'auto' (the one "
          "scoring fewest query-key pairs); the same numbers up to float rounding",
          choices=packed.MODES),
    # LoRA: rank > 0 trains adapters on `targets` only; the optimizer and the checkpoints hold just
    # the adapters, and the KL reference is the stage's initial adapters over the same frozen
    # weights (no second copy of the model when kl_coef > 0).
    Field("model.lora", lora.config_section, dict, "LoRA adapters: the model.lora.* rows "
          "(declared in models/lora.py)", check=False),
    Field("mesh.data", 1, int, "devices on the data axis; -1 = all remaining devices", check=False),
    Field("mesh.fsdp", -1, int, "devices on the fsdp axis; -1 = all remaining devices", check=False),
    Field("mesh.tensor", 1, int, "devices on the tensor axis; -1 = all remaining devices",
          check=False),
)

ROLLOUT = (
    Field("rollout.prompts_per_step", 8, int, "prompts per GRPO step over all hosts (each host "
          "takes its share)", lo=1, why="prompts per GRPO step, all hosts"),
    Field("rollout.group_size", 8, int, "G completions per prompt (TRL default 8; ARENA 7)", lo=2,
          why="GRPO's baseline is the group mean: a group of one has advantage 0 in every "
              "advantage option, so nothing trains"),
    Field("rollout.max_new_tokens", 256, int, "completion token limit (with max_turns > 1: the "
          "policy's and the tool's inserted tokens together)", lo=1),
    Field("rollout.max_turns", 1, int, "generation segments per completion; > 1: the policy may "
          "call the run's tool (a retriever) up to max_turns − 1 times, its results inserted and "
          "masked out of the loss (sampling/multiturn.py)", lo=1,
          why="1 = one segment, no tool calls"),
    Field("rollout.temperature", 1.0, float, "sampling temperature; the trainer's log-probs use it "
          "too (loss.logprob_temperature)", lo=0, lo_open=True,
          why="the trainer's log-probs are of logits / temperature; 0 would be greedy, and a "
              "greedy group has no variance"),
    Field("rollout.top_p", 1.0, float, "nucleus sampling mass; 1 = off", lo=0, hi=1, lo_open=True),
    Field("rollout.top_k", 0, int, "sample among the k likeliest tokens; 0 = all", lo=0,
          why="0 = no top-k"),
    Field("rollout.stop", (), tuple, "stop strings besides the recipe's own (Recipe.stop)"),
    Field("rollout.max_prompt_tokens", 0, int, "prompt token limit (0 = none); longer prompts go as "
          "overlong_prompts says", lo=0, why="0 = no limit"),
    Field("rollout.overlong_prompts", "truncate", str, "'truncate': lose tokens on the left (VeRL "
          "truncation='left'); 'drop': left out of the stage's data before any step (TruthRL)",
          choices=rollout_lib.OVERLONG_PROMPTS, why="prompts over rollout.max_prompt_tokens"),
    Field("rollout.enable_thinking", None, bool, "Qwen3's chat-template thinking switch; None = "
          "the template's default", none_ok=True),
    Field("rollout.fuse_projections", "auto", str, "the sampler (rollouts and validation) runs "
          "each layer's q/k/v projections as one GEMM and gate/up as one, on weights concatenated "
          "once per call (sampling.generate_ids): the same dot products, equal up to float "
          "rounding. 'auto' = on a GPU (an H200: decode 7 % faster, its compile 4 s shorter; "
          "docs/benchmarks.md), off elsewhere (unmeasured on TPU; slower for tiny CPU models) | "
          "'on' | 'off'", choices=engine.FUSE_MODES),
    # Exact: the leading tokens all prompts of a step share (chat template, instructions; 224 of the
    # demo's 330-377-token prompts) run once: in the rollout's prefill (without a mesh, one turn;
    # sampling.generate_ids) and once per update micro-batch, each group's stream being the rest of
    # its prompt and its packed completions (with update_loop.share_prompts;
    # logprobs.completion_logprobs(shared_prefix=); update.common_prefix: measured per step on the
    # host, rounded down to a multiple of 16).
    Field("rollout.common_prefix_min_tokens", 32, int, "the fewest leading tokens all of a step's "
          "prompts share for them to run once in the rollout's prefill and once per update "
          "micro-batch; 0 = never", lo=0, why="0 = never"),
    Field("rollout.options", {}, dict, "the recipe's rollout options (Recipe.rollout), e.g. LEAR's",
          why="the recipe's rollout options"),
)

REWARD = (
    Field("reward.functions",
          lambda: [ml_collections.ConfigDict(dict(name="naive", weight=1.0, options={}))], list,
          "reward functions summed with weights, total = Σ weight · fn(...)['reward'], each "
          "{name, weight, options} (presets.reward_fn); components logged as "
          "reward/<name>/<component>", check=False),
    Field("reward.num_workers", 2, int, "reward process pool size; 0 = score in the trainer process "
          "(no timeout)", lo=0, why="0 = score in the trainer process"),
    Field("reward.timeout_seconds", 300.0, float, "per rollout batch: a hanging reward never hangs "
          "the loop", lo=0, lo_open=True),
    Field("reward.on_error", "min", str, "rows whose reward raises, hangs or is NaN/inf: 'min' scores "
          "them at the reward's floor (its reward_range), so a failure never outranks a wrong "
          "answer; 'skip' drops their groups; 'raise' stops the run", choices=reward_pool.ON_ERROR,
          why="'min' scores failed rows at the reward's floor, 'skip' drops their groups"),
)

# Retrieval inside the rollout (grounding_jax/tools/): the tool a search recipe's rollout calls at
# each </search>; '' = no tool. tools.from_config(config.search, data_spec=...) builds it.
SEARCH = (
    Field("search.retriever", "", str, "'' = no search tool; 'bm25' | 'dense' (MiniLM) | 'hybrid' "
          "(BM25 candidates reranked by MiniLM) over search.corpus, in-process; 'http': a server "
          "of your own at search.url (Search-R1's retrieval protocol)", choices=tools.RETRIEVERS,
          why="the search tool"),
    Field("search.corpus", "synthetic", str, "a JSONL file of {id, title, text} rows, or "
          "'synthetic': the first stage's world without its withheld facts (data.withheld_share)",
          check=False),
    Field("search.top_k", 3, int, "passages returned per query (Search-R1: 3)", lo=1),
    Field("search.url", "", str, "the retrieval server's endpoint, e.g. http://host:8000/retrieve "
          "(retriever 'http')", check=False),
    Field("search.timeout_s", 10.0, float, "per HTTP attempt", lo=0, lo_open=True),
    Field("search.retries", 2, int, "further HTTP attempts after the first (exponential back-off)",
          lo=0),
    Field("search.on_error", "empty", str, "a query that still fails: 'empty' returns a result "
          "saying the search failed (error set); 'raise' stops the rollout",
          choices=tools.ON_ERROR),
    Field("search.cache_size", 4096, int, "LRU cache of (query, top_k) results; 0 = none", lo=0),
)

ADVANTAGE = (
    Field("advantage.scale", "group", str, "'group' (GRPO) | 'batch' (TRL scale_rewards='batch') | "
          "'batch_tokens' (REINFORCE++-baseline, verl: group-centred, then whitened over the "
          "batch's loss tokens) | 'none' (Dr.GRPO)", choices=advantages.SCALES),
    Field("advantage.std_ddof", 1, int, "1 = torch std (TRL, VeRL, ARENA); 0 = population (LEAR)",
          choices=(0, 1), why="0 = population std, LEAR; 1 = unbiased, TRL"),
    Field("advantage.std_floor", 0.0, float, "lower bound of the std divisor (LEAR, "
          "arXiv:2507.15586 §3.3, Eq. 11: 0.1)", lo=0, why="LEAR Eq. 11: 0.1"),
    Field("advantage.eps", 1e-4, float, "added to the std (TRL / ARENA 1e-4; VeRL 1e-6)", lo=0),
    Field("advantage.leave_one_out", False, bool, "RLOO baseline: the mean of the other G − 1"),
    Field("advantage.contrast_baseline", "shared", str, "with evidence-contrast groups "
          "(data.evidence_contrast): 'shared' = one baseline (and std) over the question's G "
          "samples, all conditions; 'condition' = each condition's G/k samples are their own group, "
          "for rewards whose scale differs by condition (GRACE: up to 6.5 with the gold passage, "
          "1.5 without; docs/results.md). No effect without contrast groups",
          choices=advantages.CONTRAST_BASELINES,
          why="condition: per-condition baselines where the reward's scale differs by condition"),
)

# Keeping the shared answer-or-abstain choice out of both corners (rl/abstention.py): 'dual' prices
# an abstention where the passages hold the answer and pays one where they do not, the two prices
# Lagrange multipliers of the constraints below on each step's sampled completions; 'project'
# removes from the advantages their component along the choice all prompts share. Both need
# answerability labels (or evidence-contrast groups) and a recipe whose reward marks abstention
# (Recipe.abstention_component).
ABSTENTION = (
    Field("abstention.control", "", str, "'' = off (the recipe's reward as it is); 'dual': the "
          "reward of an abstention is shifted by two multipliers updated each step from the "
          "sampled abstention shares; 'project': each step's advantages lose their component "
          "along the shared abstain choice (rl/abstention.py)", choices=abstention.CONTROLS,
          why="'' = off, 'dual' = prices by dual ascent, 'project' = shared choice held"),
    Field("abstention.max_answerable", 0.2, float, "the highest share of sampled completions that "
          "may abstain on prompts whose passages hold the answer", lo=0, hi=1),
    Field("abstention.min_unanswerable", 0.7, float, "the lowest share that must abstain on prompts "
          "whose passages do not", lo=0, hi=1),
    Field("abstention.rate", 1.0, float, "dual step: a multiplier moves by rate × the step's "
          "violation of its share", lo=0, lo_open=True),
    Field("abstention.max_price", 1.0, float, "upper bound of both multipliers (in reward units)",
          lo=0),
)

DAPO = (  # DAPO, arXiv:2503.14476
    Field("dapo.dynamic_sampling", False, bool, "drop zero-variance groups and refill from further "
          "prompts (DAPO §3.2)"),
    Field("dapo.std_tolerance", 0.0, float, "a group whose rewards' population std is <= this "
          "counts as zero-variance (advantage 0, dropped by dynamic sampling, in "
          "zero_variance_frac); 0 = all rewards exactly equal. F1 / ROUGE / judge rewards differ by "
          "float noise", lo=0, why="0 = exact equality"),
    Field("dapo.max_sampling_rounds", 3, int, "cap on extra rollout rounds per step when refilling",
          lo=0, why="extra rollout rounds per step when refilling"),
    Field("dapo.overlong_shaping", False, bool, "DAPO Eq. 13's soft overlong punishment added to the "
          "reward"),
    # With shaping on, the buffer must lie in (0, rollout.max_new_tokens] (rl/config/checks.py).
    Field("dapo.overlong_buffer", 0, int, "L_cache: the punishment's last tokens before "
          "rollout.max_new_tokens", lo=0, when=("overlong_shaping", False)),
    Field("dapo.overlong_factor", 1.0, float, "the punishment at the token limit", lo=0),
    Field("dapo.mask_truncated", False, bool, "DAPO overlong filtering: truncated completions get "
          "no loss"),
)

LOSS = (
    Field("loss.clip_eps_low", 0.2, float, "ε_low: the ratio is clipped below at 1 − ε_low", lo=0,
          hi=1, hi_open=True, why="the ratio floor is 1 − ε_low"),
    Field("loss.clip_eps_high", 0.2, float, "ε_high: the ratio is clipped above at 1 + ε_high "
          "(DAPO clip-higher: 0.28)", lo=0),
    Field("loss.dual_clip", None, float, "dual-clip bound of negative-advantage ratios (GRACE: 10.0); "
          "None = off", lo=1, lo_open=True, none_ok=True, why="GRACE: 10.0"),
    Field("loss.kl_coef", 0.0, float, "β; 0 skips the reference model entirely", lo=0,
          why="β; 0 turns the KL term and the reference model off"),
    Field("loss.kl_estimator", "k3", str, "'k1' | 'k2' (ARENA) | 'k3'", choices=losses.KL_ESTIMATORS),
    Field("loss.kl_clamp", None, float, "clamp of the per-token KL (VeRL low_var_kl: 10); None = "
          "none", lo=0, lo_open=True, none_ok=True, why="VeRL low_var_kl: 10"),
    Field("loss.entropy_coef", 0.0, float, "entropy bonus; entropy is always logged", lo=0,
          why="an entropy bonus; 0 = logged only"),
    Field("loss.aggregation", "token_mean", str, "'token_mean' (DAPO) | 'seq_mean_token_mean' "
          "(GRPO) | 'seq_sum_constant' (Dr.GRPO) | 'micro_token_mean' (TRL ≤ 0.18: each group of "
          "micro_batch_rows rows is its own token mean, groups averaged)",
          choices=losses.AGGREGATIONS),
    Field("loss.micro_batch_rows", 0, int, "'micro_token_mean' group size (0 = "
          "update_loop.micro_batch_size)", lo=0, why="0 = update_loop.micro_batch_size"),
    Field("loss.ratio_level", "token", str, "the importance ratio: 'token' (PPO / GRPO) | "
          "'sequence' (GSPO, arXiv:2507.18071 §4.1: exp of the mean token log-ratio, clipped per "
          "sequence) | 'sequence_token' (GSPO-token, §4.3)", choices=losses.RATIO_LEVELS),
    Field("loss.rollout_correction", "none", str, "sampler-trainer mismatch correction of the "
          "policy-gradient term: 'tis' weighs each token by min(π_old/π_sampler, cap), 'mis' drops "
          "tokens past the cap; needs the trainer's old log-probs (update_loop.old_logprobs="
          "'recompute', or μ = 1 with one mini-batch)", choices=losses.ROLLOUT_CORRECTIONS),
    Field("loss.rollout_correction_cap", 2.0, float, "C of the rollout correction (verl's "
          "rollout_is_threshold: 2.0)", lo=0, lo_open=True),
    Field("loss.logprob_temperature", "sampling", object, "T of the update's log-probs (trained, "
          "old and reference): 'sampling' = rollout.temperature, or a number (ARENA's code, "
          "arXiv:2505.13258: 1.0 while sampling at 0.9)", check=False),
    Field("loss.logprob_chunk_size", 4096, int, "vocabulary columns per chunk in the log-prob "
          "kernel", lo=1),
    Field("loss.logprob_remat", True, bool, "recompute chunk logits in the backward pass"),
)

UPDATE_LOOP = (
    Field("update_loop.num_iterations", 1, int, "μ: passes over each rollout batch", lo=1,
          why="μ, passes over each rollout batch"),
    Field("update_loop.num_minibatches", 1, int, "optimizer updates per pass (rollout rows split "
          "evenly)", lo=1),
    Field("update_loop.micro_batch_size", 8, int, "rows per gradient-accumulation micro-batch "
          "(divides a mini-batch)", lo=1),
    Field("update_loop.old_logprobs", "recompute", str, "'recompute' (a forward pass before "
          "updating, VeRL) | 'sampler' (the sampler's own)", choices=OLD_LOGPROBS),
    Field("update_loop.gpu_gemm", "cublas", str, "on a GPU, the gradient program's GEMMs: 'cublas' "
          "(XLA's Triton GEMMs off for that program: same update time, no GEMM autotuning in its "
          "compile; rl/update.gemm_compiler_options) | 'xla' (XLA's choice)", choices=GPU_GEMMS),
    # Each step's rows run at their longest prompt and last loss-bearing completion column, rounded
    # up to buckets (update.prompt_bucket; completions: this multiple × 2^k).
    Field("update_loop.length_multiple", 32, int, "completion widths of the update round up to this "
          "multiple × 2^k; 0 keeps the sampler's widths (prompt bucket + max_new_tokens)", lo=0,
          why="0 keeps the sampler's widths"),
    # Exact; a prompt costs 1/G and completion padding only what the longest group needs (rounded
    # up to update.packed_bucket). Applies when micro_batch_size is a multiple of group_size.
    Field("update_loop.share_prompts", True, bool, "run each group's prompt once per micro-batch, "
          "its G completions packed after it (Transformer.hidden_states_shared_prefix)"),
    # "widest": the program a step most likely runs (its prompts' bucket at the widest completion
    # and packed widths, needed by any group filling over 3/4 of G × max_new_tokens), unless a step
    # built it already; it costs one program per prompt bucket that short completions never use (a
    # resumed run reads it from the compilation cache). "all" (every prompt × completion × packed
    # bucket) pays off only where cores idle while an accelerator samples. docs/benchmarks.md.
    Field("update_loop.compile_ahead", "widest", str, "gradient programs compiled in a thread while "
          "a step samples (rl/update_programs.py): 'widest' | 'all' | 'none'",
          choices=COMPILE_AHEAD, why="gradient programs compiled while step 1 samples"),
    # rl/step_perf.py: TFLOP of sample / reference / update, FLOP/s, MFU against the device's peak,
    # tokens/s and peak memory per device of the compiled update programs.
    Field("perf.metrics", True, bool, "log perf/ metrics every step"),
    Field("perf.startup_report", True, bool, "launch/train.py prints the widest programs' memory "
          "per device for the mesh before step 1 (compiles the widest gradient program)"),
    # A jax.profiler trace (TensorBoard's profile plugin, Perfetto, xprof) of one whole GRPO step.
    Field("perf.profile_dir", "", str, "write a jax.profiler trace of GRPO step perf.profile_step "
          "here ('' = none); launch/train.py --profile_dir sets it"),
    Field("perf.profile_step", 2, int, "the step (counted over the run, from 1) the trace covers; "
          "the default skips step 1's compilation", lo=1),
)

OPTIMIZER = (  # fields of optim.default_optimizer_config(), shared with SFT; a stage may override
    Field("learning_rate", _OPT.learning_rate, float, "peak learning rate", lo=0, lo_open=True),
    Field("schedule", _OPT.schedule, str, "the decay after warm-up", choices=optim.SCHEDULES),
    Field("schedule_unit", _OPT.schedule_unit, str, "'step': warm-up and decay count GRPO steps, "
          "each μ × num_minibatches updates at one rate (VeRL / TRL); 'update': optimizer updates",
          choices=optim.SCHEDULE_UNITS, why="what warm-up and decay count"),
    Field("warmup_steps", _OPT.warmup_steps, int, "linear warm-up from 0", lo=0),
    Field("warmup_ratio", _OPT.warmup_ratio, float, "warm-up as a share of the stage's length "
          "(HF Trainer; wins when > 0)", lo=0, hi=1),
    Field("min_lr_ratio", _OPT.min_lr_ratio, float, "the decay's floor, a share of the peak", lo=0,
          hi=1),
    Field("b1", _OPT.b1, float, "Adam β1", lo=0, hi=1, hi_open=True),
    Field("b2", _OPT.b2, float, "Adam β2", lo=0, hi=1, hi_open=True),
    Field("eps", _OPT.eps, float, "Adam ε", lo=0, lo_open=True, why="Adam divides by √v + eps"),
    Field("weight_decay", _OPT.weight_decay, float, "AdamW's decoupled weight decay", lo=0),
    Field("decay_matrices_only", _OPT.decay_matrices_only, bool, "decay weight matrices only (no "
          "norms, biases)"),
    Field("max_grad_norm", _OPT.max_grad_norm, float, "global gradient-norm clip; 0 or None = none",
          lo=0, none_ok=True, why="0 or None = no clipping"),
)

# Run health (rl/health.py). The update skips any step whose advantages, loss, gradient or updated
# state are not finite; the monitors are logged as health/<name> every step, and a warning names
# the one that crosses its bound.
HEALTH = (
    Field("health.max_consecutive_nonfinite", 3, int, "stop the run after this many non-finite "
          "steps in a row; 0 = never (each is still skipped and logged)", lo=0,
          why="0 = never stop"),
    Field("health.max_failed_steps", 3, int, "stop the run after this many steps in a row whose "
          "reward failed on every row (e.g. a judge server down: reward.on_error scored them and "
          "nothing was learnt); 0 = never", lo=0, why="0 = never stop"),
    Field("health.entropy_min", 0.01, float, "nats per token: below it the policy has collapsed",
          **_NO_BOUND),
    Field("health.kl_max", 1.0, float, "per-token KL(π ‖ π_ref) (k3), when kl_coef > 0", **_NO_BOUND),
    Field("health.clip_frac_max", 0.2, float, "share of tokens the ratio clip held back (PPO rule "
          "of thumb)", **_NO_BOUND),
    Field("health.logprob_gap_mean_max", 0.1, float, "mean |log π_sampler − log π_trainer| of the "
          "same tokens", **_NO_BOUND),
    Field("health.logprob_gap_peak_max", 5.0, float, "its largest value over the step's tokens",
          **_NO_BOUND),
    Field("health.param_norm_ratio_max", 2.0, float, "‖θ‖ / ‖θ at the stage's start‖: a runaway "
          "learning rate", lo=0, lo_open=True, none_ok=True, why="None = no bound"),
    # The corner alarm (off by default): needs answerability labels and a recipe whose reward marks
    # abstention (Recipe.abstention_component); warns once per run.
    Field("health.abstain_answerable_max", None, float, "share of sampled completions on answerable "
          "prompts that abstain (health/abstain_answerable): above it, the refuse-everything corner",
          lo=0, hi=1, none_ok=True, why="a share in [0, 1]; None = no alarm"),
    Field("health.abstain_unanswerable_min", None, float, "share on unanswerable prompts that "
          "abstain (health/abstain_unanswerable): below it, the answer-everything corner", lo=0,
          hi=1, none_ok=True, why="a share in [0, 1]; None = no alarm"),
)

# Held-out evaluation (grounding_jax.eval.harness): run by launch/evaluate.py, and by the trainer
# every `every_steps` steps and at the end, logged as eval/<metric>. Checked by rl/validate.py when
# validation runs, not here.
_EVAL = dict(check=False)
EVALS = (
    Field("evals.every_steps", 0, int, "validate every N steps and after the last; 0 = never",
          lo=0, **_EVAL),
    Field("evals.recipe", "", str, "'' = the last stage's recipe (its evaluator, prompt, decoding)",
          **_EVAL),
    Field("evals.num_examples", 100, int, "held-out questions (0 = all of a jsonl file)", lo=0,
          **_EVAL),
    Field("evals.split", "test", str, "what validation while training asks: 'test' = the held-out "
          "questions launch/evaluate.py reports; 'dev' = a synthetic world's questions that neither "
          "training nor the held-out split ask (data/splits.dev_split), so that checkpoint.best_metric "
          "chooses on them and not on the reported ones", choices=splits.EVAL_SPLITS, **_EVAL),
    Field("evals.dev_examples", 0, int, "questions of the dev split (evals.split='dev'); 0 = "
          "evals.num_examples", lo=0, **_EVAL),
    Field("evals.data.kind", "synthetic", str, "'synthetic': the training world's questions no "
          "synthetic stage asks; 'jsonl': a file of Examples (build_data.py's test.jsonl / "
          "heldout.jsonl)", choices=DATA_KINDS, **_EVAL),
    Field("evals.data.path", "", str, "the jsonl file", **_EVAL),
    Field("evals.data.seed", 0, int, "seeds the synthetic draw", **_EVAL),
    Field("evals.data.answerable_ratio", 0.5, float, "as a stage's data field", **_EVAL),
    Field("evals.data.unanswerable", "mentions", str, "as a stage's data field",
          choices=synthetic.UNANSWERABLE_CONTEXTS, **_EVAL),
    Field("evals.data.num_passages", 5, int, "as a stage's data field", **_EVAL),
    Field("evals.decoding.temperature", None, float, "None = the recipe's paper decoding "
          "(Recipe.eval_decoding)", none_ok=True, **_EVAL),
    Field("evals.decoding.top_p", None, float, "None = the recipe's", none_ok=True, **_EVAL),
    Field("evals.decoding.max_new_tokens", None, int, "None = the recipe's", none_ok=True, **_EVAL),
    Field("evals.decoding.num_samples", 1, int, "samples per question; > 1 adds pass@k, maj@k",
          **_EVAL),
    Field("evals.batch_size", 32, int, "questions per sampler call", **_EVAL),
    Field("evals.shared_prefix_min_tokens", 32, int, "when every prompt begins with this many equal "
          "tokens, a batch prefills them once (sampling.generate_ids); 0 = every prompt runs whole",
          lo=0, **_EVAL),
    Field("evals.judges", {}, dict, "Recipe.evaluate's judges by name: nli=FOLDER or spec (trust), "
          "judge=dict(kind='llm', path=...) (grace / arena / truthrl)", **_EVAL),
    Field("evals.bertscore", "", str, "GRACE: a BERT folder for BERTScore-F1 (bert-base-uncased in "
          "the paper)", **_EVAL),
    Field("evals.reader_max_new_tokens", 64, int, "the two-model protocol's reader (evaluate.py "
          "--reader, LEAR)", **_EVAL),
    Field("evals.seed", 0, int, "sampling seed of the evaluation", **_EVAL),
)

CHECKPOINT = (
    Field("checkpoint.every_steps", 50, int, "save every this many steps", lo=1,
          why="save every this many steps"),
    Field("checkpoint.max_to_keep", 3, int, "checkpoints kept; None = all", lo=1, none_ok=True,
          why="None keeps every checkpoint"),
    Field("checkpoint.resume", True, bool, "resume from the workdir's latest checkpoint"),
    Field("checkpoint.compress", False, bool, "zstd-compress the saved arrays (orbax's default): "
          "float32 weights and Adam moments shrink ~7 % while a save and a restore take ~1.6-1.8x "
          "as long (launch/bench_checkpoint.py); either kind restores under either setting"),
    Field("checkpoint.background_write", "auto", str, "'on': write a mid-run checkpoint (and the "
          "best step's) from a copy of the state on its devices in a background thread, so training "
          "goes on meanwhile (where a device lacks the room for the copy, or with several processes, "
          "the save waits; the last step's and a preemption's always do); 'auto' = on where the "
          "state lives on an accelerator (on a CPU the writer takes the training's cores); 'off'",
          choices=checkpoints.BACKGROUND_MODES),
    Field("checkpoint.best_metric", "", str, "e.g. 'eval/f1', or 'eval/balanced_accuracy' (any "
          "recipe: accuracy on answerable and abstention on unanswerable items, averaged): also keep "
          "the best-scoring step in <workdir>/checkpoints_best (needs evals.every_steps > 0; checked "
          "by rl/validate.py)", check=False),
    Field("checkpoint.best_mode", "max", str, "whether the best metric is the largest or smallest",
          choices=("max", "min"), check=False),
    Field("logging.console", True, bool, "a tqdm bar on the console"),
    Field("logging.rollouts_every", 0, int, "every this many steps, the step's completions with "
          "their parsed fields, reward components and advantages to <workdir>/rollouts/step_<N>.jsonl "
          "and a few as TensorBoard text (rl/rollout_log.py); 0 = off", lo=0, why="0 = off"),
    Field("logging.wandb.project", "", str, "a Weights & Biases project: the scalars and the "
          "rollout samples go there too (needs `pip install wandb`); '' = off"),
    Field("logging.wandb.entity", "", str, "the W&B entity (team or user); '' = wandb's default"),
    Field("logging.wandb.name", "", str, "the W&B run's name; '' = wandb's default"),
    Field("logging.wandb.mode", "online", str, "wandb.init's mode; 'offline' writes under "
          "<workdir>/logs/wandb for `wandb sync`", choices=("online", "offline", "disabled")),
)

FIELDS = (
    Field("seed", 0, int, "PRNG seed of sampling and data order", lo=0),
    Field("workdir", "/tmp/grounding_jax_run", str, "checkpoints in <workdir>/checkpoints, logs in "
          "<workdir>/logs", nonempty=True, why="the path checkpoints and logs go to"),
    # Per user, shared by runs; on a pod, a path every host reads (gs://...); set up by launch/train.py.
    Field("compile_cache_dir", compile_cache.DEFAULT_DIR, str, "persistent compilation cache: a "
          "resumed run or a rerun compiles (almost) nothing; 'off' or '' = none; env "
          "GROUNDING_JAX_COMPILE_CACHE overrides", why="a folder path, or '' for no persistent cache"),
    *MODEL, *ROLLOUT, *REWARD, *SEARCH, *ABSTENTION, *ADVANTAGE, *DAPO, *LOSS, *UPDATE_LOOP,
    Field("optimizer", optim.default_optimizer_config, dict, "the optimizer: the optimizer.* rows",
          check=False),
    Field("stages", lambda: [stage("grpo", num_steps=10)], list, "the training stages, run in "
          "order: the stages[].* rows (stage(name, num_steps, recipe=..., **overrides))",
          check=False),
    *HEALTH, *EVALS, *CHECKPOINT,
)


def default_config() -> ml_collections.ConfigDict:
  """A small, CPU-runnable GRPO config (TRL-like defaults): the declared defaults of FIELDS."""
  return config_fields.build(FIELDS)
