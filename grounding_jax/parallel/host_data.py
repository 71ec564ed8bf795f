"""Host-local numpy rows <-> one global jax.Array, the same code on one process and on a pod.

In a multi-host run every process holds only its own rows of a batch (its prompts, its completions,
its rewards). The global batch is the process-major concatenation of those rows: process p's n local
rows are global rows [p * n, (p + 1) * n) along the batch axis.

  ids = host_local_to_global(local_ids, ("batch", "length"), mesh)   # [H * n, L] global array
  out = global_to_host_local(jitted(ids))                            # this host's [n, ...] rows
  everyone = gather_hosts(local_rewards)                             # [H * n] on every host

On one process these are `jax.device_put`, `jax.device_get` and the identity. Across processes the
fast path (each process's devices hold exactly its own rows, the usual batch-over-(data, fsdp) layout)
moves no data between hosts; any other layout (rows replicated over hosts, a mesh whose device order
does not follow process order) falls back to an all-gather, which is slower but still correct.
"""

from __future__ import annotations

from typing import Sequence

import jax
from jax.experimental import multihost_utils
import numpy as np

from grounding_jax.parallel import rules as rules_lib


def _rows_of_process(sharding: jax.sharding.Sharding, shape: Sequence[int], axis: int) -> set[int]:
  """Indices along `axis` held by this process's devices (for `shape`)."""
  rows: set[int] = set()
  for index in sharding.addressable_devices_indices_map(tuple(shape)).values():
    rows.update(range(*index[axis].indices(shape[axis])))
  return rows


def spanned_processes(mesh_or_sharding) -> int:
  """How many processes own devices of a Mesh or Sharding (1 = a host-local layout); None -> 1."""
  if mesh_or_sharding is None:
    return 1
  if isinstance(mesh_or_sharding, jax.sharding.Mesh):
    devices = mesh_or_sharding.devices.flat
  else:
    devices = mesh_or_sharding.device_set
  return len({d.process_index for d in devices})


def gather_hosts(x, axis: int = 0) -> np.ndarray:
  """Every process's `x` concatenated in process order along `axis` (the identity on one process).

  Args:
    x: a host-local numpy-convertible array; same shape and dtype on every process.
    axis: the axis to concatenate along.

  Returns:
    numpy array with x.shape[axis] * process_count entries along `axis`; exact for every dtype (the
    bytes travel, so float64 rewards are not rounded to float32).
  """
  x = np.asarray(x)
  if jax.process_count() == 1:
    return x
  moved = np.ascontiguousarray(np.moveaxis(x, axis, 0))
  as_bytes = moved.reshape(moved.shape[0] if moved.ndim else 1, -1).view(np.uint8)
  gathered = np.asarray(multihost_utils.process_allgather(as_bytes, tiled=False))  # [H, n, bytes]
  out = gathered.reshape(-1, as_bytes.shape[1]).view(x.dtype)
  out = out.reshape((jax.process_count() * (moved.shape[0] if moved.ndim else 1),) + moved.shape[1:])
  return np.moveaxis(out, 0, axis) if moved.ndim else out


def host_local_to_global(local, sharding_or_names, mesh: jax.sharding.Mesh | None = None, *,
                         batch_axis: int = 0, rules=None) -> jax.Array:
  """Places this host's rows as its slice of one global array.

  Args:
    local: host-local data [.., n, ..] with the host's n rows on `batch_axis`; the other dimensions
      are the same on every host.
    sharding_or_names: a `jax.sharding.Sharding` of the GLOBAL array, or one logical axis name per
      dimension (then `mesh` is required and the sharding is `logical_sharding(names, global_shape)`).
    mesh: the mesh for logical names.
    batch_axis: the axis whose rows are split over hosts.
    rules: logical-axis rules; default DEFAULT_RULES.

  Returns:
    jax.Array of shape local.shape with dimension `batch_axis` multiplied by the process count;
    process p's rows are [p * n, (p + 1) * n). On one process (or a mesh of this host's devices
    only): `jax.device_put(local, sharding)`.
  """
  local = np.asarray(local)
  given = isinstance(sharding_or_names, jax.sharding.Sharding)
  if not given and mesh is None:
    raise ValueError(f"host_local_to_global: logical names {sharding_or_names!r} need mesh=")
  hosts = spanned_processes(sharding_or_names if given else mesh)
  global_shape = list(local.shape)
  global_shape[batch_axis] *= hosts
  global_shape = tuple(global_shape)
  sharding = sharding_or_names if given else rules_lib.logical_sharding(
      sharding_or_names, global_shape, mesh, rules)
  if hosts == 1:  # one process, or a mesh of this host's devices only
    return jax.device_put(local, sharding)
  n = local.shape[batch_axis]
  start = jax.process_index() * n
  if _rows_of_process(sharding, global_shape, batch_axis) == set(range(start, start + n)):
    return jax.make_array_from_process_local_data(sharding, local, global_shape)
  # This host's devices need rows of other hosts (replicated or permuted layout): share everything.
  full = gather_hosts(local, axis=batch_axis)
  return jax.make_array_from_callback(global_shape, sharding, lambda index: full[index])


def global_to_host_local(array, *, batch_axis: int = 0) -> np.ndarray:
  """This host's rows [p * n, (p + 1) * n) of a global array, n = rows / process_count, as numpy.

  Scalars and single-process arrays come back whole (`jax.device_get`). Reads only local shards when
  this host's devices hold its rows; otherwise all-gathers first.
  """
  if not isinstance(array, jax.Array) or jax.process_count() == 1 or array.is_fully_addressable:
    return np.asarray(jax.device_get(array))
  if array.ndim == 0:
    return np.asarray(array.addressable_data(0))
  hosts = jax.process_count()
  total = array.shape[batch_axis]
  if total % hosts:
    raise ValueError(f"global_to_host_local: {total} rows on axis {batch_axis} of {array.shape} do "
                     f"not split evenly over {hosts} processes")
  n = total // hosts
  start = jax.process_index() * n
  shape = list(array.shape)
  shape[batch_axis] = n
  out = np.empty(shape, array.dtype)
  covered = np.zeros(shape, bool)
  for shard in array.addressable_shards:
    lo, hi, _ = shard.index[batch_axis].indices(total)
    lo_c, hi_c = max(lo, start), min(hi, start + n)
    if lo_c >= hi_c:
      continue
    src = [slice(None)] * array.ndim  # the shard's own data, cut to this host's rows
    dst = list(shard.index)           # other axes: the shard's place in the full extent
    src[batch_axis] = slice(lo_c - lo, hi_c - lo)
    dst[batch_axis] = slice(lo_c - start, hi_c - start)
    out[tuple(dst)] = np.asarray(shard.data)[tuple(src)]
    covered[tuple(dst)] = True
  if covered.all():
    return out
  full = np.asarray(multihost_utils.process_allgather(array, tiled=True))
  return np.take(full, np.arange(start, start + n), axis=batch_axis)
