"""FLOPs, memory and model FLOPs utilisation (MFU) of compiled XLA programs.

  cost = perf.program_cost(train_step_program, params, rest, grad_sum, batch, packed_width=384)
  cost.flops                    # matmul FLOPs of one call, all devices (scans over layers expanded)
  cost.peak_bytes_per_device    # from XLA's memory_analysis of the compiled program
  perf.mfu(cost.flops, seconds, num_devices=mesh.size)   # achieved / (devices x peak FLOP/s)
  print(perf.memory_report({"update": cost, "decode": ...}))  # before step 1: does it fit?
  perf.decode_read_bytes(config, stats, 2)   # what a decode step must read (ceilings.py: vs bandwidth)

Two FLOP counts, because XLA's cost_analysis counts a loop body once whatever its trip count: a
model whose layers run in a lax.scan (Transformer.scan_layers) would show ~1/num_layers of its
FLOPs. `flops` therefore counts the matmuls (dot_general, the model FLOPs of MFU) of the program's
jaxpr, a scan's body times its length; a while_loop's body (the sampler's decode loop: the trip
count is data-dependent) counts once, so multiply by the steps run. `xla_flops_per_device` is XLA's
own count for the partitioned per-device program (every op, loop bodies once), kept for programs
without loops and as a cross-check. Rematerialised layers count twice (that work is done), so
with remat on this is hardware FLOPs rather than the 6·N·tokens model-FLOPs convention.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp

# Dense bfloat16 peak FLOP/s per jax device (a TPU chip, a GPU), by device_kind substring; the first
# match wins, so more specific names come first.
PEAK_FLOPS: tuple[tuple[str, float], ...] = (
    ("TPU v4", 275e12),       # cloud.google.com/tpu/docs/v4: 275 TFLOPS bf16 per chip
    ("TPU v5 lite", 197e12),  # v5e, cloud.google.com/tpu/docs/v5e: 197 TFLOPS bf16 per chip
    ("TPU v5e", 197e12),
    ("TPU v5", 459e12),       # v5p ("TPU v5" / "TPU v5p"), cloud.google.com/tpu/docs/v5p: 459
    ("TPU v6 lite", 918e12),  # v6e Trillium, cloud.google.com/tpu/docs/v6e: 918 TFLOPS bf16
    ("TPU v6e", 918e12),
    ("H100 PCIe", 756e12),    # NVIDIA H100 datasheet: 1,513 TFLOPS bf16 with sparsity -> 756 dense
    ("H100", 989e12),         # H100 SXM datasheet: 1,979 with sparsity -> 989 dense
    ("H200", 989e12),         # NVIDIA H200 datasheet: 1,979 with sparsity -> 989 dense (SXM)
    ("A100", 312e12),         # NVIDIA A100 datasheet: 312 TFLOPS bf16 dense
)


@dataclasses.dataclass(frozen=True)
class ProgramCost:
  """What one compiled program costs per call.

  Attributes:
    flops: matmul FLOPs of one call over all devices, scans expanded (see the module docstring).
    xla_flops_per_device: XLA's cost_analysis FLOPs of the per-device program (loop bodies once).
    argument_bytes, output_bytes, alias_bytes, temp_bytes, code_bytes: memory_analysis, per
      device; alias = outputs that reuse donated arguments.
    peak_bytes_per_device: arguments + outputs − aliased + temporaries + generated code.
  """
  flops: float
  xla_flops_per_device: float
  argument_bytes: int
  output_bytes: int
  alias_bytes: int
  temp_bytes: int
  code_bytes: int

  @property
  def peak_bytes_per_device(self) -> int:
    return (self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes
            + self.code_bytes)


def program_cost(fn: Callable, *args, **kwargs) -> ProgramCost:
  """The cost of `fn(*args, **kwargs)` as compiled (fn: a jax.jit function, or a function to jit).

  Tracing, lowering and compiling with the arguments of the real call reuse jax's caches, so for a
  program already run (or compiled ahead) this costs a trace, not a compile. Arguments may be
  arrays or jax.ShapeDtypeStructs (with shardings).
  """
  jitted = fn if hasattr(fn, "trace") else jax.jit(fn)
  traced = jitted.trace(*args, **kwargs)
  compiled = traced.lower().compile()
  analysis = compiled.cost_analysis()
  if isinstance(analysis, (list, tuple)):  # older jax: one dict per computation
    analysis = analysis[0] if analysis else {}
  memory = compiled.memory_analysis()
  get = lambda name: int(getattr(memory, name, 0) or 0)
  return ProgramCost(
      flops=float(jaxpr_flops(traced.jaxpr)),
      xla_flops_per_device=float((analysis or {}).get("flops", 0.0)),
      argument_bytes=get("argument_size_in_bytes"), output_bytes=get("output_size_in_bytes"),
      alias_bytes=get("alias_size_in_bytes"), temp_bytes=get("temp_size_in_bytes"),
      code_bytes=get("generated_code_size_in_bytes"))


def abstract(tree):
  """`tree` with each jax array replaced by a ShapeDtypeStruct of its shape, dtype, sharding and
  weak type: a program's signature, kept after the arrays are donated or freed (program_cost
  accepts it)."""
  def one(x):
    if isinstance(x, jax.Array):
      return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding, weak_type=x.weak_type)
    return x
  return jax.tree.map(one, tree)


def param_count(config) -> int:
  """Parameters of a decoder of `config` (a ModelConfig): per layer the q, k, v, o and SwiGLU
  projections, two RMSNorms, Qwen2's q/k/v biases or Qwen3's q/k norms; the embedding, the LM
  head when untied, the final norm."""
  d, h, kv, dh, f = (config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim,
                     config.intermediate_size)
  layer = d * (h + 2 * kv) * dh + h * dh * d + 3 * d * f + 2 * d
  layer += (h + 2 * kv) * dh if config.qkv_bias else 0
  layer += 2 * dh if config.qk_norm else 0
  vocab = config.vocab_size * d * (1 if config.tie_word_embeddings else 2)
  return config.num_layers * layer + vocab + d


def matmul_flops_per_token(config) -> tuple[float, float]:
  """(layers, LM head) matmul FLOPs of one token: 2 per weight of the layers' projections
  (q, k, v, o; gate, up, down), and 2 · hidden · vocab for the head."""
  d, h, kv, dh, f = (config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim,
                     config.intermediate_size)
  per_token = 2 * config.num_layers * (d * (h + 2 * kv) * dh + h * dh * d + 3 * d * f)
  return float(per_token), float(2 * d * config.vocab_size)


def attention_flops_per_slot(config) -> float:
  """Matmul FLOPs of one query attending to one key slot: q·k and p·v, every head and layer."""
  return float(2 * 2 * config.num_layers * config.num_heads * config.head_dim)


def sampler_flops(config, stats: Mapping[str, Any]) -> tuple[float, float]:
  """Matmul FLOPs (prefill, decode) of one sampler call (grounding_jax.sampling.last_stats()),
  padding included (it is computed), counted from the model's shapes: the decode loop is a
  while_loop whose trip count is data-dependent, so its compiled cost would count one step.

  Per token: the layers' projections (q, k, v, o; gate, up, down) and the LM head; per attended
  slot: q·k and p·v. Prefill runs a batch-shared prefix once (shared_prefix_bucket tokens over a
  causal square; 0 without one), then prompt_rows x prompt_bucket tokens (each prompt's tokens
  after that prefix) over a causal square and the prefix (the head on the last position only);
  decode runs decode_steps x rows tokens, each attending to the prefix, the prompt bucket and the
  generation bucket (the cache's full width).

  Args:
    config: a grounding_jax.models.config.ModelConfig (hidden_size, num_heads, ...).
    stats: prompt_rows, rows, prompt_bucket, new_tokens_bucket, decode_steps; shared_prefix_bucket
      (optional).
  """
  per_token, head = matmul_flops_per_token(config)
  per_slot = attention_flops_per_slot(config)
  lp, ln = stats["prompt_bucket"], stats["new_tokens_bucket"]
  sp = stats.get("shared_prefix_bucket", 0)
  prefill = (sp * per_token + sp * sp * per_slot
             + stats["prompt_rows"] * (lp * per_token + head + lp * (lp + sp) * per_slot))
  decode = stats["decode_steps"] * stats["rows"] * (per_token + head + (sp + lp + ln) * per_slot)
  return float(prefill), float(decode)


def decode_read_bytes(config, stats: Mapping[str, Any], itemsize: int) -> float:
  """Bytes one decode step of a sampler call (sampling.last_stats()) must read from device memory
  at the least, averaged over its steps: the decode roofline's numerator.

  The weights, in the sampler's compute dtype (`itemsize` bytes), once per step — an untied input
  embedding only by its looked-up rows (counted 0) — and the K and V of every cached token the live
  rows attend to: the shared prefix once (once per prompt when it was joined to each prompt's cache
  for groups of samples: shared_prefix_copies), each prompt's bucket once (its G samples share
  it), and each row's own tokens, decode_steps / 2 on average over the call.
  """
  weights = param_count(config) - (0 if config.tie_word_embeddings
                                   else config.vocab_size * config.hidden_size)
  kv_per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim
  prefix = stats.get("shared_prefix_bucket", 0) * stats.get("shared_prefix_copies", 1)
  tokens = (prefix + stats["prompt_rows"] * stats["prompt_bucket"]
            + stats["rows"] * stats["decode_steps"] / 2)
  return float(itemsize * (weights + kv_per_token * tokens))


def jaxpr_flops(jaxpr) -> float:
  """Matmul FLOPs (2 per multiply-add of every dot_general) of a (closed) jaxpr: nested calls
  counted once, scan bodies times their length, the larger branch of a cond, while-loop bodies
  once."""
  jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
  total = 0.0
  for eqn in jaxpr.eqns:
    name = eqn.primitive.name
    if name == "dot_general":
      (lhs_contract, _), _ = eqn.params["dimension_numbers"]
      lhs = eqn.invars[0].aval.shape
      # Each output element (batch x lhs free x rhs free) sums prod(contracted dims) products.
      total += 2.0 * math.prod(lhs[d] for d in lhs_contract) * math.prod(eqn.outvars[0].aval.shape)
      continue
    inner = [_flops_of_param(p) for p in eqn.params.values()]
    inner = [f for f in inner if f is not None]
    if not inner:
      continue
    if name == "cond":
      total += max(inner)
    elif name == "scan":
      total += eqn.params["length"] * sum(inner)
    else:
      total += sum(inner)
  return total


def _flops_of_param(value) -> float | None:
  if hasattr(value, "eqns") or hasattr(getattr(value, "jaxpr", None), "eqns"):
    return jaxpr_flops(value)
  if isinstance(value, (tuple, list)) and value and all(
      hasattr(v, "eqns") or hasattr(getattr(v, "jaxpr", None), "eqns") for v in value):
    return max(jaxpr_flops(v) for v in value)  # cond branches: one runs
  return None


def peak_flops(device: jax.Device | None = None) -> float | None:
  """Peak FLOP/s of one jax device: the bf16 table above for TPUs and GPUs, `measured_cpu_peak()`
  shared by the host's CPU devices for CPU, None for an accelerator not in the table."""
  device = device or jax.devices()[0]
  if device.platform == "cpu":
    return measured_cpu_peak() / jax.local_device_count("cpu")
  for kind, flops in PEAK_FLOPS:
    if kind.lower() in device.device_kind.lower():
      return flops
  return None


@functools.lru_cache(maxsize=None)
def measured_cpu_peak(dtype: str = "float32", size: int = 1536, repeats: int = 5) -> float:
  """Best FLOP/s of a jitted size^3 matmul on the first CPU device (all the host's cores): this
  machine's attainable matmul rate, measured once per process (~1 s)."""
  device = jax.devices("cpu")[0]
  a = jax.device_put(jnp.ones((size, size), dtype), device)
  matmul = jax.jit(lambda x, y: x @ y)
  matmul(a, a).block_until_ready()
  best = math.inf
  for _ in range(repeats):
    start = time.perf_counter()
    matmul(a, a).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2.0 * size ** 3 / best


def datasheet_flops(device: jax.Device | None = None) -> float | None:
  """The PEAK_FLOPS entry (dense bf16 FLOP/s) of a TPU or GPU; None for CPU or an unknown kind."""
  device = device or jax.devices()[0]
  if device.platform == "cpu":
    return None
  return next((f for kind, f in PEAK_FLOPS if kind.lower() in device.device_kind.lower()), None)


def mfu(flops: float, seconds: float, *, num_devices: int | None = None,
        peak_per_device: float | None = None) -> float | None:
  """Model FLOPs utilisation: flops / seconds / (num_devices x peak_per_device).

  Args:
    flops: FLOPs done in `seconds` over all devices (e.g. ProgramCost.flops x calls).
    num_devices: devices that shared the work (default: all jax devices).
    peak_per_device: default `peak_flops()` of the first device; None when unknown (then None).
  """
  num_devices = num_devices or jax.device_count()
  peak = peak_flops() if peak_per_device is None else peak_per_device
  if not peak or seconds <= 0:
    return None
  return flops / seconds / (num_devices * peak)


def memory_report(costs: Mapping[str, ProgramCost], device: jax.Device | None = None) -> str:
  """Lines naming each program's peak memory per device (largest first) against the device's
  memory where jax reports it (TPU, GPU), so a user sees whether the model fits before step 1."""
  device = device or jax.devices()[0]
  stats = _memory_stats(device)
  limit = stats.get("bytes_limit") if stats else None
  gib = lambda n: f"{n / 2**30:.2f} GiB"
  lines = [f"peak memory per device ({device.device_kind}"
           + (f", {gib(limit)} available)" if limit else ", memory size not reported)")]
  for name, cost in sorted(costs.items(), key=lambda kv: -kv[1].peak_bytes_per_device):
    peak = cost.peak_bytes_per_device
    verdict = ("" if not limit else "  fits" if peak <= limit else "  DOES NOT FIT")
    lines.append(f"  {name}: {gib(peak)} = arguments {gib(cost.argument_bytes)} + outputs "
                 f"{gib(cost.output_bytes)} - donated {gib(cost.alias_bytes)} + temporaries "
                 f"{gib(cost.temp_bytes)}{verdict}")
  return "\n".join(lines)


def free_memory(device: jax.Device) -> int | None:
  """Bytes free on `device` by jax's memory stats (its limit less what is in use); None where the
  device reports none (a CPU)."""
  stats = _memory_stats(device)
  if not stats or "bytes_limit" not in stats:
    return None
  return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))


def _memory_stats(device) -> dict[str, Any] | None:
  try:
    return device.memory_stats()
  except Exception:  # pylint: disable=broad-except  # some backends raise instead of returning None
    return None


@contextlib.contextmanager
def trace(profile_dir: str | None):
  """A jax.profiler trace of the block written under `profile_dir` (plugins/profile/<run>/*.xplane.pb:
  TensorBoard's profile plugin, xprof or Perfetto read it); nothing when `profile_dir` is empty.
  Block on the block's outputs inside it, or the trace ends before their device work does."""
  if not profile_dir:
    yield
    return
  jax.profiler.start_trace(str(profile_dir))
  try:
    yield
  finally:
    jax.profiler.stop_trace()
