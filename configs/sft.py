r"""Supervised fine-tuning: completion-only NLL on (prompt or chat messages, target) rows.

  # demo: the warm-up `make demo` uses — SmolLM2 on the synthetic world in TruthRL's format (CPU; cost below)
  python launch/sft.py --config=configs/sft.py:demo --workdir=/tmp/gj_sft_demo
  #   another recipe's format: --config.data.recipe=grace (arena: also --config.data.answerable_ratio=1.0)
  # the papers' SFT baselines, from a JSONL of Examples (launch/build_data.py writes them)
  python launch/sft.py --config=configs/sft.py:grace --config.model.path=/ckpt/Qwen3-4B \
      --config.data.path=/data/grace_hotpotqa/train.jsonl --workdir=/runs/sft_grace
  python launch/sft.py --config=configs/sft.py:truthrl --config.model.path=/ckpt/Llama-3.1-8B-Instruct \
      --config.data.path=/data/truthrl_crag/train.jsonl --workdir=/runs/sft_truthrl
  python launch/sft.py --config=configs/sft.py:arena --config.model.path=/ckpt/Qwen2.5-7B-Instruct \
      --config.data.path=/data/arena_hotpotqa/train.jsonl --workdir=/runs/sft_arena
  # your own rows {prompt | messages, target}
  python launch/sft.py --config=configs/sft.py:runlocal --config.data.path=rows.jsonl --workdir=/tmp/gj_sft
  python launch/sft.py --config=configs/sft.py --config.model.path=/ckpt/Qwen2.5-7B-Instruct \
      --config.data.path=/data/sft.jsonl --workdir=/runs/sft

Presets and what they cost:
  demo     SmolLM2-135M-Instruct, 64 synthetic questions (half unanswerable) as TruthRL prompts with
           their gold completions (`<think>…</think>` + `\boxed{answer}` or `\boxed{I don't know}`),
           4 rows a step, 1 epoch = 16 steps. Measured on the shared 2-core CPU (load average 6-9 from
           others' jobs): 10 min wall — step 1 83 s with compilation, then 19-46 s a step — and 8.2 GB
           peak memory; the loss went 1.75 → 0.02, and greedy answers to 4 unseen questions were all
           in the format (`<think>…</think>\n\boxed{…}`), their content not yet right (1 of 4 correct
           abstentions, 0 of 2 answers).
  grace    GRACE's SFT baseline (arXiv:2601.04525 App. B.3):
           `<evidence>…</evidence><answer>…</answer>` or
           `<llm> The question is unanswerable </llm><answer> Unanswerable </answer>` on GRACE's
           prompt. The paper trains with LLaMA-Factory and gives no hyper-parameters, so ours
           (Trust-Align's: 2 epochs, lr 2e-5 cosine, 10 % warm-up: our choice); no thinking (its
           targets have no chain of thought). Cost, estimated by 6·N·tokens at 40 % of an A100's
           bf16 peak, not measured: ~2,000 rows × 2 epochs of ≤ 5.6k tokens on a 4B model ≈ 1 A100-hour.
  truthrl  TruthRL's SFT baseline (arXiv:2509.25760 App. A): lr 5e-6, 16 rows a step, cosine, 3 %
           warm-up, 1 epoch; `<think>…</think>\n\boxed{gold}` (our reading of the paper's
           "ground-truth response"), `\boxed{I don't know}` on out-of-knowledge rows (meta["ook"]:
           R-Tuning) and unanswerable contexts; prompts cut to 14,336 tokens, targets to 2,048 (the
           paper's 16k context). Cost (estimated as above):
           ~1.5 A100-hours per 1,000 rows of 14k tokens on an 8B model.
  arena    ARENA's SFT-direct (arXiv:2505.13258 App. D + code): question + retrieved paragraphs →
           the short answer; lr 1e-5, 32 rows a step (4 per device × 8 accumulation; the GPU count of
           the SFT runs is not stated), linear decay after 10 % warm-up (TRL's default), grad-norm
           clip 0.3, 1 epoch. The authors' TRL run puts the loss on the whole chat sequence; ours on
           the answer only (sft/trainer.py). Cost (estimated as above): ~0.3 A100-hours per 1,000 rows
           of ~1.5k tokens on a 7B model.
  runlocal SmolLM2-135M-Instruct on your rows (remat on), 4 rows a step, prompts cut to 512 tokens.
           Measured: 8 steps over 32 rows of synthetic questions (136-172-token chat prompts, ≤ 7-token
           targets) took 140 s wall — step 1 35 s with compilation, then 7.5-16 s a step — and 4.2 GB
           peak memory; the loss went 3.15 → 0.48.

The default (no preset) follows the Trust-Align SFT recipe (declare-lab/trust-align, which
arXiv:2506.15522 §4.4 distils from: 2 epochs, lr 2e-5, cosine, 10 % warm-up), with AdamW and
global-norm clipping at 1.0; its batch (2 GPUs × 2 × 18 accumulation = 72 sequences) is set here to
8 sequences per update — raise config.batch_size on accelerators.

`data.kind` says where rows come from (grounding_jax/sft/data.py): "jsonl" (`data.path`, rows
{prompt | messages, target}; a row's "prompt" is used as rendered text unless
`data.prompt_as_user_turn=True` wraps it as one user turn of the chat template) or "recipe"
(Examples from `data.source` — "synthetic" or a "jsonl" of Examples at `data.path` — rendered with
recipe `data.recipe`'s prompt `data.template`, and its gold completion of style `data.target` as
the target).
"""

from grounding_jax.rl.config import presets
from grounding_jax.sft import trainer as sft_trainer

PRESETS = ("demo", "grace", "truthrl", "arena", "runlocal")


def _recipe_data(c, recipe, source="jsonl"):
  c.data.update(dict(kind="recipe", recipe=recipe, source=source, num_examples=0))


def get_config(arg=None):
  c = sft_trainer.default_config()
  c.workdir = "/tmp/grounding_jax_sft"
  c.model.path = ""                   # an HF folder, or "smollm2"
  c.data.kind = "jsonl"
  c.data.path = ""                    # rows {prompt | messages, target}
  c.batch_size = 8
  c.micro_batch_size = 8
  c.num_epochs = 2
  c.optimizer.update(dict(learning_rate=2e-5, schedule="cosine", warmup_ratio=0.1,
                          max_grad_norm=1.0))
  c.checkpoint.every_steps = 100
  if arg in ("runlocal", "demo"):
    c.model.path = presets.SMOLLM2
    c.model.remat = True              # else the backward keeps 30 layers' activations: GBs
    c.data.max_prompt_tokens = 512
    c.data.max_completion_tokens = 64
    c.batch_size = 4
    c.micro_batch_size = 2
    c.num_epochs = 1
    c.checkpoint.every_steps = 10
  if arg == "demo":
    _recipe_data(c, "truthrl", source="synthetic")   # data.recipe: any recipe's format
    c.data.update(dict(num_examples=64, seed=0, answerable_ratio=0.5))
    c.data.max_prompt_tokens = 1024   # TruthRL's prompt over 5 synthetic passages: ~600 tokens
    c.data.max_completion_tokens = 128
    c.optimizer.learning_rate = 5e-5  # [DECISION] a 16-step warm-up: the format must land quickly
    c.checkpoint.every_steps = 8
  elif arg == "grace":
    _recipe_data(c, "grace")
    c.data.enable_thinking = False    # GRACE's SFT targets carry no chain of thought (App. B.3)
    c.data.max_prompt_tokens = 5120   # GRACE's prompt budget (configs/grace.py)
    c.data.max_completion_tokens = 512
    c.model.compute_dtype = "bfloat16"
    c.model.remat = True
  elif arg == "truthrl":
    _recipe_data(c, "truthrl")
    c.batch_size, c.micro_batch_size = 16, 1
    c.num_epochs = 1
    c.optimizer.update(dict(learning_rate=5e-6, schedule="cosine", warmup_ratio=0.03))
    c.data.max_prompt_tokens = 16384 - 2048
    c.data.max_completion_tokens = 2048
    c.model.compute_dtype = "bfloat16"
    c.model.remat = True
  elif arg == "arena":
    _recipe_data(c, "arena")
    c.data.template = c.data.target = "direct"
    c.batch_size, c.micro_batch_size = 32, 4
    c.num_epochs = 1
    c.optimizer.update(dict(learning_rate=1e-5, schedule="linear", warmup_ratio=0.1,
                            max_grad_norm=0.3))
    c.data.max_prompt_tokens = 4096
    c.data.max_completion_tokens = 64
    c.model.compute_dtype = "bfloat16"
    c.model.remat = True
  elif arg not in (None, "runlocal"):
    raise ValueError(f"configs/sft.py:{arg}: unknown preset; expected one of {PRESETS} or none")
  return c
