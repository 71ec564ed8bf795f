"""Device meshes with the project's three named axes: data, fsdp and tensor.

`data` replicates parameters and splits the batch; `fsdp` splits the batch *and* the parameters'
embedding dimension (ZeRO-3 style, gathered on use); `tensor` splits heads, MLP width and vocabulary
(Megatron style). Which logical dimension goes to which axis is decided by rules (see `rules.py`).
"""

from collections.abc import Mapping, Sequence
import math
from typing import Any

import jax
import numpy as np

MESH_AXES = ("data", "fsdp", "tensor")
DEFAULT_MESH_AXES: Mapping[str, int] = {"data": 1, "fsdp": -1, "tensor": 1}


def _as_dict(axes: Any) -> dict[str, int]:
  """Accepts a Mapping, an ml_collections.ConfigDict or a sequence of (name, size) pairs."""
  if hasattr(axes, "items"):
    pairs = list(axes.items())
  else:
    pairs = list(axes)
  out = {}
  for pair in pairs:
    if len(pair) != 2:
      raise ValueError(f"mesh axes must be (name, size) pairs, got {pair!r} in {axes!r}")
    name, size = pair
    if name in out:
      raise ValueError(f"mesh axis {name!r} is given twice in {axes!r}")
    out[str(name)] = size
  return out


def resolve_axis_sizes(axes: Mapping[str, int], num_devices: int) -> dict[str, int]:
  """Replaces a single -1 by the devices left over and checks the product equals `num_devices`.

  Args:
    axes: mesh axis name -> size; sizes are positive ints, at most one may be -1.
    num_devices: how many devices the mesh must cover.

  Returns:
    name -> size with every size positive and the product equal to `num_devices`.

  Raises:
    ValueError: on an unknown axis name, a non-positive size, two -1s, or sizes that do not multiply
      to the device count.
  """
  axes = _as_dict(axes)
  if not axes:
    raise ValueError(f"mesh needs at least one axis; use e.g. {dict(DEFAULT_MESH_AXES)}")
  unknown = [n for n in axes if n not in MESH_AXES]
  if unknown:
    raise ValueError(f"unknown mesh axis {unknown} in {axes}; the mesh axes are {MESH_AXES}")
  for name, size in axes.items():
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or (size < 1 and size != -1):
      raise ValueError(f"mesh axis {name!r} has size {size!r}; use a positive int or -1 (= the "
                       "devices left over)")
  wildcards = [n for n, s in axes.items() if s == -1]
  if len(wildcards) > 1:
    raise ValueError(f"only one mesh axis may be -1, got {wildcards} in {axes}")
  fixed = math.prod(int(s) for s in axes.values() if s != -1)
  if wildcards:
    if num_devices % fixed:
      raise ValueError(f"mesh {axes}: the fixed axes need a multiple of {fixed} devices but there are "
                       f"{num_devices}; change the sizes so their product divides {num_devices}")
    axes[wildcards[0]] = num_devices // fixed
  sizes = {n: int(s) for n, s in axes.items()}
  if math.prod(sizes.values()) != num_devices:
    raise ValueError(f"mesh {sizes} covers {math.prod(sizes.values())} devices but there are "
                     f"{num_devices}; make the sizes multiply to {num_devices} or set one axis to -1")
  return sizes


def make_mesh(axes: Mapping[str, int] | None = None,
              devices: Sequence[jax.Device] | None = None) -> jax.sharding.Mesh:
  """Builds a mesh over `devices` (default: all global devices) with Auto (classic GSPMD) axes.

  Args:
    axes: mesh axis name -> size, in mesh order (outermost first; keep `tensor` last so it maps to
      the fastest interconnect). Names from ("data", "fsdp", "tensor"); -1 means all remaining devices.
      Default {"data": 1, "fsdp": -1, "tensor": 1}. Axes left out do not exist in the mesh, and rules
      naming them are ignored.
    devices: the devices to lay out; default `jax.devices()` (all processes' devices).

  Returns:
    A `jax.sharding.Mesh` with every axis of type `AxisType.Auto`.
  """
  if axes is None:
    axes = DEFAULT_MESH_AXES
  devices = list(jax.devices() if devices is None else devices)
  sizes = resolve_axis_sizes(axes, len(devices))
  names = tuple(sizes)
  shape = tuple(sizes.values())
  axis_types = (jax.sharding.AxisType.Auto,) * len(names)
  try:
    # jax.make_mesh orders devices to follow the physical topology (TPU torus, GPU NVLink islands).
    return jax.make_mesh(shape, names, axis_types=axis_types, devices=devices)
  except (ValueError, NotImplementedError, AssertionError):
    # Topologies it cannot map (e.g. a device subset) fall back to the given device order.
    return jax.sharding.Mesh(np.asarray(devices, dtype=object).reshape(shape), names,
                             axis_types=axis_types)


def mesh_from_config(axes: Any) -> jax.sharding.Mesh | None:
  """A run config's mesh (config.mesh): over the first prod(sizes) devices (-1 = all remaining), or
  None when that is one device."""
  axes = {k: int(v) for k, v in _as_dict(axes).items()}
  if -1 not in axes.values():
    size = int(np.prod(list(axes.values())))
    if size == 1:
      return None
    return make_mesh(axes, devices=jax.devices()[:size])
  return make_mesh(axes) if jax.device_count() > 1 else None
