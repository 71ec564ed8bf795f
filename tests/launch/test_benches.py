"""launch/bench_sampler.py and launch/bench_grpo_step.py at --model_shape=tiny: they run in seconds
on a CPU, print the ceilings measured in the same run beside tokens/s and step time (decode against
the bandwidth roofline, prefill and update as MFU of the measured matmul and of the datasheet), a
RESULT json line, and a jax.profiler trace with --profile_dir. No timed asserts."""

import json
import pathlib
import subprocess
import sys

import launch_script

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
                "transformers (torch threads=1)", "ratio decode", "attention kernel (ours): xla"):
    assert field in out, field
  (result,) = results
  assert result["case"] == "5x2" and result["group_size"] == 2 and result["attention"] == "xla"
  assert {"tokens_per_s", "decode_ms_per_step", "decode_roofline_fraction", "prefill_mfu_measured",
          "prefill_mfu_datasheet"} <= set(result["ours"])
  assert result["transformers"]["device"] == "cpu" and result["ratios"]["overall"] > 0
  assert _traced(tmp_path / "prof")


def test_grpo_bench_at_the_tiny_shape_prints_update_mfu_traces_a_step_and_times_a_resume(
    tiny_smollm2_dir, tmp_path):
  out, results = _run("bench_grpo_step.py", "--recipe=grace", "--model_shape=tiny",
                      f"--tokenizer_dir={tiny_smollm2_dir}", "--prompts=2", "--group_size=2",
                      "--max_new_tokens=4", "--micro_batch_size=2", "--steps=2", "--trl=false",
                      "--resume=true", f"--profile_dir={tmp_path / 'prof'}", "--attention=xla",
                      "--fuse_projections=on")  # the trainer samples with fused weights
  # the resumed run: a new process restores the checkpoint and runs step 3 (the target's figure)
  assert "resumed run (new process, filled compilation cache): step 3 starts" in out, out[-3000:]
  assert "ceilings (cpu, measured now)" in out
  assert "update: " in out and "of measured matmul, n/a of datasheet" in out
  assert "attention kernel (ours): xla" in out
  (result,) = results
  assert {"step_s", "sample_s", "update_s", "update_mfu_measured", "update_mfu_datasheet",
          "first_step_s"} <= set(result["ours"])
  assert result["model_shape"] == "tiny" and "trl" not in result
  assert result["ours"]["attention"] == "xla"
  assert _traced(tmp_path / "prof")


def test_suite_table_has_every_row_and_survives_a_failed_stage():
  """launch/bench_suite.py's table from the benches' RESULT dicts; a stage that failed (None)
  leaves its cells as dashes, never the table."""
  suite = launch_script.load("bench_suite", "launch_bench_suite")
  ceilings = dict(device_kind="NVIDIA H200", bandwidth=4.3e12, matmul_flops=7.8e14,
                  dtype="bfloat16", datasheet_flops=9.89e14)
  results = {
      "sampler_ours": dict(case="5x16", group_size=8, new_tokens=256, ceilings=ceilings,
                           attention="cudnn (decode, grouped cache prefix: xla)",
                           ours=dict(tokens_per_s=35699.0, decode_ms_per_step=2.95,
                                     decode_roofline_fraction=0.27, decode_read_gb=3.4,
                                     prefill_mfu_measured=0.3, prefill_mfu_datasheet=0.25,
                                     first_call_s=28.3)),
      "sampler_peer": dict(case="5x16", transformers=dict(tokens_per_s=3567.0,
                                                          decode_ms_per_step=34.7)),
      "grpo_ours": dict(micro_batch_size=16, ceilings=ceilings,
                        ours=dict(step_s=4.41, sample_s=1.01, update_s=3.37, update_tflop=473.0,
                                  update_mfu_measured=0.18, update_mfu_datasheet=0.142,
                                  first_step_s=42.6, first_step_compile_s=62.7,
                                  attention="cudnn (decode, grouped cache prefix: xla)")),
      "grpo_trl": None,
      "sampler_xla": dict(case="5x16", ours=dict(tokens_per_s=30000.0)),
      "grpo_xla": dict(ours=dict(step_s=5.0, update_s=3.9)),
      "sampler_cublas": dict(ours=dict(tokens_per_s=40000.0, decode_ms_per_step=2.0,
                                       decode_roofline_fraction=0.6)),
      "grpo_cublas": None,
      "sampler_fused": dict(ours=dict(tokens_per_s=42000.0, decode_ms_per_step=2.5,
                                      decode_roofline_fraction=0.5, fused_projections=True)),
      "sampler_unfused": dict(ours=dict(tokens_per_s=33000.0, decode_ms_per_step=3.0,
                                        decode_roofline_fraction=0.4, fused_projections=False)),
  }
  text = suite.table(results)
  assert "| sampler 16 × G8 × 256: tokens/s | 35,699 | transformers generate 3,567 | 10.0× |" in text
  assert "2.95 = 27.0 % of the bandwidth roofline (3.40 GB a step)" in text
  assert "| update MFU (measured matmul / datasheet) | 18.0 % / 14.2 % (473 TFLOP a step)" in text
  assert "TRL GRPOTrainer — | — |" in text  # the failed stage
  assert "copy 4,300 GB/s, bfloat16 matmul 780.0 TFLOP/s | datasheet 989 TFLOP/s | NVIDIA H200" in text
  assert ("| attention kernel (sampler / update) | cudnn (decode, grouped cache prefix: xla) / "
          "cudnn (decode, grouped cache prefix: xla) | with 'xla': 30,000 tokens/s, step 5.00 s "
          "(update 3.90) |") in text
  assert ("| every GEMM on cuBLAS (XLA's Triton GEMMs off) | 40,000 tokens/s, decode 2.00 ms/step = "
          "60.0 %; step — s (update —) |") in text
  assert ("| q/k/v and gate/up weights fused (--fuse_projections=on; sampler_ours: separate) | "
          "42,000 tokens/s, decode 2.50 ms/step = 50.0 % |  | 1.2× sampler_ours |") in text
  assert ("| q/k/v and gate/up weights separate (--fuse_projections=off; sampler_ours: separate) | "
          "33,000 tokens/s, decode 3.00 ms/step = 40.0 % |  | 0.9× sampler_ours |") in text
  assert len(text.splitlines()) == 14
  assert len(suite.table({**results, "sampler_unfused": None}).splitlines()) == 13
  no_remat = dict(ours=dict(step_s=2.35, update_s=1.36, update_tflop=363.5, first_step_s=28.5,
                            update_mfu_measured=0.383, update_mfu_datasheet=0.27))
  assert ("| GRPO step, no remat (s) | 2.35 (update 1.36, 364 TFLOP: 38.3 % / 27.0 %); first step "
          "28.5 |  | 1.9× grpo_ours |") in suite.table({**results, "grpo_no_remat": no_remat})
  results["sampler_fused"]["ours"]["fused_projections"] = False  # the sampler fell back
  assert "= 50.0 % (fell back: not fused) |" in suite.table(results)


def test_suite_deadline_shortens_and_skips_stages_and_profile_traces_grpo_ours(monkeypatch, tmp_path):
  """--deadline_s: each stage gets min(its timeout, the time left), a stage with under 30 s left is
  skipped (its row empty); --profile_dir reaches grpo_ours alone, tracing the last of its 4 steps."""
  from absl.testing import flagsaver
  suite = launch_script.load("bench_suite", "launch_bench_suite")
  clock, calls = [0.0], []

  def fake_stage(name, cmd, timeout, out):
    calls.append((name, timeout, cmd))
    clock[0] += 50.0
    return {"stage": name}

  monkeypatch.setattr(suite, "run_stage", fake_stage)
  monkeypatch.setattr(suite.time, "perf_counter", lambda: clock[0])
  with flagsaver.flagsaver(recipe="grace", out=str(tmp_path), deadline_s=120.0,
                           profile_dir=str(tmp_path / "trace"),
                           stages=["sampler_ours", "grpo_ours", "grpo_trl"],
                           timeouts=["100", "100", "100"]):
    suite.flags.FLAGS.mark_as_parsed()
    suite.main(["bench_suite"])
  assert [(name, timeout) for name, timeout, _ in calls] == [("sampler_ours", 100.0),
                                                             ("grpo_ours", 70.0)]
  assert json.loads((tmp_path / "results.json").read_text())["grpo_trl"] is None
  grpo = calls[1][2]
  assert f"--profile_dir={tmp_path / 'trace'}" in grpo and "--profile_step=4" in grpo
  assert [a for a in grpo if a.startswith("--steps=")] == ["--steps=4"]
  assert not any(a.startswith("--profile") for a in calls[0][2])


def test_suite_cublas_stages_add_their_xla_flag(monkeypatch, tmp_path):
  """sampler_cublas / grpo_cublas run ours with XLA_FLAGS += the Triton-GEMM switch, keeping the
  caller's flags; other stages get the caller's XLA_FLAGS unchanged."""
  suite = launch_script.load("bench_suite", "launch_bench_suite")
  seen, popen = {}, subprocess.Popen

  def fake_popen(cmd, stdout, stderr, env, cwd, start_new_session):
    seen[pathlib.Path(stdout.name).stem] = env.get("XLA_FLAGS")
    return popen(["true"])

  monkeypatch.setattr(suite.subprocess, "Popen", fake_popen)
  monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
  for name in ("sampler_cublas", "sampler_ours"):
    assert suite.run_stage(name, ["true"], 10.0, tmp_path) is None
  assert seen == {"sampler_cublas": "--xla_dump_to=/tmp/x --xla_gpu_enable_triton_gemm=false",
                  "sampler_ours": "--xla_dump_to=/tmp/x"}


def test_suite_stage_at_its_timeout_takes_its_children_and_temporary_files_with_it(tmp_path):
  """A stage killed at its timeout leaves no process (a resumed run's child would hold the GPU's
  memory through the next stage) and no temporary files (a 1.5 B checkpoint is ~18 GB); a stage
  that ends by itself has its temporary folder removed too."""
  suite = launch_script.load("bench_suite", "launch_bench_suite")
  script = ("import os, pathlib, subprocess, sys, tempfile, time\n"
            "pathlib.Path(tempfile.mkdtemp(), 'state').write_bytes(b'x' * 1000)\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', "
            f"{str(tmp_path)!r}])\n"
            f"pathlib.Path({str(tmp_path / 'pid')!r}).write_text(str(child.pid))\n"
            "print('RESULT {\"ok\": 1}', flush=True)\n"
            "time.sleep(60)\n")
  out = tmp_path / "out"
  out.mkdir()
  assert suite.run_stage("slow", [sys.executable, "-c", script], 4.0, out) == {"ok": 1}
  child = pathlib.Path(f"/proc/{(tmp_path / 'pid').read_text()}")
  try:  # gone, a zombie no one reaped, or its pid already another process's
    alive = str(tmp_path) in (child / "cmdline").read_text() and \
        "\tZ" not in (child / "status").read_text()
  except OSError:
    alive = False
  assert not alive
  assert [p.name for p in out.iterdir()] == ["slow.log"]  # its TMPDIR went with it
  quick = [sys.executable, "-c", "import pathlib, tempfile; pathlib.Path(tempfile.mkdtemp(), 'f')"
           ".write_text('x')"]
  assert suite.run_stage("quick", quick, 60.0, out) is None
  assert sorted(p.name for p in out.iterdir()) == ["quick.log", "slow.log"]


def test_suite_fused_stage_runs_our_sampler_with_fused_projections():
  from absl.testing import flagsaver
  suite = launch_script.load("bench_suite", "launch_bench_suite")
  with flagsaver.flagsaver(recipe="grace"):
    suite.flags.FLAGS.mark_as_parsed()
    commands = suite.stage_commands()
  fused, ours = commands["sampler_fused"], commands["sampler_ours"]
  assert fused[1].endswith("bench_sampler.py") and fused == ours + ["--fuse_projections=on"]
  assert commands["sampler_unfused"] == ours + ["--fuse_projections=off"]
  assert commands["grpo_unfused"] == commands["grpo_ours"] + ["--fuse_projections=off"]
  resume = commands["grpo_resume"]
  assert resume[-3:] == ["--trl=false", "--steps=2", "--resume=true"]
  assert "--steps=4" not in resume and "--resume=false" not in resume
  assert commands["checkpoint"][1].endswith("bench_checkpoint.py")
  assert "--model_shape=qwen2.5-1.5b" in commands["checkpoint"]


def test_checkpoint_bench_times_plain_and_zstd_checkpoints_of_the_same_state():
  out, (result,) = _run("bench_checkpoint.py", "--model_shape=tiny", "--reps=1")
  assert "| ours (compress=False) |" in out and "| orbax default (zstd) |" in out
  assert result["ours"]["disk_bytes"] > result["orbax_zstd"]["disk_bytes"]   # zstd saves bytes
  assert result["ours"]["disk_bytes"] >= 0.9 * result["state_bytes"]
  assert result["save_ratio"] > 0 and result["restore_ratio"] > 0


def test_sft_bench_reads_an_sft_runs_config_over_todays_defaults(tmp_path):
  """--sft_workdir: the bench's workload is the run's config.json (rows, limits, batch sizes, model);
  fields added since that run keep their defaults."""
  from grounding_jax.eval import model_ref
  from grounding_jax.sft import trainer
  bench = launch_script.load("bench_sft_step", "bench_sft_step_script")
  run = trainer.default_config()
  run.data.update(dict(path="/data/sft.jsonl", max_prompt_tokens=1280, max_completion_tokens=208,
                       overlong="drop"))
  run.batch_size, run.micro_batch_size, run.model.path = 4, 2, "/models/smollm2"
  del run.checkpoint["compress"]  # as a run recorded before the field existed
  model_ref.write_run_config(tmp_path, run)
  c = bench._run_sft_config(tmp_path)
  assert (c.data.path, c.data.max_prompt_tokens, c.data.max_completion_tokens, c.data.overlong) == (
      "/data/sft.jsonl", 1280, 208, "drop")
  assert (c.batch_size, c.micro_batch_size, c.model.path) == (4, 2, "/models/smollm2")
  assert c.checkpoint.compress == trainer.default_config().checkpoint.compress
  assert c.checkpoint.every_steps == 10**6  # no checkpoint inside the timed steps


def test_packed_attention_bench_times_a_layout_and_names_autos_pick():
  out, (result,) = _run("bench_packed_attention.py", "--model_shape=tiny", "--completion_width=16",
                        "--mean_tokens=8", "--prompt_tokens=40", "--common_tokens=16",
                        "--group_size=4", "--modes=blocks", "--calls=1")
  assert "blocks: median" in out and "query-key pairs a group" in out
  assert result["auto"] in ("rows", "blocks", "stream") and result["modes"]["blocks"]["median_s"] > 0
  assert result["modes"]["blocks"]["pairs"] > 0 and result["packed_width"] % 16 == 0
