"""One process of the two-process GRPO test (tests/rl/test_multihost.py); not a test itself.

usage: python multihost_worker.py COORDINATOR NUM_PROCESSES PROCESS_ID CHECKPOINT WORKDIR OUT.npz
Each of the 2 processes owns 4 CPU devices; together they form one fsdp 4 x tensor 2 mesh. They run
GRPO on the toy task: one step, then a fresh Trainer resumes from the orbax checkpoint for the second
(so saving and restoring from both processes is exercised). Every process prints a checksum of the
updated (global) parameters; process 0 writes them and the metric history to OUT.npz.

The test imports `run` and calls it in its own 8-device process for the single-process reference.
"""

import os
import sys
import time

_START = time.monotonic()

if __name__ == "__main__":  # only as a worker: the test imports run() from here too
  os.environ["XLA_FLAGS"] = (f"--xla_force_host_platform_device_count={8 // int(sys.argv[2])} "
                             + os.environ.get("GROUNDING_JAX_TEST_XLA_FLAGS", ""))
  os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
import ml_collections  # noqa: E402
import numpy as np  # noqa: E402

from grounding_jax import parallel  # noqa: E402
from grounding_jax.rl import trainer as trainer_lib  # noqa: E402
import toy_task  # noqa: E402

PROMPTS, GROUP, NEW_TOKENS, STEPS = 4, 4, 6, 2
MESH = {"data": 1, "fsdp": 4, "tensor": 2}


class ConstantOnProcess0(toy_task.TargetShareReward):
  """Process 0's groups all score 0.5 (zero variance): only that host wants more DAPO rounds."""

  def __call__(self, completions, examples, **extra):
    out = super().__call__(completions, examples)
    if jax.process_index() == 0:
      out["reward"] = np.full_like(out["reward"], 0.5)
    return out


def prompt_fn(example):
  """The toy prompt after 16 words of instructions every prompt shares: the update runs them once
  per micro-batch on both hosts (rollout.common_prefix_min_tokens)."""
  return " ".join(f"w{3 + i}" for i in range(16)) + " " + toy_task.prompt_fn(example)


def make_trainer(checkpoint, workdir, *, dapo_rounds: int = 0) -> trainer_lib.Trainer:
  """The toy GRPO run, identical on one process and two (micro-batch = all of a host's rows).

  dapo_rounds > 0: DAPO dynamic sampling with that many extra rounds and `ConstantOnProcess0`.
  """
  c = toy_task.toy_config(workdir, steps=STEPS, lr=1e-2, prompts=PROMPTS, group=GROUP,
                          new_tokens=NEW_TOKENS)
  c.model.path = str(checkpoint)
  c.mesh = ml_collections.ConfigDict(MESH)
  c.update_loop.micro_batch_size = PROMPTS * GROUP // jax.process_count()
  c.rollout.common_prefix_min_tokens = 16
  c.dapo.dynamic_sampling = dapo_rounds > 0
  c.dapo.max_sampling_rounds = dapo_rounds
  reward = ConstantOnProcess0() if dapo_rounds else toy_task.TargetShareReward()
  return trainer_lib.Trainer(c, tokenizer=toy_task.make_tokenizer(),
                             reward_functions=[("toy", 1.0, reward)],
                             datasets={"toy": toy_task.make_examples(64)},
                             prompt_fn=prompt_fn)


def run(checkpoint, workdir, *, resume: bool) -> tuple[list[dict], dict[str, np.ndarray]]:
  """STEPS GRPO steps (resume=True: one, then a new Trainer restores and runs the rest).

  Returns:
    (metric history, {parameter path: full float32 value}).
  """
  if resume:
    history = make_trainer(checkpoint, workdir).train(max_steps=1)
    _log(f"step 1 done {[(k, round(v, 2)) for k, v in history[0].items() if k.startswith('time/')]}")
    trainer = make_trainer(checkpoint, workdir)
    _log("resumed trainer built")
    history += trainer.train()
    _log(f"step 2 done {[(k, round(v, 2)) for k, v in history[1].items() if k.startswith('time/')]}")
  else:
    trainer = make_trainer(checkpoint, workdir)
    history = trainer.train()
  flat = jax.tree_util.tree_flatten_with_path(trainer.params)[0]
  params = {jax.tree_util.keystr(p): np.asarray(multihost_utils.process_allgather(v, tiled=True))
            for p, v in flat}
  return history, params


def _checksum(params) -> float:
  return float(sum(np.abs(np.asarray(multihost_utils.process_allgather(v, tiled=True)))
                   .astype(np.float64).sum() for v in jax.tree.leaves(params)))


def check_helpers():
  """host_data across processes: each host's rows, and the all-gather fallback layouts."""
  p, hosts = jax.process_index(), jax.process_count()
  local = np.arange(4 * 3, dtype=np.float32).reshape(4, 3) + 100 * p
  want = np.concatenate([np.arange(12, dtype=np.float32).reshape(4, 3) + 100 * q
                         for q in range(hosts)])
  devices = np.asarray(jax.devices())
  meshes = {"batch over hosts": parallel.make_mesh({"fsdp": 8}),
            # process 1's devices first: hosts must exchange rows (fallback path).
            "reversed devices": jax.sharding.Mesh(devices[::-1], ("fsdp",))}
  for mesh_name, mesh in meshes.items():
    for names in (("batch", None), (None, None)):  # (None, None): rows replicated on every host
      g = parallel.host_local_to_global(local, names, mesh)
      assert g.shape == want.shape, (mesh_name, names, g.shape)
      np.testing.assert_array_equal(np.asarray(multihost_utils.process_allgather(g, tiled=True)),
                                    want, err_msg=f"{mesh_name} {names}")
      np.testing.assert_array_equal(parallel.global_to_host_local(g), local,
                                    err_msg=f"{mesh_name} {names}")
  exact = np.array([1 / 3 + p], np.float64)
  np.testing.assert_array_equal(parallel.gather_hosts(exact), 1 / 3 + np.arange(hosts))


def _log(message):
  print(f"[{time.monotonic() - _START:6.1f}s] process {jax.process_index()}: {message}", flush=True)


def main(coordinator, num_processes, process_id, checkpoint, workdir, out_path):
  parallel.distributed_initialize(coordinator, int(num_processes), int(process_id),
                                  initialization_timeout=60)
  _log("joined")
  check_helpers()
  try:  # a one-device mesh would let each host train its own copy: refused
    trainer_lib.Trainer(toy_task.toy_config(workdir), model=object(), tokenizer=object())
    raise AssertionError("a mesh that misses a process was accepted")
  except ValueError as e:
    assert "covers the devices of 1" in str(e), e
  _log("helpers ok")
  history, params = run(checkpoint, workdir, resume=True)
  checksum = float(sum(np.abs(v).astype(np.float64).sum() for v in params.values()))
  _log(f"steps {[h['step'] for h in history]} checksum {checksum!r}")
  # Hosts that disagree on whether to sample again would each wait in a different collective.
  dapo = make_trainer(checkpoint, f"{workdir}_dapo", dapo_rounds=2)
  rounds = dapo.train(max_steps=1)[0]["dapo/sampling_rounds"]
  _log(f"dapo rounds {rounds:g} checksum {_checksum(dapo.params)!r}")
  if jax.process_index() == 0:
    keys = sorted(k for k in history[0] if not k.startswith(("time/", "throughput/", "perf/"))
                  or k == "throughput/common_prefix_tokens")
    np.savez(out_path, metric_names=np.array(keys),
             metrics=np.array([[h[k] for k in keys] for h in history], np.float64),
             **{f"param{p}": v for p, v in params.items()})
  jax.distributed.shutdown()


if __name__ == "__main__":
  main(*sys.argv[1:])
