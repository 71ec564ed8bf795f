"""distributed_initialize: layout resolution from args / JAX_* / SLURM / TPU variables, local devices
under SLURM, the single-process no-op, and two real processes joining from a simulated cluster."""

import json
import pathlib
import subprocess
import sys

from absl import flags
import jax
from jax._src.clusters import cloud_tpu_cluster
from jax._src.clusters import cluster as jax_cluster
import pytest

from grounding_jax.parallel import distributed

_VARS = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_PORT",
         "JAX_LOCAL_DEVICE_IDS", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_STEP_NODELIST",
         "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASKS_PER_NODE",
         "SLURM_NTASKS_PER_NODE", "SLURM_GPUS_ON_NODE", "CUDA_VISIBLE_DEVICES", "TPU_WORKER_ID",
         "TPU_WORKER_HOSTNAMES", "TPU_PROCESS_ADDRESSES", "MEGASCALE_COORDINATOR_ADDRESS",
         "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID")
_WORKER = pathlib.Path(__file__).with_name("layout_worker.py")


@pytest.fixture
def clean_env(monkeypatch):
  for name in _VARS:
    monkeypatch.delenv(name, raising=False)
  return monkeypatch


def test_arguments_win_over_environment(clean_env):
  clean_env.setenv("JAX_COORDINATOR_ADDRESS", "envhost:1")
  clean_env.setenv("JAX_NUM_PROCESSES", "4")
  clean_env.setenv("JAX_PROCESS_ID", "3")
  assert distributed.resolve_layout("arghost:2", 2, 1) == ("arghost:2", 2, 1)
  assert distributed.resolve_layout() == ("envhost:1", 4, 3)


def test_slurm_layout(clean_env):
  clean_env.setenv("SLURM_NTASKS", "4")
  clean_env.setenv("SLURM_PROCID", "2")
  clean_env.setenv("SLURM_STEP_NODELIST", "gpu[017-020,031],login1")
  clean_env.setenv("SLURM_JOB_ID", "4097")
  assert distributed.resolve_layout() == ("gpu017:61441", 4, 2)
  clean_env.setenv("JAX_COORDINATOR_PORT", "1234")
  assert distributed.resolve_layout() == ("gpu017:1234", 4, 2)


@pytest.mark.parametrize("nodelist, host", [
    ("node001", "node001"), ("node001,host2", "node001"), ("n[3,5-7]", "n3"), ("a-b[01-02]", "a-b01")])
def test_first_slurm_host(nodelist, host):
  assert distributed._first_slurm_host(nodelist) == host


def test_single_process_is_a_no_op(clean_env):
  distributed.distributed_initialize(num_processes=1, process_id=0)
  clean_env.setenv("SLURM_NTASKS", "1")
  clean_env.setenv("SLURM_PROCID", "0")
  distributed.distributed_initialize()
  assert not jax.distributed.is_initialized()


def test_nothing_detected_is_single_process(clean_env):
  distributed.distributed_initialize()
  assert not jax.distributed.is_initialized()


def test_bad_layout_raises(clean_env):
  with pytest.raises(ValueError, match="process_id=2 is outside"):
    distributed.distributed_initialize("localhost:1", 2, 2)
  clean_env.setenv("JAX_NUM_PROCESSES", "two")
  with pytest.raises(ValueError, match="JAX_NUM_PROCESSES='two' must be an integer"):
    distributed.distributed_initialize()


def test_flags_feed_the_layout(clean_env):
  flag_values = flags.FlagValues()
  distributed.define_flags(flag_values)
  flag_values(["prog", "--num_processes=2", "--process_id=5", "--coordinator_address=localhost:1"])
  with pytest.raises(ValueError, match="process_id=5 is outside"):
    distributed.initialize_from_flags(flag_values)
  flag_values(["prog", "--num_processes=1", "--process_id=0"])
  distributed.initialize_from_flags(flag_values)  # single process: no-op
  assert not jax.distributed.is_initialized()


@pytest.mark.parametrize("slices, slice_id, megascale_host", [("1", "0", ""), ("2", "1", "localhost")])
@pytest.mark.parametrize("worker", ["0", "3"])
def test_tpu_layout_follows_jax_rule(clean_env, worker, slices, slice_id, megascale_host):
  """TPU worker variables (GKE, multislice) give the layout jax's own TPU cluster class derives."""
  clean_env.setenv("TPU_WORKER_HOSTNAMES", "localhost,host-b,host-c,host-d")
  clean_env.setenv("TPU_WORKER_ID", worker)
  # All three set (even empty) so jax's reference reads them here, never from a metadata server.
  clean_env.setenv("MEGASCALE_NUM_SLICES", slices)
  clean_env.setenv("MEGASCALE_SLICE_ID", slice_id)
  clean_env.setenv("MEGASCALE_COORDINATOR_ADDRESS", megascale_host)
  gke = cloud_tpu_cluster.GkeTpuCluster
  expected = (gke.get_coordinator_address(timeout_secs=5, override_coordinator_port=None),
              gke.get_process_count(), gke.get_process_id())
  assert distributed.resolve_layout() == expected
  assert expected[1] == 4 * int(slices) and expected[2] == int(worker) + 4 * int(slice_id)
  clean_env.setenv("JAX_COORDINATOR_PORT", "1234")
  assert distributed.resolve_layout()[0] == "localhost:1234"


def test_tpu_worker_id_out_of_range(clean_env):
  clean_env.setenv("TPU_WORKER_HOSTNAMES", "a,b")
  clean_env.setenv("TPU_WORKER_ID", "2")
  with pytest.raises(ValueError, match="TPU_WORKER_ID=2 is outside the 2 workers"):
    distributed.resolve_layout()


@pytest.mark.parametrize("env, expected", [
    # one task per node on 4 GPUs: it drives all 4 (jax's default would be GPU 0 only)
    (dict(SLURM_TASKS_PER_NODE="1(x2)", SLURM_NODEID="1", CUDA_VISIBLE_DEVICES="0,1,2,3"), [0, 1, 2, 3]),
    (dict(SLURM_NTASKS_PER_NODE="1", SLURM_GPUS_ON_NODE="8"), list(range(8))),
    # one task per GPU, each bound to its own GPU (--gpus-per-task=1): the one it sees
    (dict(SLURM_TASKS_PER_NODE="8(x2)", SLURM_NODEID="1", CUDA_VISIBLE_DEVICES="5"), [0]),
    # one task per GPU that all see all GPUs: jax's rule (task i drives GPU i)
    (dict(SLURM_TASKS_PER_NODE="4,8", SLURM_NODEID="1", CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7"), None),
    (dict(SLURM_TASKS_PER_NODE="8", SLURM_NODEID="0", JAX_LOCAL_DEVICE_IDS="2,3"), [2, 3]),
])
def test_slurm_local_device_ids(clean_env, env, expected):
  for k, v in dict(SLURM_JOB_ID="7", SLURM_NTASKS="16", SLURM_PROCID="11", SLURM_LOCALID="3",
                   SLURM_STEP_NODELIST="gpu[1-2]", **env).items():
    clean_env.setenv(k, v)
  assert distributed.resolve_local_device_ids() == expected
  assert distributed.resolve_local_device_ids([6]) == [6]
  if expected is None:  # left to jax: its SLURM detection picks the SLURM_LOCALID-th device
    *_, ids = jax_cluster.ClusterEnv.auto_detect_unset_distributed_params(
        None, None, None, None, None, 5)
    assert ids == [3]


def test_no_cluster_no_local_device_ids(clean_env):
  assert distributed.resolve_local_device_ids() is None
  clean_env.setenv("JAX_LOCAL_DEVICE_IDS", "0,x")
  with pytest.raises(ValueError, match="JAX_LOCAL_DEVICE_IDS='0,x'"):
    distributed.resolve_local_device_ids()


def _cluster_env(kind, i, port):
  if kind == "slurm":
    return dict(SLURM_JOB_ID="4242", SLURM_NTASKS="2", SLURM_PROCID=str(i), SLURM_LOCALID=str(i),
                SLURM_NODEID="0", SLURM_TASKS_PER_NODE="2", SLURM_STEP_NODELIST="localhost",
                JAX_COORDINATOR_PORT=str(port))
  return dict(TPU_WORKER_HOSTNAMES="localhost,localhost", TPU_WORKER_ID=str(i),
              JAX_COORDINATOR_PORT=str(port))


@pytest.mark.parametrize("kind", ["slurm", "tpu"])
def test_workers_join_from_cluster_environment(kind, distributed_launch):
  """Two processes given only a simulated SLURM or TPU environment join one 4-device system."""
  address, env = distributed_launch
  port = int(address.rsplit(":", 1)[1])
  env = {k: v for k, v in env.items() if not k.startswith(("TPU_", "MEGASCALE_", "JAX_LOCAL"))}
  procs = [subprocess.Popen([sys.executable, str(_WORKER)], env={**env, **_cluster_env(kind, i, port)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for i in range(2)]
  outputs = []
  try:
    for p in procs:
      out, err = p.communicate(timeout=120)
      assert p.returncode == 0, err[-3000:]
      outputs.append(json.loads(out.strip().splitlines()[-1]))
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  assert [o["process_index"] for o in outputs] == [0, 1]
  for o in outputs:
    assert o["process_count"] == 2 and o["device_count"] == 4
    assert o["coordinator"] == f"localhost:{port}"
