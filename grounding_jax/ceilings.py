"""What one device achieves, measured now: the denominators of a benchmark's roofline fractions
(a datasheet's peak is rarely reached by any program). perf.py counts what a program does.

  c = ceilings.measure_ceilings()   # copy bandwidth, bf16 matmul rate, the host link, now
  c.fractions(flops, seconds)       # MFU against the measured matmul and the datasheet
  c.roofline(perf.decode_read_bytes(config, stats, 2), step_seconds)   # decode vs bandwidth
"""

from __future__ import annotations

import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from grounding_jax import perf


@dataclasses.dataclass(frozen=True)
class Ceilings:
  """What one device achieves, measured in this process: the denominators of a benchmark's
  roofline fractions (a datasheet's peak is rarely reached by any program).

  Attributes:
    device_kind: jax's name of the device.
    bandwidth: bytes/s of a large jitted device-to-device copy (read + write counted).
    matmul_flops: FLOP/s of a large jitted square matmul in `dtype` on random data.
    dtype: the matmul's dtype name.
    datasheet_flops: perf.PEAK_FLOPS' dense bf16 FLOP/s, None where unknown (CPU).
    host_to_device, device_to_host: bytes/s of a host numpy array put on the device and of a
      device array fetched to the host (the link a checkpoint's save and restore cross), None
      where not measured.
  """
  device_kind: str
  bandwidth: float
  matmul_flops: float
  dtype: str
  datasheet_flops: float | None
  host_to_device: float | None = None
  device_to_host: float | None = None

  def line(self) -> str:
    sheet = (f"{self.datasheet_flops / 1e12:.0f} TFLOP/s" if self.datasheet_flops
             else "none for this device")
    link = ("" if self.host_to_device is None else
            f"; host to device {self.host_to_device / 1e9:.1f} GB/s, device to host "
            f"{self.device_to_host / 1e9:.1f} GB/s")
    return (f"ceilings ({self.device_kind}, measured now): copy bandwidth {self.bandwidth / 1e9:.1f} "
            f"GB/s, {self.dtype} matmul {self.matmul_flops / 1e12:.3f} TFLOP/s; datasheet bf16 "
            f"peak {sheet}{link}")

  def fractions(self, flops: float, seconds: float) -> str:
    """'x % of measured matmul, y % of datasheet' of `flops` done in `seconds` on this device."""
    rate = flops / max(seconds, 1e-12)
    sheet = f"{rate / self.datasheet_flops:.1%}" if self.datasheet_flops else "n/a"
    return f"MFU {rate / self.matmul_flops:.1%} of measured matmul, {sheet} of datasheet"

  def roofline(self, read_bytes: float, seconds: float) -> str:
    """A memory-bound step's time against reading `read_bytes` at the measured bandwidth."""
    floor = read_bytes / self.bandwidth
    return (f"roofline {1e3 * floor:.3f} ms ({read_bytes / 1e9:.3f} GB at "
            f"{self.bandwidth / 1e9:.0f} GB/s) = {floor / max(seconds, 1e-12):.1%} of the "
            f"bandwidth roofline")


def _default_sizes(device) -> tuple[int, int]:
  """(copy bytes, matmul side): large enough to saturate an accelerator, small on a CPU."""
  return (2**30, 8192) if device.platform != "cpu" else (2**26, 1024)


def _best_seconds(fn, *args, repeats: int) -> float:
  jax.block_until_ready(fn(*args))  # compile and warm up
  best = math.inf
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    best = min(best, time.perf_counter() - start)
  return best


def measure_bandwidth(nbytes: int | None = None, *, repeats: int = 10,
                      device: jax.Device | None = None) -> float:
  """Bytes/s of a jitted copy of `nbytes` (x + 1 over float32; 2 x nbytes move), best of
  `repeats` after a warm-up; default 1 GiB on an accelerator, 64 MiB on a CPU."""
  device = device or jax.devices()[0]
  nbytes = nbytes or _default_sizes(device)[0]
  x = jax.device_put(jnp.zeros((nbytes // 4,), jnp.float32), device)
  return 2 * x.nbytes / _best_seconds(jax.jit(lambda v: v + 1), x, repeats=repeats)


def measure_matmul_flops(dtype: str = "bfloat16", size: int | None = None, *, repeats: int = 10,
                         device: jax.Device | None = None) -> float:
  """FLOP/s of a jitted size x size matmul in `dtype` on random normal data, best of `repeats`
  after a warm-up; default side 8192 on an accelerator, 1024 on a CPU."""
  device = device or jax.devices()[0]
  size = size or _default_sizes(device)[1]
  a, b = (jax.device_put(jax.random.normal(jax.random.key(i), (size, size), dtype), device)
          for i in (0, 1))
  return 2.0 * size ** 3 / _best_seconds(jax.jit(jnp.matmul), a, b, repeats=repeats)


def measure_host_link(nbytes: int | None = None, *, repeats: int = 3,
                      device: jax.Device | None = None) -> tuple[float, float]:
  """(host-to-device, device-to-host) bytes/s of moving `nbytes` of float32 between a numpy
  array and `device`, best of `repeats` after a warm-up; default 256 MiB on an accelerator, 16 MiB
  on a CPU. Each fetch is of a fresh device array (jax keeps an array's host copy once fetched)."""
  device = device or jax.devices()[0]
  nbytes = nbytes or _default_sizes(device)[0] // 4
  host = np.random.default_rng(0).random(nbytes // 4, dtype=np.float32)
  put = lambda: jax.block_until_ready(jax.device_put(host, device))
  bump = jax.jit(lambda v, i: v + i)
  x = put()
  up = down = math.inf
  for i in range(repeats + 1):  # round 0: a warm-up
    start = time.perf_counter()
    put()
    took_up = time.perf_counter() - start
    fresh = jax.block_until_ready(bump(x, float(i)))
    start = time.perf_counter()
    jax.device_get(fresh)
    took_down = time.perf_counter() - start
    if i:
      up, down = min(up, took_up), min(down, took_down)
  return host.nbytes / up, host.nbytes / down


def measure_ceilings(dtype: str = "bfloat16", *, copy_bytes: int | None = None,
                     matmul_size: int | None = None, link_bytes: int | None = None,
                     repeats: int = 10, device: jax.Device | None = None) -> Ceilings:
  """Ceilings of `device` (default the first), measured now (~1 s on an accelerator, plus the
  host link's 8 transfers of 256 MiB)."""
  device = device or jax.devices()[0]
  up, down = measure_host_link(link_bytes, repeats=min(repeats, 3), device=device)
  return Ceilings(device_kind=device.device_kind,
                  bandwidth=measure_bandwidth(copy_bytes, repeats=repeats, device=device),
                  matmul_flops=measure_matmul_flops(dtype, matmul_size, repeats=repeats,
                                                    device=device),
                  dtype=str(jnp.dtype(dtype)), datasheet_flops=perf.datasheet_flops(device),
                  host_to_device=up, device_to_host=down)
