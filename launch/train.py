r"""Trains a policy with GRPO (or DAPO / Dr.GRPO settings) from an ml_collections config.

  # the small default: SmolLM2-135M-Instruct on the synthetic grounded-QA set (CPU, minutes)
  python launch/train.py --config=configs/synthetic_smollm2.py --workdir=/tmp/gj_synth
  # a paper recipe, shrunk to run locally; drop ':runlocal' on accelerators
  python launch/train.py --config=configs/grace.py:runlocal --workdir=/tmp/gj_grace
  # any field from the command line (big_vision style)
  python launch/train.py --config=configs/arena.py --config.rollout.group_size=4 --workdir=...
  # a named preset (grounding_jax.rl.config.presets) applied to the config; --config.* fields win
  python launch/train.py --config=configs/truthrl.py --preset=dapo --config.loss.kl_coef=0 ...
  # a jax.profiler trace of step 2 (config.perf.profile_step) in /tmp/prof (TensorBoard, xprof)
  python launch/train.py --config=configs/grace.py:runlocal --workdir=/tmp/gj --profile_dir=/tmp/prof

Every knob lives in the config (declared in grounding_jax/rl/config/fields.py); flags only pick the
config and the working directory. Re-running with the same --workdir resumes from its newest checkpoint, and
compiled programs come back from config.compile_cache_dir (~/.cache/grounding_jax/xla). The resolved
config is kept as <workdir>/config.json, the run record that launch/export_hf.py reads. On a
multi-host pod slice, start this same command on every host (launch/tpu/run.py does, and
launch/slurm/ for GPU clusters): `distributed_initialize` reads the coordinator and process layout
from flags or the environment (TPU VMs and SLURM set them). launch/sweep.py runs this command once
per entry of a config's sweep.

On SIGTERM (a SLURM time-limit or preemption notice, a spot VM's shutdown) the run finishes its
step, checkpoints it, logs one line and exits with 75 (grounding_jax/rl/preemption.py); a second
SIGTERM exits at once. launch/slurm/sbatch.py --requeue requeues the job on that code.
"""

from __future__ import annotations

import os
import sys

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from grounding_jax import checkpoints
from grounding_jax import parallel
from grounding_jax.data import schema
from grounding_jax.eval import model_ref
from grounding_jax.parallel import compile_cache
from grounding_jax.rl.config import checks as config_checks
from grounding_jax.rl import health
from grounding_jax.rl import preemption
from grounding_jax.rl.config import overrides
from grounding_jax.rl.config import presets
from grounding_jax.rl import setup
from grounding_jax.rl import trainer

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file[:arg].",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints and logs go here (overrides config).")
_PROFILE_DIR = flags.DEFINE_string(
    "profile_dir", None, "Write a jax.profiler trace of one GRPO step here (sets "
    "config.perf.profile_dir; the step is config.perf.profile_step, default 2).")
_PRESET = flags.DEFINE_list("preset", [], "Functions of grounding_jax.rl.config.presets applied to the "
                            "config in order (e.g. dapo); --config.<field> flags win over them.")
_COORDINATOR = flags.DEFINE_string("coordinator_address", None, "host:port of process 0 (multi-host).")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Number of processes (multi-host).")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index (multi-host).")
flags.mark_flags_as_required(["config"])


def main(argv):
  del argv
  parallel.distributed_initialize(coordinator_address=_COORDINATOR.value,
                                  num_processes=_NUM_PROCESSES.value, process_id=_PROCESS_ID.value)
  config = overrides.apply_presets(_CONFIG.value, _PRESET.value,
                                   config_flags.get_override_values(flags.FLAGS["config"]))
  with config.unlocked():
    if _WORKDIR.value:
      config.workdir = _WORKDIR.value
    if _PROFILE_DIR.value:
      config.perf.profile_dir = _PROFILE_DIR.value
    config.model.path = os.path.abspath(presets.resolve_model_path(config.model.path))
  # Errors a user causes (bad config values, data rows, start weights, checkpoints, a full disk, a
  # run stopped on non-finite updates or on a reward that failed every row) end the run with their
  # message alone: it names the value and the fix.
  user_errors = (config_checks.ConfigError, schema.DataError, checkpoints.CheckpointError,
                 checkpoints.CheckpointWriteError, health.NonFiniteRunError,
                 health.NonFiniteWeightsError, health.FailedRewardsError)
  try:
    setup.check_config(config, read_data=False)  # before the run record can overwrite a good one
    # The run record: the workdir alone then says which base model and dtype its checkpoints belong
    # to (launch/export_hf.py and evaluation read it through grounding_jax.eval.model_ref).
    model_ref.write_run_config(config.workdir, config)
    logging.info("config:\n%s", config)
    logging.info("compilation cache: %s", compile_cache.enable(config.compile_cache_dir) or "off")
    run = trainer.Trainer(config)
    if config.perf.startup_report:  # before step 1: does the model fit on this mesh?
      print(run.startup_report(), flush=True)
    history = run.train()
  except user_errors as e:
    logging.error("%s", e)
    sys.exit(1)
  except preemption.Preempted as e:  # SIGTERM: the finished step is checkpointed; requeue to resume
    logging.warning("%s", e)
    sys.exit(preemption.PREEMPTED_EXIT_CODE)
  if history:
    last = history[-1]
    keys = [k for k in ("step", "reward/mean", "kl", "entropy", "completion_length/mean") if k in last]
    logging.info("finished: %s", ", ".join(f"{k}={last[k]}" for k in keys))


if __name__ == "__main__":
  app.run(main)
