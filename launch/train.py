r"""Trains a policy with GRPO (or DAPO / Dr.GRPO settings) from an ml_collections config.

  # the small default: SmolLM2-135M-Instruct on the synthetic grounded-QA set (CPU, minutes)
  python launch/train.py --config=configs/synthetic_smollm2.py --workdir=/tmp/gj_synth
  # a paper recipe, shrunk to run locally; drop ':runlocal' on accelerators
  python launch/train.py --config=configs/grace.py:runlocal --workdir=/tmp/gj_grace
  # any field from the command line (big_vision style)
  python launch/train.py --config=configs/arena.py --config.rollout.group_size=4 --workdir=...

Every knob lives in the config (see grounding_jax/rl/config.py); flags only pick the config and the
working directory. Re-running with the same --workdir resumes from its newest checkpoint, and
compiled programs come back from config.compile_cache_dir (~/.cache/grounding_jax/xla). On a
multi-host pod slice, start this same command on every host: `distributed_initialize` reads the
coordinator and process layout from flags or the environment (TPU VMs and SLURM set them).
"""

from __future__ import annotations

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from grounding_jax import parallel
from grounding_jax.parallel import compile_cache
from grounding_jax.rl import presets
from grounding_jax.rl import trainer

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file[:arg].",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints and logs go here (overrides config).")
_COORDINATOR = flags.DEFINE_string("coordinator_address", None, "host:port of process 0 (multi-host).")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Number of processes (multi-host).")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index (multi-host).")
flags.mark_flags_as_required(["config"])


def main(argv):
  del argv
  parallel.distributed_initialize(coordinator_address=_COORDINATOR.value,
                                  num_processes=_NUM_PROCESSES.value, process_id=_PROCESS_ID.value)
  config = _CONFIG.value
  with config.unlocked():
    if _WORKDIR.value:
      config.workdir = _WORKDIR.value
    config.model.path = presets.resolve_model_path(config.model.path)
  logging.info("config:\n%s", config)
  logging.info("compilation cache: %s", compile_cache.enable(config.compile_cache_dir) or "off")
  history = trainer.train(config)
  if history:
    last = history[-1]
    keys = [k for k in ("step", "reward/mean", "kl", "entropy", "completion_length/mean") if k in last]
    logging.info("finished: %s", ", ".join(f"{k}={last[k]}" for k in keys))


if __name__ == "__main__":
  app.run(main)
