r"""One command, one accelerator, the table of docs/benchmarks.md: our sampler and GRPO step against
transformers' generate and TRL's GRPOTrainer on the same card, with the card's ceilings.

  python launch/bench_suite.py --recipe=grace --out=/tmp/bench   # qwen2.5-1.5b, 16 x G8 x 256, bf16
  python launch/bench_suite.py --recipe=grace --model_shape=qwen3-4b --tokenizer_dir=/path/tok
  python launch/bench_suite.py --recipe=grace --model_shape=tiny --prompts=2 --group_size=2 \
      --max_new_tokens=8 --micro_batch_size=4 --out=/tmp/bench_tiny   # a CPU smoke run (~3 min)

Each stage is its own process with its own timeout (jax preallocates most of a GPU, so the torch
peers never share a process with it), its log under --out/<stage>.log; the benches' "RESULT {json}"
lines are gathered into --out/results.json and the table into --out/table.md (also printed). A
stage that fails or times out leaves its row empty, never the whole table. The stages:
  sampler_ours  launch/bench_sampler.py, ours alone: tokens/s, first call, prefill MFU, decode
                ms/step against the bandwidth roofline (ceilings measured in that process)
  sampler_peer  the same prompts with transformers' generate (cuda when torch sees a GPU)
  grpo_ours     launch/bench_grpo_step.py, ours alone: step, sample, update, update MFU, step 1
  grpo_trl      the same step with TRL's GRPOTrainer (needs `pip install -e ".[bench]"`)
  sampler_xla, grpo_xla   (not by default) ours again with model.attention='xla', for the fused
                attention kernel's before/after on one card ("auto" is cuDNN on a GPU)
  sampler_cublas, grpo_cublas   (not by default) ours again with XLA's Triton GEMMs off
                (XLA_FLAGS+=--xla_gpu_enable_triton_gemm=false: cuBLAS runs every GEMM; on an
                H200 the decode's Triton projection GEMMs read weights at ~42 % of bandwidth)
  sampler_fused, sampler_unfused   (not by default) ours again with each layer's q/k/v weights
                concatenated into one and gate/up into one (--fuse_projections=on), or kept
                separate (=off); sampler_ours takes config rollout.fuse_projections' default,
                'auto' (fused on a GPU: XLA merges the separate ones inside each decode GEMM);
  grpo_unfused  (not by default) grpo_ours with the sampler's weights separate
  grpo_save_dots, grpo_no_remat   (not by default) grpo_ours with the recomputed layers keeping
                their matmul outputs (--remat_policy=save_dots), or with no recomputation
                (--remat=false): fewer FLOPs a step for more memory
  grpo_no_prefix   (not by default) grpo_ours without running the prompt prefix all groups share
                once (rollout.common_prefix_min_tokens=0): its FLOPs saved against its compile
  grpo_stream   (not by default) grpo_ours with each group's packed completions attended as one
                masked stream (model.packed_attention='stream') instead of 'auto' (rows or
                blocks where they score fewer pairs: models/packed.py)
  grpo_save_mid    (not by default) grpo_ours with a checkpoint at step 2 too, written in the
                background on an accelerator: how long it held training (time/checkpoint) and
                what step 3 paid beside the writing thread
  grpo_resume   (not by default) 2 steps of grpo_ours, then a new process resumes from the last
                checkpoint with the filled compile cache: its "resumed run" log line is the time
                to the resumed step (target <= 10 s)
  checkpoint    (not by default) launch/bench_checkpoint.py at the shape: save and restore of its
                float32 weights and Adam moments, plain (ours) vs zstd (orbax's default)
The default timeouts sum to 8 minutes; on an H100 / H200 the 1.5 B shape takes ~6.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

_RECIPE = flags.DEFINE_string("recipe", None, "Whose prompts and reward (a recipe needing no judge).")
_SHAPE = flags.DEFINE_string("model_shape", "qwen2.5-1.5b", "grounding_jax.models.shapes name.")
_TOKENIZER_DIR = flags.DEFINE_string("tokenizer_dir", None, "Tokenizer folder; default SmolLM2's.")
_SHAPE_VOCAB = flags.DEFINE_integer("shape_vocab", 0, "0 = the shape's vocabulary, -1 = the "
                                    "tokenizer's (the first GPU run's 1.39 B model), or a size.")
_OUT = flags.DEFINE_string("out", "/tmp/grounding_jax_bench", "Logs, results.json and table.md.")
_PROMPTS = flags.DEFINE_integer("prompts", 16, "Prompts per sampler call and per GRPO step.")
_GROUP = flags.DEFINE_integer("group_size", 8, "Samples per prompt (G).")
_NEW = flags.DEFINE_integer("max_new_tokens", 256, "New tokens per sample (EOS off in the sampler).")
_MICRO = flags.DEFINE_integer("micro_batch_size", 16, "GRPO update micro-batch (rows).")
_DTYPE = flags.DEFINE_enum("dtype", "bfloat16", ["float32", "bfloat16"], "Compute dtype.")
_STAGES = flags.DEFINE_list("stages", ["sampler_ours", "sampler_peer", "grpo_ours", "grpo_trl"],
                            "Which stages to run, in order.")
_TIMEOUTS = flags.DEFINE_list("timeouts", ["110", "100", "160", "110"],
                              "Seconds per stage of --stages, in order.")
_DEADLINE = flags.DEFINE_float("deadline_s", 0, "> 0: the whole suite ends within this many seconds "
                               "(a lease): each stage gets min(its timeout, the time left), and a "
                               "stage with under 30 s left is skipped.")
_PROFILE_DIR = flags.DEFINE_string("profile_dir", None, "Also write a jax.profiler trace of one "
                                   "steady GRPO step of grpo_ours here (sampling and update): the "
                                   "last of its 4 steps, so the median of steps 2-4 is an untraced "
                                   "one.")

ROOT = pathlib.Path(__file__).resolve().parents[1]


def stage_commands() -> dict[str, list[str]]:
  """Each stage's command line (python, script, flags)."""
  common = [f"--recipe={_RECIPE.value}", f"--model_shape={_SHAPE.value}", f"--dtype={_DTYPE.value}",
            f"--shape_vocab={_SHAPE_VOCAB.value}"]
  if _TOKENIZER_DIR.value:
    common.append(f"--tokenizer_dir={_TOKENIZER_DIR.value}")
  sampler = [sys.executable, str(ROOT / "launch" / "bench_sampler.py"), *common,
             f"--cases=5x{_PROMPTS.value}", f"--group_size={_GROUP.value}",
             f"--max_new_tokens={_NEW.value}", "--repeats=2"]
  grpo = [sys.executable, str(ROOT / "launch" / "bench_grpo_step.py"), *common,
          f"--prompts={_PROMPTS.value}", f"--group_size={_GROUP.value}",
          f"--max_new_tokens={_NEW.value}", f"--micro_batch_size={_MICRO.value}", "--steps=4",
          "--resume=false"]
  traced = ([f"--profile_dir={_PROFILE_DIR.value}", "--profile_step=4"]
            if _PROFILE_DIR.value else [])
  return {"sampler_ours": sampler + ["--hf=false"], "sampler_peer": sampler + ["--ours=false"],
          "grpo_ours": grpo + ["--trl=false"] + traced, "grpo_trl": grpo + ["--ours=false", "--trl=true"],
          "sampler_xla": sampler + ["--hf=false", "--attention=xla"],
          "grpo_xla": grpo + ["--trl=false", "--attention=xla"],
          "sampler_cublas": sampler + ["--hf=false"], "grpo_cublas": grpo + ["--trl=false"],
          "sampler_fused": sampler + ["--hf=false", "--fuse_projections=on"],
          "sampler_unfused": sampler + ["--hf=false", "--fuse_projections=off"],
          "grpo_unfused": grpo + ["--trl=false", "--fuse_projections=off"],
          "grpo_save_dots": grpo + ["--trl=false", "--remat_policy=save_dots"],
          "grpo_no_remat": grpo + ["--trl=false", "--remat=false"],
          "grpo_no_prefix": grpo + ["--trl=false", "--common_prefix_min_tokens=0"],
          "grpo_stream": grpo + ["--trl=false", "--packed_attention=stream"],
          "grpo_save_mid": grpo + ["--trl=false", "--checkpoint_every=2"],
          "grpo_resume": [a for a in grpo if a not in ("--steps=4", "--resume=false")]
                         + ["--trl=false", "--steps=2", "--resume=true"],
          "checkpoint": [sys.executable, str(ROOT / "launch" / "bench_checkpoint.py"),
                         f"--model_shape={_SHAPE.value}", "--reps=1"]}


# Stages that run with more XLA flags (appended to the caller's XLA_FLAGS).
STAGE_XLA_FLAGS = {"sampler_cublas": "--xla_gpu_enable_triton_gemm=false",
                   "grpo_cublas": "--xla_gpu_enable_triton_gemm=false"}


def run_stage(name: str, cmd: list[str], timeout: float, out: pathlib.Path) -> dict | None:
  """Runs one stage; its log goes to out/<name>.log; returns its last RESULT, or None.

  The stage's temporary files (GRPO workdirs and checkpoints, compile caches, the checkpoint
  bench's folders: ~18-36 GB each at 1.5 B) go to a folder of their own (TMPDIR), removed when the
  stage ends, also when it was killed at its timeout before it could clean up."""
  scratch = pathlib.Path(tempfile.mkdtemp(prefix=f"{name}_", dir=out))
  env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
             TOKENIZERS_PARALLELISM="false", TMPDIR=str(scratch), PYTHONPATH=os.pathsep.join(
                 [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  if name in STAGE_XLA_FLAGS:
    env["XLA_FLAGS"] = " ".join(f for f in (env.get("XLA_FLAGS"), STAGE_XLA_FLAGS[name]) if f)
  start = time.perf_counter()
  with open(out / f"{name}.log", "w") as log:
    # Its own process group: at the timeout the stage's children (a resumed run's process) die
    # with it, instead of holding the GPU's memory through the next stage.
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                            start_new_session=True)
    try:
      code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
      code = "timeout"
    finally:
      shutil.rmtree(scratch, ignore_errors=True)
  text = (out / f"{name}.log").read_text(errors="replace")
  results = [json.loads(line[len("RESULT "):]) for line in text.splitlines()
             if line.startswith("RESULT ")]
  print(f"[{name}] exit {code} after {time.perf_counter() - start:.0f}s (limit {timeout:.0f}s); "
        f"log {out / f'{name}.log'}", flush=True)
  return results[-1] if results else None


def _pct(x):
  return "—" if x is None else f"{100 * x:.1f} %"


def _num(x, fmt="{:.2f}"):
  return "—" if x is None else fmt.format(x)


def table(results: dict) -> str:
  """The markdown table of the stages' RESULT dicts ({stage: result or None})."""
  get = lambda stage, *keys: _dig(results.get(stage), keys)
  c = get("sampler_ours", "ceilings") or get("grpo_ours", "ceilings") or {}
  s_ours, s_peer = get("sampler_ours", "ours", "tokens_per_s"), get("sampler_peer", "transformers",
                                                                     "tokens_per_s")
  g_ours, g_trl = get("grpo_ours", "ours", "step_s"), get("grpo_trl", "trl", "step_s")
  ratio = lambda a, b: f"{a / b:.1f}×" if a and b else "—"
  run = results.get("sampler_ours") or results.get("sampler_peer") or {}
  prompts = str(run.get("case", "5x?")).split("x")[-1]
  micro = (results.get("grpo_ours") or results.get("grpo_trl") or {}).get("micro_batch_size", "?")
  rows = [
      ("measure", "ours", "peer, same card", "ratio"),
      ("---", "---", "---", "---"),
      ("ceilings (measured now)", f"copy {_num(c.get('bandwidth') and c['bandwidth'] / 1e9, '{:,.0f}')}"
       f" GB/s, {c.get('dtype', '')} matmul "
       f"{_num(c.get('matmul_flops') and c['matmul_flops'] / 1e12, '{:.1f}')} TFLOP/s", f"datasheet {_num(c.get('datasheet_flops') and c['datasheet_flops'] / 1e12, '{:.0f}')}"
       f" TFLOP/s", c.get("device_kind", "")),
      ("attention kernel (sampler / update)", f"{get('sampler_ours', 'attention') or '—'} / "
       f"{get('grpo_ours', 'ours', 'attention') or '—'}",
       f"with 'xla': {_num(get('sampler_xla', 'ours', 'tokens_per_s'), '{:,.0f}')} tokens/s, step "
       f"{_num(get('grpo_xla', 'ours', 'step_s'))} s (update {_num(get('grpo_xla', 'ours', 'update_s'))})",
       ""),
      ("every GEMM on cuBLAS (XLA's Triton GEMMs off)",
       f"{_num(get('sampler_cublas', 'ours', 'tokens_per_s'), '{:,.0f}')} tokens/s, decode "
       f"{_num(get('sampler_cublas', 'ours', 'decode_ms_per_step'))} ms/step = "
       f"{_pct(get('sampler_cublas', 'ours', 'decode_roofline_fraction'))}; step "
       f"{_num(get('grpo_cublas', 'ours', 'step_s'))} s (update "
       f"{_num(get('grpo_cublas', 'ours', 'update_s'))})", "", ""),
      *[(f"q/k/v and gate/up weights {label} (--fuse_projections={flag}; sampler_ours: "
         f"{'fused' if get('sampler_ours', 'fuse_projections') else 'separate'})",
         f"{_num(get(stage, 'ours', 'tokens_per_s'), '{:,.0f}')} tokens/s, decode "
         f"{_num(get(stage, 'ours', 'decode_ms_per_step'))} ms/step = "
         f"{_pct(get(stage, 'ours', 'decode_roofline_fraction'))}"
         + (" (fell back: not fused)" if flag == "on" and get(stage, "ours", "fused_projections")
            is False else ""), "",
         f"{ratio(get(stage, 'ours', 'tokens_per_s'), s_ours)} sampler_ours")
        for stage, label, flag in (("sampler_fused", "fused", "on"),
                                   ("sampler_unfused", "separate", "off"))
        if results.get(stage)],
      (f"sampler {prompts} × G{run.get('group_size', '?')} × {run.get('new_tokens', '?')}: tokens/s", _num(s_ours, "{:,.0f}"),
       f"transformers generate {_num(s_peer, '{:,.0f}')}", ratio(s_ours, s_peer)),
      ("decode ms/step", f"{_num(get('sampler_ours', 'ours', 'decode_ms_per_step'))} = "
       f"{_pct(get('sampler_ours', 'ours', 'decode_roofline_fraction'))} of the bandwidth roofline "
       f"({_num(get('sampler_ours', 'ours', 'decode_read_gb'))} GB a step)",
       _num(get("sampler_peer", "transformers", "decode_ms_per_step")), ""),
      ("prefill MFU (measured matmul / datasheet)",
       f"{_pct(get('sampler_ours', 'ours', 'prefill_mfu_measured'))} / "
       f"{_pct(get('sampler_ours', 'ours', 'prefill_mfu_datasheet'))}", "", ""),
      ("sampler first call (s)", _num(get("sampler_ours", "ours", "first_call_s"), "{:.1f}"), "", ""),
      (f"GRPO step, micro-batch {micro} (s)",
       f"{_num(g_ours)} (sample {_num(get('grpo_ours', 'ours', 'sample_s'))} + update "
       f"{_num(get('grpo_ours', 'ours', 'update_s'))})", f"TRL GRPOTrainer {_num(g_trl)}",
       ratio(g_trl, g_ours)),
      ("update MFU (measured matmul / datasheet)",
       f"{_pct(get('grpo_ours', 'ours', 'update_mfu_measured'))} / "
       f"{_pct(get('grpo_ours', 'ours', 'update_mfu_datasheet'))} "
       f"({_num(get('grpo_ours', 'ours', 'update_tflop'), '{:.0f}')} TFLOP a step)", "", ""),
      *[(f"GRPO step, {label} (s)",
         f"{_num(get(stage, 'ours', 'step_s'))} (update {_num(get(stage, 'ours', 'update_s'))}, "
         f"{_num(get(stage, 'ours', 'update_tflop'), '{:.0f}')} TFLOP: "
         f"{_pct(get(stage, 'ours', 'update_mfu_measured'))} / "
         f"{_pct(get(stage, 'ours', 'update_mfu_datasheet'))}); first step "
         f"{_num(get(stage, 'ours', 'first_step_s'), '{:.1f}')}"
         + (f"; a save held training {_num(get(stage, 'ours', 'checkpoint_held_s'))} s"
            if get(stage, "ours", "checkpoint_held_s") is not None else ""), "",
         f"{ratio(g_ours, get(stage, 'ours', 'step_s'))} grpo_ours")
        for stage, label in (("grpo_save_dots", "remat keeping matmul outputs"),
                             ("grpo_no_remat", "no remat"),
                             ("grpo_no_prefix", "shared prompt prefix not run once"),
                             ("grpo_stream", "packed completions as one masked stream"),
                             ("grpo_save_mid", "a checkpoint at step 2 too"))
        if results.get(stage)],
      ("first GRPO step (s)", f"{_num(get('grpo_ours', 'ours', 'first_step_s'), '{:.1f}')} (compile "
       f"{_num(get('grpo_ours', 'ours', 'first_step_compile_s'), '{:.1f}')})",
       f"TRL {_num(get('grpo_trl', 'trl', 'first_step_s'), '{:.1f}')}", ""),
  ]
  return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def _dig(tree, keys):
  for key in keys:
    if not isinstance(tree, dict) or tree.get(key) is None:
      return None
    tree = tree[key]
  return tree


def main(argv):
  del argv
  if len(_TIMEOUTS.value) != len(_STAGES.value):
    raise app.UsageError(f"--timeouts has {len(_TIMEOUTS.value)} entries for "
                         f"{len(_STAGES.value)} --stages")
  out = pathlib.Path(_OUT.value)
  out.mkdir(parents=True, exist_ok=True)
  commands = stage_commands()
  unknown = [name for name in _STAGES.value if name not in commands]
  if unknown:
    raise app.UsageError(f"--stages: unknown {unknown}; expected some of {list(commands)}")
  start, results = time.perf_counter(), {}
  for name, timeout in zip(_STAGES.value, _TIMEOUTS.value):
    timeout = float(timeout)
    if _DEADLINE.value > 0:
      timeout = min(timeout, _DEADLINE.value - (time.perf_counter() - start))
      if timeout < 30:
        print(f"[{name}] skipped: {timeout:.0f}s left of --deadline_s={_DEADLINE.value:.0f}",
              flush=True)
        results[name] = None
        continue
    results[name] = run_stage(name, commands[name], timeout, out)
  (out / "results.json").write_text(json.dumps(results, indent=1))
  text = table(results)
  (out / "table.md").write_text(text + "\n")
  print(text)


if __name__ == "__main__":
  flags.mark_flag_as_required("recipe")
  app.run(main)
