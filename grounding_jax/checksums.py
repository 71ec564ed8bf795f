"""Checksums of arrays, computed where they live: what checkpoints/ writes beside every saved
array and verifies on restore (neither plain arrays nor zstd frames carry a checksum, so flipped bytes
would restore silently).

    sums, finite = checksums({"000000": params_w, ...})   # {name: 16 hex digits}, {name: all finite}

A checksum depends on the array's bits and element positions only, not on its sharding or devices,
so a state saved on one mesh verifies when restored onto another.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp


def _as_words(x: jax.Array) -> jax.Array:
  """The bits of `x` as a flat uint32 vector (one word per element; two per 64-bit element)."""
  if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  size = jnp.dtype(x.dtype).itemsize
  if x.dtype == jnp.bool_:
    x = x.astype(jnp.uint8)
  if size == 4:
    return jax.lax.bitcast_convert_type(x, jnp.uint32).reshape(-1)
  if size == 8:  # bitcast to a narrower type appends a dimension of 2
    return jax.lax.bitcast_convert_type(x, jnp.uint32).reshape(-1)
  narrow = {2: jnp.uint16, 1: jnp.uint8}[size]
  return jax.lax.bitcast_convert_type(x, narrow).reshape(-1).astype(jnp.uint32)


def _digest_one(x: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(uint32[2] checksum, bool all-finite) of one array.

  Two wrapping uint32 sums over the elements' bits: Σ u_i·(2i+1) and Σ fmix32(u_i ⊕ i·φ) (murmur3's
  finaliser, a bijection). A changed element always changes both sums (odd weights; bijection), so
  any one changed element is caught, and a random corruption goes unseen with probability ~2⁻⁶⁴.
  Integer sums are exact in any order, so the value does not depend on the sharding that computes it.

  Both sums and the finiteness check are one variadic reduce: XLA:CPU then reads the array once,
  its terms fused into the loop, where three separate reductions first wrote every term to a
  temporary array as large as the input (~20x slower on a 1.6 GB training state; same values).
  """
  finite = jnp.isfinite(x) if jnp.issubdtype(x.dtype, jnp.inexact) else None
  u = _as_words(x)
  i = jnp.arange(u.shape[0], dtype=jnp.uint32)
  weighted = u * (i * jnp.uint32(2) + jnp.uint32(1))
  h = u ^ (i * jnp.uint32(0x9E3779B9))
  h = (h ^ (h >> 16)) * jnp.uint32(0x85EBCA6B)
  h = (h ^ (h >> 13)) * jnp.uint32(0xC2B2AE35)
  h = h ^ (h >> 16)
  if finite is not None and finite.size != u.shape[0]:  # 64-bit floats: two words per element
    finite = jnp.repeat(finite.reshape(-1), u.shape[0] // finite.size)  # sizes differ: both > 0
  flags = jnp.ones_like(u, dtype=bool) if finite is None else finite.reshape(-1)
  zero = jnp.uint32(0)
  s1, s2, all_finite = jax.lax.reduce(
      (weighted, h, flags), (zero, zero, jnp.bool_(True)),
      lambda a, b: (a[0] + b[0], a[1] + b[1], jnp.logical_and(a[2], b[2])), (0,))
  return jnp.stack([s1, s2]), all_finite


@jax.jit
def _digests(arrays: dict) -> dict:
  return {k: _digest_one(v) for k, v in arrays.items()}


def checksums(arrays: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, bool]]:
  """({name: 16-hex-digit checksum}, {name: all values finite}) of a flat dict of arrays, computed
  where the arrays live (sharded and multi-host arrays are not gathered): one jitted pass per set of
  devices holding them (host numpy arrays count as one set)."""
  groups: dict[Any, dict] = {}
  for k, v in arrays.items():
    devices = v.sharding.device_set if isinstance(v, jax.Array) else None
    groups.setdefault(None if devices is None else frozenset(devices), {})[k] = v
  out = {}
  for group in groups.values():
    out.update(jax.device_get(_digests(group)))
  sums = {k: f"{int(d[0]):08x}{int(d[1]):08x}" for k, (d, _) in out.items()}
  finite = {k: bool(f) for k, (_, f) in out.items()}
  return sums, finite
