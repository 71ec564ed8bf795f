"""launch/sweep.py: expansion of grids and lists, run names, --only, the dry run's commands, skipping
finished runs, metric summaries, every config's declared sweep, and a summary of two tiny real runs."""

import importlib.util
import json
import pathlib
import shlex
import shutil
import subprocess
import sys

import jax.numpy as jnp
import pytest

import launch_script
from grounding_jax import checkpoints

ROOT = pathlib.Path(__file__).resolve().parents[2]
sweep = launch_script.load("sweep", "launch_sweep")


def _config_module(path):
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _sweep_cli(*args):
  proc = subprocess.run([sys.executable, str(ROOT / "launch" / "sweep.py"), *args],
                        capture_output=True, text=True, timeout=600, cwd=ROOT)
  return proc


def test_expand_grid_and_list():
  grid = sweep.expand({"a.x": [1, 2], "b": ["p", "q", "r"]})
  assert grid == [{"a.x": 1, "b": "p"}, {"a.x": 1, "b": "q"}, {"a.x": 1, "b": "r"},
                  {"a.x": 2, "b": "p"}, {"a.x": 2, "b": "q"}, {"a.x": 2, "b": "r"}]
  listed = [{"preset": "dapo"}, {}, {"optimizer.learning_rate": 1e-6, "preset": ["a", "b"]}]
  assert sweep.expand(listed) == listed
  with pytest.raises(ValueError, match="grid entry 'b' must be a non-empty list"):
    sweep.expand({"b": "abc"})  # a string would otherwise sweep over its characters
  with pytest.raises(ValueError, match="expected a dict"):
    sweep.expand([{"a": 1}, 2])


def test_run_names_are_short_safe_and_unique():
  runs = [{"optimizer.learning_rate": 1e-6, "loss.kl_coef": 0.0},
          {"optimizer.learning_rate": 2e-6, "loss.kl_coef": 0.001},
          {"preset": ["dapo", "x"], "model.remat": True},
          {"model.path": "/ckpt/Qwen3 4B"}, {"model.path": "/ckpt/Qwen3_4B"}, {},
          {"reward.functions[0].options.tau": 0.5, "a.tau": 1.0},
          {"stages[0].data.path": "d" * 300}]
  names = sweep.run_names(runs)
  assert names[:4] == ["learning_rate=1e-06,kl_coef=0", "learning_rate=2e-06,kl_coef=0.001",
                       "preset=dapo+x,remat=true", "model.path=_ckpt_Qwen3_4B"]
  assert names[4] == "model.path=_ckpt_Qwen3_4B-2" and names[5] == "base"
  assert names[6] == "options.tau=0.5,a.tau=1"  # shortest suffix that tells the two taus apart
  assert len(names[7]) <= 120 and names[7].startswith("data.path=ddd")
  assert len(set(names)) == len(names)
  assert all(set(n) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._=,+-")
             for n in names)


def test_metric_summary_final_and_best():
  rows = [{"step": 1, "reward/mean": 0.1, "eval/em": 0.2, "eval/hallucination": 0.5, "loss": 3.0},
          {"step": 2, "reward/mean": 0.4, "eval/em": None},
          {"step": 3, "reward/mean": 0.3, "eval/em": 0.6, "eval/hallucination": 0.3},
          {"step": 3, "reward/mean": 0.35},  # a resumed run re-logged step 3: the later row wins
          {"step": 4, "reward/mean": 0.4, "eval/hallucination": 0.4}]
  got = sweep.metric_summary(rows, r"hallucinat")
  assert set(got) == {"reward/mean", "eval/em", "eval/hallucination"}  # no train-only keys
  assert got["reward/mean"] == {"final": 0.4, "final_step": 4, "best": 0.4, "best_step": 2,
                                "higher_is_better": True}
  assert got["eval/em"] == {"final": 0.6, "final_step": 3, "best": 0.6, "best_step": 3,
                            "higher_is_better": True}
  assert got["eval/hallucination"] == {"final": 0.4, "final_step": 4, "best": 0.3, "best_step": 3,
                                       "higher_is_better": False}


@pytest.mark.parametrize("path", [p for p in sorted((ROOT / "configs").glob("*.py"))
                                  if hasattr(_config_module(p), "get_sweep")], ids=lambda p: p.stem)
def test_declared_sweeps_build(path, tmp_path):
  """Every run of every config's sweep names real fields and builds its config."""
  module = _config_module(path)
  declared = sweep.expand(module.get_sweep(None))
  runs = sweep.make_runs(module.get_config(None), declared, str(tmp_path))
  assert len({r.name for r in runs}) == len(runs) > 1
  assert all(r.total_steps == sum(st.num_steps for st in module.get_config(None).stages) for r in runs)


def test_presets_in_a_sweep(tmp_path):
  """A run's preset shapes its config (here runlocal's 16 steps decide when it is finished) and
  reaches train.py as --preset; a missing preset stops the sweep before anything runs."""
  from grounding_jax.rl import config as rl_config  # pylint: disable=g-import-not-at-top
  [run] = sweep.make_runs(rl_config.default_config(), [{"preset": "runlocal", "rollout.group_size": 2}],
                          str(tmp_path))
  assert run.name == "preset=runlocal,group_size=2" and run.total_steps == 16  # default: 10 steps
  assert sweep.command(run, "c.py", {"seed": 1}, python="py", entry="e.py") == [
      "py", "e.py", "--config=c.py", "--config.seed=1", "--preset=runlocal",
      "--config.rollout.group_size=2", f"--workdir={tmp_path}/{run.name}"]
  with pytest.raises(ValueError, match=r"sweep run 1 \(preset=dapo_v9\): preset 'dapo_v9'"):
    sweep.make_runs(rl_config.default_config(), [{}, {"preset": "dapo_v9"}], str(tmp_path))


def _finish(workdir, step):
  ck = checkpoints.Checkpointer(pathlib.Path(workdir) / "checkpoints")
  ck.save(step, {"w": jnp.zeros(2)})
  ck.close()


def test_dry_run_only_and_skip_finished(tmp_path):
  root = tmp_path / "sweep"
  names = ["tau=0.1,gamma=0.1", "tau=0.1,gamma=0.3", "tau=0.1,gamma=0.5"]
  _finish(root / names[0], 16)  # configs/lear.py:runlocal trains 16 steps: finished
  _finish(root / names[1], 1)   # partial: resumed, not skipped
  proc = _sweep_cli("--config=configs/lear.py:runlocal", f"--workdir_root={root}", "--only=2,0,1,2",
                    "--dry_run", "--python=python", "--config.rollout.max_new_tokens=32")
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.strip().splitlines()
  assert lines[1] == f"# 0 {names[0]}: finished (step 16 of 16), skipped"
  commands = [shlex.split(lines[i]) for i in (0, 2)]
  for cmd, (i, gamma) in zip(commands, [(2, 0.5), (1, 0.3)]):
    assert cmd == ["python", "launch/train.py", "--config=configs/lear.py:runlocal",
                   "--config.rollout.max_new_tokens=32",
                   "--config.reward.functions[0].options.tau=0.1",
                   f"--config.reward.functions[0].options.gamma={gamma}",
                   f"--workdir={root}/{names[i]}"]
  assert len(lines) == 3 and not (root / "summary.json").exists()  # a dry run writes nothing
  bad = _sweep_cli("--config=configs/lear.py:runlocal", f"--workdir_root={root}", "--only=20",
                   "--dry_run")
  assert bad.returncode != 0 and "--only=20: no run ['20']; runs are 0..19" in bad.stderr


def test_summary_of_two_tiny_runs(tiny_checkpoint, smollm2_dir, tmp_path):
  """Two 2-step GRPO runs of configs/truthrl.py's sweep (the two without KL, so no reference
  model) on a tiny model: both finish, the summary's final and best reward/mean are those in each
  run's metrics.jsonl, the other four runs are listed as not started, and a second call skips both."""
  model_dir = tmp_path / "model"
  shutil.copytree(tiny_checkpoint("llama", vocab_size=49152), model_dir)
  for f in smollm2_dir.iterdir():
    if f.is_file() and f.name != "config.json" and not f.name.startswith("model"):
      shutil.copy(f, model_dir / f.name)
  root = tmp_path / "sweep"
  args = ["--config=configs/truthrl.py:runlocal", f"--workdir_root={root}", "--only=3,1",
          f"--config.model.path={model_dir}", "--config.stages[0].num_steps=2",
          "--config.stages[0].data.num_examples=8", "--config.rollout.prompts_per_step=2",
          "--config.rollout.group_size=2", "--config.rollout.max_new_tokens=8",
          "--config.update_loop.micro_batch_size=2", "--config.reward.num_workers=0",
          "--config.logging.console=false"]
  proc = _sweep_cli(*args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  summary = json.loads((root / "summary.json").read_text())
  runs = summary["runs"]
  assert summary["config"] == "configs/truthrl.py:runlocal" and len(runs) == 6
  assert [r["status"] for r in runs] == ["not started", "finished"] * 2 + ["not started"] * 2
  assert runs[1]["overrides"] == {"reward.functions[0].options.abstain_reward": -0.5,
                                  "loss.kl_coef": 0.0}
  for r in (runs[1], runs[3]):
    assert r["step"] == r["total_steps"] == 2 and r["exit_code"] == 0
    logged = [json.loads(line) for line in
              (pathlib.Path(r["workdir"]) / "logs" / "metrics.jsonl").read_text().splitlines()]
    rewards = {row["step"]: row["reward/mean"] for row in logged}
    assert sorted(rewards) == [1, 2]
    m = r["metrics"]["reward/mean"]
    assert m["final"] == rewards[2] and m["best"] == max(rewards.values())
    assert rewards[m["best_step"]] == m["best"]
  markdown = (root / "summary.md").read_text()
  assert f"| 1 | {runs[1]['name']} | -0.5 | 0 | finished | 2/2 |" in markdown
  assert f"| 2 | {runs[2]['name']} | 0 | 0.001 | not started | –/2 |" in markdown
  again = _sweep_cli(*args)
  assert again.returncode == 0, again.stderr[-3000:]
  assert again.stdout.count("finished (step 2 of 2), skipped") == 2
  assert json.loads((root / "summary.json").read_text())["runs"][3]["metrics"] == runs[3]["metrics"]
