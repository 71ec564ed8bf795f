r"""TruthRL (arXiv:2509.25760): ternary reward (+1 correct, 0 abstain, −1 hallucinate) with GRPO.

  python launch/build_data.py --recipe=truthrl --source=crag --train_input=crag_train.jsonl.bz2 \
      --output_dir=/data/truthrl_crag
  python launch/train.py --config=configs/truthrl.py --config.model.path=/ckpt/Llama-3.1-8B-Instruct \
      --config.stages[0].data.path=/data/truthrl_crag/train.jsonl --workdir=/runs/truthrl
  python launch/train.py --config=configs/truthrl.py:runlocal --workdir=/tmp/gj_truthrl   # CPU
  python launch/learning_check.py --config=configs/truthrl.py:runlocal --sft_steps=6 --workdir=/tmp/gj_lc_truthrl
  python launch/evaluate.py --config=configs/truthrl.py:runlocal --model=smollm2 --model=/tmp/gj_truthrl \
      --output_dir=/tmp/gj_truthrl_eval    # start vs trained on 32 held-out synthetic questions
  # get_sweep: the v2 abstention-reward sweep × β (6 runs; --dry_run prints them)
  python launch/sweep.py --config=configs/truthrl.py --config.model.path=/ckpt/Llama-3.1-8B-Instruct \
      --config.stages[0].data.path=/data/truthrl_crag/train.jsonl --workdir_root=/runs/truthrl_sweep

The reward's correctness judge is the paper's: Llama-3.3-70B-Instruct behind an OpenAI-compatible
server (arXiv:2509.25760 §3.2, App. B; decoding T 0, top-p 0.9, 512 tokens in its code), e.g. vLLM
on another host:
  vllm serve meta-llama/Llama-3.3-70B-Instruct --tensor-parallel-size 4 --port 8000
  python launch/train.py --config=configs/truthrl.py ... \
      --config.reward.functions[0].options.judge.base_url=http://judge-host:8000/v1
(api_key_env names the variable holding a key, if the server wants one). `:llm_judge` runs a judge
model on our sampler instead, sharded over this process's devices (score rewards in-process then):
  python launch/train.py --config=configs/truthrl.py:llm_judge \
      --config.reward.functions[0].options.judge.path=/ckpt/Qwen2.5-7B-Instruct --config.reward.num_workers=0 ...
`:runlocal` (offline) uses exact match, which logs the paper's warning: training with a
string-matching verifier collapsed to ~96 % abstention (Table 5).
`:grounded` adds what holds a small model off the refusal and answering corners on the demo's worlds
(docs/training.md "Evidence-contrast groups"; not the paper's): each question's G samples split
between its gold passages and a copy without them (data.evidence_contrast), an abstention on a
question whose passages hold the answer earns −0.5 instead of 0, and a right answer the passages do
not hold −1 instead of +1 (a gold-removed copy answered from memory); with `:runlocal` the
unanswerable contexts are unrelated passages, for training and evaluation. TruthRL's learning check:
  python launch/learning_check.py --config=configs/truthrl.py:runlocal,grounded --sft_steps=128 \
      --sft_world_offset=1000 --sft_answerable_ratio=0.625 --steps=16 --best_every=2

Paper / VeRL code (arXiv:2509.25760 §3.2, App. A): 64 prompts per step and one optimizer update per
rollout batch, G = 8, lr 1e-6 constant, β = 0.001 with k3 clamped to [−10, 10], ε = 0.2, temperature
1.0, 2048 new tokens, prompts over 16,384 tokens dropped from the data (not truncated), the paper's
seq-mean-token-mean aggregation.
"""


from grounding_jax.rl import config as rl_config
from grounding_jax.rl.config import presets


# The paper's verifier: base_url must be given (the reward names the flag when it is empty).
PAPER_JUDGE = dict(kind="openai", base_url="", model="meta-llama/Llama-3.3-70B-Instruct",
                   api_key_env="", style="truthrl", timeout_seconds=60.0, max_retries=3,
                   concurrency=32)
# `:grounded`'s reward for a right answer the passages do not hold (configs/demo.py's
# correct_unanswerable=-1, docs/results.md); its abstention price is presets.OVER_REFUSAL_PRICE.
GROUNDED_CORRECT_UNANSWERABLE = -1.0
# A judge model on our sampler, sharded over the trainer process's devices (mesh axes as config.mesh).
SAMPLER_JUDGE = dict(kind="llm", path="", style="truthrl", max_new_tokens=64, batch_size=16,
                     mesh=dict(fsdp=-1))


def get_config(arg=None):
  args = set(arg.split(",")) if arg else set()
  unknown = args - {"runlocal", "llm_judge", "grounded"}
  if unknown:
    raise ValueError(f"configs/truthrl.py:{arg}: unknown preset(s) {sorted(unknown)}; expected a "
                     "comma-separated subset of 'runlocal', 'llm_judge', 'grounded'")
  c = rl_config.default_config()
  c.model.path = ""
  c.model.compute_dtype = "bfloat16"
  c.model.remat = True
  # The 16k context is the prompt limit (VeRL data.max_prompt_length=16384); longer prompts are
  # filtered out of the data, not truncated (filter_overlong_prompts=True in the authors' config).
  c.rollout.update(dict(prompts_per_step=64, group_size=8, max_new_tokens=2048, temperature=1.0,
                        top_p=1.0, max_prompt_tokens=16384, overlong_prompts="drop"))
  judge = SAMPLER_JUDGE if "llm_judge" in args else PAPER_JUDGE
  c.reward.functions = [presets.reward_fn("truthrl", abstain_reward=0.0,  # ternary: +1 / 0 / −1
                                          judge=dict(judge))]
  c.advantage.update(dict(scale="group", std_ddof=1, eps=1e-6))
  c.loss.update(dict(clip_eps_low=0.2, clip_eps_high=0.2, kl_coef=0.001, kl_estimator="k3",
                     kl_clamp=10.0, aggregation="seq_mean_token_mean"))
  c.update_loop.update(dict(num_iterations=1, num_minibatches=1, micro_batch_size=8))
  c.optimizer.update(dict(learning_rate=1e-6, schedule="constant", weight_decay=0.01,
                          max_grad_norm=1.0))
  c.stages = [rl_config.stage("truthrl", num_steps=200, recipe="truthrl")]
  c.stages[0].data.update(dict(kind="jsonl"))
  c.checkpoint.every_steps = 10
  # Evaluation (arXiv:2509.25760 §4.1): greedy, 2048 new tokens, Acc / Unc / Hall / T, judged by the
  # reward's judge (the same ConfigDict: setting ...options.judge.base_url sets both).
  c.evals.update(dict(every_steps=0, num_examples=0))   # 0 = the whole file
  c.evals.data.update(dict(kind="jsonl", path=""))
  c.evals.judges.judge = c.reward.functions[0].options.judge
  if "runlocal" in args:
    presets.runlocal(c, max_new_tokens=128)  # gold completions: ≤ 67 SmolLM2 tokens
    if "llm_judge" in args:  # SmolLM2 as its own judge: plumbing, not fidelity
      c.reward.functions[0].options.judge.path = presets.SMOLLM2
      c.reward.num_workers = 0
    else:  # offline: exact match, with the paper's collapse warning (Table 5)
      c.reward.functions = [presets.reward_fn("truthrl", abstain_reward=0.0,
                                              judge=dict(kind="exact_match"))]
      c.evals.judges.judge = c.reward.functions[0].options.judge
  if "grounded" in args:
    for st in c.stages:
      st.data.evidence_contrast = "gold_removed"
    options = c.reward.functions[0].options
    with options.unlocked():
      options.abstain_reward_answerable = presets.OVER_REFUSAL_PRICE
      options.correct_reward_unanswerable = GROUNDED_CORRECT_UNANSWERABLE
    if "runlocal" in args:  # synthetic: no name from the question in an unanswerable context
      for spec in [st.data for st in c.stages] + [c.evals.data]:
        spec.unanswerable = "unrelated"
  return c


def get_sweep(arg=None):
  """launch/sweep.py's runs: the abstention reward of arXiv:2509.25760v2 Table 5 ({−0.5, 0, +0.5}; 0
  was best) × β (the paper's 0.001, and none)."""
  del arg
  return {"reward.functions[0].options.abstain_reward": [-0.5, 0.0, 0.5],
          "loss.kl_coef": [1e-3, 0.0]}
