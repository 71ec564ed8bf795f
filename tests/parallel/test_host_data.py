"""host_data on one process (8 CPU devices): the helpers are device_put / device_get / identity.

The two-process behaviour (each host's rows, the all-gather fallback) is checked by
tests/rl/test_multihost.py, which runs the same helpers in two processes.
"""

import jax
import numpy as np

from grounding_jax import parallel


def test_host_local_to_global_is_device_put_on_one_process():
  mesh = parallel.make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
  # batch is the middle axis, as in the trainer's [num_micro, micro_batch, L] layout.
  x = np.arange(3 * 8 * 5, dtype=np.float32).reshape(3, 8, 5)
  names = (None, "batch", None)
  got = parallel.host_local_to_global(x, names, mesh, batch_axis=1)
  want = jax.device_put(x, parallel.logical_sharding(names, x.shape, mesh))
  assert got.sharding == want.sharding
  assert got.sharding.spec == jax.sharding.PartitionSpec(None, ("data", "fsdp"), None)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  # A ready-made sharding works too, and reading back returns the whole (single-host) batch.
  again = parallel.host_local_to_global(x, want.sharding)
  np.testing.assert_array_equal(parallel.global_to_host_local(again, batch_axis=1), x)
  assert parallel.global_to_host_local(jax.numpy.float32(2.5)) == 2.5


def test_gather_hosts_is_identity_on_one_process():
  r = np.array([0.1, 0.2, 1 / 3], np.float64)
  out = parallel.gather_hosts(r)
  assert out.dtype == np.float64
  np.testing.assert_array_equal(out, r)


def test_logical_names_need_a_mesh():
  try:
    parallel.host_local_to_global(np.zeros((2, 2)), ("batch", None))
  except ValueError as e:
    assert "mesh=" in str(e)
  else:
    raise AssertionError("expected ValueError")
