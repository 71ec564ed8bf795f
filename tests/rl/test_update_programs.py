"""The update's shape set is small and known ahead, and compiling it ahead leaves step 1's update
nothing to compile."""

import collections
import concurrent.futures

import jax
import numpy as np
import optax

from grounding_jax import models
from grounding_jax.rl import host_batch
from grounding_jax.rl import losses
from grounding_jax.rl import update
from grounding_jax.rl import update_programs


def test_shape_set_is_the_buckets_product():
  shapes = update_programs.update_shapes([205, 218, 300], max_new_tokens=128, length_multiple=32,
                                         rows_per_prompt=4)
  assert {s.prompt_width for s in shapes} == {224, 320}
  assert {s.completion_width for s in shapes} == {32, 64, 128}
  assert len(shapes) == 2 * 3 * 4  # per prompt bucket: 3 completion x 4 packed widths
  assert {s.packed_width for s in shapes if s.completion_width == 128} == {128, 256, 384, 512}
  unshared = update_programs.update_shapes([100], max_new_tokens=100, length_multiple=32,
                                           rows_per_prompt=1)
  assert [(s.completion_width, s.packed_width) for s in unshared] == [(32, None), (64, None),
                                                                      (100, None)]


def _rollout_batch(rng, lp, lc, n=8, group_size=4):
  lengths = rng.integers(1, lc + 1, n)
  loss_mask = np.arange(lc)[None] < lengths[:, None]
  prompt_mask = np.repeat(np.arange(lp)[None] >= lp - rng.integers(1, lp + 1, n // group_size)[:, None],
                          group_size, axis=0)
  return dict(prompt_ids=np.where(prompt_mask, rng.integers(3, 96, (n, lp)), 0).astype(np.int32),
              prompt_mask=prompt_mask,
              completion_ids=np.where(loss_mask, rng.integers(3, 96, (n, lc)), 0).astype(np.int32),
              loss_mask=loss_mask, advantages=rng.normal(size=n).astype(np.float32))


def test_compiled_ahead_programs_are_not_compiled_again(tiny_checkpoint):
  settings = update.UpdateSettings(loss=losses.PolicyLossConfig(), chunk_size=48, on_policy=True,
                                   rows_per_prompt=4)
  model = models.load_pretrained(tiny_checkpoint("llama"))
  graphdef, params, rest = update.split_model(model)
  optimizer = optax.sgd(1e-3)
  train_step = update.make_train_step(graphdef, optimizer, settings)
  hosts = host_batch.HostBatches(None)
  rng = np.random.default_rng(0)

  def run(batch):
    batch = hosts.trim(batch, 8)
    widths = hosts.packed_widths(batch, 4, 4)
    return train_step(params, rest, optimizer.init(params), hosts.device_batch(batch, 4),
                      packed_width=widths), batch, widths

  # Step "0" compiles the optimizer's apply program and the eager helpers on a first shape.
  (new_params, _, _), _, _ = run(_rollout_batch(rng, 12, 10))
  params = new_params
  batch = _rollout_batch(rng, 20, 16)
  trimmed = hosts.trim(batch, 8)
  shapes = {update_programs.UpdateShape(trimmed["prompt_ids"].shape[1],
                                        trimmed["loss_mask"].shape[1], w)
            for w in hosts.packed_widths(trimmed, 4, 4)}
  listed = update_programs.update_shapes(batch["prompt_mask"].sum(axis=1), max_new_tokens=16,
                                         length_multiple=8, rows_per_prompt=4)
  assert shapes <= set(listed)
  pending = update_programs.compile_update_programs(train_step, params, rest, hosts, sorted(shapes),
                                                    settings=settings, micro_batch_size=4, num_micro=2,
                                                    threads=2)
  assert all(f.result() >= 0 for f in concurrent.futures.as_completed(pending))

  compiles = collections.Counter()
  listener = lambda event, duration, **kw: compiles.update([event])
  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    (_, _, metrics), _, _ = run(batch)
    jax.block_until_ready(metrics)
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)
  assert compiles["/jax/core/compile/backend_compile_duration"] == 0, compiles
  assert np.isfinite(float(metrics["loss"]))
