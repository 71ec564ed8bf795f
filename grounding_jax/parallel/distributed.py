"""Multi-host start-up: `jax.distributed.initialize` with the layout from args, env, SLURM or TPU.

Call `distributed_initialize()` first thing in a launcher, before any JAX computation. Afterwards
`jax.devices()` lists every process's devices and `make_mesh()` builds one global mesh over them.

Where the layout comes from (first that applies): the arguments; JAX_COORDINATOR_ADDRESS /
JAX_NUM_PROCESSES / JAX_PROCESS_ID (launch/slurm/local_gpus.py sets these); SLURM's task variables
(launch/slurm/sbatch.py); the TPU worker variables of GKE and multislice (TPU_WORKER_HOSTNAMES,
TPU_WORKER_ID, MEGASCALE_*); else jax's own detection, which on a Cloud TPU VM slice asks the VM's
metadata server (launch/tpu/run.py relies on it: "If you are using TPU, Slurm, or Open MPI, all
arguments are optional", https://docs.jax.dev/en/latest/_autosummary/jax.distributed.initialize.html).
"""

import logging
import os
import re
from typing import Sequence

from absl import flags
import jax

_ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
_ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
_ENV_PROCESS_ID = "JAX_PROCESS_ID"
_ENV_PORT = "JAX_COORDINATOR_PORT"
_ENV_LOCAL_DEVICE_IDS = "JAX_LOCAL_DEVICE_IDS"
# jax's fixed coordinator port on TPU slices (jax/_src/clusters/cloud_tpu_cluster.py), so every
# worker derives the same address without talking to the others.
_TPU_COORDINATOR_PORT = 8482


def _first_slurm_host(nodelist: str) -> str:
  """First host of a SLURM node list: 'n01' | 'n01,n02' | 'n[01-04,07],m1' | 'gpu[3,5]' -> 'n01' ..."""
  match = re.match(r"([^,\[]+)(\[([^\]]*)\])?", nodelist.strip())
  if not match:
    raise ValueError(f"cannot parse SLURM_STEP_NODELIST={nodelist!r}; set {_ENV_COORDINATOR} instead")
  prefix, _, ranges = match.groups()
  if ranges is None:
    return prefix
  return prefix + re.split(r"[,-]", ranges)[0]


def _int_env(name: str) -> int | None:
  value = os.environ.get(name)
  if value is None or value == "":
    return None
  try:
    return int(value)
  except ValueError:
    raise ValueError(f"environment variable {name}={value!r} must be an integer") from None


def _tpu_layout() -> tuple[str, int, int] | None:
  """(coordinator, process count, process id) from the TPU worker variables, or None if unset.

  The same rule as jax's GkeTpuCluster / BaseTpuCluster: workers of one slice are listed in
  TPU_WORKER_HOSTNAMES (or TPU_PROCESS_ADDRESSES) in process order, TPU_WORKER_ID is this worker's
  index in its slice; with multislice, MEGASCALE_NUM_SLICES / MEGASCALE_SLICE_ID number the slices
  and MEGASCALE_COORDINATOR_ADDRESS names process 0's host.
  """
  hosts = os.environ.get("TPU_PROCESS_ADDRESSES") or os.environ.get("TPU_WORKER_HOSTNAMES")
  worker = _int_env("TPU_WORKER_ID")
  if not hosts or worker is None:
    return None
  hosts = [h.strip() for h in hosts.split(",") if h.strip()]
  if not 0 <= worker < len(hosts):
    raise ValueError(f"TPU_WORKER_ID={worker} is outside the {len(hosts)} workers of "
                     f"TPU_WORKER_HOSTNAMES={','.join(hosts)!r}")
  num_slices = _int_env("MEGASCALE_NUM_SLICES") or 1
  slice_id = _int_env("MEGASCALE_SLICE_ID") or 0
  host = (os.environ.get("MEGASCALE_COORDINATOR_ADDRESS") or hosts[0]).split(":")[0]
  port = _int_env(_ENV_PORT) or _TPU_COORDINATOR_PORT
  return f"{host}:{port}", len(hosts) * num_slices, worker + slice_id * len(hosts)


def resolve_layout(coordinator_address: str | None = None, num_processes: int | None = None,
                   process_id: int | None = None) -> tuple[str | None, int | None, int | None]:
  """Fills the layout from (in order) the arguments, JAX_* variables, SLURM, then TPU variables.

  Returns:
    (coordinator_address, num_processes, process_id); entries nobody set stay None (left to jax's
    own cluster detection, e.g. on Cloud TPU VMs).
  """
  coordinator_address = coordinator_address or os.environ.get(_ENV_COORDINATOR) or None
  if num_processes is None:
    num_processes = _int_env(_ENV_NUM_PROCESSES)
  if process_id is None:
    process_id = _int_env(_ENV_PROCESS_ID)
  if "SLURM_NTASKS" in os.environ and "SLURM_PROCID" in os.environ:
    if num_processes is None:
      num_processes = _int_env("SLURM_NTASKS")
    if process_id is None:
      process_id = _int_env("SLURM_PROCID")
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if coordinator_address is None and nodelist and (num_processes or 1) > 1:
      port = _int_env(_ENV_PORT)
      if port is None:
        # Same rule as jax's SLURM detection so every task derives the same port from the job id.
        port = (_int_env("SLURM_JOB_ID") or 0) % 2**12 + (65535 - 2**12 + 1)
      coordinator_address = f"{_first_slurm_host(nodelist)}:{port}"
  tpu = _tpu_layout()
  if tpu is not None:
    coordinator_address = coordinator_address or tpu[0]
    num_processes = tpu[1] if num_processes is None else num_processes
    process_id = tpu[2] if process_id is None else process_id
  return coordinator_address, num_processes, process_id


def _slurm_tasks_on_this_node() -> int | None:
  """Tasks SLURM started on this node: SLURM_TASKS_PER_NODE ('8(x2),4' = 8, 8, 4 per node in
  SLURM_NODEID order), else SLURM_NTASKS_PER_NODE."""
  spec, node = os.environ.get("SLURM_TASKS_PER_NODE"), _int_env("SLURM_NODEID")
  if spec and node is not None:
    per_node = []
    for part in spec.split(","):
      match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
      if not match:
        return _int_env("SLURM_NTASKS_PER_NODE")
      per_node += [int(match.group(1))] * int(match.group(2) or 1)
    if node < len(per_node):
      return per_node[node]
  return _int_env("SLURM_NTASKS_PER_NODE")


def resolve_local_device_ids(local_device_ids: Sequence[int] | None = None) -> list[int] | None:
  """The accelerators this process drives, as indices into the devices it can see; None = all.

  From the argument, else JAX_LOCAL_DEVICE_IDS ("0,1,2,3"), else SLURM on GPUs, where jax's own
  default (one device per task, the SLURM_LOCALID-th) is wrong in two common set-ups:
    - one task per node (jax issue #16788): the task must drive every GPU it sees, not only GPU 0;
      the count is that of CUDA_VISIBLE_DEVICES, else SLURM_GPUS_ON_NODE;
    - one task per GPU with `--gpus-per-task=1` (jax issue #28194): each task sees one GPU, index 0.
  Otherwise None, leaving jax's rule (several tasks on a node that all see all of its GPUs: task i
  drives GPU i).
  """
  if local_device_ids is not None:
    return [int(i) for i in local_device_ids]
  env = os.environ.get(_ENV_LOCAL_DEVICE_IDS, "").strip()
  if env:
    try:
      return [int(i) for i in env.split(",")]
    except ValueError:
      raise ValueError(f"{_ENV_LOCAL_DEVICE_IDS}={env!r} must be comma-separated integers, "
                       f"e.g. 0,1,2,3") from None
  if "SLURM_PROCID" not in os.environ or "SLURM_LOCALID" not in os.environ:
    return None
  visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
  tasks_here = _slurm_tasks_on_this_node()
  if tasks_here == 1:
    gpus = len(visible) or _int_env("SLURM_GPUS_ON_NODE")
    if gpus:
      return list(range(gpus))
    logging.warning("distributed_initialize: one SLURM task on this node but its GPU count is "
                    "unknown (no CUDA_VISIBLE_DEVICES or SLURM_GPUS_ON_NODE); on GPUs jax will "
                    "drive GPU 0 only. Set %s=0,1,...", _ENV_LOCAL_DEVICE_IDS)
    return None
  if len(visible) == 1:
    return [0]
  return None


def distributed_initialize(coordinator_address: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None, *,
                           local_device_ids: Sequence[int] | None = None,
                           initialization_timeout: int = 300) -> None:
  """Joins this process to the JAX distributed system; a no-op for a single process or a repeat call.

  Layout comes from the arguments, else JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID,
  else SLURM (SLURM_NTASKS, SLURM_PROCID, first host of SLURM_STEP_NODELIST; port from
  JAX_COORDINATOR_PORT or the job id), else TPU worker variables (TPU_WORKER_HOSTNAMES,
  TPU_WORKER_ID, MEGASCALE_*; port 8482 or JAX_COORDINATOR_PORT), else jax's auto-detection (Cloud
  TPU VMs through their metadata server, Open MPI). When nothing is detected the run is
  single-process and nothing is initialised. Local devices: see `resolve_local_device_ids`.

  Args:
    coordinator_address: "host:port" of process 0's coordinator service.
    num_processes: total number of processes.
    process_id: this process's index in [0, num_processes).
    local_device_ids: indices of the accelerators this process drives (None = the rule above).
    initialization_timeout: seconds to wait for every process to join.

  Raises:
    ValueError: on an inconsistent layout (process_id out of range, only some fields given).
    RuntimeError: from jax when JAX computations already ran in this process.
  """
  if jax.distributed.is_initialized():
    return
  address, count, index = resolve_layout(coordinator_address, num_processes, process_id)
  if count is not None and count < 1:
    raise ValueError(f"num_processes={count} must be >= 1")
  if count == 1 and index in (None, 0):
    return  # single process: nothing to coordinate
  if count is not None and index is not None and not 0 <= index < count:
    raise ValueError(f"process_id={index} is outside [0, num_processes={count})")
  given = {"coordinator_address": address, "num_processes": count, "process_id": index}
  if any(v is not None for v in given.values()) and any(v is None for v in given.values()):
    missing = [k for k, v in given.items() if v is None]
    # Only Cloud TPU / MPI detection can fill a partial layout; say what is missing if it cannot.
    logging.info("distributed_initialize: %s not given; asking jax to detect them", missing)
  if all(v is None for v in given.values()) and not _cluster_detected():
    return  # nothing given and no cluster to detect: a single process
  try:
    jax.distributed.initialize(coordinator_address=address, num_processes=count, process_id=index,
                               local_device_ids=resolve_local_device_ids(local_device_ids),
                               initialization_timeout=initialization_timeout)
  except ValueError as e:
    if all(v is None for v in given.values()) and "coordinator_address" in str(e):
      logging.info("distributed_initialize: no cluster detected; running as a single process")
      return
    raise ValueError(f"jax.distributed.initialize failed for layout {given}: {e}. Pass "
                     f"coordinator_address/num_processes/process_id or set {_ENV_COORDINATOR}, "
                     f"{_ENV_NUM_PROCESSES}, {_ENV_PROCESS_ID}") from e


def _cluster_detected() -> bool:
  """Whether jax's own auto-detection sees a cluster (Cloud TPU, Open MPI, SLURM, Kubernetes, …).

  Asked before calling `jax.distributed.initialize()` with nothing given, which raises rather than
  returning when no cluster is there (and refuses outright once JAX computations have run).
  """
  try:
    from jax._src import clusters  # pylint: disable=g-import-not-at-top
    return any(c.is_env_present() for c in clusters.ClusterEnv._cluster_types)  # pylint: disable=protected-access
  except (ImportError, AttributeError):  # the private API moved: let jax decide
    return True


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines --coordinator_address, --num_processes and --process_id for a launcher (all optional;
  unset ones come from the environment as in `distributed_initialize`)."""
  flags.DEFINE_string("coordinator_address", None, "host:port of process 0 (multi-host runs).",
                      flag_values=flag_values)
  flags.DEFINE_integer("num_processes", None, "Number of processes (multi-host runs).",
                       flag_values=flag_values)
  flags.DEFINE_integer("process_id", None, "This process's index (multi-host runs).",
                       flag_values=flag_values)


def initialize_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """`distributed_initialize` with the layout from the flags of `define_flags` (after parsing)."""
  distributed_initialize(flag_values.coordinator_address, flag_values.num_processes,
                         flag_values.process_id)
