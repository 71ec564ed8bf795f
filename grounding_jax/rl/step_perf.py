"""The perf/ metrics of a GRPO step and the start-up memory report (issue 17).

    perf = StepPerf(model.config, mesh)     # measures this CPU's matmul peak once (accelerators: table)
    perf.begin_step()
    ... sample; perf.record("reference", logprob_fn, *args); perf.record("update", accumulate, *args)
    metrics = perf.step_metrics(times, completion_tokens)   # perf/... (below)

Where each figure comes from:
  * reference and update TFLOP: the matmul FLOPs of the jaxpr of each program the step ran
    (perf.program_cost: a scan over layers counted times its length; XLA's cost_analysis counts a
    loop body once, so on a scanned model it would report ~1/num_layers), summed over calls.
    "reference" is the phase time/reference times: the reference log-probs and, with
    update_loop.old_logprobs="recompute", the old ones. With remat, recomputed layers count again
    (work done: hardware FLOPs, not the 6·N·tokens convention).
  * sample TFLOP: counted from the model's shapes per sampler call (perf.sampler_flops), since the
    decode loop is a while_loop of a data-dependent trip count.
  * peak memory: XLA's memory_analysis of each compiled reference / update program, per device.
  * MFU: FLOPs / seconds / (devices x peak FLOP/s per device, perf.peak_flops: the TPU/GPU table, or
    this host's matmul rate measured at start-up on CPU).
Each distinct (program, argument shapes) is costed once per process, just before its first call
and on its arguments: that compiles the program the call then finds in jax's cache, so costing
adds a walk over the jaxpr and XLA's analyses, not a compile (tests/rl/test_step_perf.py).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp

from grounding_jax import perf
from grounding_jax import sampling
from grounding_jax.rl import host_batch
from grounding_jax.rl import update as update_lib
from grounding_jax.rl import update_programs

PHASES = ("sample", "reference", "update")
_GIB = 2.0 ** 30


def _signature(tree) -> tuple:
  leaves, treedef = jax.tree.flatten(tree)
  return treedef, tuple((x.shape, str(x.dtype), x.sharding, getattr(x, "weak_type", False))
                        if hasattr(x, "shape") else x for x in leaves)


class StepPerf:
  """Costs the programs of each step and turns them into perf/ metrics.

  Args:
    model_config: the policy's ModelConfig (the sampler's FLOPs are counted from its shapes).
    mesh: the trainer's mesh (None: one device); its size is the MFU's device count.
  """

  def __init__(self, model_config, mesh):
    self.model_config = model_config
    self.num_devices = mesh.size if mesh is not None else 1
    self.peak = perf.peak_flops(mesh.devices.flat[0] if mesh is not None else None)
    self._costs: dict = {}  # (phase, program, signature) -> perf.ProgramCost
    self._calls: list = []  # this step's program calls (keys of _costs)

  def begin_step(self) -> None:
    """Forgets sampler calls made since the last step (e.g. validation's)."""
    sampling.drain_stats()
    self._calls = []

  def record(self, phase: str, fn: Callable, *args, **kwargs) -> None:
    """Notes one call of jitted `fn(*args, **kwargs)` in `phase`; call it just before `fn`. A
    signature not seen before is costed now, on these very arguments, so the program compiled for
    its cost is the one the call then finds in jax's cache (abstract arguments would lower a
    program of their own, e.g. committed where the call's arrays are not)."""
    key = (phase, fn, _signature(perf.abstract(args)), tuple(sorted(kwargs.items())))
    if key not in self._costs:
      self._costs[key] = perf.program_cost(fn, *args, **kwargs)
    self._calls.append(key)

  def step_metrics(self, times: Mapping[str, float], completion_tokens: float) -> dict:
    """perf/ metrics of the step just run.

    Args:
      times: seconds of "sample", "reference", "update" and the whole "step".
      completion_tokens: tokens sampled in the step (all hosts).
    Returns:
      perf/{sample,reference,update,step}_tflop, perf/achieved_tflop_per_s, perf/mfu and
      perf/mfu_{sample,update} (None-free: omitted when the device's peak is unknown),
      perf/tokens_per_s_per_device, perf/peak_memory_gib (the largest reference / update program,
      per device) with perf/{reference,update}_peak_memory_gib.
    """
    flops = dict.fromkeys(PHASES, 0.0)
    peak = dict.fromkeys(PHASES[1:], 0.0)
    for stats in sampling.drain_stats():
      flops["sample"] += sum(perf.sampler_flops(self.model_config, stats))
    for key in self._calls:
      phase, cost = key[0], self._costs[key]
      flops[phase] += cost.flops
      peak[phase] = max(peak[phase], cost.peak_bytes_per_device / _GIB)
    self._calls = []
    total = sum(flops.values())
    out = {f"perf/{p}_tflop": flops[p] / 1e12 for p in PHASES}
    out["perf/step_tflop"] = total / 1e12
    out["perf/achieved_tflop_per_s"] = total / 1e12 / max(times["step"], 1e-9)
    for name, f, s in (("mfu", total, times["step"]), ("mfu_sample", flops["sample"], times["sample"]),
                       ("mfu_update", flops["update"], times["update"])):
      value = perf.mfu(f, s, num_devices=self.num_devices, peak_per_device=self.peak)
      if value is not None:
        out[f"perf/{name}"] = value
    out["perf/tokens_per_s_per_device"] = completion_tokens / max(times["step"], 1e-9) / self.num_devices
    out.update({f"perf/{p}_peak_memory_gib": peak[p] for p in PHASES[1:]})
    out["perf/peak_memory_gib"] = max(peak.values())
    return out


def widest_costs(train_step, logprob_fn, params, rest, hosts: host_batch.HostBatches,
                 settings: update_lib.UpdateSettings, prompt_lengths: Sequence[int], *,
                 max_new_tokens: int, length_multiple: int, micro_batch_size: int,
                 rows_per_step: int, reference: bool, sampler_logp: bool = False,
                 shared_prefix: int = 0) -> dict[str, perf.ProgramCost]:
  """The costs of the stage's widest gradient program (and reference log-prob pass over a step's
  rows) as compiled for the trainer's mesh: what decides whether a step fits in memory.

  Args:
    prompt_lengths: the stage's prompt lengths in tokens (the widest prompt bucket is used).
    rows_per_step: this host's rows of one step (prompts x G); the log-prob pass maps over them.
    reference: whether a log-prob pass runs (a KL term, or recomputed old log-probs).
    sampler_logp: the update batch carries the sampler's log-probs (update_programs.batch_keys).
    shared_prefix: the leading tokens the prompts share (update.common_prefix; 0 = none).
  """
  shapes = update_programs.update_shapes(prompt_lengths, max_new_tokens=max_new_tokens,
                                         length_multiple=length_multiple,
                                         rows_per_prompt=settings.rows_per_prompt,
                                         shared_prefix=shared_prefix)
  widest = max(shapes, key=lambda s: (s.prompt_width, s.completion_width, s.packed_width or 0))
  keys = update_programs.batch_keys(settings, sampler_logp)
  num_micro = max(rows_per_step // micro_batch_size, 1)
  costs = {}
  with hosts.context():
    batch = update_programs.zero_batch(hosts, widest, keys, micro_batch_size, num_micro)
    mb = update_lib.micro_batches(batch)[0]
    costs["update (gradient of one micro-batch)"] = perf.program_cost(
        train_step.accumulate, params, rest, params, mb, packed_width=widest.packed_width,
        shared_prefix=shared_prefix)
    if reference:
      costs["reference / old log-probs (one step's rows)"] = perf.program_cost(
          logprob_fn, params, rest, batch, packed_width=widest.packed_width,
          shared_prefix=shared_prefix)
  return costs


def stage_report(view, settings: update_lib.UpdateSettings, train_step, logprob_fn, params, rest,
                 hosts: host_batch.HostBatches, model_config, prompts: Sequence[Sequence[int]],
                 sampler_logp: bool) -> str:
  """startup_report of a trainer stage (view: its rl config view) on the trainer's mesh, for its
  prompts' token ids (prompt_tokens)."""
  prompt_lengths = [len(p) for p in prompts] or [1]
  r, u = view.rollout, view.update_loop
  rows = r.prompts_per_step // jax.process_count() * r.group_size
  costs = widest_costs(train_step, logprob_fn, params, rest, hosts, settings, prompt_lengths,
                       max_new_tokens=r.max_new_tokens, length_multiple=u.length_multiple,
                       micro_batch_size=u.micro_batch_size, rows_per_step=rows,
                       reference=bool(view.loss.kl_coef) or not settings.on_policy,
                       sampler_logp=sampler_logp,
                       shared_prefix=update_lib.common_prefix_of(prompts,
                                                                 settings.common_prefix_min))
  slots = sampling.bucket_length(r.max_new_tokens) + (
      0 if r.group_size > 1 else sampling.bucket_length(max(prompt_lengths)))
  mesh = hosts.mesh
  return startup_report(costs, model_config, rows=r.prompts_per_step * r.group_size, kv_slots=slots,
                        num_devices=mesh.size if mesh is not None else 1,
                        kv_bytes=jnp.dtype(view.model.compute_dtype).itemsize)


def startup_report(costs: Mapping[str, perf.ProgramCost], model_config, *, rows: int,
                   kv_slots: int, num_devices: int, kv_bytes: int = 4) -> str:
  """perf.memory_report of `costs`, the sampler's KV cache (counted: rows x slots x layers x 2 x
  kv_heads x head_dim, spread over the devices) and the widest programs' FLOPs."""
  c = model_config
  kv = rows * kv_slots * c.num_layers * 2 * c.num_kv_heads * c.head_dim * kv_bytes / num_devices
  lines = [perf.memory_report(costs),
           f"  sampler KV cache: {kv / _GIB:.2f} GiB per device ({rows} rows x {kv_slots} slots, "
           f"counted from the model's shapes)"]
  lines += [f"  {name}: {cost.flops / 1e12:.3f} TFLOP per call" for name, cost in costs.items()]
  return "\n".join(lines)


def prompt_tokens(examples, prompt_fn, tokenizer, max_prompt_tokens: int) -> list[list[int]]:
  """The examples' prompts as token ids, at most max_prompt_tokens (0 = no limit) of them."""
  ids = [tokenizer(prompt_fn(ex), add_special_tokens=False)["input_ids"] for ex in examples]
  return [t[:max_prompt_tokens] if max_prompt_tokens else t for t in ids]


def summary(metrics: Mapping[str, float]) -> str:
  """One line of a step's perf/ metrics for a console."""
  mfu = metrics.get("perf/mfu")
  return (f"{metrics['perf/step_tflop']:.3f} TFLOP (sample {metrics['perf/sample_tflop']:.3f}, "
          f"reference {metrics['perf/reference_tflop']:.3f}, update {metrics['perf/update_tflop']:.3f})"
          f", {metrics['perf/achieved_tflop_per_s'] * 1e3:.1f} GFLOP/s"
          + (f", MFU {mfu:.1%}" if mfu is not None else "")
          + f", peak {metrics['perf/peak_memory_gib']:.2f} GiB/device")
