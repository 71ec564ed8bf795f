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
