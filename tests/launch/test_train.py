"""launch/train.py prints the start-up memory report, traces the step --profile_dir asks for, and
stops a run whose updates keep turning non-finite, or a config with bad values, with exit code 1 and its error alone (no traceback), the
step's metrics logged. (The default config's successful run through the launcher is
tests/configs/test_configs.py.)"""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_run_of_nonfinite_updates_exits_1_with_one_error_line(tiny_smollm2_dir, tmp_path):
  workdir = tmp_path / "run"
  cmd = [sys.executable, str(ROOT / "launch" / "train.py"),
         f"--config={ROOT / 'configs' / 'synthetic_smollm2.py'}", f"--workdir={workdir}",
         f"--config.model.path={tiny_smollm2_dir}", "--config.stages[0].num_steps=2",
         "--config.rollout.max_new_tokens=4", "--config.reward.num_workers=0",
         "--config.optimizer.learning_rate=1e39",  # overflows float32: every update is non-finite
         "--config.health.max_consecutive_nonfinite=1",
         # --profile_dir: a jax.profiler trace of step config.perf.profile_step, files on disk
         "--config.perf.profile_step=1", f"--profile_dir={tmp_path / 'prof'}"]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert list((tmp_path / "prof").glob("plugins/profile/*/*.xplane.pb"))
  # Before step 1, the start-up report (config.perf.startup_report) says what each program needs.
  report = proc.stdout[proc.stdout.index("peak memory per device"):]
  assert "update (gradient of one micro-batch):" in report and "sampler KV cache:" in report
  assert "Traceback" not in proc.stderr
  errors = [line for line in proc.stderr.splitlines() if line.startswith("E") and "stopping" in line]
  assert len(errors) == 1 and "stopping at step 1: step 1 skipped its update as non-finite" in errors[0]
  rows = [json.loads(line) for line in (workdir / "logs" / "metrics.jsonl").read_text().splitlines()]
  assert [(r["step"], r["nonfinite/skipped_updates"]) for r in rows] == [(1, 1.0)]


def test_bad_config_values_exit_1_naming_each_before_anything_is_written(tmp_path):
  """Every bad value in one message (field, value, what is allowed), no traceback, and no run record
  written: an existing workdir's config.json is never replaced by a config that cannot run."""
  workdir = tmp_path / "run"
  cmd = [sys.executable, str(ROOT / "launch" / "train.py"),
         f"--config={ROOT / 'configs' / 'synthetic_smollm2.py'}", f"--workdir={workdir}",
         "--config.checkpoint.every_steps=0", "--config.rollout.group_size=1",
         "--config.model.compute_dtype=float64"]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
  assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
  for line in ("3 invalid config value(s)", "config.checkpoint.every_steps=0",
               "config.rollout.group_size=1", "config.model.compute_dtype='float64'"):
    assert line in proc.stderr
  assert not workdir.exists()
