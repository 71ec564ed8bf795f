"""launch/bench_sampler.py and launch/bench_grpo_step.py at --model_shape=tiny: they run in seconds
on a CPU, print the ceilings measured in the same run beside tokens/s and step time (decode against
the bandwidth roofline, prefill and update as MFU of the measured matmul and of the datasheet), a
RESULT json line, and a jax.profiler trace with --profile_dir. No timed asserts."""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(script, *args, timeout=600):
  proc = subprocess.run([sys.executable, str(ROOT / "launch" / script), *args], capture_output=True,
                        text=True, timeout=timeout, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines()
             if line.startswith("RESULT ")]
  return proc.stdout, results


def _traced(folder):
  return list(pathlib.Path(folder).glob("plugins/profile/*/*.xplane.pb"))


def test_sampler_bench_at_the_tiny_shape_against_transformers(tiny_smollm2_dir, tmp_path):
  out, results = _run("bench_sampler.py", "--recipe=grace", "--model_shape=tiny",
                      f"--tokenizer_dir={tiny_smollm2_dir}", "--cases=5x2", "--group_size=2",
                      "--max_new_tokens=4", "--repeats=1", "--hf_threads=1",
                      f"--profile_dir={tmp_path / 'prof'}")
  assert "ceilings (cpu, measured now): copy bandwidth" in out
  for field in ("tokens/s", "MFU", "of measured matmul", "ms/step", "of the bandwidth roofline",
                "transformers (torch threads=1)", "ratio decode"):
    assert field in out, field
  (result,) = results
  assert result["case"] == "5x2" and result["group_size"] == 2
  assert {"tokens_per_s", "decode_ms_per_step", "decode_roofline_fraction", "prefill_mfu_measured",
          "prefill_mfu_datasheet"} <= set(result["ours"])
  assert result["transformers"]["device"] == "cpu" and result["ratios"]["overall"] > 0
  assert _traced(tmp_path / "prof")


def test_grpo_bench_at_the_tiny_shape_prints_update_mfu_and_traces_a_step(tiny_smollm2_dir,
                                                                            tmp_path):
  out, results = _run("bench_grpo_step.py", "--recipe=grace", "--model_shape=tiny",
                      f"--tokenizer_dir={tiny_smollm2_dir}", "--prompts=2", "--group_size=2",
                      "--max_new_tokens=4", "--micro_batch_size=2", "--steps=2", "--trl=false",
                      "--resume=false", f"--profile_dir={tmp_path / 'prof'}")
  assert "ceilings (cpu, measured now)" in out
  assert "update: " in out and "of measured matmul, n/a of datasheet" in out
  (result,) = results
  assert {"step_s", "sample_s", "update_s", "update_mfu_measured", "update_mfu_datasheet",
          "first_step_s"} <= set(result["ours"])
  assert result["model_shape"] == "tiny" and "trl" not in result
  assert _traced(tmp_path / "prof")
