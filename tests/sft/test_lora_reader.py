"""LEAR's LoRA reader (configs/lear.py:reader) through launch/sft.py: the Table 7 prompt → the gold
answer, adapters only in the checkpoints, the merged HF folder at the end, and the adapters alone as
a PEFT folder with launch/export_hf.py --adapters=peft."""

import json
import pathlib
import subprocess
import sys

import numpy as np

from grounding_jax import checkpoints
from grounding_jax.eval import model_ref
from grounding_jax.models import hf_export
from grounding_jax.models import load_pretrained
from grounding_jax.recipes import get_recipe
from grounding_jax.data import synthetic

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_reader_gold_is_the_answer_on_table_7s_prompt():
  ex = synthetic.generate_examples(2, seed=0, answerable_ratio=1.0)[0]
  recipe = get_recipe("lear")
  assert recipe.gold_completion(ex, style="reader") in ex.answers
  prompt = recipe.messages(ex, template="reader")[0]["content"]
  assert prompt.endswith("Answer:") and ex.question in prompt and "Passage 1:" in prompt


def test_lora_reader_trains_adapters_and_exports(tiny_smollm2_dir, tmp_path):
  workdir = tmp_path / "reader"
  cmd = [sys.executable, str(ROOT / "launch" / "sft.py"),
         f"--config={ROOT / 'configs' / 'lear.py'}:reader_runlocal", f"--workdir={workdir}",
         f"--config.model.path={tiny_smollm2_dir}", "--config.data.num_examples=8"]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [json.loads(line) for line in (workdir / "logs" / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows] == [1, 2] and all(np.isfinite(r["loss"]) for r in rows)
  meta = checkpoints.Checkpointer(workdir / "checkpoints").read_meta()
  params = [p for p in meta["leaf_paths"] if p.startswith("['params']")]
  assert params and all("_lora" in p for p in params)  # rank 8 adapters, no base weight

  # launch/sft.py's merged folder equals the run's policy (base + checkpointed adapters)
  loaded = model_ref.load(str(workdir))
  assert loaded.ref.lora.rank == 8
  ids = np.array([[5, 17, 230, 9, 41]], np.int32)
  mask = np.ones_like(ids, bool)
  want = np.asarray(loaded.model(ids, mask))
  np.testing.assert_allclose(np.asarray(load_pretrained(workdir / "hf")(ids, mask)), want, atol=1e-5)

  out = tmp_path / "peft"
  proc = subprocess.run([sys.executable, str(ROOT / "launch" / "export_hf.py"),
                         f"--workdir={workdir}", f"--output_dir={out}", "--adapters=peft"],
                        capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-3000:]
  config = json.loads((out / hf_export.PEFT_CONFIG).read_text())
  assert (config["r"], config["lora_alpha"], config["peft_type"]) == (8, 16.0, "LORA")
  assert (out / hf_export.PEFT_WEIGHTS).is_file()
