r"""Ground-GRPO (arXiv:2506.15522, "Lessons from Training Grounded LLMs"): two stages, NLI-cited answers, refusals.

  python launch/build_data.py --recipe=trust --source=asqa --train_input=trust_asqa_train.json \
      --output_dir=/data/trust_stage1          # stage 1: answerable only; stage 2: the mixed set
  python launch/train.py --config=configs/trust.py --config.model.path=/ckpt/Qwen3-8B \
      --config.stages[0].data.path=/data/trust_stage1/train.jsonl \
      --config.stages[1].data.path=/data/trust_stage2/train.jsonl \
      --config.reward.functions[0].options.nli=/ckpt/t5_xxl_true_nli_mixture --workdir=/runs/trust
  python launch/train.py --config=configs/trust.py:runlocal --workdir=/tmp/gj_trust   # NLI: word recall
  python launch/train.py --config=configs/trust.py:runlocal \
      --config.reward.functions[0].options.nli=/path/to/any/nli_classifier --workdir=/tmp/gj_trust
  python launch/learning_check.py --config=configs/trust.py:runlocal --sft_steps=6 --workdir=/tmp/gj_lc_trust
  # Table 1's Ground-GRPO (Instruct) rows: the same command with configs/trust.py:instruct
  # (Qwen3 with thinking off; its template's empty think block is the reward's forced prefix)
  python launch/evaluate.py --config=configs/trust.py --config.evals.judges.nli=/ckpt/t5_xxl_true_nli_mixture \
      --model=/ckpt/Qwen3-8B --model=/runs/trust --data=/data/trust_eval/test.jsonl --output_dir=/runs/trust/eval

Paper (arXiv:2506.15522 §3, §3.1): TRL GRPO, G = 8, lr 1e-5 cosine with 10% warm-up, 4 epochs per
stage, global batch 384 completions (48 prompts × 8); stage 1 ≈ 25 steps on 300 answerable items,
stage 2 ≈ 250 steps on 3,000 mixed items, continuing from stage 1 with a fresh schedule (our reading:
the paper does not say). TRL ≤ 0.18 defaults where the paper is silent: β = 0.04 with k3, ε = 0.2,
μ = 1, (r − mean)/(std + 1e-4), token-mean. The citation reward needs an NLI model folder (`nli=`; the TRUE T5 model in the paper).

`:instruct` is the paper's Instruct variant of the hybrid Qwen3 checkpoints (arXiv:2506.15522 §3.2,
Table 1): thinking off, so Qwen3's chat template ends the prompt with an empty
`<think>\n\n</think>\n\n` block, and both stages' rewards read the tags on that forced prefix + the
completion; same rewards and prompt otherwise. For Llama-3.1-8B-Instruct (no think block in its
template) keep the default config. `:reasoning` is the default (thinking on: the policy writes its
own <think>).
"""

import ml_collections

from grounding_jax.recipes.trust import reward as trust_reward
from grounding_jax.rl import config as rl_config
from grounding_jax.rl.config import presets

ARGS = (None, "reasoning", "runlocal", "instruct", "instruct,runlocal")


def get_config(arg=None):
  c = rl_config.default_config()
  c.model.path = ""
  c.model.compute_dtype = "bfloat16"
  c.model.remat = True
  c.rollout.update(dict(prompts_per_step=48, group_size=8, max_new_tokens=1024, temperature=1.0,
                        top_p=1.0, max_prompt_tokens=2048))
  nli = ml_collections.FieldReference("", field_type=str)   # one NLI folder for both stages
  c.reward.functions = [presets.reward_fn("trust_stage1", nli=nli)]
  c.advantage.update(dict(scale="group", std_ddof=1, eps=1e-4))
  c.loss.update(dict(clip_eps_low=0.2, clip_eps_high=0.2, kl_coef=0.04, kl_estimator="k3",
                     aggregation="token_mean"))
  c.update_loop.update(dict(num_iterations=1, num_minibatches=1, micro_batch_size=8))
  c.optimizer.update(dict(learning_rate=1e-5, schedule="cosine", warmup_ratio=0.1))
  # refusal_reward_answerable: 0 is the paper's; spelled out so a run can price over-refusal
  # (--config.stages[1].reward.functions[0].options.refusal_reward_answerable=-0.5).
  stage2_reward = ml_collections.ConfigDict(dict(
      functions=[presets.reward_fn("trust_stage2", nli=nli, refusal_reward_answerable=0.0)]))
  c.stages = [rl_config.stage("stage1", num_steps=25, recipe="trust_stage1"),
              rl_config.stage("stage2", num_steps=250, recipe="trust_stage2", reward=stage2_reward)]
  for st in c.stages:
    st.data.update(dict(kind="jsonl"))
  c.checkpoint.every_steps = 25
  # Evaluation (arXiv:2506.15522 §3.3-3.4): Trust-Score with the same NLI model, T 0.5 / top-p 0.95
  # (Trust-Eval), on the test file; the paper evaluates each stage's final model.
  c.evals.update(dict(every_steps=0, num_examples=0))   # 0 = the whole file
  c.evals.data.update(dict(kind="jsonl", path=""))
  c.evals.judges.nli = nli
  if arg not in ARGS:
    raise ValueError(f"configs/trust.py:{arg}: unknown preset; expected one of {ARGS[1:]}")
  if arg and "instruct" in arg:  # Table 1's Ground-GRPO (Instruct): Qwen3 with thinking off
    c.rollout.enable_thinking = False
    for fns in [c.reward.functions] + [st.reward.get("functions") or [] for st in c.stages]:
      for fn in fns:
        fn.options.forced_prefix = trust_reward.QWEN3_NO_THINKING_PREFIX
  if arg and "runlocal" in arg:
    presets.runlocal(c, max_new_tokens=128)  # gold completions: ≤ 53 SmolLM2 tokens
    c.stages[0].num_steps, c.stages[1].num_steps = 4, 12   # the paper's stage 1 is the short one
    # Offline, the citation reward's and Trust-Score's NLI judge is word recall (judges/base.py
    # LexicalNLIJudge: every word of the statement in the cited passages), not the paper's TRUE T5;
    # pass a real NLI folder with --config.reward.functions[0].options.nli=. SmolLM2 asked yes/no
    # (nli="smollm2", the earlier stand-in) said "no" to all 8 verbatim gold statements of the
    # training draw, so a cited right answer earned what a wrong one did (2.5) and GRPO had no
    # correctness signal (docs/results.md, the learning check).
    nli.set("lexical")
  return c
