"""Array checksums (checksums.py): one changed element, even one bit or a swap of two, changes the
checksum; how the array is sharded does not; non-finite values are reported."""

import jax
import jax.numpy as jnp
import numpy as np

from grounding_jax import parallel
from grounding_jax.checksums import checksums


def test_checksum_catches_one_changed_element_and_ignores_sharding():
  x = {"f32": jax.random.normal(jax.random.key(0), (64, 32)),
       "bf16": jnp.linspace(-2, 2, 48, dtype=jnp.bfloat16), "bool": jnp.arange(10) % 3 == 0,
       "u32": jax.random.key_data(jax.random.key(1)), "scalar": jnp.int32(7)}
  sums, finite = checksums(x)
  assert all(finite.values()) and len(set(sums.values())) == len(sums)
  for name, changed in (("f32", x["f32"].at[5, 7].set(np.nextafter(x["f32"][5, 7], 9.0))),
                        ("bf16", x["bf16"].at[0].set(-x["bf16"][0])), ("bool", ~x["bool"]),
                        ("u32", x["u32"] ^ 1), ("scalar", jnp.int32(8))):
    assert checksums({**x, name: changed})[0][name] != sums[name], name
  # Two elements swapped: the sums weight elements by position.
  swapped = x["f32"].at[0, 0].set(x["f32"][0, 1]).at[0, 1].set(x["f32"][0, 0])
  assert checksums({"f32": swapped})[0]["f32"] != sums["f32"]
  mesh = parallel.make_mesh({"data": 2, "fsdp": 4})
  sharded = jax.device_put(x["f32"], jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data", "fsdp")))
  assert checksums({"f32": sharded})[0]["f32"] == sums["f32"]
  assert checksums({"f": jnp.array([1.0, jnp.nan])})[1] == {"f": False}


def _numpy_checksum(x) -> str:
  """checksums.py's two sums re-derived in numpy from the docstring's formula (uint32 wrap-around):
  Σ u_i·(2i+1) and Σ fmix32(u_i ⊕ i·φ) over the array's bits as uint32 words."""
  x = np.asarray(x)
  u = (x.astype(np.uint8) if x.dtype == bool else x).reshape(-1)
  u = u.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint32}[u.dtype.itemsize]).astype(np.uint32)
  i = np.arange(u.size, dtype=np.uint32)
  with np.errstate(over="ignore"):
    s1 = (u * (i * np.uint32(2) + np.uint32(1))).sum(dtype=np.uint32)
    h = u ^ (i * np.uint32(0x9E3779B9))
    h = (h ^ (h >> np.uint32(16))) * np.uint32(0x85EBCA6B)
    h = (h ^ (h >> np.uint32(13))) * np.uint32(0xC2B2AE35)
    s2 = (h ^ (h >> np.uint32(16))).sum(dtype=np.uint32)
  return f"{int(s1):08x}{int(s2):08x}"


def test_checksum_equals_the_formula_so_older_checkpoints_still_verify():
  """The digest's value is part of the checkpoint format (saved beside every array): however it is
  computed, it must stay the documented formula (a numpy re-derivation here)."""
  rng = np.random.default_rng(0)
  x = {"f32": rng.standard_normal((37, 301)).astype(np.float32),
       "bf16": jnp.linspace(-3, 3, 77, dtype=jnp.bfloat16), "bool": np.arange(13) % 3 == 0,
       "i32": rng.integers(-2**31, 2**31 - 1, (5, 7), dtype=np.int32), "scalar": np.float32(2.5),
       "empty": np.zeros((0, 4), np.float32)}
  sums, finite = checksums({k: jnp.asarray(v) for k, v in x.items()})
  assert sums == {k: _numpy_checksum(v) for k, v in x.items()}
  assert all(finite.values())
  nan = x["f32"].copy()
  nan[36, 300] = np.inf
  assert checksums({"f32": jnp.asarray(nan)})[1] == {"f32": False}
