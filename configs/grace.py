r"""GRACE (arXiv:2601.04525): gated evidence/answer reward, DAPO-style GRPO (clip-higher, dual clip, overlong).

  python launch/build_data.py --preset=grace_hotpotqa --train_input=hotpot_train_v1.1.json \
      --eval_input=hotpot_dev_distractor_v1.json --output_dir=/data/grace_hotpotqa
  python launch/train.py --config=configs/grace.py --config.model.path=/ckpt/Qwen3-4B \
      --config.stages[0].data.path=/data/grace_hotpotqa/train.jsonl --workdir=/runs/grace
  python launch/train.py --config=configs/grace.py:runlocal --workdir=/tmp/gj_grace   # CPU, minutes
  python launch/learning_check.py --config=configs/grace.py:runlocal --sft_steps=6 --workdir=/tmp/gj_lc_grace
  python launch/evaluate.py --config=configs/grace.py --model=/ckpt/Qwen3-4B --model=/runs/grace \
      --data=/data/grace_hotpotqa/test.jsonl --output_dir=/runs/grace/eval     # the paper's Table 1
  python launch/evaluate.py --config=configs/grace.py:runlocal --model=smollm2 --model=/tmp/gj_grace \
      --output_dir=/tmp/gj_grace_eval --curves=/tmp/gj_grace   # 32 held-out synthetic questions
  # get_sweep: learning rate × KL (6 runs of the command above; --dry_run prints them)
  python launch/sweep.py --config=configs/grace.py --config.model.path=/ckpt/Qwen3-4B \
      --config.stages[0].data.path=/data/grace_hotpotqa/train.jsonl --workdir_root=/runs/grace_sweep

Data (arXiv:2601.04525 §3.1, App. B.1): the authors' seeded 2,000 train / 500 test questions;
train contexts from five retrievers × 50/50 sufficient / insufficient, test contexts the dense top-3;
train.jsonl, test.jsonl and manifest.json. The paper's retrievers and 512-token chunks: add
--dense_encoder=/ckpt/Qwen3-Embedding-0.6B --reranker=/ckpt/bge-reranker-v2-m3
--chunk_tokenizer=/ckpt/Qwen3-Embedding-0.6B (defaults: MiniLM, a dense + BM25 rank-fusion rerank
and word chunks; docs/recipes/grace.md, Deviations). On the 24 questions in tests/data it takes
~25 s of CPU time.

Paper: 400 steps × 32 prompts × G=8 on 4 GPUs (App. B.1, Table 2). Hyper-parameters from Table 2 and
the authors' train.sh: clip 0.2 / 0.28, dual clip 10, lr 2e-6 with 50 warm-up steps then cosine,
weight decay 0.1, 4 optimizer updates per step, token-mean loss, no KL, 3072 new tokens with a
1024-token DAPO overlong buffer.
"""

import ml_collections

from grounding_jax.rl import config as rl_config
from grounding_jax.rl.config import presets


def get_config(arg=None):
  c = rl_config.default_config()
  c.model.path = ""                        # e.g. Qwen3-4B; thinking on (GRACE scores after </think>)
  c.model.compute_dtype = "bfloat16"
  c.model.remat = True
  c.rollout.update(dict(prompts_per_step=32, group_size=8, max_new_tokens=3072, temperature=1.0,
                        top_p=1.0, max_prompt_tokens=5120))
  c.rollout.enable_thinking = True
  c.reward.functions = [presets.reward_fn("grace", alpha=2.0, beta=3.0)]
  c.advantage.update(dict(scale="group", std_ddof=1, eps=1e-6))   # VeRL GRPO
  # "DAPO without dynamic sampling or KL" (§3.3): clip 0.2 / 0.28, token-mean, overlong 1024.
  presets.dapo(c, dynamic_sampling=False, overlong_buffer=1024)
  c.loss.dual_clip = 10.0
  c.update_loop.update(dict(num_iterations=1, num_minibatches=4, micro_batch_size=2))
  c.optimizer.update(dict(learning_rate=2e-6, schedule="cosine", warmup_steps=50,
                          weight_decay=0.1, max_grad_norm=1.0))
  c.stages = [rl_config.stage("grace", num_steps=400, recipe="grace")]
  c.stages[0].data.update(dict(kind="jsonl"))
  c.checkpoint.every_steps = 50
  # Evaluation (§4.3; decoding from Table 2): the 500 test questions (dense top-3 contexts), T 0.6 /
  # top-p 0.9, 3072 new tokens (the recipe's eval_decoding); the paper evaluates the final model
  # only. LJ needs
  # --config.evals.judges.judge.kind=llm --config.evals.judges.judge.path=FOLDER, BERTScore-F1
  # --config.evals.bertscore=/ckpt/bert-base-uncased.
  c.evals.update(dict(every_steps=0, num_examples=500))
  c.evals.data.update(dict(kind="jsonl", path=""))   # e.g. /data/grace_hotpotqa/test.jsonl
  c.evals.judges.judge = ml_collections.ConfigDict(dict(kind="", path="", style="grace"))
  if arg == "runlocal":
    presets.runlocal(c, max_new_tokens=96)   # gold completions: ≤ 44 SmolLM2 tokens
    c.rollout.enable_thinking = None
  return c


def get_sweep(arg=None):
  """launch/sweep.py's runs: lr around the paper's 2e-6 × β (the paper trains without KL)."""
  del arg
  return {"optimizer.learning_rate": [1e-6, 2e-6, 4e-6], "loss.kl_coef": [0.0, 1e-3]}
