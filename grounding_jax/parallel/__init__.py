"""Meshes (data, fsdp, tensor axes), logical-axis sharding rules, and multi-host start-up.

Typical use:

  distributed_initialize()                      # multi-host only; a no-op on one process
  mesh = make_mesh({"data": 1, "fsdp": -1, "tensor": 2})
  model = shard_model(model, mesh, DEFAULT_RULES)
  with use_mesh(mesh, DEFAULT_RULES):           # activates with_logical_constraint inside the model
    logits = jax.jit(forward, in_shardings=..., out_shardings=...)(...)
"""

from grounding_jax.parallel.distributed import distributed_initialize
from grounding_jax.parallel.host_data import (gather_hosts, global_to_host_local, host_local_to_global,
                                              spanned_processes)
from grounding_jax.parallel.mesh import make_mesh, mesh_from_config
from grounding_jax.parallel.rules import (DEFAULT_RULES, active_mesh, logical_sharding,
                                          logical_to_spec, use_mesh, with_logical_constraint)
from grounding_jax.parallel.shard import logical_names, shard_model, state_shardings

__all__ = [
    "DEFAULT_RULES", "active_mesh", "distributed_initialize", "gather_hosts", "global_to_host_local",
    "host_local_to_global", "logical_names", "logical_sharding", "logical_to_spec", "make_mesh",
    "mesh_from_config", "shard_model", "spanned_processes", "state_shardings", "use_mesh",
    "with_logical_constraint",
]
