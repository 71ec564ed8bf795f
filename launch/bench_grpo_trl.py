"""TRL's GRPOTrainer on launch/bench_grpo_step.py's workload: the peer our GRPO step is timed against.

The same model, prompts, reward, G, new tokens, micro-batches, rematerialisation and dtype as ours
(bench_grpo_step.py's docstring lists them); `report_trl` runs it, prints its steps and the ratios
against our figures, and returns its own. Imported by bench_grpo_step.py; needs the bench extra
(pip install -e ".[bench]").
"""

from __future__ import annotations

import dataclasses
import tempfile
import time

import numpy as np


@dataclasses.dataclass(frozen=True)
class Workload:
  """What both sides run: bench_grpo_step.py's flags of the same names."""
  recipe: str
  prompts: int
  group_size: int
  max_new_tokens: int
  micro_batch_size: int
  steps: int
  remat: bool
  dtype: str


def run_trl(model_dir, tok, examples, texts, w: Workload) -> tuple[list[float], list[float]]:
  """TRL's GRPOTrainer for `w.steps` steps on the workload; (each step's seconds, each step's mean
  completion length)."""
  import datasets
  import torch
  import transformers
  import trl
  from grounding_jax import models
  from grounding_jax.models import shapes
  from grounding_jax.recipes import get_reward
  torch.manual_seed(0)
  recipe_reward = get_reward(w.recipe)
  by_prompt = dict(zip(texts, examples))

  def reward(prompts, completions, **kw):
    return list(recipe_reward(completions, [by_prompt[p] for p in prompts])["reward"])

  n = w.prompts * w.group_size
  args = trl.GRPOConfig(
      output_dir=tempfile.mkdtemp(prefix="bench_trl_"), per_device_train_batch_size=w.micro_batch_size,
      gradient_accumulation_steps=n // w.micro_batch_size, num_generations=w.group_size,
      gradient_checkpointing=w.remat,
      max_completion_length=w.max_new_tokens, temperature=1.0, learning_rate=1e-6, beta=0.0,
      num_iterations=1, loss_type="dapo", max_steps=w.steps, logging_steps=1, report_to="none",
      save_strategy="no", use_cpu=not torch.cuda.is_available(), bf16=w.dtype == "bfloat16",
      seed=0,
      shuffle_dataset=False,
      dataloader_num_workers=0)
  times, lengths = [], []

  class Timer(transformers.TrainerCallback):
    def on_step_begin(self, *a, **k):
      self.t = time.perf_counter()

    def on_step_end(self, *a, **k):
      times.append(time.perf_counter() - self.t)

    def on_log(self, args, state, control, logs=None, **k):
      if logs and "completions/mean_length" in logs:
        lengths.append(float(logs["completions/mean_length"]))

  if isinstance(model_dir, models.ModelConfig):  # the same shape, random float32 master weights
    model = shapes.hf_random_model(model_dir, "float32", "cpu")
  else:
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
  trainer = trl.GRPOTrainer(model=model, reward_funcs=[reward], args=args,
                            train_dataset=datasets.Dataset.from_list([{"prompt": t} for t in texts]),
                            processing_class=tok, callbacks=[Timer()])
  trainer.train()
  return times, lengths


def report_trl(setup, w: Workload, ours: dict | None) -> dict:
  """Runs TRL's GRPOTrainer; prints its steps and the ratios against ours; returns its figures."""
  try:
    times, lengths = run_trl(*setup, w)
  except Exception as e:  # pylint: disable=broad-except
    print(f"TRL could not run: {type(e).__name__}: {e}")
    return {"error": f"{type(e).__name__}: {e}"}
  for i, (t, n) in enumerate(zip(times, lengths), start=1):
    print(f"TRL GRPOTrainer step {i}: {t:.2f}s; mean completion {n:.1f} tokens")
  trl = float(np.median(times[1:]))
  trl_len = float(np.mean(lengths[1:])) if len(lengths) >= len(times) else float("nan")
  print(f"TRL GRPOTrainer: median step {trl:.2f}s over steps 2..{len(times)}")
  out = dict(step_s=trl, first_step_s=times[0], completion_mean=trl_len)
  if ours:
    print(f"ratio TRL / grounding_jax = {trl / ours['step_s']:.2f}x (median steps; target >= 2.5x)")
    print(f"ratio TRL / grounding_jax without our compile time = {trl / ours['steady_step_s']:.2f}x "
          f"(a long run has compiled every shape; the update compiles one program per micro-batch "
          f"width)")
    print(f"ratio per completion token = "
          f"{trl / trl_len / (ours['step_s'] / ours['completion_mean']):.2f}x (mean completion "
          f"{trl_len:.1f} TRL vs {ours['completion_mean']:.1f} ours)")
  return out
