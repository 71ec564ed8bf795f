"""Where the trainer's host-side numpy meets the device mesh, on one host or many.

Each host holds only its own rows (its prompts' groups). `HostBatches` turns them into slices of
global arrays for the jitted programs, reads this host's rows back, gathers per-host values for
metrics and decisions every host must take alike, and trims padding columns to widths all hosts share.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np

from grounding_jax import parallel
from grounding_jax.rl import update as update_lib


# The longest common prompt prefix hosts agree on (HostBatches.common_prefix).
_MOST_COMMON_TOKENS = 4096


class HostBatches:
  """Host-array ↔ mesh plumbing of one trainer (`mesh` None = one device, no collectives)."""

  def __init__(self, mesh):
    self.mesh = mesh

  def context(self):
    """Activates the mesh's logical sharding rules for a jitted call (no-op without a mesh)."""
    return parallel.use_mesh(self.mesh) if self.mesh is not None else contextlib.nullcontext()

  def gather(self, x) -> np.ndarray:
    """Every host's rows of `x` (process order) when the mesh spans hosts; else `x` itself."""
    return parallel.gather_hosts(x) if parallel.spanned_processes(self.mesh) > 1 else np.asarray(x)

  def all_hosts(self, flag: bool) -> bool:
    """True when `flag` holds on every host (the hosts then take the same branch)."""
    return bool(self.gather(np.array([bool(flag)])).all())

  def on_mesh(self, tree, *, abstract: bool = False):
    """`tree` with its arrays off the mesh (optax's step count sits on one local device) replicated
    over it — as ShapeDtypeStructs for a checkpoint target when `abstract` — so a multi-host jitted
    update accepts them, and fresh and restored states compile one update program, not two."""
    if self.mesh is None:
      return tree
    devices = set(self.mesh.devices.flat)
    replicated = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())

    def place(x):
      if not isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) or (
          x.sharding is not None and x.sharding.device_set == devices):
        return x
      if abstract or isinstance(x, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated)
      host = np.asarray(x)  # the same value on every host (e.g. a zero count)
      return jax.make_array_from_callback(host.shape, replicated, lambda index: host[index])

    return jax.tree.map(place, tree)

  def trim(self, batch: dict, multiple: int) -> dict:
    """`batch` without the padding columns no row on any host needs (update_loop.length_multiple).

    The sampler pads prompts to its bucket and completions to max_new_tokens; the update only needs
    the longest prompt and the last loss-bearing column, rounded up to the update's buckets so a
    run compiles a few shapes (update.prompt_bucket, update.completion_bucket with base
    `multiple`; 0 = keep the widths). Hosts agree on the widths: their arrays form one global
    batch.
    """
    if not multiple:
      return batch
    widths = self.gather(np.asarray([update_lib.content_widths(batch)], np.int64)).max(axis=0)
    return update_lib.trim_batch(batch, update_lib.prompt_bucket(int(widths[0])),
                                 update_lib.completion_bucket(int(widths[1]), multiple))

  def packed_widths(self, batch: dict, micro: int, rows_per_prompt: int) -> list[int] | None:
    """Columns for each micro-batch's packed completions (update.packed_width), the same on every
    host, or None when prompts are not shared. Each is rounded up to update.packed_bucket of the
    completion width L, so a run compiles at most 4 (G <= 4), 6 (G = 8) or 8 (G = 16) gradient
    programs per prompt and completion width, while a micro-batch of short completions runs at a
    smaller width."""
    if rows_per_prompt == 1:
      return None
    mask = np.asarray(batch["loss_mask"])
    need = [update_lib.packed_width({"loss_mask": mask[i:i + micro]}, rows_per_prompt)
            for i in range(0, len(mask), micro)]
    need = self.gather(np.asarray([need], np.int64)).max(axis=0)
    return [update_lib.packed_bucket(int(w), mask.shape[1], rows_per_prompt) for w in need]

  def common_prefix(self, batch: dict, minimum: int) -> int:
    """The leading prompt tokens every row shares on every host (update.common_prefix), the same
    value on each: hosts take the shortest and cut it where their prompts' tokens part."""
    c = update_lib.common_prefix(batch, minimum)
    if parallel.spanned_processes(self.mesh) <= 1 or not minimum:
      return c
    # Every host sends its length and tokens in a fixed shape (its prompt width may differ).
    c = min(c, _MOST_COMMON_TOKENS)
    lead = np.full(_MOST_COMMON_TOKENS, -1, np.int64)
    if c:
      ids, mask = np.asarray(batch["prompt_ids"]), np.asarray(batch["prompt_mask"], bool)
      start = ids.shape[1] - int(mask[0].sum())
      lead[:c] = ids[0, start:start + c]
    rows = self.gather(np.concatenate([[c], lead])[None])  # [hosts, 1 + _MOST_COMMON_TOKENS]
    c = int(rows[:, 0].min())
    differs = np.flatnonzero((rows[:, 1:1 + c] != rows[:1, 1:1 + c]).any(axis=0))
    if differs.size:
      c = int(differs[0]) - int(differs[0]) % update_lib.COMMON_PREFIX_MULTIPLE
    return c if c >= minimum else 0

  def device_batch(self, batch: dict, micro: int) -> dict:
    """Host arrays [n, ...] -> device arrays [n / micro, micro * hosts, ...], rows over batch axes."""
    out = {}
    for k, v in batch.items():
      v = np.asarray(v).reshape(-1, micro, *np.shape(v)[1:])
      if self.mesh is not None:
        names = (None, "batch") + (None,) * (v.ndim - 2)
        # This host's rows become its slice of the global micro-batches (all hosts' rows).
        out[k] = parallel.host_local_to_global(v, names, self.mesh, batch_axis=1)
      else:
        out[k] = jnp.asarray(v)
    return out

  def logprobs(self, logprob_fn, params, rest, batch: dict, micro: int,
               packed_width: int | None = None, on_call=None, shared_prefix: int = 0) -> np.ndarray:
    """This host's rows of `logprob_fn` over `batch` (reference / old log-probs), [n, L].
    on_call(logprob_fn, *args, **kwargs), when given, sees the call's arguments first (perf)."""
    with self.context():
      args = (params, rest, self.device_batch(batch, micro))
      kwargs = dict(packed_width=packed_width, shared_prefix=shared_prefix)
      if on_call is not None:
        on_call(logprob_fn, *args, **kwargs)
      lp = logprob_fn(*args, **kwargs)
    return parallel.global_to_host_local(lp, batch_axis=1).reshape(-1, lp.shape[-1])
