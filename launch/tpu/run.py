r"""Installs grounding_jax on every worker of a Cloud TPU VM slice and starts one launcher on all of them.

  # GRACE on a v5e-16 slice (4 hosts × 4 chips), checkpoints and logs on a bucket
  python launch/tpu/run.py --tpu=my-v5e-16 --zone=us-west4-a --workdir=gs://my-bucket/runs/grace \
      --setup="gcloud storage cp -r gs://my-bucket/models/Qwen3-4B /tmp/" \
      -- --config=configs/grace.py --config.model.path=/tmp/Qwen3-4B \
         --config.stages[0].data.path=gs://my-bucket/data/grace_hotpotqa/train.jsonl
  # see every command first; re-run without reinstalling; detach from the ssh session
  python launch/tpu/run.py --tpu=my-v5e-16 --zone=us-west4-a --workdir=gs://... --dry_run -- ...
  python launch/tpu/run.py ... --noinstall --background -- ...

Everything after `--` goes to the entry (--entry, default launch/train.py; any launch/*.py with its
flags, e.g. launch/evaluate.py). Steps, each one gcloud command run from this machine:
  1. `git archive` the committed tree of this checkout (uncommitted edits are NOT shipped) and copy
     it to every worker: `gcloud compute tpus tpu-vm scp … --worker=all`;
  2. unpack it and `pip install` the package with its `gcs` extra beside `jax[tpu]` on every worker
     (`--worker=all --command=…`, as the Cloud TPU guide installs JAX on a slice:
     https://cloud.google.com/tpu/docs/jax-pods; `pip install -U "jax[tpu]"` is JAX's TPU install,
     https://docs.jax.dev/en/latest/installation.html), then run --setup (e.g. copy the model);
  3. start the entry on all workers at once with `gcloud compute tpus tpu-vm ssh NAME --zone=Z
     --worker=all --command=…` (https://cloud.google.com/sdk/gcloud/reference/compute/tpus/tpu-vm/ssh).
     JAX is multi-controller: the same program runs on every host and must call
     `jax.distributed.initialize()` first; on Cloud TPU its arguments are found automatically
     (https://docs.jax.dev/en/latest/multi_process.html), which `parallel.distributed_initialize`
     leaves to jax (it reads the worker number and peers from the VM metadata server).
Output: worker 0 prints to this terminal (and ~/grounding_jax_logs/<name>.log on the VM); the other
workers write only to that file on their VM. The worker number comes from the same metadata key
jax reads (agent-worker-number, jax/_src/clusters/cloud_tpu_cluster.py). With --background every
worker writes to its file and the command returns; follow worker 0 with the `tail` line it prints.
The workdir should be a bucket (gs://…): every host must see the same checkpoints (orbax writes
from all of them) and process 0 writes metrics there (grounding_jax.paths).
"""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sys

from absl import app
from absl import flags

_REPO = pathlib.Path(__file__).resolve().parents[2]
# The metadata key of a TPU VM's index in its slice (jax's GceTpuCluster reads the same key).
_WORKER_NUMBER_URL = ("http://metadata.google.internal/computeMetadata/v1/instance/attributes/"
                      "agent-worker-number")

_TPU = flags.DEFINE_string("tpu", None, "TPU VM (slice) name, as in `gcloud compute tpus tpu-vm create`.")
_ZONE = flags.DEFINE_string("zone", None, "The slice's zone, e.g. us-west4-a.")
_PROJECT = flags.DEFINE_string("project", None, "Google Cloud project (default: gcloud's).")
_INTERNAL_IP = flags.DEFINE_bool("internal_ip", False, "ssh/scp over internal IPs (from a VM in the VPC).")
_ENTRY = flags.DEFINE_string("entry", "launch/train.py", "The launcher to run, relative to the repo.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Passed to the entry as --workdir (use gs://…).")
_INSTALL = flags.DEFINE_bool("install", True, "Copy and pip-install this checkout first.")
_REF = flags.DEFINE_string("ref", "HEAD", "Git revision of this checkout to ship.")
_TARBALL = flags.DEFINE_string("tarball", "/tmp/grounding_jax.tar.gz", "Local path of the archive.")
_REMOTE_DIR = flags.DEFINE_string("remote_dir", "~/grounding_jax", "Where the code lives on each VM.")
_PYTHON = flags.DEFINE_string("python", "python3", "Python on the VMs.")
_EXTRAS = flags.DEFINE_string("extras", "gcs", "setup.py extras to install (gcs: bucket paths).")
_SETUP = flags.DEFINE_string("setup", None, "Shell run on every worker after installing.")
_ENV = flags.DEFINE_multi_string("env", [], "KEY=VALUE exported for the entry (repeatable).")
_NAME = flags.DEFINE_string("name", None, "Log file name on the VMs (default: the workdir's basename).")
_BACKGROUND = flags.DEFINE_bool("background", False, "Detach (nohup) and return; logs to files only.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print every command instead of running it.")


def _gcloud(verb: str, *args: str) -> list[str]:
  cmd = ["gcloud", "compute", "tpus", "tpu-vm", verb, *args, f"--zone={_ZONE.value}", "--worker=all"]
  if _PROJECT.value:
    cmd.append(f"--project={_PROJECT.value}")
  if _INTERNAL_IP.value:
    cmd.append("--internal-ip")
  return cmd


def _remote_path(path: str) -> str:
  """`path` quoted for the VM's shell, a leading ~/ left bare so that shell expands it."""
  if path.startswith("~/"):
    return "~/" + shlex.quote(path[2:])
  return shlex.quote(path)


def _log_file() -> str:
  name = _NAME.value or (os.path.basename(_WORKDIR.value.rstrip("/")) if _WORKDIR.value else "run")
  return "~/grounding_jax_logs/" + shlex.quote(name) + ".log"


def install_commands() -> list[list[str]]:
  """archive → scp to all workers → unpack + pip install (+ --setup) on all workers."""
  tpu, tarball, remote = _TPU.value, _TARBALL.value, _REMOTE_DIR.value
  archive = ["git", "-C", str(_REPO), "archive", "--format=tar.gz", f"--output={tarball}", _REF.value]
  name = os.path.basename(tarball)
  scp = _gcloud("scp", tarball, f"{tpu}:~/{name}")
  package = f"{remote}[{_EXTRAS.value}]" if _EXTRAS.value else remote
  # One pip call so the resolver picks the jax[tpu] (jax + libtpu) that setup.py's jax range allows.
  steps = [f"rm -rf {_remote_path(remote)}", f"mkdir -p {_remote_path(remote)}",
           f"tar xzf ~/{shlex.quote(name)} -C {_remote_path(remote)}",
           f"{_PYTHON.value} -m pip install -q -U 'jax[tpu]' -e {_remote_path(package)}"]
  if _SETUP.value:
    steps.append(_SETUP.value)
  return [archive, scp, _gcloud("ssh", tpu, "--command=" + " && ".join(steps))]


def run_command(entry_args: list[str]) -> list[str]:
  """The ssh --worker=all command that starts the entry on every worker (logs as the docstring says)."""
  args = list(entry_args)
  if _WORKDIR.value:
    args.append(f"--workdir={_WORKDIR.value}")
  log = _log_file()
  program = shlex.join([_PYTHON.value, _ENTRY.value, *args])
  exports = "".join(f"export {shlex.quote(kv.split('=', 1)[0])}={shlex.quote(kv.split('=', 1)[1])}; "
                    for kv in _ENV.value)
  # -e: a worker whose cd or metadata query fails stops there instead of running elsewhere / unnamed.
  prologue = (f"set -eo pipefail; cd {_remote_path(_REMOTE_DIR.value)}; mkdir -p ~/grounding_jax_logs; "
              f"{exports}WORKER=$(curl -sf -H 'Metadata-Flavor: Google' {_WORKER_NUMBER_URL}); ")
  if _BACKGROUND.value:
    body = f"nohup {program} > {log} 2>&1 < /dev/null & echo worker $WORKER started pid $!"
  else:
    body = (f'if [ "$WORKER" = 0 ]; then {program} 2>&1 | tee {log}; '
            f"else {program} > {log} 2>&1; fi")
  return _gcloud("ssh", _TPU.value, "--command=" + prologue + body)


def main(argv):
  for flag in (_TPU, _ZONE):
    if not flag.value:
      raise app.UsageError(f"--{flag.name} is required")
  if _WORKDIR.value and not _WORKDIR.value.startswith("gs://"):
    print(f"warning: --workdir={_WORKDIR.value} is not a gs:// bucket; every worker writes its "
          "own copy and only worker 0's metrics land there", file=sys.stderr)
  for kv in _ENV.value:
    if "=" not in kv:
      raise app.UsageError(f"--env={kv!r} must be KEY=VALUE")
  commands = (install_commands() if _INSTALL.value else []) + [run_command(argv[1:])]
  for cmd in commands:
    print(shlex.join(cmd), flush=True)
    if not _DRY_RUN.value:
      subprocess.run(cmd, check=True)
  if _BACKGROUND.value:
    tail = _gcloud("ssh", _TPU.value, f"--command=tail -f {_log_file()}")
    tail[tail.index("--worker=all")] = "--worker=0"
    print("# follow worker 0: " + shlex.join(tail))


if __name__ == "__main__":
  app.run(main)
