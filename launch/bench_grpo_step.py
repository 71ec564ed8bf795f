r"""One GRPO step (sample → reward → update) with SmolLM2-135M on CPU: grounding_jax vs TRL's GRPOTrainer.

  python launch/bench_grpo_step.py --recipe=grace   # 8 GRACE prompts (5 passages) x G=4, 128 new tokens
  python launch/bench_grpo_step.py --recipe=grace --trl=false     # ours only
  python launch/bench_grpo_step.py --recipe=grace --passages=20   # longer grounded prompts (~760 tokens)
  python launch/bench_grpo_step.py --recipe=grace --dtype=bfloat16   # bf16 compute on both sides
  python launch/bench_grpo_step.py --recipe=grace --trl=false --lora_rank=8 --kl_coef=0.04   # LoRA: update memory
      # against full fine-tuning's (compiled, memory_analysis), then LoRA GRPO steps
  python launch/bench_grpo_step.py --recipe=grace --trl=false --compile_ahead=all   # every gradient program
      # compiled while step 1 samples (default widest: while each step samples, the new one it
      # most likely runs; none)
  # a public model's shape with random weights (grounding_jax/models/shapes.py) on the GPU, TRL on cuda
  python launch/bench_grpo_step.py --recipe=grace --model_shape=qwen2.5-1.5b --dtype=bfloat16 \
      --prompts=16 --group_size=8 --max_new_tokens=256 --micro_batch_size=16
  python launch/bench_grpo_step.py --recipe=grace --model_shape=tiny --prompts=2 --group_size=2 \
      --max_new_tokens=8 --micro_batch_size=2 --steps=2 --trl=false --resume=false   # seconds
  python launch/bench_grpo_step.py --recipe=grace --profile_dir=/tmp/prof   # a jax.profiler trace of step 2
  pip install -e ".[bench]"                        # TRL and what it needs, for the peer

The grounded workload: the synthetic world's questions with --passages retrieved passages each, in
--recipe's prompt (GRACE: ~380 tokens at 5 passages) and scored by its reward (GRACE's format, path
and ROUGE terms; no judge). Same model (SmolLM2-135M-Instruct, float32 weights), same prompts, G = 4,
128 new tokens, temperature 1.0, β = 0, μ = 1, token-mean loss, lr 1e-6, one optimizer update over
32 completions in micro-batches of 4, with activation rematerialisation (gradient checkpointing) on
both sides; --dtype=bfloat16 switches both to bf16 compute over float32 master weights (ours:
model.compute_dtype; TRL: bf16=True). Each trainer runs --steps steps (default 3); the steps after
the first (which compiles / warms up) are timed and their median is compared. Rewards are scored
in-process on both sides. A step's cost depends on the completions it sampled (ours stops at the
recipe's stop strings, TRL at EOS), so both sides' mean completion lengths are printed next to the
times, and a ratio per completion token.

Compile: our run starts with an empty persistent compilation cache (a fresh folder), so step 1
compiles everything; its compile time (time/compile) is printed beside the steady-state step. Then
a new process resumes the run from its last checkpoint with the now-filled cache and runs one more
step: what a resumed run pays is the time from main() to the start of that step (the model's set-up
without reading its weights, the checkpoint's restore and verification, the stage's set-up),
printed apart from the step itself.
Per step, the perf/ metrics (TFLOP, achieved FLOP/s, MFU against this CPU's measured matmul peak,
peak memory) are printed, and after the run the trainer's start-up memory report. Takes ~15
minutes on a 2-core CPU.

With --model_shape both sides train a random-weight model of that shape (speed only) with the
tokenizer of --tokenizer_dir; ours runs on jax's default device, TRL on cuda when torch sees a GPU.
The device's ceilings are measured first (ceilings.measure_ceilings: a large copy's bandwidth, a large
matmul's FLOP/s in --dtype), and each step's update is printed as MFU of that measured rate and of
the datasheet's bf16 peak (perf.PEAK_FLOPS). A last line "RESULT {json}" carries the figures for
launch/bench_suite.py. TRL's side of the comparison is launch/bench_grpo_trl.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_grpo_trl  # pylint: disable=g-import-not-at-top,wrong-import-position

_TRL = flags.DEFINE_bool("trl", True, "Also time TRL's GRPOTrainer (torch; cuda when there is one).")
_OURS = flags.DEFINE_bool("ours", True, "Time grounding_jax (false: TRL alone, e.g. in its own "
                          "process on a GPU that jax would otherwise preallocate).")
_MODEL_DIR = flags.DEFINE_string("model_dir", None, "HF folder; default SmolLM2-135M-Instruct.")
_MODEL_SHAPE = flags.DEFINE_string(
    "model_shape", None, "Instead of --model_dir: a shape of grounding_jax.models.shapes.SHAPES "
    "(tiny, qwen2.5-0.5b, qwen2.5-1.5b, qwen3-4b, llama3-8b) with random weights.")
_TOKENIZER_DIR = flags.DEFINE_string(
    "tokenizer_dir", None, "Tokenizer folder for --model_shape; default SmolLM2's (prepared offline).")
_SHAPE_VOCAB = flags.DEFINE_integer(
    "shape_vocab", 0, "--model_shape's vocabulary size; 0 = the shape's own, -1 = the tokenizer's.")
_PROFILE_DIR = flags.DEFINE_string("profile_dir", None, "Ours: write a jax.profiler trace of step "
                                   "--profile_step here (config.perf.profile_dir).")
_PROFILE_STEP = flags.DEFINE_integer("profile_step", 2, "The step --profile_dir traces.")
_PROMPTS = flags.DEFINE_integer("prompts", 8, "Prompts per step.")
_RECIPE = flags.DEFINE_string(
    "recipe", None, "Whose prompt and reward (a recipe needing no judge); the recorded runs "
    "used grace.")
_PASSAGES = flags.DEFINE_integer("passages", 5, "Retrieved passages per question (~24 tokens each).")
_COMPILE_AHEAD = flags.DEFINE_enum("compile_ahead", "widest", ["none", "widest", "all"],
                                   "Ours: update_loop.compile_ahead (gradient programs compiled in a "
                                   "thread while a step samples).")
_RESUME = flags.DEFINE_bool("resume", True, "Time a resumed run (a new process, the filled cache).")
_RESUME_WORKDIR = flags.DEFINE_string("resume_workdir", None, "Internal: resume this run for one step "
                                      "and print its time to the first update.")
_GROUP = flags.DEFINE_integer("group_size", 4, "Completions per prompt.")
_NEW_TOKENS = flags.DEFINE_integer("max_new_tokens", 128, "Generation limit.")
_MICRO = flags.DEFINE_integer("micro_batch_size", 4, "Completions per gradient-accumulation step.")
_STEPS = flags.DEFINE_integer("steps", 3, "GRPO steps per trainer; all but the first are timed.")
_REMAT = flags.DEFINE_bool("remat", True, "Recompute layer activations in the backward pass "
                           "(gradient checkpointing), on both sides.")
_ATTENTION = flags.DEFINE_string("attention", "auto", "Ours: model.attention (models/attention.py: "
                                 "auto, xla or cudnn), to compare kernels on one device.")
_PACKED = flags.DEFINE_enum("packed_attention", "auto", ["auto", "rows", "blocks", "stream"],
                            "Ours: model.packed_attention (models/packed.py: a group's packed "
                            "completions attended as rows, in blocks, as one masked stream, or "
                            "whichever scores fewest pairs).")
_FUSE = flags.DEFINE_enum("fuse_projections", "auto", ["auto", "on", "off"], "Ours: "
                          "rollout.fuse_projections (the sampler's q/k/v and gate/up weights "
                          "concatenated; 'auto' = on a GPU).")
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
_CHECKPOINT_EVERY = flags.DEFINE_integer(
    "checkpoint_every", 0, "Ours: also save a checkpoint every this many steps (0: the last step's "
    "alone); a mid-run save writes in the background on an accelerator (checkpoint.background_write"
    "='auto'), and the next step logs how long it held training (time/checkpoint).")
_COMMON_PREFIX = flags.DEFINE_integer(
    "common_prefix_min_tokens", None, "Ours: rollout.common_prefix_min_tokens (a prompt prefix "
    "every group shares runs once per sampler call and update micro-batch; 0 = off; default the "
    "config's).")
_REMAT_POLICY = flags.DEFINE_enum(
    "remat_policy", "full", ["full", "save_dots"],
    "Ours: what a recomputed layer keeps. 'full' matches TRL's gradient checkpointing; 'save_dots' "
    "also keeps the matmul outputs.")


def _setup():
  """(HF model folder, or the ModelConfig of --model_shape; tokenizer; examples; prompt texts)."""
  from grounding_jax.data import synthetic
  from grounding_jax.models import gguf_convert, load_tokenizer, shapes
  from grounding_jax.recipes import get_recipe
  if _MODEL_SHAPE.value and _MODEL_DIR.value:
    raise app.UsageError("--model_dir and --model_shape exclude each other")
  if _MODEL_SHAPE.value:
    model_dir, tok, _ = shapes.config_and_tokenizer(_MODEL_SHAPE.value, _TOKENIZER_DIR.value,
                                                    _SHAPE_VOCAB.value)
  else:
    model_dir = _MODEL_DIR.value or gguf_convert.prepare_smollm2()
    tok = load_tokenizer(model_dir)
  examples = synthetic.generate_examples(_PROMPTS.value * 2, seed=0, num_passages=_PASSAGES.value)
  texts = [get_recipe(_RECIPE.value).render_prompt(ex, tok) for ex in examples]
  return model_dir, tok, examples, texts


def _config(model_dir, workdir: str, num_steps: int):
  from grounding_jax.rl import config as config_lib
  c = config_lib.default_config()
  c.workdir = workdir
  c.model.path = "" if _MODEL_SHAPE.value else str(model_dir)  # a shape: the model is passed in
  c.model.attention = _ATTENTION.value
  c.model.packed_attention = _PACKED.value
  c.rollout.fuse_projections = _FUSE.value
  if _PROFILE_DIR.value:
    c.perf.profile_dir, c.perf.profile_step = _PROFILE_DIR.value, _PROFILE_STEP.value
  c.mesh.fsdp = 1
  c.rollout.prompts_per_step = _PROMPTS.value
  c.rollout.group_size = _GROUP.value
  c.rollout.max_new_tokens = _NEW_TOKENS.value
  c.reward.num_workers = 0
  c.update_loop.micro_batch_size = _MICRO.value
  c.update_loop.compile_ahead = _COMPILE_AHEAD.value
  c.optimizer.learning_rate = 1e-6
  c.loss.logprob_chunk_size = 8192
  c.stages = [config_lib.stage("bench", num_steps=num_steps, recipe=_RECIPE.value)]
  c.stages[0].data.shuffle = False
  c.loss.kl_coef = _KL.value
  if _COMMON_PREFIX.value is not None:
    c.rollout.common_prefix_min_tokens = _COMMON_PREFIX.value
  if _LORA_RANK.value:
    c.model.lora.update(dict(rank=_LORA_RANK.value, alpha=2.0 * _LORA_RANK.value))
  c.checkpoint.every_steps = _CHECKPOINT_EVERY.value or _STEPS.value  # the last step saves (resume)
  c.logging.console = False
  return c


def _workload() -> bench_grpo_trl.Workload:
  """The flags TRL's side of the comparison reads (launch/bench_grpo_trl.py)."""
  return bench_grpo_trl.Workload(
      recipe=_RECIPE.value, prompts=_PROMPTS.value, group_size=_GROUP.value,
      max_new_tokens=_NEW_TOKENS.value, micro_batch_size=_MICRO.value, steps=_STEPS.value,
      remat=_REMAT.value, dtype=_DTYPE.value)


def _load(model_dir, weights: bool = True):
  """Ours: float32 master weights from the HF folder, or random ones of --model_shape's config;
  without `weights` the architecture alone (abstract), which a resumed Trainer fills from its
  checkpoint."""
  import dataclasses
  import jax.numpy as jnp
  from flax import nnx
  from grounding_jax import models
  from grounding_jax.models import shapes
  kw = dict(remat=_REMAT.value, remat_policy=_REMAT_POLICY.value,
            compute_dtype=jnp.dtype(_DTYPE.value), scan_layers=_SCAN.value)
  if isinstance(model_dir, models.ModelConfig):
    config = dataclasses.replace(model_dir, attention_implementation=_ATTENTION.value,
                                 packed_attention=_PACKED.value)
    return shapes.random_model(config, **kw) if weights else nnx.eval_shape(
        lambda: shapes.random_model(config, **kw))
  return models.load_pretrained(model_dir, attention_implementation=_ATTENTION.value,
                                packed_attention=_PACKED.value, read_weights=weights, **kw)


def _trainer(c, model_dir, tok, examples, texts, weights: bool = True):
  from grounding_jax.recipes import get_reward
  from grounding_jax.rl import trainer
  prompt_of = dict(zip((ex.id for ex in examples), texts))
  model = _load(model_dir, weights)
  return trainer.Trainer(c, model=model, tokenizer=tok,
                         reward_functions=[(_RECIPE.value, 1.0, get_reward(_RECIPE.value))],
                         datasets={"bench": examples}, prompt_fn=lambda ex: prompt_of[ex.id])


def run_ours(model_dir, tok, examples, texts):
  c = _config(model_dir, tempfile.mkdtemp(prefix="bench_grpo_"), _STEPS.value)
  tr = _trainer(c, model_dir, tok, examples, texts)
  return tr, tr.train()


def resume_ours(workdir: str) -> None:
  """The --resume_workdir child: one more step from the run's last checkpoint; prints its times.

  What a resume costs is the time before its first step starts (the model's set-up, its weights
  read from the checkpoint alone, as a Trainer resuming from config.model.path does; the restore;
  the stage's set-up: the target is <= 10 s); the step itself is printed
  apart, with its compile time (tracing and lowering, which the persistent cache does not save, and
  any program missing from it)."""
  from grounding_jax.rl import stages as stages_lib
  start = time.perf_counter()
  setup = _setup()
  c = _config(setup[0], workdir, _STEPS.value + 1)
  tr = _trainer(c, *setup, weights=False)
  assert tr.resumed_step is not None, "the run left no checkpoint to resume"
  tr.checkpointer.save = lambda *a, **k: None  # train() returns right after the step's update
  built = time.perf_counter() - start
  step_starts = []
  run_step = stages_lib.Stage.step  # the stage object is made inside train(): time its class's step

  def timed_step(stage, *args, **kwargs):
    step_starts.append(time.perf_counter() - start)
    return run_step(stage, *args, **kwargs)

  stages_lib.Stage.step = timed_step
  hist = tr.train()
  done = time.perf_counter() - start
  h, before = hist[0], step_starts[0]
  restore, stage = h.get("time/restore", 0.0), h.get("time/stage_setup", 0.0)
  built -= restore  # the Trainer restored the checkpoint while it was built (resumed_step)
  update_start = before + h["time/step"] - h["time/update"] - h["time/reference"]
  on_disk = sum(f.stat().st_size for f in pathlib.Path(workdir, "checkpoints", str(h["step"] - 1))
                .rglob("*") if f.is_file())
  from grounding_jax import ceilings  # after the timed part: the link a restore crosses, for scale
  up, down = ceilings.measure_host_link()
  print(f"host link: host to device {up / 1e9:.1f} GB/s, device to host {down / 1e9:.1f} GB/s; "
        f"the restore read {on_disk / 1e9:.2f} GB of checkpoint ({on_disk / 1e9 / max(restore, 1e-9):.2f}"
        " GB/s)", flush=True)
  print(f"resumed run (new process, filled compilation cache): step {h['step']} starts "
        f"{before:.1f}s after main() (target <= 10s) = model set-up {built:.1f}s (no weights read) "
        f"+ restore {restore:.1f}s + stage set-up {stage:.1f}s + other "
        f"{before - built - restore - stage:.1f}s;"
        f" then the step {h['time/step']:.1f}s (of which compiling {h['time/compile']:.2f}s, sample "
        f"{h['time/sample']:.1f}s, update {h['time/update']:.1f}s): its update starts "
        f"{update_start:.1f}s and is done {done:.1f}s after main()", flush=True)


def _resume_in_new_process(workdir: str, cache: str) -> None:
  from grounding_jax.parallel import compile_cache
  env = {**os.environ, **compile_cache.environment(cache)}
  argv = [a for a in sys.argv[1:] if not a.startswith("--resume")]
  start = time.perf_counter()
  proc = subprocess.run([sys.executable, os.path.abspath(__file__), *argv,
                         f"--resume_workdir={workdir}"], env=env, capture_output=True, text=True)
  lines = [line for line in proc.stdout.splitlines() if line.startswith("resumed run")]
  if proc.returncode or not lines:
    print(f"resumed run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return
  print("\n".join(line for line in proc.stdout.splitlines() if line.startswith("host link")))
  print(f"{lines[0]}; the whole process {time.perf_counter() - start:.1f}s (imports included)")


def update_memory(model_dir, tok, texts):
  """Peak bytes per device of one compiled update — the reference log-prob pass (β > 0), every
  micro-batch's gradient and the optimizer step, as one program — for full fine-tuning and for
  LoRA of rank --lora_rank; printed with their ratio. Compiles only (abstract arguments)."""
  import jax
  import jax.numpy as jnp
  from grounding_jax import optim, perf, sampling
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
    model = _load(model_dir)
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


def _report_ours(tr, hist, ceilings) -> dict:
  """Prints our steps (times, perf/, update MFU against the ceilings); returns their figures."""
  from grounding_jax.models import attention
  from grounding_jax.rl import step_perf
  for i, h in enumerate(hist, start=1):
    print(f"grounding_jax step {i}: total {h['time/step']:.2f}s = sample {h['time/sample']:.2f}s + "
          f"reward {h['time/reward']:.3f}s + reference {h['time/reference']:.3f}s + update "
          f"{h['time/update']:.2f}s (+ host glue), of which compiling {h['time/compile']:.2f}s; "
          f"mean completion {h['completion_length/mean']:.1f} tokens")
    if "perf/update_tflop" in h:
      print(f"  perf: {step_perf.summary(h)}")
      print(f"  update: {h['perf/update_tflop']:.3f} TFLOP in {h['time/update']:.2f}s, "
            f"{ceilings.fractions(h['perf/update_tflop'] * 1e12, h['time/update'])}")
  kernel = attention.kernel_choice(tr.model.config.attention_implementation, tr.model.config.head_dim,
                                  _DTYPE.value)
  print(f"attention kernel (ours): {kernel}")
  held = [(h["step"] - 1, h["time/checkpoint"]) for h in hist if "time/checkpoint" in h]
  for step, seconds in held:
    print(f"grounding_jax: the checkpoint of step {step} held training {seconds:.2f}s")
  steady = hist[1:]
  median = lambda key: float(np.median([h[key] for h in steady]))
  ours = median("time/step")
  print(f"grounding_jax: step 1 {hist[0]['time/step']:.1f}s (of which compiling "
        f"{hist[0]['time/compile']:.1f}s; target <= 40s) vs steady-state median step {ours:.2f}s "
        f"over steps 2..{len(hist)}")
  out = dict(step_s=ours, sample_s=median("time/sample"), update_s=median("time/update"),
             steady_step_s=float(np.median([h["time/step"] - h["time/compile"] for h in steady])),
             completion_mean=float(np.mean([h["completion_length/mean"] for h in steady])),
             first_step_s=hist[0]["time/step"], first_step_compile_s=hist[0]["time/compile"],
             attention=kernel, checkpoint_held_s=max((t for _, t in held), default=None))
  if "perf/update_tflop" in steady[0]:
    rate = median("perf/update_tflop") * 1e12 / out["update_s"]
    out.update(update_tflop=median("perf/update_tflop"),
               update_mfu_measured=rate / ceilings.matmul_flops,
               update_mfu_datasheet=(rate / ceilings.datasheet_flops if ceilings.datasheet_flops
                                     else None),
               peak_memory_gib=steady[-1]["perf/peak_memory_gib"])
  print(tr.startup_report())
  return out


def main(argv):
  del argv
  if _RESUME.value and _OURS.value and not _RESUME_WORKDIR.value:
    # jax takes 75 % of a GPU per process; the resumed run is a second process beside this one (a
    # child, which inherits this): each gets 45 %. Set before jax is imported.
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.45")
  from grounding_jax import ceilings as ceilings_lib
  from grounding_jax.parallel import compile_cache
  if _RESUME_WORKDIR.value:
    compile_cache.enable(os.environ[compile_cache.ENV_VAR])
    resume_ours(_RESUME_WORKDIR.value)
    return
  if _STEPS.value < 2:
    raise app.UsageError("--steps must be >= 2 (the first step compiles and is not timed)")
  cache = compile_cache.enable(tempfile.mkdtemp(prefix="bench_grpo_xla_"))  # empty: step 1 compiles
  print(f"dtype={_DTYPE.value} micro_batch_size={_MICRO.value} remat={_REMAT.value} "
        f"steps={_STEPS.value} kl_coef={_KL.value} (ours: remat_policy={_REMAT_POLICY.value}, "
        f"scan_layers={_SCAN.value}, compile_ahead={_COMPILE_AHEAD.value}, "
        f"lora_rank={_LORA_RANK.value})")
  ceilings = ceilings_lib.measure_ceilings(_DTYPE.value) if _OURS.value else None  # TRL alone: no jax
  if ceilings:
    print(ceilings.line(), flush=True)
  setup = _setup()
  if _LORA_RANK.value:
    update_memory(setup[0], setup[1], setup[3])
  lengths = [len(setup[1](t, add_special_tokens=False)["input_ids"]) for t in setup[3][:_PROMPTS.value]]
  print(f"workload: {_RECIPE.value} prompts with {_PASSAGES.value} passages, {min(lengths)}-"
        f"{max(lengths)} tokens (mean {np.mean(lengths):.0f}), G={_GROUP.value}, "
        f"{_NEW_TOKENS.value} new tokens; model {_MODEL_SHAPE.value or 'from ' + str(setup[0])}")
  result = dict(bench="grpo_step", model_shape=_MODEL_SHAPE.value, prompts=_PROMPTS.value,
                group_size=_GROUP.value, new_tokens=_NEW_TOKENS.value, dtype=_DTYPE.value,
                micro_batch_size=_MICRO.value,
                ceilings=dataclasses.asdict(ceilings) if ceilings else None,
                prompt_tokens_mean=float(np.mean(lengths)))
  if _OURS.value:
    tr, hist = run_ours(*setup)
    result["ours"] = _report_ours(tr, hist, ceilings)
    if _RESUME.value:
      _resume_in_new_process(tr.config.workdir, cache)
    # The run's temporary workdir holds its checkpoint (~18 GB of float32 state at 1.5 B): a suite
    # of several GRPO stages would otherwise fill a lease's disk.
    shutil.rmtree(tr.config.workdir, ignore_errors=True)
  shutil.rmtree(cache, ignore_errors=True)
  if _TRL.value:
    result["trl"] = bench_grpo_trl.report_trl(setup, _workload(), result.get("ours"))
  print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
  flags.mark_flag_as_required("recipe")
  app.run(main)
