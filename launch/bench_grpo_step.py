r"""One GRPO step (sample → reward → update) with SmolLM2-135M on CPU: grounding_jax vs TRL's GRPOTrainer.

  python launch/bench_grpo_step.py                 # 8 prompts x G=4, 128 new tokens, both trainers
  python launch/bench_grpo_step.py --trl=false     # ours only
  python launch/bench_grpo_step.py --dtype=bfloat16   # bf16 compute on both sides
  python launch/bench_grpo_step.py --trl=false --lora_rank=8 --kl_coef=0.04   # LoRA: update memory
      # against full fine-tuning's (compiled, memory_analysis), then LoRA GRPO steps
  pip install -e ".[bench]"                        # TRL and what it needs, for the peer

Same model (SmolLM2-135M-Instruct, float32 weights), same 8 synthetic grounded-QA prompts (naive-GRPO chat
prompt), G = 4, 128 new tokens, temperature 1.0, the same reward ("naive": format + EM), β = 0, μ = 1,
token-mean loss, lr 1e-6, one optimizer update over 32 completions in micro-batches of 4, with
activation rematerialisation (gradient checkpointing) on both sides; --dtype=bfloat16 switches both
to bf16 compute over float32 master weights (ours: model.compute_dtype; TRL: bf16=True). Each trainer
runs --steps steps (default 3); the steps after the first (which compiles / warms up) are timed and
their median is compared. Rewards are scored in-process on both sides. A step's cost depends on the
completions it sampled (same model, same temperature, different draws), so both sides' mean
completion lengths are printed next to the times. Prints time per phase for ours, TRL's step times,
the ratio TRL / ours of the medians, and the ratio per completion token.
"""

from __future__ import annotations

import os
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

_TRL = flags.DEFINE_bool("trl", True, "Also time TRL's GRPOTrainer (torch, CPU).")
_PROMPTS = flags.DEFINE_integer("prompts", 8, "Prompts per step.")
_GROUP = flags.DEFINE_integer("group_size", 4, "Completions per prompt.")
_NEW_TOKENS = flags.DEFINE_integer("max_new_tokens", 128, "Generation limit.")
_MICRO = flags.DEFINE_integer("micro_batch_size", 4, "Completions per gradient-accumulation step.")
_STEPS = flags.DEFINE_integer("steps", 3, "GRPO steps per trainer; all but the first are timed.")
_REMAT = flags.DEFINE_bool("remat", True, "Recompute layer activations in the backward pass "
                           "(gradient checkpointing), on both sides.")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"],
                           "Compute dtype on both sides: ours model.compute_dtype (float32 master "
                           "weights), TRL bf16=True (autocast; float32 master weights).")
_SCAN = flags.DEFINE_bool("scan_layers", True, "Ours: run the layers as one scanned body over stacked "
                          "weights (compiles once) instead of unrolled (Transformer.scan_layers).")
_LORA_RANK = flags.DEFINE_integer(
    "lora_rank", 0, "Ours: train LoRA adapters of this rank on every projection (model.lora; alpha "
    "2·rank) instead of all weights, and first print the compiled update's memory "
    "(memory_analysis) with these adapters against full fine-tuning's at --kl_coef.")
_KL = flags.DEFINE_float("kl_coef", 0.0, "β of the KL term (> 0: reference log-probs every step; "
                         "full fine-tuning keeps a reference copy of the weights, LoRA of the adapters).")
_REMAT_POLICY = flags.DEFINE_enum(
    "remat_policy", "full", ["full", "save_dots"],
    "Ours: what a recomputed layer keeps. 'full' matches TRL's gradient checkpointing; 'save_dots' "
    "also keeps the matmul outputs.")


def _setup():
  from grounding_jax.data import synthetic
  from grounding_jax.models import gguf_convert, load_tokenizer
  from grounding_jax.recipes import get_recipe
  model_dir = gguf_convert.prepare_smollm2()
  tok = load_tokenizer(model_dir)
  examples = synthetic.generate_examples(_PROMPTS.value * 2, seed=0)
  texts = [get_recipe("naive").render_prompt(ex, tok) for ex in examples]
  return model_dir, tok, examples, texts


def run_ours(model_dir, tok, examples, texts):
  import jax.numpy as jnp
  from grounding_jax import models
  from grounding_jax.recipes import get_reward
  from grounding_jax.rl import config as config_lib
  from grounding_jax.rl import trainer
  c = config_lib.default_config()
  c.workdir = tempfile.mkdtemp(prefix="bench_grpo_")
  c.model.path = str(model_dir)
  c.mesh.fsdp = 1
  c.rollout.prompts_per_step = _PROMPTS.value
  c.rollout.group_size = _GROUP.value
  c.rollout.max_new_tokens = _NEW_TOKENS.value
  c.reward.num_workers = 0
  c.update_loop.micro_batch_size = _MICRO.value
  c.optimizer.learning_rate = 1e-6
  c.loss.logprob_chunk_size = 8192
  c.stages = [config_lib.stage("bench", num_steps=_STEPS.value)]
  c.stages[0].data.shuffle = False
  c.loss.kl_coef = _KL.value
  if _LORA_RANK.value:
    c.model.lora.update(dict(rank=_LORA_RANK.value, alpha=2.0 * _LORA_RANK.value))
  c.checkpoint.every_steps = 10**9
  c.checkpoint.resume = False
  c.logging.console = False
  prompt_of = dict(zip((ex.id for ex in examples), texts))
  model = models.load_pretrained(model_dir, remat=_REMAT.value, remat_policy=_REMAT_POLICY.value,
                                 compute_dtype=jnp.dtype(_DTYPE.value), scan_layers=_SCAN.value)
  tr = trainer.Trainer(c, model=model, tokenizer=tok,
                       reward_functions=[("naive", 1.0, get_reward("naive"))],
                       datasets={"bench": examples}, prompt_fn=lambda ex: prompt_of[ex.id])
  tr.checkpointer.save = lambda *a, **k: None  # timing excludes checkpoint I/O
  hist = tr.train()
  return hist


def update_memory(model_dir, tok, texts):
  """Peak bytes per device of one compiled update — the reference log-prob pass (β > 0), every
  micro-batch's gradient and the optimizer step, as one program — for full fine-tuning and for
  LoRA of rank --lora_rank; printed with their ratio. Compiles only (abstract arguments)."""
  import jax
  import jax.numpy as jnp
  from grounding_jax import models, optim, perf, sampling
  from grounding_jax.models import lora
  from grounding_jax.rl import config as config_lib
  from grounding_jax.rl import update as update_lib
  c = config_lib.default_config()
  c.rollout.group_size, c.rollout.max_new_tokens = _GROUP.value, _NEW_TOKENS.value
  c.update_loop.micro_batch_size = _MICRO.value
  c.loss.kl_coef = _KL.value
  c.loss.logprob_chunk_size = 8192
  settings = update_lib.settings_from_config(c)
  n = _PROMPTS.value * _GROUP.value
  prompt_width = update_lib.prompt_bucket(sampling.tokenize_prompts(tok, texts)[0].shape[1])
  spec = lambda shape, dtype: jax.ShapeDtypeStruct((n // _MICRO.value, _MICRO.value) + shape, dtype)
  batch = dict(prompt_ids=spec((prompt_width,), jnp.int32), prompt_mask=spec((prompt_width,), bool),
               completion_ids=spec((_NEW_TOKENS.value,), jnp.int32),
               loss_mask=spec((_NEW_TOKENS.value,), bool), advantages=spec((), jnp.float32))
  costs = {}
  for name, rank in (("full fine-tuning", 0), (f"LoRA r={_LORA_RANK.value}", _LORA_RANK.value)):
    model = models.load_pretrained(model_dir, remat=_REMAT.value, remat_policy=_REMAT_POLICY.value,
                                   compute_dtype=jnp.dtype(_DTYPE.value), scan_layers=_SCAN.value)
    if rank:
      lora.add_adapters(model, lora.LoRAConfig(rank=rank, alpha=2.0 * rank), jax.random.key(0))
    graphdef, params, rest = update_lib.split_model(model)
    optimizer = optim.build_optimizer(c.optimizer, 10, 1)
    train_step = update_lib.make_train_step(graphdef, optimizer, settings)
    logprob_fn = update_lib.make_logprob_fn(graphdef, settings)
    abstract = lambda tree: jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)

    def update(params, rest, opt_state, ref_params, batch):
      if ref_params is not None:  # what the step's reference pass adds (rl/step.py)
        batch = dict(batch, ref_logp=logprob_fn(ref_params, rest, batch))
      return train_step(params, rest, opt_state, batch)

    args = (abstract(params), abstract(rest), jax.eval_shape(optimizer.init, params),
            abstract(params) if _KL.value else None, batch)
    costs[name] = perf.program_cost(update, *args)
    del model, params, rest
  print(perf.memory_report(costs))
  full, low = costs["full fine-tuning"], costs[f"LoRA r={_LORA_RANK.value}"]
  print(f"update memory LoRA r={_LORA_RANK.value} / full fine-tuning = "
        f"{low.peak_bytes_per_device / full.peak_bytes_per_device:.1%} (kl_coef={_KL.value}; "
        f"target <= 40%)")


def run_trl(model_dir, tok, examples, texts):
  import datasets
  import torch
  import transformers
  import trl
  from grounding_jax.recipes import get_reward
  torch.manual_seed(0)
  naive = get_reward("naive")
  by_prompt = dict(zip(texts, examples))

  def reward(prompts, completions, **kw):
    return list(naive(completions, [by_prompt[p] for p in prompts])["reward"])

  n = _PROMPTS.value * _GROUP.value
  args = trl.GRPOConfig(
      output_dir=tempfile.mkdtemp(prefix="bench_trl_"), per_device_train_batch_size=_MICRO.value,
      gradient_accumulation_steps=n // _MICRO.value, num_generations=_GROUP.value,
      gradient_checkpointing=_REMAT.value,
      max_completion_length=_NEW_TOKENS.value, temperature=1.0, learning_rate=1e-6, beta=0.0,
      num_iterations=1, loss_type="dapo", max_steps=_STEPS.value, logging_steps=1, report_to="none",
      save_strategy="no", use_cpu=True, bf16=_DTYPE.value == "bfloat16", seed=0,
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

  model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
  trainer = trl.GRPOTrainer(model=model, reward_funcs=[reward], args=args,
                            train_dataset=datasets.Dataset.from_list([{"prompt": t} for t in texts]),
                            processing_class=tok, callbacks=[Timer()])
  trainer.train()
  return times, lengths


def main(argv):
  del argv
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  if _STEPS.value < 2:
    raise app.UsageError("--steps must be >= 2 (the first step compiles and is not timed)")
  print(f"dtype={_DTYPE.value} micro_batch_size={_MICRO.value} remat={_REMAT.value} "
        f"steps={_STEPS.value} kl_coef={_KL.value} (ours: remat_policy={_REMAT_POLICY.value}, "
        f"scan_layers={_SCAN.value}, lora_rank={_LORA_RANK.value})")
  setup = _setup()
  if _LORA_RANK.value:
    update_memory(setup[0], setup[1], setup[3])
  hist = run_ours(*setup)
  for i, h in enumerate(hist[1:], start=2):
    print(f"grounding_jax step {i}: total {h['time/step']:.2f}s = sample {h['time/sample']:.2f}s + "
          f"reward {h['time/reward']:.3f}s + reference {h['time/reference']:.3f}s + update "
          f"{h['time/update']:.2f}s (+ host glue), of which compiling new shapes "
          f"{h['time/compile']:.2f}s; mean completion {h['completion_length/mean']:.1f} tokens")
  ours = float(np.median([h["time/step"] for h in hist[1:]]))
  ours_steady = float(np.median([h["time/step"] - h["time/compile"] for h in hist[1:]]))
  ours_len = float(np.mean([h["completion_length/mean"] for h in hist[1:]]))
  print(f"grounding_jax: median step {ours:.2f}s over steps 2..{len(hist)}; step 1 (compiles): "
        f"{hist[0]['time/step']:.1f}s")
  if not _TRL.value:
    return
  try:
    times, lengths = run_trl(*setup)
  except Exception as e:  # pylint: disable=broad-except
    print(f"TRL could not run: {type(e).__name__}: {e}")
    return
  for i, (t, n) in enumerate(zip(times, lengths), start=1):
    print(f"TRL GRPOTrainer step {i}: {t:.2f}s; mean completion {n:.1f} tokens")
  trl = float(np.median(times[1:]))
  trl_len = float(np.mean(lengths[1:])) if len(lengths) >= len(times) else float("nan")
  print(f"TRL GRPOTrainer: median step {trl:.2f}s over steps 2..{len(times)}")
  print(f"ratio TRL / grounding_jax = {trl / ours:.2f}x (median steps; target >= 1.5x)")
  print(f"ratio TRL / grounding_jax without our compile time = {trl / ours_steady:.2f}x (a long "
        f"run has compiled every shape; the update compiles one program per micro-batch width)")
  print(f"ratio per completion token = {trl / trl_len / (ours / ours_len):.2f}x (mean completion "
        f"{trl_len:.1f} TRL vs {ours_len:.1f} ours)")


if __name__ == "__main__":
  app.run(main)
