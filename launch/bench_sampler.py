r"""Sampler on the grounded workload: grounding_jax.sampling.generate vs transformers' generate.

  python launch/bench_sampler.py --recipe=grace        # GRACE prompts: 32 x 5 passages, 8 x 64 passages
  python launch/bench_sampler.py --recipe=grace --temperature=0       # greedy
  python launch/bench_sampler.py --recipe=grace --cases=20x32   # 32 prompts of 20 passages (~760 tokens)
  python launch/bench_sampler.py --recipe=grace --hf=false      # ours only
  python launch/bench_sampler.py --recipe=grace --dtype=bfloat16   # both engines in bf16

The prompts are the synthetic world's questions with their retrieved passages in --recipe's prompt
(GRACE: ~380 tokens at 5 passages, ~2,000 at 64). Each --cases entry "PxN" runs N prompts of P
passages. Both engines load SmolLM2-135M-Instruct (float32, or --dtype) from the same HF folder, get
the same prompts, and must produce exactly --max_new_tokens tokens per row (EOS disabled on both
sides), so tokens/s compare like for like. Per case it prints: tokens/s of both and their ratio, our
compile time, and prefill and decode separately against transformers (ours: the sampler's own
prefill / decode clocks; transformers: a generate of one new token is its prefill, the rest of a
full generate its decode), with the achieved FLOP/s as a share of this machine's float32 matmul
peak (grounding_jax.perf). The engines alternate in --repeats rounds so that a slow spell of this
shared machine hits both; per-round ratios and their medians are printed. Takes ~15 minutes on a
2-core CPU.
"""

from __future__ import annotations

import time

from absl import app
from absl import flags
import numpy as np

_MODEL_DIR = flags.DEFINE_string("model_dir", None, "HF folder; default SmolLM2-135M-Instruct.")
_RECIPE = flags.DEFINE_string(
    "recipe", None, "Whose prompt (grounding_jax.recipes); the recorded runs used grace.")
_CASES = flags.DEFINE_list("cases", ["5x32", "64x8"], "PxN: N prompts of P passages each.")
_MAX_NEW_TOKENS = flags.DEFINE_integer("max_new_tokens", 128, "Tokens generated per prompt.")
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "0 = greedy.")
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

  def __init__(self, model_dir, max_new_tokens, temperature):
    import torch
    import transformers

    self.torch = torch
    self.tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    self.tok.padding_side = "left"
    self.model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=getattr(torch, _DTYPE.value)).eval()
    self.model.generation_config.eos_token_id = None  # run every row to max_new_tokens, as ours does
    self.kw = dict(max_new_tokens=max_new_tokens, pad_token_id=self.tok.pad_token_id)
    self.kw.update(dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
                   if temperature > 0 else dict(do_sample=False))

  def set_prompts(self, prompts):
    self.inputs = self.tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)

  def run(self, threads: int, max_new_tokens: int | None = None) -> tuple[int, float]:
    """(generated tokens, seconds) of one generate call with `threads` torch threads."""
    self.torch.set_num_threads(threads)
    kw = dict(self.kw, max_new_tokens=max_new_tokens or self.kw["max_new_tokens"])
    with self.torch.inference_mode():
      start = time.perf_counter()
      out = self.model.generate(**self.inputs, **kw)
      seconds = time.perf_counter() - start
    return out.shape[0] * (out.shape[1] - self.inputs["input_ids"].shape[1]), seconds


def _case(model, tokenizer, hf, passages: int, n: int, peak: float) -> dict:
  """Times one case; prints its lines; returns its median ratios."""
  from grounding_jax import perf
  from grounding_jax import sampling
  prompts = _prompts(tokenizer, passages, n)
  lengths = [len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
  n_new, temp = _MAX_NEW_TOKENS.value, _TEMPERATURE.value
  kw = dict(max_new_tokens=n_new, temperature=temp, eos_ids=())
  threads = [int(t) for t in _HF_THREADS.value]
  print(f"--- case {passages}x{n}: {n} {_RECIPE.value} prompts of {passages} passages, "
        f"{min(lengths)}-{max(lengths)} tokens (mean {np.mean(lengths):.0f}), {n_new} new tokens, "
        f"temperature={temp}, dtype={_DTYPE.value}", flush=True)
  start = time.perf_counter()
  sampling.generate(model, tokenizer, prompts, seed=0, **kw)
  first = time.perf_counter() - start
  if hf:
    hf.set_prompts(prompts)
    for t in threads:
      hf.run(t, max_new_tokens=2)  # warm-up
  ours_s, stats_r, hf_full, hf_prefill = [], [], {t: [] for t in threads}, {t: [] for t in threads}
  for r in range(_REPEATS.value):
    start = time.perf_counter()
    gen = sampling.generate(model, tokenizer, prompts, seed=r + 1, **kw)
    ours_s.append(time.perf_counter() - start)
    stats_r.append(sampling.last_stats())
    for t in (threads if hf else []):
      hf_prefill[t].append(hf.run(t, max_new_tokens=1)[1])
      hf_tokens, seconds = hf.run(t)
      hf_full[t].append(seconds)
  tokens = int(gen.lengths.sum())
  assert tokens == len(prompts) * n_new, (tokens, gen.lengths)
  best = int(np.argmin(ours_s))
  st = stats_r[best]
  prefill_flops, decode_flops = perf.sampler_flops(model.config, st)
  step_ms = lambda s: 1e3 * s["decode_seconds"] / s["decode_steps"]
  print(f"ours: {tokens / ours_s[best]:.1f} tokens/s ({tokens} tokens in {ours_s[best]:.2f} s end to "
        f"end, best of {_REPEATS.value}); compile+first call {first:.2f} s -> compile ~"
        f"{first - ours_s[best]:.2f} s")
  print(f"ours: prefill {st['prefill_seconds']:.3f} s (bucket {st['prompt_bucket']}, "
        f"{prefill_flops / 1e9:.1f} GFLOP, {prefill_flops / st['prefill_seconds'] / peak:.1%} of "
        f"matmul peak), decode {st['decode_seconds']:.3f} s for {st['decode_steps']} steps "
        f"({step_ms(st):.1f} ms/step, {decode_flops / st['decode_seconds'] / peak:.1%} of peak); "
        f"host tokenise/detokenise {ours_s[best] - st['prefill_seconds'] - st['decode_seconds']:.3f} s")
  if not hf:
    return {}
  for t in threads:
    i = int(np.argmin(hf_full[t]))
    pre, full = hf_prefill[t][i], hf_full[t][i]
    print(f"transformers (torch threads={t}): {hf_tokens / full:.1f} tokens/s ({full:.2f} s); "
          f"prefill {pre:.3f} s, decode {full - pre:.3f} s ({1e3 * (full - pre) / (n_new - 1):.1f} "
          f"ms/step)")
  # Per round: ours against the fastest thread count of that round, phase by phase.
  ratios = {"overall": [], "prefill": [], "decode": []}
  for r in range(_REPEATS.value):
    t = min(threads, key=lambda t: hf_full[t][r])
    pre, full = hf_prefill[t][r], hf_full[t][r]
    ratios["overall"].append(full / ours_s[r])
    ratios["prefill"].append(pre / stats_r[r]["prefill_seconds"])
    ratios["decode"].append((full - pre) / (n_new - 1) / (step_ms(stats_r[r]) / 1e3))
  for name, target in (("overall", ">= 1.5x"), ("prefill", ">= 1.0x"), ("decode", "")):
    print(f"ratio {name} (transformers time / ours, per round): "
          + " ".join(f"{x:.2f}x" for x in ratios[name])
          + f"; median {np.median(ratios[name]):.2f}x" + (f" (target {target})" if target else ""))
  return {k: float(np.median(v)) for k, v in ratios.items()}


def main(argv):
  del argv
  import jax.numpy as jnp
  from grounding_jax import perf
  from grounding_jax.models import load_pretrained, load_tokenizer
  from grounding_jax.models.gguf_convert import prepare_smollm2

  model_dir = _MODEL_DIR.value or str(prepare_smollm2())
  peak = perf.measured_cpu_peak()
  print(f"matmul peak (jnp float32, all cores): {peak / 1e9:.1f} GFLOP/s")
  model = load_pretrained(model_dir, dtype=jnp.dtype(_DTYPE.value))
  tokenizer = load_tokenizer(model_dir)
  hf = _HFEngine(model_dir, _MAX_NEW_TOKENS.value, _TEMPERATURE.value) if _HF.value else None
  for case in _CASES.value:
    passages, n = (int(x) for x in case.lower().split("x"))
    _case(model, tokenizer, hf, passages, n, peak)


if __name__ == "__main__":
  flags.mark_flag_as_required("recipe")
  app.run(main)
