"""grounding_jax/ceilings.py: a device's ceilings measured now, and fractions against them."""

import jax

from grounding_jax import ceilings as ceilings_lib
from grounding_jax import perf


def test_ceilings_are_measured_and_fractions_are_against_them():
  ceilings = ceilings_lib.measure_ceilings("float32", copy_bytes=2**20, matmul_size=64,
                                           link_bytes=2**20, repeats=2)
  assert ceilings.bandwidth > 0 and ceilings.matmul_flops > 0
  assert ceilings.host_to_device > 0 and ceilings.device_to_host > 0
  assert "host to device" in ceilings.line()
  assert ceilings.device_kind == jax.devices()[0].device_kind
  assert ceilings.datasheet_flops is None  # CPU: no datasheet row
  assert "copy bandwidth" in ceilings.line() and "none for this device" in ceilings.line()
  gpu = ceilings_lib.Ceilings("NVIDIA H100", bandwidth=1e9, matmul_flops=1e12, dtype="bfloat16",
                              datasheet_flops=2e12)
  assert gpu.fractions(1e12, 2.0) == "MFU 50.0% of measured matmul, 25.0% of datasheet"
  assert gpu.roofline(1e6, 2e-3).endswith("= 50.0% of the bandwidth roofline")  # 1 ms of 2 ms
  assert perf.datasheet_flops() is None
