r"""ARENA (arXiv:2505.13258): relevance / analysis / answer format, EM + relevance + bonus, k2 KL.

  python launch/build_data.py --recipe=arena --source=hotpotqa --train_input=hotpot_train_v1.1.json \
      --output_dir=/data/arena_hotpotqa
  python launch/train.py --config=configs/arena.py --config.model.path=/ckpt/Qwen2.5-7B-Instruct \
      --config.stages[0].data.path=/data/arena/train.jsonl \
      --config.evals.data.path=/data/arena/heldout.jsonl --workdir=/runs/arena   # build_data --preset=arena
  python launch/train.py --config=configs/arena.py:runlocal --workdir=/tmp/gj_arena   # CPU, minutes
  python launch/learning_check.py --config=configs/arena.py:runlocal --sft_steps=6 --workdir=/tmp/gj_lc_arena
  python launch/evaluate.py --config=configs/arena.py --model=/ckpt/Qwen2.5-7B-Instruct \
      --model=/runs/arena --data=/data/arena/test_hotpotqa.jsonl --output_dir=/runs/arena/eval_hotpotqa

Paper / authors' code (arXiv:2505.13258 §4.4, App. E): 256 prompts × G=7 per optimizer step, ≈95
steps, lr 3e-6 cosine with 10% warm-up, β = 0.04 with the k2 estimator ½(log π_ref − log π)², μ = 1,
temperature 0.9, 256 new tokens, advantages (r − mean) / (std + 1e-4) with the unbiased std; the
loss is the token mean of each micro-batch of 4 completions, averaged, on log-probs of the raw
logits (temperature 1).
"""

import ml_collections

from grounding_jax.rl import config as rl_config
from grounding_jax.rl.config import presets


def get_config(arg=None):
  c = rl_config.default_config()
  c.model.path = ""
  c.model.compute_dtype = "bfloat16"
  c.model.remat = True
  c.rollout.update(dict(prompts_per_step=256, group_size=7, max_new_tokens=256, temperature=0.9,
                        top_p=1.0))
  c.reward.functions = [presets.reward_fn("arena")]
  c.advantage.update(dict(scale="group", std_ddof=1, eps=1e-4))
  # As the authors' TRL 0.16 computes it (their code for arXiv:2505.13258): log-probs of the raw
  # logits (temperature 1) although rollouts sample at 0.9, and each device's micro-batch of 4
  # completions normalised by its own token count, the 448 micro-batch losses of a step averaged
  # (7 GPUs × 64 accumulation steps). The paper's formula would be logprob_temperature="sampling" and
  # aggregation="seq_mean_token_mean".
  c.loss.update(dict(clip_eps_low=0.2, clip_eps_high=0.2, kl_coef=0.04, kl_estimator="k2",
                     aggregation="micro_token_mean", micro_batch_rows=4, logprob_temperature=1.0))
  c.update_loop.update(dict(num_iterations=1, num_minibatches=1, micro_batch_size=28))
  c.optimizer.update(dict(learning_rate=3e-6, schedule="cosine", warmup_ratio=0.1,
                          weight_decay=0.0, max_grad_norm=1.0))
  c.stages = [rl_config.stage("arena", num_steps=95, recipe="arena")]
  c.stages[0].data.update(dict(kind="jsonl"))
  c.checkpoint.every_steps = 25
  # In-training evaluation (arXiv:2505.13258 App. E, authors' code): every 25 steps on the 500
  # held-out train-mix prompts (build_data.py --preset=arena writes heldout.jsonl), T 0.9, 1024 new
  # tokens.
  c.evals.update(dict(every_steps=25, num_examples=500))
  c.evals.data.update(dict(kind="jsonl", path=""))   # e.g. /data/arena/heldout.jsonl
  c.evals.judges.judge = ml_collections.ConfigDict(dict(kind="", path="", style="arena"))
  if arg == "runlocal":
    presets.runlocal(c, max_new_tokens=160)  # gold completions: ≤ 88 SmolLM2 tokens
    c.stages[0].data.answerable_ratio = 1.0   # ARENA's relevance reward needs gold passages
    c.evals.data.answerable_ratio = 1.0
  return c
