r"""Writes and submits a SLURM batch script that runs one launcher on several GPU nodes.

  # 2 nodes × 8 GPUs, one process per GPU (16 processes)
  python launch/slurm/sbatch.py --nodes=2 --gpus_per_node=8 --procs=gpu --partition=gpu \
      --time=24:00:00 --setup="source .venv/bin/activate" --workdir=/shared/runs/grace \
      -- --config=configs/grace.py --config.model.path=/shared/models/Qwen3-4B
  # checkpoint 10 minutes before the time limit and requeue (resumes from the checkpoint)
  python launch/slurm/sbatch.py --nodes=2 --time=4:00:00 --requeue --signal_seconds=600 \
      --workdir=/shared/runs/grace -- --config=configs/grace.py
  # print the script instead of submitting it (save it, edit it, `sbatch` it yourself)
  python launch/slurm/sbatch.py --nodes=2 --dry_run -- --config=configs/grace.py > grace.sbatch

Everything after `--` goes to the entry (--entry, default launch/train.py; any launch/*.py). srun
starts the processes; `parallel.distributed_initialize` (called by the entry before any JAX work)
reads the layout from SLURM's variables: SLURM_NTASKS processes, this one SLURM_PROCID, the
coordinator on the first host of SLURM_STEP_NODELIST at a port derived from the job id (jax's own
rule; JAX_COORDINATOR_PORT overrides). Two layouts:
  --procs=gpu   one task per GPU (--ntasks-per-node=G). Every task sees all G GPUs of its node and
                drives the SLURM_LOCALID-th: the layout jax's SLURM support expects (binding one GPU
                per task with --gpus-per-task breaks it, jax issue #28194; it is not used here).
  --procs=node  one task per node driving all its GPUs (distributed_initialize passes every visible
                GPU as local_device_ids; jax alone would give the task GPU 0 only, jax issue #16788).
                Fewer processes: one copy of the tokenizer, data and reward workers per node.
The trainer's sharded arrays and collectives are identical either way; per-GPU processes spread
host work (tokenising, rewards) over more Python processes, per-node ones use less host memory.
Process 0 prints to the job's output file (--output); the others write to <process_logs>/$SLURM_JOB_ID/
process-<rank>.log. A failing process ends the job (srun --kill-on-bad-exit) instead of leaving its
peers waiting in a collective.

--requeue (time limits and preemption): `#SBATCH --signal=TERM@<--signal_seconds>` has SLURM send
SIGTERM to every task that long before the time limit (without `B:`, which would signal the batch
shell alone and leave it to forward the signal); the trainer finishes its step, checkpoints it and
exits with 75 (grounding_jax/rl/preemption.py). Each task's shell outlives the signal (`trap :
TERM`: the trainer itself keeps SIGTERM's default until it installs its handler) and, on 75, leaves
a marker in the job's log folder; after srun the batch script requeues the job (`scontrol requeue`)
when any task left one — not on srun's own status, which --kill-on-bad-exit can turn into a
signal's when it kills the peers of the first task to exit. `#SBATCH --requeue` lets SLURM requeue
the job (its own preemption with PreemptMode=REQUEUE needs it too), `--open-mode=append` keeps the
earlier runs' output, and the requeued job (same id, same --workdir) resumes from the checkpoint.
Set --signal_seconds above one GRPO step plus a checkpoint write: SLURM kills the job at its limit.
"""

from __future__ import annotations

import pathlib
import shlex
import subprocess
import sys

from absl import app
from absl import flags

_REPO = pathlib.Path(__file__).resolve().parents[2]

_NODES = flags.DEFINE_integer("nodes", 1, "Nodes to allocate.")
_GPUS = flags.DEFINE_integer("gpus_per_node", 8, "GPUs per node.")
_PROCS = flags.DEFINE_enum("procs", "gpu", ["gpu", "node"], "One process per GPU or per node.")
_JOB_NAME = flags.DEFINE_string("job_name", "grounding_jax", "SLURM job name.")
_PARTITION = flags.DEFINE_string("partition", None, "SLURM partition.")
_ACCOUNT = flags.DEFINE_string("account", None, "SLURM account.")
_TIME = flags.DEFINE_string("time", None, "Wall-clock limit, e.g. 24:00:00.")
_CPUS = flags.DEFINE_integer("cpus_per_task", None, "CPUs per task (reward workers run there).")
_OUTPUT = flags.DEFINE_string("output", "slurm-%x-%j.out", "Job output file (process 0's log).")
_PROCESS_LOGS = flags.DEFINE_string("process_logs", "slurm_logs",
                                     "Logs of processes 1..: <process_logs>/<job id>/process-<rank>.log.")
_SBATCH_ARGS = flags.DEFINE_multi_string("sbatch_arg", [], "Extra #SBATCH line, e.g. --exclusive.")
_SETUP = flags.DEFINE_string("setup", None, "Shell run before srun, e.g. activating a venv.")
_ENV = flags.DEFINE_multi_string("env", [], "KEY=VALUE exported for the entry (repeatable).")
_PYTHON = flags.DEFINE_string("python", "python3", "Python on the nodes.")
_ENTRY = flags.DEFINE_string("entry", "launch/train.py", "The launcher to run, relative to the repo.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Passed to the entry as --workdir (a shared path).")
_REPO_DIR = flags.DEFINE_string("repo_dir", str(_REPO), "The checkout as the nodes see it.")
_SCRIPT = flags.DEFINE_string("script", None, "Where to write the script (default <job_name>.sbatch).")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the script; write and submit nothing.")
_REQUEUE = flags.DEFINE_bool("requeue", False, "SIGTERM the tasks --signal_seconds before the time "
                             "limit and requeue the job when the trainer exits with 75 (preempted).")
_SIGNAL_SECONDS = flags.DEFINE_integer("signal_seconds", 300, "With --requeue: how long before the "
                                       "time limit SLURM sends SIGTERM (> one step + a checkpoint).")

PREEMPTED_EXIT_CODE = 75  # grounding_jax/rl/preemption.py (not imported: launchers stay light)


def render(entry_args: list[str]) -> str:
  """The batch script's text."""
  tasks_per_node = _GPUS.value if _PROCS.value == "gpu" else 1
  lines = ["#!/bin/bash", f"#SBATCH --job-name={_JOB_NAME.value}", f"#SBATCH --nodes={_NODES.value}",
           f"#SBATCH --ntasks-per-node={tasks_per_node}", f"#SBATCH --gpus-per-node={_GPUS.value}",
           f"#SBATCH --output={_OUTPUT.value}"]
  for name, flag in (("partition", _PARTITION), ("account", _ACCOUNT), ("time", _TIME),
                     ("cpus-per-task", _CPUS)):
    if flag.value is not None:
      lines.append(f"#SBATCH --{name}={flag.value}")
  if _REQUEUE.value:
    lines += ["#SBATCH --requeue", f"#SBATCH --signal=TERM@{_SIGNAL_SECONDS.value}",
              "#SBATCH --open-mode=append"]
  lines += [f"#SBATCH {arg}" for arg in _SBATCH_ARGS.value]
  lines += ["set -euo pipefail", f"cd {shlex.quote(_REPO_DIR.value)}"]
  if _SETUP.value:
    lines.append(_SETUP.value)
  for kv in _ENV.value:
    key, value = kv.split("=", 1)
    lines.append(f"export {key}={shlex.quote(value)}")
  log_dir = f"{shlex.quote(_PROCESS_LOGS.value)}/$SLURM_JOB_ID"
  args = list(entry_args) + ([f"--workdir={_WORKDIR.value}"] if _WORKDIR.value else [])
  program = shlex.join([_PYTHON.value, _ENTRY.value, *args])
  # Single quotes: $SLURM_PROCID is expanded by each task's shell, not once by the batch shell.
  if not _REQUEUE.value:
    per_task = (f'if [ "$SLURM_PROCID" = 0 ]; then exec {program}; '
                f'else exec {program} > {log_dir}/process-$SLURM_PROCID.log 2>&1; fi')
    lines += [f"mkdir -p {log_dir}",
              f"srun --kill-on-bad-exit=1 bash -c {shlex.quote(per_task)}"]
    return "\n".join(lines) + "\n"
  marker = f"{log_dir}/preempted"
  per_task = (f'trap : TERM; if [ "$SLURM_PROCID" = 0 ]; then {program}; '
              f'else {program} > {log_dir}/process-$SLURM_PROCID.log 2>&1; fi; status=$?; '
              f'if [ "$status" = {PREEMPTED_EXIT_CODE} ]; then touch {marker}; fi; exit "$status"')
  lines += [f"mkdir -p {log_dir}", f"rm -f {marker}", "set +e",
            f"srun --kill-on-bad-exit=1 bash -c {shlex.quote(per_task)}",
            "status=$?", "set -e",
            f"if [ -e {marker} ]; then",
            f'  echo "preempted (exit {PREEMPTED_EXIT_CODE}): requeueing job $SLURM_JOB_ID to resume '
            'from its checkpoint"',
            '  scontrol requeue "$SLURM_JOB_ID"',
            "fi",
            'exit "$status"']
  return "\n".join(lines) + "\n"


def main(argv):
  for kv in _ENV.value:
    if "=" not in kv:
      raise app.UsageError(f"--env={kv!r} must be KEY=VALUE")
  if _REQUEUE.value and _SIGNAL_SECONDS.value < 1:
    raise app.UsageError(f"--signal_seconds={_SIGNAL_SECONDS.value} must be >= 1")
  if _NODES.value < 1 or _GPUS.value < 1:
    raise app.UsageError(f"--nodes={_NODES.value} and --gpus_per_node={_GPUS.value} must be >= 1")
  script = render(argv[1:])
  if _DRY_RUN.value:
    sys.stdout.write(script)
    return
  path = pathlib.Path(_SCRIPT.value or f"{_JOB_NAME.value}.sbatch")
  path.write_text(script, encoding="utf-8")
  print(f"wrote {path}; submitting: sbatch {path}", flush=True)
  subprocess.run(["sbatch", str(path)], check=True)


if __name__ == "__main__":
  app.run(main)
