"""launch/sft.py end to end on a tiny model: the loss on a repeated target falls, a second run on the
same workdir resumes, the HF folder it writes loads in transformers with our logits, and a malformed
row stops the run (file:line: field) before any model loads."""

import importlib.util
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from grounding_jax.eval import model_ref

ROOT = pathlib.Path(__file__).resolve().parents[2]
TARGET = "w5 w6 w7 w5"


def _rows(path, n=16):
  rng = np.random.default_rng(0)
  with open(path, "w") as f:
    for i in range(n):
      words = " ".join(f"w{t}" for t in rng.integers(13, 90, 3))
      row = ({"prompt": words} if i % 2 else {"messages": [{"role": "user", "content": words}]})
      f.write(json.dumps({**row, "target": TARGET}) + "\n")
  return path


def _sft(workdir, model, rows, *overrides):
  cmd = [sys.executable, str(ROOT / "launch" / "sft.py"), f"--config={ROOT / 'configs' / 'sft.py'}",
         f"--workdir={workdir}", f"--config.model.path={model}", f"--config.data.path={rows}",
         "--config.batch_size=8", "--config.micro_batch_size=4", "--config.optimizer.learning_rate=0.02",
         "--config.optimizer.schedule=constant", "--config.optimizer.warmup_ratio=0.0",
         "--config.logprob_chunk_size=48", "--config.checkpoint.every_steps=2", *overrides]
  return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_sft_launcher_learns_resumes_and_exports(tiny_chat_model, tmp_path):
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  workdir, rows = tmp_path / "sft", _rows(tmp_path / "rows.jsonl")
  proc = _sft(workdir, tiny_chat_model, rows, "--config.num_epochs=3")
  assert proc.returncode == 0, proc.stderr[-3000:]
  metrics = (workdir / "logs" / "metrics.jsonl").read_text().splitlines()
  losses = [json.loads(line)["loss"] for line in metrics]
  assert len(losses) == 6 and losses[-1] < 0.6 * losses[0], losses
  assert any((workdir / "logs" / "tb").iterdir())
  record = json.loads((workdir / "config.json").read_text())
  assert record["model"]["path"] == str(tiny_chat_model) and record["data"]["path"] == str(rows)

  # Same workdir, one more epoch: continues from step 6, not from scratch.
  proc = _sft(workdir, tiny_chat_model, rows, "--config.num_epochs=4")
  assert proc.returncode == 0, proc.stderr[-3000:]
  metrics = (workdir / "logs" / "metrics.jsonl").read_text().splitlines()
  steps = [json.loads(line)["step"] for line in metrics]
  assert steps == [1, 2, 3, 4, 5, 6, 7, 8]

  # <workdir>/hf is the step-8 policy: transformers' logits match ours from the checkpoint.
  ours = model_ref.load(str(workdir))
  assert ours.ref.step == 8
  hf = transformers.AutoModelForCausalLM.from_pretrained(workdir / "hf", dtype=torch.float32)
  ids = np.asarray([[90, 17, 18, 91, 92, 5, 6, 7]], np.int32)
  with torch.no_grad():
    theirs = hf(torch.from_numpy(ids).long()).logits.numpy()
  mine = np.asarray(ours.model(ids, np.ones_like(ids, bool)))
  assert np.abs(mine - theirs).max() <= 1e-4
  assert transformers.AutoTokenizer.from_pretrained(workdir / "hf").chat_template


def test_malformed_row_fails_before_the_model_loads(tmp_path):
  rows = tmp_path / "rows.jsonl"
  rows.write_text(json.dumps({"prompt": "w1", "target": "w5"}) + "\n" +
                  json.dumps({"messages": [{"role": "user", "content": 7}], "target": "w5"}) + "\n")
  proc = _sft(tmp_path / "sft", tmp_path / "no_such_model", rows)
  assert proc.returncode != 0
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith(f"sft: {rows}:2: field 'messages[0].content' must be a string"), last
  assert not (tmp_path / "sft").exists()  # nothing written, no model looked up


def test_sft_config_presets():
  spec = importlib.util.spec_from_file_location("sft_config", ROOT / "configs" / "sft.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  c = module.get_config("runlocal")
  assert c.model.path == "smollm2" and c.data.kind == "jsonl" and c.batch_size % c.micro_batch_size == 0
  assert module.get_config().model.path == ""
  demo = module.get_config("demo")
  assert demo.data.kind == "recipe" and demo.data.recipe == "truthrl" and demo.data.source == "synthetic"
  # The papers' SFT baselines: their hyper-parameters where the notes give them (004 §4.2; 002 §4).
  truthrl, arena, grace = (module.get_config(a) for a in ("truthrl", "arena", "grace"))
  assert (truthrl.optimizer.learning_rate, truthrl.batch_size, truthrl.optimizer.warmup_ratio,
          truthrl.num_epochs) == (5e-6, 16, 0.03, 1)
  assert (arena.optimizer.learning_rate, arena.batch_size, arena.optimizer.max_grad_norm,
          arena.data.target) == (1e-5, 32, 0.3, "direct")
  assert grace.data.recipe == "grace" and all(c.data.source == "jsonl" for c in (truthrl, arena, grace))
  for c in (demo, truthrl, arena, grace):
    assert c.batch_size % c.micro_batch_size == 0
  with pytest.raises(ValueError, match="unknown preset"):
    module.get_config("dmeo")


def test_sft_launcher_on_recipe_rows(tiny_smollm2_dir, tmp_path):
  # data.kind="recipe": TruthRL prompts of 8 synthetic questions and their gold completions, 2 steps
  # on a tiny llama with SmolLM2's tokenizer; the output is a model folder train.py accepts.
  workdir = tmp_path / "sft"
  cmd = [sys.executable, str(ROOT / "launch" / "sft.py"), f"--config={ROOT / 'configs' / 'sft.py'}:demo",
         f"--workdir={workdir}", f"--config.model.path={tiny_smollm2_dir}", "--config.data.num_examples=8",
         "--config.logprob_chunk_size=4096"]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [json.loads(line) for line in (workdir / "logs" / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows] == [1, 2] and all(np.isfinite(r["loss"]) for r in rows)
  record = json.loads((workdir / "config.json").read_text())
  assert record["data"]["kind"] == "recipe" and record["data"]["recipe"] == "truthrl"
  assert (workdir / "hf" / "config.json").is_file() and (workdir / "hf" / "tokenizer_config.json").is_file()
  # The tokens trained on are the gold completions (think + box + EOS: ~25-50 each), not a few words.
  assert 8 * 20 < sum(r["tokens"] for r in rows) < 8 * 128
  # An example the target cannot be written for stops the run before any model loads.
  bad = subprocess.run(cmd[:3] + [f"--workdir={tmp_path / 'bad'}", "--config.model.path=/no/such/model",
                                  "--config.data.recipe=arena"], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
  assert bad.returncode != 0
  assert "sft: synthetic(seed=0) example" in bad.stderr and "answerable_ratio=1.0" in bad.stderr
  assert not (tmp_path / "bad").exists()
