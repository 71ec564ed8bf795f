r"""Runs one launcher on a single multi-GPU machine without SLURM: one process for all GPUs, or one per GPU.

  # the default: one process drives all 8 GPUs
  python launch/slurm/local_gpus.py --gpus=8 --workdir=/runs/grace -- --config=configs/grace.py
  # one process per GPU, as on a multi-node cluster (process 0 prints; the others write to files)
  python launch/slurm/local_gpus.py --gpus=8 --procs=gpu --workdir=/runs/grace -- --config=...
  python launch/slurm/local_gpus.py --gpus=8 --procs=gpu --dry_run -- --config=...   # print only

Everything after `--` goes to the entry (--entry, default launch/train.py; any launch/*.py).
--procs=one (default): a single process sees every GPU; XLA runs the collectives between them inside
  that process and nothing needs a coordinator. The simplest and the default for one machine — on a
  single host nothing in the trainer gains from more processes except host-side work.
--procs=gpu: N processes, process i with CUDA_VISIBLE_DEVICES=i and JAX_COORDINATOR_ADDRESS /
  JAX_NUM_PROCESSES / JAX_PROCESS_ID, which `parallel.distributed_initialize` reads. The same layout
  as a multi-node job (each process feeds its share of the batch and runs its own reward workers),
  so it spreads tokenising and reward scoring over N Python processes and tries out the multi-host
  code path on one machine; it costs N model loads in host memory and N compilations.
A process that fails stops the others (they would wait forever in a collective).
"""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sys
import time

from absl import app
from absl import flags

_GPUS = flags.DEFINE_integer("gpus", 8, "GPUs on this machine.")
_PROCS = flags.DEFINE_enum("procs", "one", ["one", "gpu"], "One process for all GPUs, or one per GPU.")
_PORT = flags.DEFINE_integer("port", 8476, "Coordinator port on localhost (--procs=gpu).")
_PYTHON = flags.DEFINE_string("python", sys.executable, "Python to run the entry with.")
_ENTRY = flags.DEFINE_string("entry", "launch/train.py", "The launcher to run, relative to the repo.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Passed to the entry as --workdir.")
_PROCESS_LOGS = flags.DEFINE_string("process_logs", "local_logs",
                                     "Logs of processes 1.. (--procs=gpu), under the repo.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the command(s) instead of running them.")

_REPO = pathlib.Path(__file__).resolve().parents[2]


def process_commands(entry_args: list[str]) -> list[tuple[dict[str, str], list[str], str | None]]:
  """[(extra environment, argv, log file or None for the console)] per process."""
  argv = [_PYTHON.value, _ENTRY.value, *entry_args]
  if _WORKDIR.value:
    argv.append(f"--workdir={_WORKDIR.value}")
  if _PROCS.value == "one":
    return [({"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(_GPUS.value))}, argv, None)]
  out = []
  for i in range(_GPUS.value):
    env = {"CUDA_VISIBLE_DEVICES": str(i), "JAX_COORDINATOR_ADDRESS": f"localhost:{_PORT.value}",
           "JAX_NUM_PROCESSES": str(_GPUS.value), "JAX_PROCESS_ID": str(i)}
    out.append((env, argv, None if i == 0 else os.path.join(_PROCESS_LOGS.value, f"process-{i}.log")))
  return out


def _render(env: dict[str, str], argv: list[str], log: str | None) -> str:
  line = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(argv)
  return line + (f" > {shlex.quote(log)} 2>&1 &" if log else "")


def main(argv):
  if _GPUS.value < 1:
    raise app.UsageError(f"--gpus={_GPUS.value} must be >= 1")
  commands = process_commands(argv[1:])
  if _DRY_RUN.value:
    # Background the console process too when there are several, so the lines run as a script.
    lines = [f"cd {shlex.quote(str(_REPO))}"]
    if len(commands) > 1:
      lines.append(f"mkdir -p {shlex.quote(_PROCESS_LOGS.value)}")
    lines += [_render(*c) for c in commands[1:]] + [_render(*commands[0])]
    print("\n".join(lines))
    return
  if len(commands) > 1:
    os.makedirs(_REPO / _PROCESS_LOGS.value, exist_ok=True)
  procs, files = {}, []
  try:
    for rank in reversed(range(len(commands))):  # peers first; process 0 (the coordinator) last
      env, cmd, log = commands[rank]
      out = open(_REPO / log, "w", encoding="utf-8") if log else None
      files += [out] if out else []
      procs[rank] = subprocess.Popen(cmd, env={**os.environ, **env}, cwd=_REPO, stdout=out,
                                     stderr=subprocess.STDOUT if out else None)
    while any(p.poll() is None for p in procs.values()):
      if any(p.returncode not in (None, 0) for p in procs.values()):
        for p in procs.values():  # peers of a dead process would block in a collective
          if p.poll() is None:
            p.terminate()
        break
      time.sleep(1.0)
    codes = [procs[rank].wait() for rank in range(len(commands))]
  finally:
    for p in procs.values():
      if p.poll() is None:
        p.kill()
    for f in files:
      f.close()
  bad = [c for c in codes if c != 0]
  if bad:
    sys.exit(f"{len(bad)} of {len(procs)} processes failed (exit codes {codes}); see {_PROCESS_LOGS.value}/")


if __name__ == "__main__":
  app.run(main)
