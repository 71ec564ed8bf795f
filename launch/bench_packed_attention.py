r"""The update's gradient for one micro-batch under each `model.packed_attention` layout.

One micro-batch of GRPO groups (G completions of at most L tokens after prompts that share a
prefix), the model at a named shape with random weights (models/shapes.py) or SmolLM2-135M's,
float32 or bf16 compute, remat on: the gradient of the completions' summed log-probs, timed per call
after a compile, the layouts interleaved. Prints seconds per call, the ratio against "stream" (the
one masked stream, the layout before rows and blocks), the query-key pairs each layout scores
(packed.pairs) and which one "auto" picks.

    python launch/bench_packed_attention.py --mean_tokens=64     # short completions: blocks
    python launch/bench_packed_attention.py --mean_tokens=240    # full ones: rows
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import statistics
import time

from absl import app
from absl import flags

_SHAPE = flags.DEFINE_string("model_shape", None, "A models/shapes.py name (random weights); default "
                             "SmolLM2-135M-Instruct's config (prepared by launch/prepare_smollm2.py).")
_MEAN = flags.DEFINE_integer("mean_tokens", 64, "Mean completion length (normal, sd mean/3, 1..L).")
_WIDTH = flags.DEFINE_integer("completion_width", 256, "L: the completion bucket.")
_GROUP = flags.DEFINE_integer("group_size", 8, "G: completions per prompt.")
_GROUPS = flags.DEFINE_integer("groups", 2, "Groups in the micro-batch.")
_PROMPT = flags.DEFINE_integer("prompt_tokens", 380, "Tokens of each prompt.")
_COMMON = flags.DEFINE_integer("common_tokens", 224, "Leading prompt tokens all groups share (0: none).")
_MODES = flags.DEFINE_list("modes", ["stream", "rows", "blocks"], "Layouts to time.")
_CALLS = flags.DEFINE_integer("calls", 3, "Timed calls per layout, after one that compiles.")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "Compute dtype.")


def main(argv):
  del argv
  import jax
  import jax.numpy as jnp
  import numpy as np
  from flax import nnx

  from grounding_jax.models import logprobs, packed, shapes
  from grounding_jax.models.config import ModelConfig
  from grounding_jax.rl import update as update_lib

  config = (shapes.shape_config(_SHAPE.value) if _SHAPE.value else
            ModelConfig.from_hf(pathlib.Path.home() / ".cache/grounding_jax/smollm2-135m-instruct"))
  g, width, groups, common = _GROUP.value, _WIDTH.value, _GROUPS.value, _COMMON.value
  lp = update_lib.prompt_bucket(_PROMPT.value)
  rng = np.random.default_rng(0)
  n = g * groups
  vocab = min(config.vocab_size, 1000)  # token ids drawn below this, within every shape's vocabulary
  p_ids = rng.integers(3, vocab, (groups, lp)).astype(np.int32)
  p_ids[:, lp - _PROMPT.value:lp - _PROMPT.value + common] = 7
  p_mask = np.zeros((groups, lp), bool)
  p_mask[:, lp - _PROMPT.value:] = True
  lengths = np.clip(rng.normal(_MEAN.value, _MEAN.value / 3, n).astype(int), 1, width)
  c_mask = np.arange(width)[None] < lengths[:, None]
  c_ids = np.where(c_mask, rng.integers(3, vocab, (n, width)), 0).astype(np.int32)
  packed_width = update_lib.packed_bucket(update_lib.packed_width({"loss_mask": c_mask}, g), width, g)
  batch = (np.repeat(p_ids, g, 0), np.repeat(p_mask, g, 0), c_ids, c_mask)
  shared = lp - common if common else 0
  sizes = dict(prefix=common or lp, stream=shared + packed_width, shared=shared, rows_per_group=g,
               width=width)
  print(f"{groups} groups x G={g}, L={width}, prompts {_PROMPT.value} tokens ({common} shared), "
        f"completions mean {lengths.mean():.1f}, packed width {packed_width}; "
        f"auto picks {packed.choose('auto', **sizes)!r}", flush=True)

  grads = {}
  for mode in _MODES.value:
    model = shapes.random_model(dataclasses.replace(config, packed_attention=mode), remat=True,
                                compute_dtype=jnp.dtype(_DTYPE.value))
    graphdef, state = nnx.split(model)

    def loss(state, graphdef=graphdef):
      logp, _ = logprobs.completion_logprobs(nnx.merge(graphdef, state), *batch, rows_per_prompt=g,
                                             packed_width=packed_width, shared_prefix=common)
      return jnp.sum(jnp.where(c_mask, logp, 0))

    grads[mode] = (jax.jit(jax.grad(loss)), state)
    start = time.perf_counter()
    jax.block_until_ready(grads[mode][0](state))
    print(f"{mode}: compile and first call {time.perf_counter() - start:.1f} s", flush=True)
  times = {mode: [] for mode in grads}
  for _ in range(_CALLS.value):
    for mode, (fn, state) in grads.items():
      start = time.perf_counter()
      jax.block_until_ready(fn(state))
      times[mode].append(time.perf_counter() - start)
  base = statistics.median(times["stream"]) if "stream" in times else None
  result = dict(bench="packed_attention", auto=packed.choose("auto", **sizes),
                completion_mean=float(lengths.mean()), packed_width=packed_width, modes={})
  for mode, took in times.items():
    median = statistics.median(took)
    ratio = f", {base / median:.2f}x stream" if base else ""
    pairs = packed.pairs(mode, **sizes)
    print(f"{mode}: median {median:.3g} s per call ({', '.join(f'{t:.3g}' for t in took)}){ratio}; "
          f"{pairs:,} query-key pairs a group")
    result["modes"][mode] = dict(median_s=median, pairs=pairs)
  print("RESULT " + json.dumps(result))


if __name__ == "__main__":
  app.run(main)
