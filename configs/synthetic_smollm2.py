r"""The small default: GRPO on SmolLM2-135M-Instruct over the offline synthetic grounded-QA set.

  python launch/train.py --config=configs/synthetic_smollm2.py --workdir=/tmp/gj_synth

The smallest GRPO run (`make demo` is configs/demo.py: SFT first, then GRPO). TruthRL's prompt and
ternary reward (+1 correct, 0 "I don't know", −1 wrong; exact-match judge) on synthetic questions,
half of them unanswerable from their passages, at :runlocal's sizes (presets.runlocal: 2 prompts ×
G=8, 48 new tokens here, lr 2e-5 constant, micro-batches of 4). Measured at the earlier 2 prompts ×
G=4 (~600-token prompts) on this 2-core CPU: about a minute a step once compiled (sample 8.4 s,
update 40.1 s; the update's forward and backward over 8 × ~650 tokens is ~4 TFLOP, most of it on the
prompts); G=8 doubles the update's rows.
"""

from grounding_jax.rl import config as rl_config
from grounding_jax.rl.config import presets


def get_config(arg=None):
  del arg
  c = rl_config.default_config()
  c.workdir = "/tmp/grounding_jax_demo"
  # Exact match keeps the demo offline; it logs the paper's warning (TruthRL Table 5: training with a
  # string-matching verifier collapses to ~96 % abstention).
  c.reward.functions = [presets.reward_fn("truthrl", judge=dict(kind="exact_match"))]
  c.stages = [rl_config.stage("synthetic", num_steps=4, recipe="truthrl")]
  c.advantage.std_ddof = 1
  presets.runlocal(c, steps=4, max_new_tokens=48)
  c.rollout.prompts_per_step = 2
  return c
