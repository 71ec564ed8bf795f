"""Every recipe config builds (full and :runlocal), names real rewards and prompt recipes, each
:runlocal trains a step on a tiny model, and the default config runs end to end through
launch/train.py."""

import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from grounding_jax.data import prompts
from grounding_jax.rewards import get_reward

ROOT = pathlib.Path(__file__).resolve().parents[2]
# GRPO configs; configs/sft.py (launch/sft.py) is tested in tests/sft/test_sft_launch.py.
CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.py") if p.stem != "sft")


def _load(path):
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
@pytest.mark.parametrize("arg", [None, "runlocal"])
def test_config_builds_with_real_rewards_and_prompts(path, arg):
  c = _load(path).get_config(arg)
  rows = c.rollout.prompts_per_step * c.rollout.group_size
  assert rows % c.update_loop.num_minibatches == 0
  assert (rows // c.update_loop.num_minibatches) % c.update_loop.micro_batch_size == 0
  for st in c.stages:
    assert st.data.recipe in prompts.RECIPES
    for fn in (st.reward.get("functions") or c.reward.functions):
      options = dict(fn.options)
      if fn.name.startswith("trust"):
        # An NLI folder must be named; without one the reward says which option to set.
        with pytest.raises(ValueError, match="nli"):
          get_reward(fn.name, **options)
        continue
      assert callable(get_reward(fn.name, **options))
  if arg == "runlocal":
    assert c.model.path == "smollm2" and all(st.data.kind == "synthetic" for st in c.stages)


def test_default_config_trains_through_the_launcher(tiny_checkpoint, smollm2_dir, tmp_path):
  # A tiny llama with SmolLM2's vocabulary and tokenizer stands in for SmolLM2 to keep this fast.
  model_dir = tmp_path / "model"
  shutil.copytree(tiny_checkpoint("llama", vocab_size=49152), model_dir)
  for f in smollm2_dir.iterdir():
    if f.is_file() and f.name != "config.json" and not f.name.startswith("model"):
      shutil.copy(f, model_dir / f.name)
  workdir = tmp_path / "run"
  cmd = [sys.executable, str(ROOT / "launch" / "train.py"),
         f"--config={ROOT / 'configs' / 'synthetic_smollm2.py'}", f"--workdir={workdir}",
         f"--config.model.path={model_dir}", "--config.stages[0].num_steps=2",
         "--config.rollout.max_new_tokens=8", "--config.reward.num_workers=0"]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [json.loads(line) for line in (workdir / "logs" / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows] == [1, 2]
  assert all(-1.0 <= r["reward/mean"] <= 1.0 for r in rows)
  assert any((workdir / "checkpoints").iterdir())
  record = json.loads((workdir / "config.json").read_text())  # the run record says which base model
  assert record["model"]["path"] == str(model_dir) and record["model"]["param_dtype"] == "float32"


@pytest.fixture(scope="module")
def tiny_smollm2_vocab(tiny_checkpoint, smollm2_dir, tmp_path_factory):
  """A tiny llama with SmolLM2's vocabulary and tokenizer files (stands in for SmolLM2)."""
  model_dir = tmp_path_factory.mktemp("tiny_smollm2") / "model"
  shutil.copytree(tiny_checkpoint("llama", vocab_size=49152), model_dir)
  for f in smollm2_dir.iterdir():
    if f.is_file() and f.name != "config.json" and not f.name.startswith("model"):
      shutil.copy(f, model_dir / f.name)
  return model_dir


# trust's reward needs an NLI model folder (its rewards have their own tests); synthetic_smollm2 is
# the launcher test's config.
_SELF_CONTAINED = [p for p in CONFIGS if p.stem not in ("trust", "synthetic_smollm2")]


@pytest.mark.parametrize("path", _SELF_CONTAINED, ids=lambda p: p.stem)
def test_runlocal_config_trains_one_step(path, tiny_smollm2_vocab, tmp_path):
  """Each recipe's :runlocal settings (remat, KL, advantage, DAPO, rollout kind) run a whole GRPO
  step; only sizes shrink. Catches option combinations no unit test puts together."""
  from grounding_jax.rl import trainer  # pylint: disable=g-import-not-at-top
  c = _load(path).get_config("runlocal")
  c.model.path = str(tiny_smollm2_vocab)
  c.workdir = str(tmp_path)
  c.rollout.prompts_per_step, c.rollout.group_size = 2, 2
  c.rollout.max_new_tokens = 8
  if c.dapo.overlong_shaping:
    c.dapo.overlong_buffer = 2
  c.update_loop.num_minibatches, c.update_loop.micro_batch_size = 1, 2
  c.reward.num_workers = 0
  c.logging.console = False
  c.stages = c.stages[:1]
  c.stages[0].num_steps = 1
  c.stages[0].data.num_examples = 8
  history = trainer.train(c)
  assert len(history) == 1 and np.isfinite(history[0]["loss"])
