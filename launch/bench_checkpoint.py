r"""Saving and restoring a training state: our checkpoints (arrays as they are) vs orbax's default
(zstd-compressed arrays), through the same Checkpointer (checksums verified on restore).

  python launch/bench_checkpoint.py                   # SmolLM2-135M: ~1.6 GB, ~2 min on CPU
  python launch/bench_checkpoint.py --model_shape=qwen2.5-1.5b        # ~18 GB: a GPU host
  python launch/bench_checkpoint.py --state_from=/runs/x/checkpoints --step=16   # a run's state

The state is what a GRPO run checkpoints: float32 weights and AdamW's two moments (and the PRNG
key). By default the weights are SmolLM2-135M-Instruct's (launch/prepare_smollm2.py) or a random
model of --model_shape, and the moments those of one AdamW update with a random gradient; with
--state_from, the arrays of a saved step (any Checkpointer directory, e.g. a learning check's
<workdir>/run/checkpoints) are read once and timed as they are. Each setting saves into its own
directory and restores from it --reps times, alternating, after one untimed round, onto the
default device as a resumed one-device run does; the table gives the medians, the bytes on disk
and the ratio of the peer's seconds to ours. The restore reads files the save has just written
(the page cache may hold them, as after a preemption on the same host; a new host reads the disk).
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time

from absl import app
from absl import flags

_SHAPE = flags.DEFINE_string("model_shape", "", "A models/shapes.py name (random weights); '' = "
                             "SmolLM2-135M-Instruct's weights.")
_STATE_FROM = flags.DEFINE_string("state_from", "", "A Checkpointer directory whose step's arrays "
                                  "are the state to time.")
_STEP = flags.DEFINE_integer("step", None, "The step of --state_from (default: its latest).")
_REPS = flags.DEFINE_integer("reps", 3, "Saves and restores per setting (medians reported).")
_DIR = flags.DEFINE_string("dir", "", "Where the checkpoints are written (default: a temporary "
                           "folder, removed after).")


def _state():
  """The training state: {"params", "opt_state", "rng"} (float32 weights, AdamW moments)."""
  import jax
  import numpy as np
  import optax
  from flax import nnx
  from grounding_jax import models
  from grounding_jax.models import gguf_convert, shapes
  if _STATE_FROM.value:
    import orbax.checkpoint as ocp
    step = _STEP.value
    if step is None:
      from grounding_jax import checkpoints
      step = checkpoints.latest_step(_STATE_FROM.value)
    where = f"{_STATE_FROM.value}/{step}/arrays"
    saved = ocp.PyTreeCheckpointer().metadata(where)
    saved = getattr(saved, "item_metadata", saved)
    target = {k: np.empty(v.shape, v.dtype) for k, v in saved.items()}
    return ocp.PyTreeCheckpointer().restore(where, args=ocp.args.PyTreeRestore(
        target, restore_args=ocp.checkpoint_utils.construct_restore_args(target))), where
  if _SHAPE.value:
    model, what = shapes.random_model(_SHAPE.value), f"random {_SHAPE.value}"
  else:
    model = models.load_pretrained(str(gguf_convert.prepare_smollm2()))
    what = "SmolLM2-135M-Instruct"
  params = nnx.state(model, nnx.Param)
  opt = optax.adamw(1e-5)
  leaves, treedef = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(1), len(leaves))
  grads = treedef.unflatten([1e-3 * jax.random.normal(k, x.shape, x.dtype)
                             for k, x in zip(keys, leaves)])
  _, opt_state = opt.update(grads, opt.init(params), params)
  state = {"params": params, "opt_state": opt_state,
           "rng": np.asarray(jax.random.key_data(jax.random.key(0)))}
  return state, f"{what} float32 weights + AdamW moments after one update (random gradient)"


def _nbytes(tree) -> int:
  import jax
  return int(sum(x.nbytes for x in jax.tree.leaves(tree)))


def _disk(path) -> int:
  import pathlib
  return sum(p.stat().st_size for p in pathlib.Path(path).rglob("*") if p.is_file())


def main(argv):
  del argv
  import jax
  from grounding_jax import checkpoints
  state, what = _state()
  root = _DIR.value or tempfile.mkdtemp(prefix="bench_checkpoint_")
  settings = {"ours (compress=False)": False, "orbax default (zstd)": True}
  seconds = {name: {"save": [], "restore": []} for name in settings}
  sizes = {}
  try:
    for rep in range(-1, _REPS.value):  # rep -1: a warm-up (the checksum programs compile), untimed
      for name, compress in settings.items():
        ck = checkpoints.Checkpointer(f"{root}/{compress}", max_to_keep=1, compress=compress)
        t = time.perf_counter()
        ck.save(rep + 2, state)
        saved = time.perf_counter() - t
        target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
        t = time.perf_counter()
        restored, _ = ck.restore(target, rep + 2)
        jax.block_until_ready(restored)
        took = time.perf_counter() - t
        print(f"{name}: save {saved:.2f} s, restore {took:.2f} s"
              + (" (the untimed warm-up round)" if rep < 0 else ""), flush=True)
        if rep >= 0:
          seconds[name]["save"].append(saved)
          seconds[name]["restore"].append(took)
        del restored
        sizes[name] = _disk(f"{root}/{compress}/{rep + 2}")
        ck.close()
  finally:
    if not _DIR.value:
      shutil.rmtree(root, ignore_errors=True)
  med = {n: {k: statistics.median(v) for k, v in s.items()} for n, s in seconds.items()}
  ours, peer = med["ours (compress=False)"], med["orbax default (zstd)"]
  print(f"\nstate: {what}; {_nbytes(state) / 2**30:.2f} GiB in memory; device "
        f"{jax.devices()[0].device_kind}; medians of {_REPS.value}\n")
  print("| setting | save s | restore s | on disk GiB | every save s | every restore s |")
  print("|---|---|---|---|---|---|")
  for name in settings:
    s = seconds[name]
    print(f"| {name} | {med[name]['save']:.2f} | {med[name]['restore']:.2f} | "
          f"{sizes[name] / 2**30:.2f} | {', '.join(f'{x:.2f}' for x in s['save'])} | "
          f"{', '.join(f'{x:.2f}' for x in s['restore'])} |")
  print(f"\nours vs orbax's default: save {peer['save'] / ours['save']:.2f}x, restore "
        f"{peer['restore'] / ours['restore']:.2f}x faster; "
        f"{sizes['ours (compress=False)'] / sizes['orbax default (zstd)']:.2f}x the bytes on disk")
  print("RESULT " + json.dumps({"state": what, "state_bytes": _nbytes(state), "reps": _REPS.value,
                                "ours": {**ours, "disk_bytes": sizes["ours (compress=False)"]},
                                "orbax_zstd": {**peer, "disk_bytes": sizes["orbax default (zstd)"]},
                                "save_ratio": peer["save"] / ours["save"],
                                "restore_ratio": peer["restore"] / ours["restore"]}))


if __name__ == "__main__":
  app.run(main)
