"""perf: FLOPs of known programs, memory figures, the CPU peak and MFU are present and right."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax import perf


def test_matmul_flops_are_2mnk():
  m, k, n = 64, 32, 48
  cost = perf.program_cost(lambda a, b: a @ b, jnp.ones((m, k)), jnp.ones((k, n)))
  assert cost.flops == cost.xla_flops_per_device == 2 * m * n * k
  assert cost.argument_bytes == 4 * (m * k + k * n) and cost.output_bytes == 4 * m * n
  assert cost.peak_bytes_per_device >= cost.argument_bytes + cost.output_bytes


def test_scanned_layers_count_every_layer():
  """XLA counts a loop body once; the jaxpr count multiplies a scan's body by its length, so a
  scanned stack of layers costs what the unrolled one does (and its gradient ~3x)."""
  w, x = jnp.ones((6, 64, 64)), jnp.ones((8, 64))
  scanned = lambda w, x: jax.lax.scan(lambda h, wi: (jnp.tanh(h @ wi), None), x, w)[0].sum()
  layer = 2 * 8 * 64 * 64
  assert perf.program_cost(scanned, w, x).flops == 6 * layer
  assert perf.program_cost(scanned, w, x).xla_flops_per_device < 2 * layer  # the body, once
  assert perf.program_cost(_unrolled, w, x).flops == 6 * layer
  grad = perf.program_cost(jax.grad(scanned), w, x).flops
  assert grad == 3 * 6 * layer  # forward, and two matmuls per layer backward


def _unrolled(w, x):
  for i in range(w.shape[0]):
    x = jnp.tanh(x @ w[i])
  return x.sum()


def test_sharded_program_reports_per_device_xla_flops():
  mesh = jax.make_mesh((8,), ("x",))
  a = jax.device_put(jnp.ones((64, 32)), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x")))
  cost = perf.program_cost(lambda a, b: a @ b, a, jnp.ones((32, 48)))
  assert cost.flops == 2 * 64 * 32 * 48
  assert cost.xla_flops_per_device == cost.flops / 8


def test_peaks_mfu_and_memory_report():
  cpu = perf.peak_flops()
  assert cpu > 1e8 and cpu == pytest.approx(perf.measured_cpu_peak() / jax.local_device_count())
  cost = perf.program_cost(lambda a: (a @ a).sum(), jnp.ones((256, 256)))
  util = perf.mfu(cost.flops, 0.5, num_devices=1)
  assert util > 0 and util == pytest.approx(cost.flops / 0.5 / cpu)
  assert perf.mfu(1e9, 1.0, peak_per_device=0) is None  # an unknown peak gives no MFU

  class Device:
    platform, device_kind = "tpu", "TPU v5 lite"
  assert perf.peak_flops(Device()) == 197e12
  for kind, want in (("TPU v5", 459e12), ("TPU v6 lite", 918e12), ("TPU v4", 275e12),
                     ("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H100 PCIe", 756e12),
                     ("NVIDIA H200", 989e12), ("NVIDIA A100-SXM4-80GB", 312e12),
                     ("Some new chip", None)):
    Device.device_kind = kind
    assert perf.peak_flops(Device()) == want, kind

  report = perf.memory_report({"small": cost, "update": perf.program_cost(
      lambda a: a @ a @ a, jnp.ones((512, 512)))})
  lines = report.splitlines()
  assert "peak memory per device" in lines[0]
  assert lines[1].lstrip().startswith("update:") and lines[2].lstrip().startswith("small:")
  assert np.isfinite(cost.peak_bytes_per_device) and cost.peak_bytes_per_device > 0


def test_decode_read_bytes_are_weights_and_the_live_cache():
  """A decode step reads every weight (an untied input embedding only by its rows) and the K, V of
  the shared prefix once, each prompt once and each row's own tokens (half the steps on average)."""
  from grounding_jax.models import ModelConfig
  tied = ModelConfig(model_type="llama", vocab_size=100, hidden_size=8, intermediate_size=16,
                     num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4)
  layer = 8 * (2 + 2 * 1) * 4 + 2 * 4 * 8 + 3 * 8 * 16 + 2 * 8  # q k v, o, SwiGLU, two norms
  assert perf.param_count(tied) == 2 * layer + 100 * 8 + 8
  stats = dict(prompt_rows=3, rows=6, prompt_bucket=10, decode_steps=4, shared_prefix_bucket=5)
  kv_tokens = 5 + 3 * 10 + 6 * 4 / 2
  kv_per_token = 2 * 2 * 1 * 4  # K and V, 2 layers, 1 KV head of 4
  assert perf.decode_read_bytes(tied, stats, 2) == 2 * (perf.param_count(tied)
                                                         + kv_per_token * kv_tokens)
  untied = dataclasses.replace(tied, tie_word_embeddings=False)
  assert perf.param_count(untied) == perf.param_count(tied) + 100 * 8
  assert perf.decode_read_bytes(untied, stats, 2) == perf.decode_read_bytes(tied, stats, 2)
  # Joined to each of the 3 prompts' caches (groups of samples), the prefix is read 3 times.
  joined = dict(stats, shared_prefix_copies=3)
  assert perf.decode_read_bytes(tied, joined, 2) == perf.decode_read_bytes(tied, stats, 2) + (
      2 * kv_per_token * 2 * 5)
  # A prefix run once costs less prefill than the same tokens in every prompt, and each prompt's
  # tokens and every decode step attend to it.
  whole = dict(stats, prompt_bucket=15, shared_prefix_bucket=0)
  per_token, head = perf.matmul_flops_per_token(tied)
  per_slot = perf.attention_flops_per_slot(tied)
  prefill, decode = perf.sampler_flops(tied, dict(stats, new_tokens_bucket=4))
  assert prefill == 5 * per_token + 25 * per_slot + 3 * (10 * per_token + head + 10 * 15 * per_slot)
  assert decode == 4 * 6 * (per_token + head + (5 + 10 + 4) * per_slot)
  assert prefill < perf.sampler_flops(tied, dict(whole, new_tokens_bucket=4))[0]


def test_trace_writes_a_profile_only_when_given_a_folder(tmp_path):
  with perf.trace(None):
    jnp.ones(3).block_until_ready()
  assert not any(tmp_path.iterdir())
  with perf.trace(str(tmp_path)):
    (jnp.ones((8, 8)) @ jnp.ones((8, 8))).block_until_ready()
  assert list(tmp_path.glob("plugins/profile/*/*.xplane.pb"))
