"""launch/real_data_check.py before any model loads: the parts it writes (short real contexts with
twins, SFT and GRPO halves of the training questions, dev and test never trained on), the config it
points at them, and the SFT warm-up reading the SFT part. The run itself is learning_check.run
(tests/launch/test_learning_check.py); its results are in docs/results.md."""

import importlib.util
import json
import pathlib

import numpy as np

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
  for part in ("sft", "grpo"):  # each dataset's training questions halved, not the whole list
    assert {ex.meta["dataset"] for ex in parts[part]} == set(real_contexts.FILES), part
  test = list(jsonl.read_examples(paths["test"]))
  assert [ex.answerable for ex in test[:4]] == [True, False, True, False]  # each with its twin

  lc = real_data_check.learning_check
  c = lc.prepare_config(_truthrl_runlocal(tiny_smollm2_dir, tmp_path / "run"), steps=2)
  real_data_check.configure(c, paths, split="heldout", evidence_contrast="gold_removed")
  settings, examples, _ = lc.check_inputs(c, "heldout", None, 2, paths["sft"])
  assert [ex.id for ex in examples] == [ex.id for ex in test]
  assert c.stages[0].data.path == paths["grpo"] and c.stages[0].data.evidence_contrast == "gold_removed"
  assert c.rollout.max_prompt_tokens == real_data_check.MAX_PROMPT_TOKENS
  limit = real_data_check.MAX_NEW_TOKENS  # SFT targets, GRPO samples and evaluated answers alike
  assert c.rollout.max_new_tokens == c.evals.decoding.max_new_tokens == limit > 128
  sft = lc.sft_config(c, 2, paths["sft"], overlong=real_data_check.SFT_OVERLONG)
  assert (sft.data.source, sft.data.path, sft.data.num_examples) == ("jsonl", paths["sft"],
                                                                     len(parts["sft"]))
  assert (sft.data.max_completion_tokens, sft.data.overlong) == (limit, "drop")
  real_data_check.configure(c, paths, split="dev", evidence_contrast="")
  assert c.evals.data.path == paths["dev"]
  cross = real_data_check.build_parts(real_contexts.DEFAULT_DIR, held_out_dataset="nq",
                                      test_questions=2, dev_questions=2)
  assert {ex.meta["dataset"] for ex in cross["test"]} == {"nq"} and len(cross["test"]) == 12
  assert "nq" not in {ex.meta["dataset"] for ex in cross["sft"] + cross["grpo"]}


def test_gold_completions_fit_the_token_limit(smollm2_dir):
  """The limit real_data_check sets holds ≥ 95 % of the answerable gold completions (TruthRL's, with
  SmolLM2's tokenizer; docs/results.md) of the SFT part and of every part, each dataset ≥ 85 %; the
  rest SFT drops. Before MuSiQue's and NQ's evidence became sentences, 72 % of the SFT part fit it."""
  from grounding_jax import models
  tokenizer = models.load_tokenizer(smollm2_dir)
  parts = real_data_check.build_parts(real_contexts.DEFAULT_DIR)
  limit = real_data_check.MAX_NEW_TOKENS
  for rows in (parts["sft"], [ex for part in parts.values() for ex in part]):
    lengths = real_data_check.gold_lengths(rows, "truthrl", tokenizer)
    assert set(lengths) == set(real_contexts.FILES)
    assert all(np.mean(v <= limit) >= 0.85 for v in lengths.values()), {
        k: np.mean(v <= limit) for k, v in lengths.items()}
    assert np.mean(np.concatenate(list(lengths.values())) <= limit) >= 0.95
  table = real_data_check.length_table(lengths, limit)
  assert table.splitlines()[0] == f"| dataset | n | median | p90 | p95 | max | ≤ {limit} |"
  assert table.splitlines()[-1].startswith("| all | 453 |")



def test_graded_reward_judge_leaves_the_evaluation_judge_and_scores_a_partial_answer(tmp_path):
  from grounding_jax import text  # pylint: disable=g-import-not-at-top
  from grounding_jax.eval import from_config  # pylint: disable=g-import-not-at-top
  paths = real_data_check.write_parts(
      real_data_check.build_parts(real_contexts.DEFAULT_DIR, test_questions=1, dev_questions=1),
      tmp_path)
  c = _truthrl_runlocal(tmp_path, tmp_path / "run")
  real_data_check.configure(c, paths, split="dev", evidence_contrast="gold_removed",
                            reward_f1_threshold=0.5, abstain_reward_answerable=-0.5)
  options = c.reward.functions[0].options
  assert (options.judge.kind, options.judge.threshold) == ("token_f1", 0.5)
  assert c.evals.judges.judge.kind == "exact_match"      # the tables stay exact match, as dev2's
  (_, _, reward), = from_config.reward_functions(c)     # the reward the trainer builds
  ex = next(e for e in jsonl.read_examples(paths["dev"]) if e.answerable)
  gold = ex.answers[0]
  partial = f"{gold} and more"                          # F1 >= 0.5, not an exact match
  scores = reward.score([f"\\boxed{{{gold}}}", f"\\boxed{{{partial}}}", "\\boxed{I don't know}",
                         "\\boxed{zzz qqq}"], [ex] * 4)["reward"]
  assert text.token_f1(partial, ex.answers) >= 0.5 > text.exact_match(partial, ex.answers)
  np.testing.assert_allclose(scores, [1.0, 1.0, -0.5, -1.0])
  c2 = _truthrl_runlocal(tmp_path, tmp_path / "run2")
  with c2.unlocked():
    c2.reward.functions[0].options = dict(x=1)
  with np.testing.assert_raises_regex(ValueError, "does not have"):
    real_data_check.configure(c2, paths, split="dev", evidence_contrast="", reward_f1_threshold=0.5)


def test_learning_check_flags_it_does_not_use_are_refused_not_dropped():
  """Its own FlagValues: the global one holds whatever launch scripts other tests loaded."""
  from absl import flags

  def given(*argv):
    fv = flags.FlagValues()
    for name in ("best_every", "sft_answerable_ratio", "sft_world_offset", "split", "sft_steps",
                 "output_dir", "num_examples"):
      flags.DEFINE_string(name, None, "", flag_values=fv)
    fv(["real_data_check", *argv])
    return real_data_check.ignored_flags(fv)

  assert given("--sft_steps=4", "--best_every=2", "--sft_answerable_ratio=0.6") == [
      "best_every", "sft_answerable_ratio"]
  assert given("--sft_steps=4", "--split=dev", "--output_dir=/tmp/x") == []
