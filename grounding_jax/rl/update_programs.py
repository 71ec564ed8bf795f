"""The gradient programs a run compiles, listed from its configuration and compiled ahead of step 1.

  shapes = update_shapes(prompt_lengths, max_new_tokens=256, length_multiple=32, rows_per_prompt=8)
  pending = compile_update_programs(train_step, params, rest, hosts, shapes, settings=settings,
                                    micro_batch_size=16, threads=4)
  ... sample step 1 ...
  concurrent.futures.wait(pending)         # step 1's update then compiles nothing

The update runs each micro-batch at (prompt width, completion width, packed width) rounded up to the
buckets of update.py, so the set is known before the first rollout: the prompt buckets of the
dataset's prompts x the completion buckets up to max_new_tokens x the packed buckets of each.
Compiling ahead populates jax's own caches (and the persistent compilation cache, when enabled), so
the trainer's later call with those shapes only dispatches. The compiles run in threads (XLA
releases the GIL) while the caller goes on, e.g. sampling step 1 on the accelerator.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import time
from typing import Callable, Iterable

import jax
import numpy as np

from grounding_jax.rl import update as update_lib

# The host dtypes of the update batch, as the trainer builds it (rollout ids int32, masks bool,
# advantages and log-probs float32): a program is compiled for exactly these.
_DTYPES = {"prompt_ids": np.int32, "prompt_mask": bool, "completion_ids": np.int32,
           "loss_mask": bool, "advantages": np.float32, "old_logp": np.float32,
           "ref_logp": np.float32, "sampler_logp": np.float32}


@dataclasses.dataclass(frozen=True, order=True)
class UpdateShape:
  """The widths of one gradient program's micro-batch: prompt columns, completion columns, the
  packed completion columns per group (None when prompts are not shared), and the leading tokens
  all its prompts share, run once (update.common_prefix; 0 = none)."""
  prompt_width: int
  completion_width: int
  packed_width: int | None
  shared_prefix: int = 0


def update_shapes(prompt_lengths: Iterable[int], *, max_new_tokens: int, length_multiple: int,
                  rows_per_prompt: int, shared_prefix: int = 0) -> list[UpdateShape]:
  """Every shape the update can run for prompts of these token lengths (sorted).

  Args:
    prompt_lengths: the dataset's prompt lengths in tokens (after any max_prompt_tokens cut).
    max_new_tokens: rollout.max_new_tokens.
    length_multiple: update_loop.length_multiple (0: the sampler's widths, untrimmed).
    rows_per_prompt: UpdateSettings.rows_per_prompt (1 = prompts not shared: no packed width).
    shared_prefix: the leading tokens the prompts share (update.common_prefix; 0 = none).
  Returns:
    per prompt bucket, completion buckets x packed buckets shapes (e.g. 3 x 4 for 128 new
    tokens, multiple 32, G = 4).
  """
  prompts = sorted({update_lib.prompt_bucket(int(n)) for n in prompt_lengths})
  if length_multiple:
    completions = sorted({min(update_lib.completion_bucket(n, length_multiple), max_new_tokens)
                          for n in range(1, max_new_tokens + 1)})
  else:
    completions = [max_new_tokens]
  shapes = []
  for lp in prompts:
    for lc in completions:
      packed = ({update_lib.packed_bucket(need, lc, rows_per_prompt)
                 for need in range(1, rows_per_prompt * lc + 1)} if rows_per_prompt > 1 else {None})
      shapes += [UpdateShape(lp, lc, w, shared_prefix)
                 for w in sorted(packed, key=lambda w: w or 0)]
  return shapes


def batch_keys(settings: update_lib.UpdateSettings, sampler_logp: bool = False) -> tuple[str, ...]:
  """The keys of the trainer's update batch under `settings`: old log-probs unless on-policy,
  reference log-probs when the KL term is on, and the sampler's log-probs when the update's loss
  pass measures the log-prob gap (`sampler_logp`: rl/step.py keeps them unless the old log-probs
  are recomputed; a program lowered without them is not the trainer's)."""
  keys = ("prompt_ids", "prompt_mask", "completion_ids", "loss_mask", "advantages")
  keys += () if settings.on_policy else ("old_logp",)
  keys += ("ref_logp",) if settings.loss.kl_coef else ()
  return keys + (("sampler_logp",) if sampler_logp else ())


def compile_update_programs(train_step: Callable, params, rest, hosts, shapes: Iterable[UpdateShape],
                            *, settings: update_lib.UpdateSettings, micro_batch_size: int,
                            num_micro: int = 1, threads: int = 1,
                            sampler_logp: bool = False) -> list[concurrent.futures.Future]:
  """Starts compiling train_step's gradient program for each shape; returns one future per shape
  (its result: the seconds that compile took).

  Each program is traced and lowered here, on a zero micro-batch placed as the trainer places its
  batches (hosts.device_batch, then indexed as train_step does), so its arguments' shapes,
  dtypes and shardings are the real call's; only the XLA compiles run in the threads.

  Args:
    train_step: from update.make_train_step (its `accumulate` program is compiled).
    params, rest: the policy's split state (as passed to train_step).
    hosts: the trainer's host_batch.HostBatches (its mesh and placement).
    shapes: from update_shapes (or a subset, e.g. the widest completion bucket only).
    settings: the update's settings (which batch keys exist).
    micro_batch_size: rows per micro-batch on this host.
    num_micro: micro-batches per mini-batch (rows of a mini-batch / micro_batch_size): the eager
      programs that split a mini-batch into micro-batches are compiled for it too.
    threads: concurrent compiles.
    sampler_logp: the batch carries the sampler's log-probs (batch_keys).
  """
  accumulate = train_step.accumulate
  keys = batch_keys(settings, sampler_logp)
  pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads,
                                               thread_name_prefix="update_programs")
  futures = []
  for shape in shapes:
    with hosts.context():
      batch = zero_batch(hosts, shape, keys, micro_batch_size, num_micro)
      mb = update_lib.micro_batches(batch)[0]
      lowered = accumulate.lower(params, rest, params, mb, packed_width=shape.packed_width,
                                 shared_prefix=shape.shared_prefix)
    futures.append(pool.submit(_timed_compile, lowered))
  pool.shutdown(wait=False)
  return futures


def compile_stage(view, settings: update_lib.UpdateSettings, train_step: Callable, params, rest,
                  hosts, prompt_lengths: Iterable[int], sampler_logp: bool, widest_only: bool = False,
                  skip: Iterable[UpdateShape] = (), shared_prefix: int = 0
                  ) -> dict[UpdateShape, concurrent.futures.Future]:
  """compile_update_programs for the shapes of a trainer stage (view: its rl config view), in up
  to 4 threads leaving one core to the caller: every shape its prompts can run, or with
  `widest_only` the widest one (the prompts' widest bucket, widest completion and packed widths),
  less those in `skip` (built already), with the prompts' `shared_prefix` (update.common_prefix);
  returns {shape: future}."""
  r, u = view.rollout, view.update_loop
  shapes = update_shapes(prompt_lengths, max_new_tokens=r.max_new_tokens,
                         length_multiple=u.length_multiple,
                         rows_per_prompt=settings.rows_per_prompt, shared_prefix=shared_prefix)
  skip = set(skip)
  shapes = [s for s in ([max(shapes)] if widest_only else shapes) if s not in skip]
  if not shapes:
    return {}
  rows = r.prompts_per_step // jax.process_count() * r.group_size // u.num_minibatches
  futures = compile_update_programs(
      train_step, params, rest, hosts, shapes, settings=settings,
      micro_batch_size=u.micro_batch_size, num_micro=max(rows // u.micro_batch_size, 1),
      threads=max(1, min(4, (os.cpu_count() or 1) - 1)), sampler_logp=sampler_logp)
  return dict(zip(shapes, futures))


def zero_batch(hosts, shape: UpdateShape, keys: Iterable[str], micro_batch_size: int,
               num_micro: int = 1) -> dict:
  """A zero update batch of `shape` placed as the trainer places its batches (hosts.device_batch:
  [num_micro, micro_batch_size x hosts, ...]), so programs lowered on it are the real call's."""
  host = {}
  for k in keys:
    columns = (() if k == "advantages" else
               (shape.prompt_width,) if k.startswith("prompt") else (shape.completion_width,))
    host[k] = np.zeros((num_micro * micro_batch_size,) + columns, _DTYPES[k])
  return hosts.device_batch(host, micro_batch_size)


def _timed_compile(lowered) -> float:
  start = time.perf_counter()
  lowered.compile()
  return time.perf_counter() - start
