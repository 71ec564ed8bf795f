"""The research loop as commands on a tiny model: sft.py → train.py → export_hf.py → evaluate.py.

SFT on TruthRL-formatted targets, GRPO from the SFT folder, the GRPO workdir exported to an HF
folder, and evaluate.py comparing the SFT model, the exported folder and the workdir itself: the
exported folder answers exactly as its checkpoint does (same weights, greedy decoding)."""

import json
import pathlib
import subprocess
import sys

from grounding_jax import recipes
from grounding_jax.data import synthetic

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRUTHRL = str(ROOT / "configs" / "truthrl.py")


def _run(script, *args):
  proc = subprocess.run([sys.executable, str(ROOT / "launch" / script), *args], capture_output=True,
                        text=True, timeout=900, cwd=ROOT)
  assert proc.returncode == 0, f"{script}: {proc.stderr[-3000:]}"
  return proc


def test_sft_train_export_evaluate_chain(tiny_smollm2_dir, tmp_path):
  recipe = recipes.get_recipe("truthrl")
  rows = tmp_path / "sft.jsonl"
  with open(rows, "w") as f:
    for ex in synthetic.generate_examples(8, seed=11):
      target = f"\\boxed{{{ex.answers[0]}}}" if ex.answerable else "\\boxed{I don't know}"
      f.write(json.dumps({"messages": recipe.messages(ex), "target": target}) + "\n")
  sft, rl, export, out = (tmp_path / d for d in ("sft", "rl", "export", "eval"))
  _run("sft.py", f"--config={ROOT / 'configs' / 'sft.py'}", f"--workdir={sft}",
       f"--config.model.path={tiny_smollm2_dir}", f"--config.data.path={rows}", "--config.num_epochs=1",
       "--config.batch_size=4", "--config.micro_batch_size=4", "--config.logprob_chunk_size=4096")
  assert (sft / "hf" / "model.safetensors").is_file()
  # GRPO at tests/configs/test_runlocal_golden.py's truthrl shapes (seed 3, 8 training examples, 12
  # new tokens, micro-batches of 2): its gradient and sampler programs come from the session's
  # compilation cache, which the subprocesses share.
  tiny = ["--config.seed=3", "--config.stages[0].data.num_examples=8",
          "--config.rollout.prompts_per_step=2", "--config.rollout.group_size=2",
          "--config.rollout.max_new_tokens=12", "--config.update_loop.micro_batch_size=2",
          "--config.reward.num_workers=0", "--config.logging.console=false",
          "--config.evals.num_examples=4", "--config.evals.decoding.max_new_tokens=8"]
  _run("train.py", f"--config={TRUTHRL}:runlocal", f"--workdir={rl}", f"--config.model.path={sft / 'hf'}",
       "--config.stages[0].num_steps=1", *tiny)
  _run("export_hf.py", f"--workdir={rl}", f"--output_dir={export}")
  proc = _run("evaluate.py", f"--config={TRUTHRL}:runlocal", f"--model={sft / 'hf'}", f"--model={export}",
              f"--model={rl}", "--label=sft", "--label=grpo_export", "--label=grpo_workdir",
              f"--output_dir={out}", "--bootstrap_resamples=500", f"--curves={rl}", *tiny)
  assert "| sft |" in proc.stdout and "| grpo_export |" in proc.stdout  # the printed table
  report = (out / "report.md").read_text()
  assert "python" in report and "--model=" in report  # the command that reproduces the table
  predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
  by_model = {}
  for p in predictions:
    by_model.setdefault(p["model"], []).append(p["completion"])
  assert [len(v) for v in by_model.values()] == [4, 4, 4]
  assert by_model["grpo_export"] == by_model["grpo_workdir"]
  assert (out / "curves.png").is_file()
