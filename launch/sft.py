r"""Supervised fine-tuning (loss on target tokens only) from an ml_collections config.

  # SmolLM2-135M-Instruct on your rows, shrunk for a CPU: 8 steps of 4 rows took 140 s (configs/sft.py)
  python launch/sft.py --config=configs/sft.py:runlocal --config.data.path=rows.jsonl \
      --workdir=/tmp/gj_sft
  # any model and any field from the command line (big_vision style)
  python launch/sft.py --config=configs/sft.py --config.model.path=/ckpt/Qwen2.5-7B-Instruct \
      --config.data.path=/data/sft.jsonl --config.num_epochs=2 --workdir=/runs/sft
  # then RL from it: its HF folder is a config.model.path
  python launch/train.py --config=configs/arena.py --config.model.path=/runs/sft/hf --workdir=/runs/arena
  # rows from Examples and a recipe: its prompt, and its gold completion as the target (the papers'
  # SFT baselines: configs/sft.py:grace / :truthrl / :arena; :demo is the demo's warm-up)
  python launch/sft.py --config=configs/sft.py:demo --workdir=/tmp/gj_sft_demo

Rows are JSONL {"prompt": str, "target": str} or {"messages": [{"role", "content"}, ...], "target": str}
(config.data.kind="jsonl"), or built from Examples by a recipe (kind "recipe"; grounding_jax/sft/data.py).
A malformed row, or an Example the recipe cannot write a target for, stops the run before any model
loads, naming file:line (or the example) and the field. Re-running with the same --workdir resumes
exactly from its newest checkpoint. Writes <workdir>/config.json (the run record),
<workdir>/checkpoints, <workdir>/logs/metrics.jsonl and TensorBoard events in <workdir>/logs/tb, and at
the end <workdir>/hf (config.export_hf), an HF folder; `launch/export_hf.py --workdir=<workdir>
--step=N` exports any other checkpoint.
"""

from __future__ import annotations

import os
import pathlib
import sys

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from grounding_jax.eval import model_ref
from grounding_jax.models import hf_export
from grounding_jax.rl.config import presets
from grounding_jax.sft import data as sft_data
from grounding_jax.sft import trainer as sft_trainer

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to configs/sft.py[:arg].",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints and logs go here (overrides config).")
flags.mark_flags_as_required(["config"])


def main(argv):
  del argv
  config = _CONFIG.value
  try:  # a malformed row stops the run in one line (file:line: field), before any model loads
    rows = sft_data.load_rows(config.data)
  except (ValueError, FileNotFoundError) as e:
    sys.exit(f"sft: {e}")
  with config.unlocked():
    if _WORKDIR.value:
      config.workdir = _WORKDIR.value
    config.model.path = os.path.abspath(presets.resolve_model_path(config.model.path))
    config.data.path = os.path.abspath(config.data.path) if config.data.path else ""
  model_ref.write_run_config(config.workdir, config)
  logging.info("config:\n%s", config)
  trainer = sft_trainer.SFTTrainer(config, rows=rows)
  history = trainer.train()
  if history:
    logging.info("finished: step=%d, loss=%.4g", history[-1]["step"], history[-1]["loss"])
  if config.export_hf:
    folder = pathlib.Path(config.workdir) / "hf"
    hf_export.export_hf(trainer.model, folder, tokenizer_from=config.model.path, overwrite=True)
    logging.info("HF folder: %s (use as --config.model.path of launch/train.py)", folder)


if __name__ == "__main__":
  app.run(main)
