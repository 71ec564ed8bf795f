"""launch/build_data.py end to end (as a user runs it): raw files and the synthetic world → JSONL + summary."""

import pathlib
import subprocess
import sys

from grounding_jax.data.jsonl import read_examples, read_examples_with_prompts
from grounding_jax.data.prompts import render_prompt
from grounding_jax.data.readers import read_dataset

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "data" / "fixtures"


def _run(*args):
  out = subprocess.run([sys.executable, str(ROOT / "launch" / "build_data.py"), *args], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
  assert out.returncode == 0, out.stderr
  return out.stdout


def test_raw_files_to_jsonl_with_prompts(tmp_path):
  stdout = _run("--recipe=arena", "--source=hotpotqa", f"--train_input={FIX / 'hotpotqa_dev_distractor_5.json'}",
                "--train_limit=3", f"--eval_input={FIX / 'hotpotqa_dev_distractor_5.json'}",
                f"--output_dir={tmp_path}", "--with_prompts")
  expected = list(read_dataset("hotpotqa", FIX / "hotpotqa_dev_distractor_5.json"))
  train = list(read_examples_with_prompts(tmp_path / "train.jsonl"))
  assert [ex for ex, _ in train] == expected[:3]
  assert [p for _, p in train] == [render_prompt("arena", ex) for ex in expected[:3]]
  assert list(read_examples(tmp_path / "eval.jsonl")) == expected
  rows = {line.split()[0]: line.split() for line in stdout.splitlines() if line.startswith(("train", "eval"))}
  # split examples answerable unanswerable unlabelled rate passages gold prompt-chars
  assert rows["train"][1:6] == ["3", "3", "0", "0", "1.000"]
  assert rows["eval"][1] == "5" and rows["eval"][6:8] == ["10.00", "2.00"]
  mean_chars = sum(len(render_prompt("arena", ex)) for ex in expected) / 5
  assert rows["eval"][8] == f"{mean_chars:.0f}"


def test_synthetic_source_and_eval_fraction(tmp_path):
  stdout = _run("--recipe=grace", "--source=synthetic", "--synthetic_train_size=40", "--synthetic_eval_size=10",
                "--synthetic_answerable_ratio=0.25", f"--output_dir={tmp_path / 's'}")
  train = list(read_examples(tmp_path / "s" / "train.jsonl"))
  assert len(train) == 40 and sum(ex.answerable is True for ex in train) == 10
  assert "0.250" in stdout
  _run("--recipe=trust", "--source=asqa", f"--train_input={FIX / 'trust_asqa_eval_calibrated_handmade.json'}",
       "--eval_fraction=0.5", "--reader_kwargs=ndoc=3", f"--output_dir={tmp_path / 't'}")
  both = list(read_examples(tmp_path / "t" / "train.jsonl")) + list(read_examples(tmp_path / "t" / "eval.jsonl"))
  assert sorted(ex.id for ex in both) == ["hm-asqa-1", "hm-asqa-2"] and all(len(ex.passages) == 3 for ex in both)


def test_grace_construction_from_raw_files(tmp_path):
  stdout = _run("--recipe=grace", "--source=hotpotqa", "--grace_construct", "--grace_retrievers=oracle,bm25,random",
                "--grace_test_retriever=bm25", f"--train_input={FIX / 'hotpotqa_dev_distractor_5.json'}",
                f"--eval_input={FIX / 'hotpotqa_dev_distractor_5.json'}", f"--output_dir={tmp_path}")
  assert "GRACE construction (hotpotqa, mode=grace)" in stdout
  train = list(read_examples(tmp_path / "train.jsonl"))
  assert {ex.meta["retriever"] for ex in train} == {"oracle", "bm25", "random"}
  for ex in train:
    assert bool(ex.gold_passage_ids) == ex.answerable  # sufficient ⇔ gold in the context
  evals = list(read_examples(tmp_path / "eval.jsonl"))
  assert len(evals) == 5 and all(len(ex.passages) == 3 for ex in evals)
