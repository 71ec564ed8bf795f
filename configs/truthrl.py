r"""TruthRL (seed 004): ternary reward (+1 correct, 0 abstain, −1 hallucinate) with GRPO.

  python launch/build_data.py --recipe=truthrl --source=crag --train_input=crag_train.jsonl.bz2 \
      --output_dir=/data/truthrl_crag
  python launch/train.py --config=configs/truthrl.py --config.model.path=/ckpt/Llama-3.1-8B-Instruct \
      --config.stages[0].data.path=/data/truthrl_crag/train.jsonl --workdir=/runs/truthrl
  python launch/train.py --config=configs/truthrl.py:runlocal --workdir=/tmp/gj_truthrl   # CPU
  python launch/evaluate.py --config=configs/truthrl.py:runlocal --model=smollm2 --model=/tmp/gj_truthrl \
      --output_dir=/tmp/gj_truthrl_eval    # start vs trained on 16 held-out synthetic questions
  # get_sweep: the v2 abstention-reward sweep × β (6 runs; --dry_run prints them)
  python launch/sweep.py --config=configs/truthrl.py --config.model.path=/ckpt/Llama-3.1-8B-Instruct \
      --config.stages[0].data.path=/data/truthrl_crag/train.jsonl --workdir_root=/runs/truthrl_sweep

Paper / VeRL code (note 004 §4): 64 prompts per step and one optimizer update per rollout batch,
G = 8, lr 1e-6 constant, β = 0.001 with k3 clamped to [−10, 10], ε = 0.2, temperature 1.0,
2048 new tokens, the paper's seq-mean-token-mean aggregation. The reward's correctness judge defaults
to exact match (offline); the paper uses an LLM judge (see grounding_jax.judges).
"""

import ml_collections

from grounding_jax.rl import config as rl_config
from grounding_jax.rl import presets


def get_config(arg=None):
  c = rl_config.default_config()
  c.model.path = ""
  c.model.compute_dtype = "bfloat16"
  c.model.remat = True
  c.rollout.update(dict(prompts_per_step=64, group_size=8, max_new_tokens=2048, temperature=1.0,
                        top_p=1.0))
  c.reward.functions = [presets.reward_fn("truthrl", abstain_reward=0.0)]  # ternary: +1 / 0 / −1
  c.advantage.update(dict(scale="group", std_ddof=1, eps=1e-6))
  c.loss.update(dict(clip_eps_low=0.2, clip_eps_high=0.2, kl_coef=0.001, kl_estimator="k3",
                     kl_clamp=10.0, aggregation="seq_mean_token_mean"))
  c.update_loop.update(dict(num_iterations=1, num_minibatches=1, micro_batch_size=8))
  c.optimizer.update(dict(learning_rate=1e-6, schedule="constant", weight_decay=0.01,
                          max_grad_norm=1.0))
  c.stages = [rl_config.stage("truthrl", num_steps=200, recipe="truthrl")]
  c.stages[0].data.update(dict(kind="jsonl"))
  c.checkpoint.every_steps = 10
  # Evaluation (note 004 §6): greedy, 2048 new tokens, Acc / Unc / Hall / T with an LLM judge
  # (--config.evals.judges.judge.kind=llm --config.evals.judges.judge.path=FOLDER; exact match without).
  c.evals.update(dict(every_steps=0, num_examples=0))   # 0 = the whole file
  c.evals.data.update(dict(kind="jsonl", path=""))
  c.evals.judges.judge = ml_collections.ConfigDict(dict(kind="", path="", style="truthrl"))
  if arg == "runlocal":
    presets.runlocal(c)
  return c


def get_sweep(arg=None):
  """launch/sweep.py's runs: the abstention reward of TruthRL v2 Table 5 ({−0.5, 0, +0.5}; 0 was
  best, note 004 §3.1) × β (the paper's 0.001, and none)."""
  del arg
  return {"reward.functions[0].options.abstain_reward": [-0.5, 0.0, 0.5],
          "loss.kl_coef": [1e-3, 0.0]}
