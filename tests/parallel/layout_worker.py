"""One process of tests/parallel/test_distributed.py's cluster-environment test; not a test itself.

usage: python layout_worker.py   (the layout comes only from the environment the test sets)
Joins the distributed system through `distributed_initialize()` with no arguments, as launch/train.py
does on a TPU slice or under SLURM, and prints what jax then sees as one JSON line.
"""

import json
import os

os.environ["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=2 "
                           + os.environ.get("GROUNDING_JAX_TEST_XLA_FLAGS", ""))
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402

from grounding_jax.parallel import distributed  # noqa: E402

if __name__ == "__main__":
  layout = distributed.resolve_layout()
  distributed.distributed_initialize(initialization_timeout=60)
  print(json.dumps({"coordinator": layout[0], "process_index": jax.process_index(),
                    "process_count": jax.process_count(), "device_count": jax.device_count()}),
        flush=True)
  jax.distributed.shutdown()
