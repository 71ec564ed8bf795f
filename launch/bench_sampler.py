r"""Sampler on the grounded workload: grounding_jax.sampling.generate vs transformers' generate.

  python launch/bench_sampler.py --recipe=grace        # GRACE prompts: 32 x 5 passages, 8 x 64 passages
  python launch/bench_sampler.py --recipe=grace --temperature=0       # greedy
  python launch/bench_sampler.py --recipe=grace --cases=20x32   # 32 prompts of 20 passages (~760 tokens)
  python launch/bench_sampler.py --recipe=grace --hf=false      # ours only
  python launch/bench_sampler.py --recipe=grace --dtype=bfloat16   # both engines in bf16
  # a public model's shape with random weights (grounding_jax/models/shapes.py), SmolLM2's tokenizer,
  # 16 prompts x G=8 samples x 256 new tokens; both engines on the GPU when there is one
  python launch/bench_sampler.py --recipe=grace --model_shape=qwen2.5-1.5b --dtype=bfloat16 \
      --cases=5x16 --group_size=8 --max_new_tokens=256 --repeats=2
  python launch/bench_sampler.py --recipe=grace --model_shape=tiny --cases=5x2 --max_new_tokens=8  # seconds
  python launch/bench_sampler.py --recipe=grace --hf=false --fuse_projections  # 4 GEMMs a layer

The prompts are the synthetic world's questions with their retrieved passages in --recipe's prompt
(GRACE: ~380 tokens at 5 passages, ~2,000 at 64). Each --cases entry "PxN" runs N prompts of P
passages. Both engines load SmolLM2-135M-Instruct (float32, or --dtype) from the same HF folder, get
the same prompts, and must produce exactly --max_new_tokens tokens per row (EOS disabled on both
sides), so tokens/s compare like for like. With --model_shape both engines get a random-weight
model of that shape instead (speed only) and the tokenizer of --tokenizer_dir; transformers runs on
cuda when torch sees a GPU, else on the CPU, as ours runs on jax's default device.

Per case it prints: tokens/s of both and their ratio, our compile time, and prefill and decode
separately against transformers (ours: the sampler's own prefill / decode clocks; transformers: a
generate of one new token is its prefill, the rest of a full generate its decode). The device's
ceilings are measured first in the same process (a large copy's bandwidth, a large matmul's FLOP/s
in --dtype; ceilings.measure_ceilings): prefill is printed as MFU of the measured matmul rate and of the
datasheet's bf16 peak (perf.PEAK_FLOPS), decode as the share of its bandwidth roofline (the weights
and live KV cache a step must read, perf.decode_read_bytes, at the measured bandwidth). A last line
per case, "RESULT {json}", carries the figures for launch/bench_suite.py. The engines alternate in
--repeats rounds so that a slow spell of this shared machine hits both; per-round ratios and their
medians are printed. Takes ~15 minutes on a 2-core CPU for the SmolLM2 cases.
"""

from __future__ import annotations

import dataclasses
import json
import time

from absl import app
from absl import flags
import numpy as np

_MODEL_DIR = flags.DEFINE_string("model_dir", None, "HF folder; default SmolLM2-135M-Instruct.")
_MODEL_SHAPE = flags.DEFINE_string(
    "model_shape", None, "Instead of --model_dir: a shape of grounding_jax.models.shapes.SHAPES "
    "(tiny, qwen2.5-0.5b, qwen2.5-1.5b, qwen3-4b, llama3-8b) with random weights.")
_TOKENIZER_DIR = flags.DEFINE_string(
    "tokenizer_dir", None, "Tokenizer folder for --model_shape; default SmolLM2's (prepared offline).")
_SHAPE_VOCAB = flags.DEFINE_integer(
    "shape_vocab", 0, "--model_shape's vocabulary size; 0 = the shape's own, -1 = the tokenizer's.")
_GROUP = flags.DEFINE_integer("group_size", 1, "Samples per prompt (G; the rows are prompts x G).")
_OURS = flags.DEFINE_bool("ours", True, "Time grounding_jax's sampler (false: the peer alone, e.g. "
                          "in its own process on a GPU that jax would otherwise preallocate).")
_PROFILE_DIR = flags.DEFINE_string("profile_dir", None, "Write a jax.profiler trace of our first "
                                   "timed call of the first case here.")
_RECIPE = flags.DEFINE_string(
    "recipe", None, "Whose prompt (grounding_jax.recipes); the recorded runs used grace.")
_CASES = flags.DEFINE_list("cases", ["5x32", "64x8"], "PxN: N prompts of P passages each.")
_MAX_NEW_TOKENS = flags.DEFINE_integer("max_new_tokens", 128, "Tokens generated per prompt.")
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "0 = greedy.")
_ATTENTION = flags.DEFINE_string("attention", "auto", "Ours: the attention kernel (models/attention.py"
                                 ": auto, xla or cudnn), to compare kernels on one device.")
_FUSE = flags.DEFINE_enum("fuse_projections", "auto", ["auto", "on", "off"], "Ours: each layer's "
                          "q/k/v projections as one GEMM and gate/up as one "
                          "(sampling.generate_ids(fuse_projections=)); 'auto' = on a GPU, as "
                          "config rollout.fuse_projections.")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"],
                           "Weights and compute of both engines (ours: load_pretrained(dtype=); "
                           "transformers: from_pretrained(dtype=)).")
_HF = flags.DEFINE_bool("hf", True, "Also time transformers' generate.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed rounds after the warm-up (ours, then transformers, "
                                "in each round); best runs and per-round ratios are reported.")
_HF_THREADS = flags.DEFINE_list("hf_threads", ["1", "2"],
                                "torch thread counts to time; the fastest is the peer. On a shared "
                                "2-core machine torch's 2-thread OpenMP can be ~10x slower than 1.")


def _prompts(tokenizer, passages: int, n: int) -> list[str]:
  """n grounded prompts: synthetic questions with `passages` passages in the recipe's prompt."""
  from grounding_jax.data import synthetic
  from grounding_jax.recipes import get_recipe
  recipe = get_recipe(_RECIPE.value)
  examples = synthetic.generate_examples(n, seed=0, num_passages=passages)
  return [recipe.render_prompt(ex, tokenizer) for ex in examples]


class _HFEngine:
  """transformers' generate on the same folder, prompts and settings (EOS disabled)."""

  def __init__(self, model_dir, tokenizer_dir, config, max_new_tokens, temperature):
    import torch
    import transformers
    from grounding_jax.models import shapes

    self.torch = torch
    self.device = "cuda" if torch.cuda.is_available() else "cpu"
    self.tok = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    self.tok.padding_side = "left"
    if model_dir:
      self.model = transformers.AutoModelForCausalLM.from_pretrained(
          model_dir, dtype=getattr(torch, _DTYPE.value)).to(self.device).eval()
    else:  # the same shape, random weights
      self.model = shapes.hf_random_model(config, _DTYPE.value, self.device)
    self.model.generation_config.eos_token_id = None  # run every row to max_new_tokens, as ours does
    self.kw = dict(max_new_tokens=max_new_tokens, pad_token_id=self.tok.pad_token_id)
    self.kw.update(dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
                   if temperature > 0 else dict(do_sample=False))

  def set_prompts(self, prompts, group_size: int = 1):
    rows = [p for p in prompts for _ in range(group_size)]
    self.inputs = self.tok(rows, return_tensors="pt", padding=True,
                           add_special_tokens=False).to(self.device)

  def _sync(self):
    if self.device == "cuda":
      self.torch.cuda.synchronize()

  def run(self, threads: int, max_new_tokens: int | None = None) -> tuple[int, float]:
    """(generated tokens, seconds) of one generate call with `threads` torch threads."""
    if threads:  # 0: leave torch's default (a GPU run)
      self.torch.set_num_threads(threads)
    kw = dict(self.kw, max_new_tokens=max_new_tokens or self.kw["max_new_tokens"])
    with self.torch.inference_mode():
      self._sync()
      start = time.perf_counter()
      out = self.model.generate(**self.inputs, **kw)
      self._sync()
      seconds = time.perf_counter() - start
    return out.shape[0] * (out.shape[1] - self.inputs["input_ids"].shape[1]), seconds


def _ours_round(model, tokenizer, prompts, kw, seed: int, profile_dir=None) -> tuple[float, dict]:
  """(seconds, sampling.last_stats()) of one call of our sampler; traced into profile_dir if set."""
  from grounding_jax import perf
  from grounding_jax import sampling
  with perf.trace(profile_dir):
    start = time.perf_counter()
    gen = sampling.generate(model, tokenizer, prompts, seed=seed, **kw)
    seconds = time.perf_counter() - start
  tokens = int(gen.lengths.sum())
  assert tokens == len(prompts) * kw["num_samples"] * kw["max_new_tokens"], (tokens, gen.lengths)
  return seconds, sampling.last_stats()


def _print_ours(ours: dict, config, ceilings, itemsize: int) -> dict:
  """Prints our tokens/s, prefill MFU and decode against the bandwidth roofline; their figures."""
  from grounding_jax import perf
  best = int(np.argmin(ours["seconds"]))
  st, secs, tokens = ours["stats"][best], ours["seconds"][best], ours["tokens"]
  prefill_flops, _ = perf.sampler_flops(config, st)
  step_s = st["decode_seconds"] / st["decode_steps"]
  read = perf.decode_read_bytes(config, st, itemsize)
  print(f"ours: {tokens / secs:.1f} tokens/s ({tokens} tokens in {secs:.2f} s end to end, best of "
        f"{_REPEATS.value}); compile+first call {ours['first']:.2f} s -> compile ~"
        f"{ours['first'] - secs:.2f} s")
  print(f"ours: prefill {st['prefill_seconds']:.3f} s (bucket {st['prompt_bucket']}, "
        f"{prefill_flops / 1e9:.1f} GFLOP, {ceilings.fractions(prefill_flops, st['prefill_seconds'])})"
        f"; host tokenise/detokenise {secs - st['prefill_seconds'] - st['decode_seconds']:.3f} s")
  print(f"ours: decode {st['decode_seconds']:.3f} s for {st['decode_steps']} steps x {st['rows']} "
        f"rows ({1e3 * step_s:.2f} ms/step; {ceilings.roofline(read, step_s)})")
  fused = bool(st.get("fused_projections"))
  print(f"ours: projection GEMMs a layer: {4 if fused else 7} ("
        + ("q/k/v and gate/up fused" if fused else "separate"
           + ("; --fuse_projections fell back" if _FUSE.value == "on" else "")) + ")")
  return dict(tokens_per_s=tokens / secs, seconds=secs, first_call_s=ours["first"],
              prefill_s=st["prefill_seconds"], decode_ms_per_step=1e3 * step_s,
              fused_projections=fused,
              prefill_mfu_measured=prefill_flops / st["prefill_seconds"] / ceilings.matmul_flops,
              prefill_mfu_datasheet=(prefill_flops / st["prefill_seconds"] / ceilings.datasheet_flops
                                     if ceilings.datasheet_flops else None),
              decode_read_gb=read / 1e9,
              decode_roofline_fraction=read / ceilings.bandwidth / step_s)


def _case(model, config, tokenizer, hf, passages: int, n: int, ceilings, itemsize: int,
          profile_dir) -> dict:
  """Times one case; prints its lines and a RESULT line; returns its figures."""
  from grounding_jax import sampling
  from grounding_jax.models import attention
  fuse = sampling.fuse_projections_enabled(_FUSE.value)  # 'auto': on a GPU
  prompts = _prompts(tokenizer, passages, n)
  lengths = [len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
  n_new, temp, g = _MAX_NEW_TOKENS.value, _TEMPERATURE.value, _GROUP.value
  kw = dict(max_new_tokens=n_new, temperature=temp, eos_ids=(), num_samples=g,
            fuse_projections=fuse)
  threads = [int(t) for t in _HF_THREADS.value] if not hf or hf.device == "cpu" else [0]
  print(f"--- case {passages}x{n}: {n} {_RECIPE.value} prompts of {passages} passages x G={g}, "
        f"{min(lengths)}-{max(lengths)} tokens (mean {np.mean(lengths):.0f}), {n_new} new tokens, "
        f"temperature={temp}, dtype={_DTYPE.value}", flush=True)
  kernel = attention.kernel_choice(config.attention_implementation, config.head_dim, _DTYPE.value)
  print(f"attention kernel (ours): {kernel}", flush=True)
  result = dict(case=f"{passages}x{n}", group_size=g, prompt_tokens_mean=float(np.mean(lengths)),
                new_tokens=n_new, dtype=_DTYPE.value, model_shape=_MODEL_SHAPE.value, attention=kernel,
                fuse_projections=fuse,
                ceilings=dataclasses.asdict(ceilings) if ceilings else None)
  ours = dict(seconds=[], stats=[], tokens=len(prompts) * g * n_new)
  if model is not None:
    start = time.perf_counter()
    _ours_round(model, tokenizer, prompts, kw, seed=0)
    ours["first"] = time.perf_counter() - start
  if hf:
    hf.set_prompts(prompts, g)
    for t in threads:
      hf.run(t, max_new_tokens=2)  # warm-up
  hf_full, hf_prefill = {t: [] for t in threads}, {t: [] for t in threads}
  for r in range(_REPEATS.value):  # alternating, so a slow spell of a shared machine hits both
    if model is not None:
      seconds, stats = _ours_round(model, tokenizer, prompts, kw, r + 1,
                                   profile_dir if r == 0 else None)
      ours["seconds"].append(seconds)
      ours["stats"].append(stats)
    for t in (threads if hf else []):
      hf_prefill[t].append(hf.run(t, max_new_tokens=1)[1])
      hf_tokens, seconds = hf.run(t)
      hf_full[t].append(seconds)
  if model is not None:
    result["ours"] = _print_ours(ours, config, ceilings, itemsize)
  if hf:
    peer = {}
    for t in threads:
      i = int(np.argmin(hf_full[t]))
      pre, full = hf_prefill[t][i], hf_full[t][i]
      where = f"torch threads={t}" if hf.device == "cpu" else hf.device
      print(f"transformers ({where}): {hf_tokens / full:.1f} tokens/s ({full:.2f} s); prefill "
            f"{pre:.3f} s, decode {full - pre:.3f} s ({1e3 * (full - pre) / (n_new - 1):.1f} ms/step)")
      if not peer or full < peer["seconds"]:
        peer = dict(tokens_per_s=hf_tokens / full, seconds=full, prefill_s=pre,
                    decode_ms_per_step=1e3 * (full - pre) / (n_new - 1), device=hf.device)
    result["transformers"] = peer
    if model is not None:
      result["ratios"] = _print_ratios(ours, hf_full, hf_prefill, threads, n_new)
  print("RESULT " + json.dumps(dict(bench="sampler", **result)), flush=True)
  return result


def _print_ratios(ours, hf_full, hf_prefill, threads, n_new) -> dict:
  """Per round: ours against the fastest thread count of that round, phase by phase."""
  ratios = {"overall": [], "prefill": [], "decode": []}
  for r in range(_REPEATS.value):
    t = min(threads, key=lambda t: hf_full[t][r])
    pre, full, st = hf_prefill[t][r], hf_full[t][r], ours["stats"][r]
    ratios["overall"].append(full / ours["seconds"][r])
    ratios["prefill"].append(pre / st["prefill_seconds"])
    ratios["decode"].append((full - pre) / (n_new - 1) / (st["decode_seconds"] / st["decode_steps"]))
  for name, target in (("overall", ">= 1.5x"), ("prefill", ">= 1.0x"), ("decode", "")):
    print(f"ratio {name} (transformers time / ours, per round): "
          + " ".join(f"{x:.2f}x" for x in ratios[name])
          + f"; median {np.median(ratios[name]):.2f}x" + (f" (target {target})" if target else ""))
  return {k: float(np.median(v)) for k, v in ratios.items()}


def _model_and_tokenizer():
  """(our model or None, its ModelConfig, tokenizer, HF model folder or None, tokenizer folder)."""
  import jax.numpy as jnp
  from grounding_jax.models import gguf_convert, load_pretrained, load_tokenizer, shapes
  dtype = jnp.dtype(_DTYPE.value)
  if _MODEL_SHAPE.value:
    if _MODEL_DIR.value:
      raise app.UsageError("--model_dir and --model_shape exclude each other")
    config, tokenizer, tokenizer_dir = shapes.config_and_tokenizer(
        _MODEL_SHAPE.value, _TOKENIZER_DIR.value, _SHAPE_VOCAB.value)
    config = dataclasses.replace(config, attention_implementation=_ATTENTION.value)
    model = shapes.random_model(config, dtype=dtype) if _OURS.value else None
    return model, config, tokenizer, None, tokenizer_dir
  model_dir = _MODEL_DIR.value or str(gguf_convert.prepare_smollm2())
  model = load_pretrained(model_dir, dtype=dtype, attention_implementation=_ATTENTION.value)
  return (model if _OURS.value else None), model.config, load_tokenizer(model_dir), model_dir, model_dir


def main(argv):
  del argv
  import jax.numpy as jnp
  from grounding_jax import ceilings as ceilings_lib
  ceilings = ceilings_lib.measure_ceilings(_DTYPE.value) if _OURS.value else None  # a peer alone: no jax
  if ceilings:
    print(ceilings.line(), flush=True)
  model, config, tokenizer, model_dir, tokenizer_dir = _model_and_tokenizer()
  hf = (_HFEngine(model_dir, tokenizer_dir, config, _MAX_NEW_TOKENS.value, _TEMPERATURE.value)
        if _HF.value else None)
  itemsize = jnp.dtype(_DTYPE.value).itemsize  # the sampler reads weights and cache in this dtype
  for i, case in enumerate(_CASES.value):
    passages, n = (int(x) for x in case.lower().split("x"))
    _case(model, config, tokenizer, hf, passages, n, ceilings, itemsize,
          _PROFILE_DIR.value if i == 0 else None)


if __name__ == "__main__":
  flags.mark_flag_as_required("recipe")
  app.run(main)
