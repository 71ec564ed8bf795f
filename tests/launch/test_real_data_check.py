"""launch/real_data_check.py before any model loads: the parts it writes (short real contexts with
twins, SFT and GRPO halves of the training questions, dev and test never trained on), the config it
points at them, and the SFT warm-up reading the SFT part. The run itself is learning_check.run
(tests/launch/test_learning_check.py); its results are in docs/results.md."""

import importlib.util
import json
import pathlib

import launch_script
from grounding_jax.data import jsonl
from grounding_jax.data import real_contexts

ROOT = pathlib.Path(__file__).resolve().parents[2]
real_data_check = launch_script.load("real_data_check", "real_data_check_cli")


def _truthrl_runlocal(model_dir, workdir):
  spec = importlib.util.spec_from_file_location("config_truthrl", ROOT / "configs" / "truthrl.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  c = module.get_config("runlocal")
  c.model.path, c.workdir = str(model_dir), str(workdir)
  return c


def test_parts_config_and_warmup_never_touch_the_held_out_questions(tiny_smollm2_dir, tmp_path):
  parts = real_data_check.build_parts(real_contexts.DEFAULT_DIR, test_questions=4, dev_questions=2)
  paths = real_data_check.write_parts(parts, tmp_path)
  ids = json.loads((tmp_path / "split_ids.json").read_text())
  assert len(ids["test"]) == 12 and len(ids["dev"]) == 6
  questions = {k: {i.split("#")[0] for i in v} for k, v in ids.items()}
  for held in ("test", "dev"):
    assert not questions[held] & (questions["sft"] | questions["grpo"])
  assert not questions["sft"] & questions["grpo"]
  test = list(jsonl.read_examples(paths["test"]))
  assert [ex.answerable for ex in test[:4]] == [True, False, True, False]  # each with its twin

  lc = real_data_check.learning_check
  c = lc.prepare_config(_truthrl_runlocal(tiny_smollm2_dir, tmp_path / "run"), steps=2)
  real_data_check.configure(c, paths, split="heldout", evidence_contrast="gold_removed")
  settings, examples, _ = lc.check_inputs(c, "heldout", None, 2, paths["sft"])
  assert [ex.id for ex in examples] == [ex.id for ex in test]
  assert c.stages[0].data.path == paths["grpo"] and c.stages[0].data.evidence_contrast == "gold_removed"
  assert c.rollout.max_prompt_tokens == real_data_check.MAX_PROMPT_TOKENS
  sft = lc.sft_config(c, 2, paths["sft"])
  assert (sft.data.source, sft.data.path, sft.data.num_examples) == ("jsonl", paths["sft"],
                                                                     len(parts["sft"]))
  real_data_check.configure(c, paths, split="dev", evidence_contrast="")
  assert c.evals.data.path == paths["dev"]
  cross = real_data_check.build_parts(real_contexts.DEFAULT_DIR, held_out_dataset="nq",
                                      test_questions=2, dev_questions=2)
  assert {ex.meta["dataset"] for ex in cross["test"]} == {"nq"} and len(cross["test"]) == 12
  assert "nq" not in {ex.meta["dataset"] for ex in cross["sft"] + cross["grpo"]}
