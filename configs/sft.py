r"""Supervised fine-tuning: completion-only NLL on (prompt or chat messages, target) rows.

  python launch/sft.py --config=configs/sft.py:runlocal --config.data.path=rows.jsonl \
      --workdir=/tmp/gj_sft
  python launch/sft.py --config=configs/sft.py --config.model.path=/ckpt/Qwen2.5-7B-Instruct \
      --config.data.path=/data/sft.jsonl --workdir=/runs/sft

`:runlocal` is SmolLM2-135M-Instruct (remat on), 4 rows a step, prompts cut to 512 tokens. Measured on
the shared 2-core CPU (load average 4-7 from other jobs): 8 steps over 32 rows of synthetic questions
(136-172-token chat prompts, ≤ 7-token targets) took 140 s wall — step 1 35 s with compilation, then
7.5-16 s a step — and 4.2 GB peak memory; the loss went 3.15 → 0.48.

Defaults follow the Trust-Align SFT recipe (note 001 [EXT-TA]: 2 epochs, lr 2e-5, cosine, 10 % warm-up),
with AdamW and global-norm clipping at 1.0; its batch (2 GPUs × 2 × 18 accumulation = 72 sequences) is
set here to 8 sequences per update — raise config.batch_size on accelerators.

`data.kind` says where rows come from; today "jsonl" (`data.path`; rows described in
grounding_jax/sft/data.py). A row's "prompt" is used as rendered text; `data.prompt_as_user_turn=True`
wraps it as one user turn of the chat template instead.
"""

from grounding_jax.rl import presets
from grounding_jax.sft import trainer as sft_trainer


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
  if arg == "runlocal":
    c.model.path = presets.SMOLLM2
    c.model.remat = True              # SmolLM2's 30 layers of attention scores otherwise fill GBs
    c.data.max_prompt_tokens = 512
    c.data.max_completion_tokens = 64
    c.batch_size = 4
    c.micro_batch_size = 2
    c.num_epochs = 1
    c.checkpoint.every_steps = 10
  elif arg:
    raise ValueError(f"configs/sft.py:{arg}: unknown preset; expected 'runlocal' or none")
  return c
