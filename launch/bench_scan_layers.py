r"""Scanned vs unrolled layers (Transformer.scan_layers) in the sampler, SmolLM2-135M on this machine.

  python launch/bench_scan_layers.py --recipe=naive    # 32 rows, 64 new tokens, 3 rounds (~5 min)
  python launch/bench_scan_layers.py --recipe=naive --layouts=scanned --rounds=0   # compile + first call

Both layouts load the same folder and sample the same grounded prompts (the synthetic world's
prompts in --recipe's template with passages, ~200 tokens for the naive-GRPO one) in two shapes: GRPO-shaped (8 prompts x G = 4,
temperature 1: prefill once per group) and 32 prompts greedy (G = 1). The layouts alternate within
each round, so a slow spell of a shared machine hits both alike. Prints each layout's compile +
first call, then per round the prefill seconds and the decode milliseconds per step, and the
median ratio unrolled / scanned (> 1: scanned is faster). EOS is off, so every call decodes the
same number of steps. The sampler runs a scanned model unstacked (engine.inference_state): its
prefill and decode programs are the unrolled model's, so in one process the second layout reuses
the first's compiled programs; compare compile + first call across two processes (--layouts).
The end-to-end seconds per call include the per-call unstacking of the scanned weights.
"""

from __future__ import annotations

import time

from absl import app
from absl import flags
import numpy as np

_ROUNDS = flags.DEFINE_integer("rounds", 3, "Timed rounds after the first (compiling) call.")
_NEW_TOKENS = flags.DEFINE_integer("max_new_tokens", 64, "Tokens generated per row.")
_LAYOUTS = flags.DEFINE_list("layouts", ["scanned", "unrolled"], "Which layouts to run, in order.")
_RECIPE = flags.DEFINE_string(
    "recipe", None, "Whose prompt (grounding_jax.recipes); the recorded runs used naive.")


def main(argv):
  del argv
  from grounding_jax import recipes, sampling
  from grounding_jax.data import synthetic
  from grounding_jax.models import gguf_convert, load_pretrained, load_tokenizer

  model_dir = gguf_convert.prepare_smollm2()
  tok = load_tokenizer(model_dir)
  texts = [recipes.render_prompt(_RECIPE.value, ex, tok)
           for ex in synthetic.generate_examples(32, seed=0)]
  models = {name: load_pretrained(model_dir, scan_layers=name == "scanned")
            for name in _LAYOUTS.value}
  shapes = {"8x4 sampled": dict(prompts=texts[:8], num_samples=4, temperature=1.0),
            "32x1 greedy": dict(prompts=texts, num_samples=1, temperature=0.0)}
  ids, _ = sampling.tokenize_prompts(tok, texts)
  print(f"SmolLM2-135M float32; prompts of {ids.shape[1]} tokens at most; "
        f"{_NEW_TOKENS.value} new tokens; rounds={_ROUNDS.value}")

  def run(layout, shape, seed):
    s = shapes[shape]
    start = time.perf_counter()
    sampling.generate(models[layout], tok, s["prompts"], max_new_tokens=_NEW_TOKENS.value,
                      temperature=s["temperature"], num_samples=s["num_samples"], eos_ids=(),
                      seed=seed)
    stats = sampling.last_stats()
    return (time.perf_counter() - start, stats["prefill_seconds"],
            1e3 * stats["decode_seconds"] / stats["decode_steps"])

  for shape in shapes:
    for layout in models:
      total, _, _ = run(layout, shape, 0)
      print(f"{shape} {layout}: compile + first call {total:.1f} s")
  results = {(shape, layout): [] for shape in shapes for layout in models}
  for r in range(_ROUNDS.value):
    for shape in shapes:
      for layout in (models if r % 2 == 0 else reversed(list(models))):
        results[shape, layout].append(run(layout, shape, r + 1))
  for shape in shapes:
    for layout in models:
      rows = results[shape, layout]
      print(f"{shape} {layout}: end to end " + " ".join(f"{t:.2f}" for t, _, _ in rows)
            + " s; prefill " + " ".join(f"{p:.2f}" for _, p, _ in rows)
            + " s; decode " + " ".join(f"{d:.1f}" for _, _, d in rows) + " ms/step")
    if len(models) == 2 and _ROUNDS.value:
      ratio = lambda i: np.median([u[i] / s[i] for s, u in zip(results[shape, "scanned"],
                                                                results[shape, "unrolled"])])
      print(f"{shape}: ratio unrolled / scanned, median of rounds: end to end {ratio(0):.2f}x, "
            f"prefill {ratio(1):.2f}x, decode step {ratio(2):.2f}x")


if __name__ == "__main__":
  flags.mark_flag_as_required("recipe")
  app.run(main)
