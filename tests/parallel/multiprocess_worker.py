"""One process of the two-process CPU test (tests/parallel/test_multiprocess.py); not a test itself.

usage: python multiprocess_worker.py COORDINATOR NUM_PROCESSES PROCESS_ID CHECKPOINT OUT.npy
Each process has 4 CPU devices; together they form one 8-device mesh (fsdp 4 x tensor 2), load the
checkpoint sharded across both, feed only their own rows of the batch, run the sharded forward and
gather the logits. Process 0 writes them to OUT.npy.
"""

import os
import sys
import time

_START = time.monotonic()

if __name__ == "__main__":  # only as a worker: the test imports padded_batch from here too
  os.environ["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=4 "
                             + os.environ.get("GROUNDING_JAX_TEST_XLA_FLAGS", ""))
  os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from flax import nnx  # noqa: E402
import numpy as np  # noqa: E402

from grounding_jax import parallel  # noqa: E402
from grounding_jax.models import load_pretrained  # noqa: E402


def padded_batch(vocab: int, batch: int = 8, length: int = 7):
  """The same left-padded batch in every process (and in the single-process reference)."""
  rng = np.random.default_rng(0)
  ids = rng.integers(3, vocab, size=(batch, length)).astype(np.int32)
  lengths = np.array([7, 3, 5, 1, 7, 6, 2, 4])[:batch]
  mask = np.arange(length)[None, :] >= (length - lengths)[:, None]
  return np.where(mask, ids, 0).astype(np.int32), mask


def _log(process_id, message):
  print(f"[{time.monotonic() - _START:6.1f}s] process {process_id}: {message}", flush=True)


def main(coordinator, num_processes, process_id, checkpoint, out_path):
  _log(process_id, "imported")
  parallel.distributed_initialize(coordinator, int(num_processes), int(process_id),
                                  initialization_timeout=60)
  _log(process_id, "joined")
  parallel.distributed_initialize(coordinator, int(num_processes), int(process_id))  # idempotent
  assert jax.process_count() == int(num_processes), jax.process_count()
  assert jax.device_count() == 4 * int(num_processes), jax.devices()
  mesh = parallel.make_mesh({"data": 1, "fsdp": 4, "tensor": 2})
  model = load_pretrained(checkpoint, mesh=mesh)
  graphdef, state = nnx.split(model)
  _log(process_id, "loaded")
  # Parameters are split across both processes, not copied: each holds only its shards.
  embed = next(v.get_value() for _, v in nnx.to_flat_state(state)
               if parallel.logical_names(v) == ("vocab", "embed"))
  assert not embed.is_fully_addressable and not embed.sharding.is_fully_replicated
  assert {s.data.shape for s in embed.addressable_shards} == {(embed.shape[0] // 2,
                                                               embed.shape[1] // 4)}

  ids, mask = padded_batch(model.config.vocab_size)
  batch_sharding = parallel.logical_sharding(("batch", "length"), ids.shape, mesh)
  # Each host feeds only the rows its devices hold, as a per-host input pipeline would.
  rows = sorted({idx[0].start or 0 for idx in
                 batch_sharding.addressable_devices_indices_map(ids.shape).values()})
  per_device = ids.shape[0] // 4
  local = np.concatenate([np.arange(r, r + per_device) for r in rows])
  ids_g = jax.make_array_from_process_local_data(batch_sharding, ids[local], ids.shape)
  mask_g = jax.make_array_from_process_local_data(batch_sharding, mask[local], mask.shape)

  def forward(state, ids, mask):
    return nnx.merge(graphdef, state)(ids, mask)

  out_sharding = parallel.logical_sharding(("batch", "length", "vocab"),
                                           ids.shape + (model.config.vocab_size,), mesh)
  jitted = jax.jit(forward, in_shardings=(parallel.state_shardings(state, mesh), batch_sharding,
                                          batch_sharding), out_shardings=out_sharding)
  with parallel.use_mesh(mesh):
    logits = jitted(state, ids_g, mask_g)
  _log(process_id, "forward done")
  gathered = np.asarray(multihost_utils.process_allgather(logits, tiled=True))
  if int(process_id) == 0:
    np.save(out_path, gathered)

  # Re-sharding a model already spread over both processes onto another layout keeps its values.
  before = np.asarray(multihost_utils.process_allgather(embed, tiled=True))
  parallel.shard_model(model, parallel.make_mesh({"data": 2, "fsdp": 2, "tensor": 2}))
  moved = next(v.get_value() for _, v in nnx.to_flat_state(nnx.state(model))
               if parallel.logical_names(v) == ("vocab", "embed"))
  assert {s.data.shape for s in moved.addressable_shards} == {(embed.shape[0] // 2,
                                                               embed.shape[1] // 2)}
  np.testing.assert_array_equal(np.asarray(multihost_utils.process_allgather(moved, tiled=True)),
                                before)
  _log(process_id, f"local rows {local.tolist()}, logits {gathered.shape}, re-sharded")
  jax.distributed.shutdown()


if __name__ == "__main__":
  main(*sys.argv[1:])
