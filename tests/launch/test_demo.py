"""`make demo`'s pipeline end to end on a tiny model (the machinery; the learning is shown by the real
run in README), and the demo config's held-out rule: no evaluated question was trained on by SFT or
GRPO."""

import json

import pytest

from launch_script import load

from grounding_jax.data import splits
from grounding_jax.eval import model_ref
from grounding_jax.sft import data as sft_data

demo = load("demo", "demo_script")


def test_demo_sft_trains_on_another_world_and_the_held_out_split_asks_other_questions():
  module = demo.config_module()
  for world in ("", "dev", "world=5"):
    sft_cfgs, grpo_cfg = demo.load_configs(world)
    assert len(sft_cfgs) == len(module.SFT_PASSES)
    first = sft_cfgs[0]
    for later in sft_cfgs[1:]:  # the same rows again, at a lower rate
      assert later.data == first.data
      assert later.optimizer.learning_rate < first.optimizer.learning_rate
    stage = grpo_cfg.stages[0].data
    assert first.data.seed == stage.seed + module.SFT_WORLD_OFFSET
    rows = sft_data.load_rows(first.data)
    # Both kinds: the abstention rows' target boxes "I don't know".
    assert len(rows) == module.SFT_EXAMPLES
    assert sum(r"\boxed{I don't know}" in r.target for r in rows) == round(
        len(rows) * (1 - module.SFT_ANSWERABLE_RATIO))
    sft_prompts = [r.messages[-1]["content"] for r in rows]
    grpo_examples = splits.load(stage)
    held = splits.held_out(grpo_cfg.evals.data, grpo_cfg.evals.num_examples, [stage])
    # Every stage reads contexts of PASSAGES passages (run 27: SFT on 3, evaluation on 5, read worse).
    assert {p.count("<DOC>") for p in sft_prompts} == {module.PASSAGES}
    assert {len(ex.passages) for ex in [*grpo_examples, *held]} == {module.PASSAGES}
    assert len(held) == grpo_cfg.evals.num_examples
    assert not {ex.question for ex in grpo_examples} & {ex.question for ex in held}
    # No question GRPO trains on or the evaluation asks is in an SFT prompt.
    for ex in [*grpo_examples, *held]:
      assert not any(ex.question in p for p in sft_prompts), ex.question
  # The dev world (where settings were chosen) shares no question with the reported one.
  assert not ({ex.question for ex in splits.load(demo.load_configs("dev")[1].stages[0].data)}
              & {ex.question for ex in splits.load(demo.load_configs()[1].stages[0].data)})
  assert demo.load_configs("world=5")[1].stages[0].data.seed == 5


def test_demo_presets_of_the_grpo_stage():
  module = demo.config_module()
  base = module.get_config("world=3")
  assert base.abstention.control == "" and base.stages[0].data.evidence_contrast == "gold_removed"
  dual = module.get_config("world=3,dual")  # the paper's reward, its abstention priced by dual ascent
  assert dual.abstention.control == "dual"
  assert dual.reward.functions[0].options.abstain_reward_answerable == 0.0
  assert dual.stages[0].data.evidence_contrast == "gold_removed"
  assert module.get_config("world=3,abstain_answerable=-1.0").reward.functions[0].options[
      "abstain_reward_answerable"] == -1.0
  options = module.get_config("world=3,correct_unanswerable=-1").reward.functions[0].options
  assert options["correct_reward_unanswerable"] == -1.0 and options["abstain_reward_answerable"] == -0.5
  # By default validated on the dev split, the best step kept; `:best` says the same; `:last` not.
  last = module.get_config("world=3,last")
  assert (base.evals.split, base.evals.dev_examples, base.checkpoint.best_metric) == (
      "dev", module.DEV_QUESTIONS, "eval/balanced_accuracy")
  assert base.evals.every_steps == module.BEST_EVERY_STEPS and last.evals.every_steps == 0
  assert module.get_config("world=3,best").to_dict() == base.to_dict()
  assert not last.checkpoint.best_metric
  assert demo.grpo_model_ref("/w", base) == "/w/grpo@best" and demo.grpo_model_ref("/w", last) == "/w/grpo"
  for bad, message in (("dual,group", "dual goes with"), ("world=x", "non-negative integer"),
                       ("price", "unknown preset"),
                       ("correct_unanswerable=x", "must be a number"), ("best,last", "exclude each other")):
    with pytest.raises(ValueError, match=message):
      module.get_config(bad)


def test_demo_pipeline_runs_end_to_end_on_a_tiny_model(tiny_smollm2_dir, tmp_path, capsys):
  # Validated on the world's dev split after each step (the default), the GRPO row is the kept step.
  sft_cfgs, grpo_cfg = demo.load_configs()
  grpo_cfg.model.path = str(tiny_smollm2_dir)
  grpo_cfg.stages[0].data.num_examples = 8
  for c in sft_cfgs:  # each pass: 4 rows, 2 steps
    c.model.path = str(tiny_smollm2_dir)  # the second pass's is replaced by the first's output
    c.data.num_examples, c.data.max_completion_tokens = 4, 16
    c.batch_size = c.micro_batch_size = c.checkpoint.every_steps = 2
  grpo_cfg.stages[0].num_steps = 2
  grpo_cfg.rollout.update(dict(prompts_per_step=2, group_size=4, max_new_tokens=8))
  grpo_cfg.update_loop.micro_batch_size = 4
  grpo_cfg.reward.num_workers = 0
  grpo_cfg.checkpoint.every_steps = 2
  grpo_cfg.evals.update(dict(num_examples=8, batch_size=8, every_steps=1, dev_examples=4))
  grpo_cfg.evals.decoding.max_new_tokens = 8
  out = demo.run(tmp_path / "demo", sft_cfgs, grpo_cfg, real_data=demo.REAL_DATA,
                 real_num_examples=2, progress=False, bootstrap_resamples=200)
  printed = capsys.readouterr().out
  report = (tmp_path / "demo" / "report" / "report.md").read_text()
  for text in ("| start |", "| SFT |", "| GRPO |", "GRPO vs SFT", "zero-variance group fraction",
               "python launch/sft.py --config=configs/demo.py:sft", "python launch/train.py",
               "python launch/evaluate.py", "Real data: hotpotqa", "Real data: musique", "load average"):
    assert text in report and text in printed, text
  metrics = json.loads((tmp_path / "demo" / "report" / "metrics.json").read_text())
  assert [m["name"] for m in metrics["models"]] == ["start", "SFT", "GRPO"]
  row = metrics["models"][2]["metrics"]
  assert row["n_questions"] == 8 and "accuracy_answerable" in row and "abstention_unanswerable" in row
  assert set(out["vs_sft"]) == {"truthfulness", "reward", "coverage", "selective_accuracy", "aurc",
                                "balanced_accuracy",  # the selective-prediction metrics (eval/selective.py)
                                "answer_em", "answer_f1", "accuracy_answerable",
                                "abstention_unanswerable"}  # EM / F1 and the two sides (eval/comparison.compare)
  assert (tmp_path / "demo" / "report" / "curves.png").stat().st_size > 0
  # The rows' reproducing commands name real runs: SFT's workdir and HF folder, GRPO's from the latter.
  assert model_ref.resolve(str(tmp_path / "demo" / "sft1")).step == 2
  assert model_ref.resolve(str(tmp_path / "demo" / "sft")).step == 2
  record = json.loads((tmp_path / "demo" / "sft" / "config.json").read_text())
  assert record["model"]["path"] == str(tmp_path / "demo" / "sft1" / "hf")
  w = tmp_path / "demo"
  assert f"--config.model.path={w}/sft1/hf --workdir={w}/sft" in report
  assert model_ref.resolve(str(tmp_path / "demo" / "grpo")).step == 2
  kept = model_ref.resolve(f"{w}/grpo@best")
  assert kept.step in (1, 2) and f"GRPO row: {kept.name}" in printed
  assert f"--model={w}/grpo@best --label=start --label=SFT --label=GRPO" in report
  record = json.loads((tmp_path / "demo" / "grpo" / "config.json").read_text())
  assert record["model"]["path"] == str(tmp_path / "demo" / "sft" / "hf")
  for name in ("hotpotqa", "musique"):
    real = json.loads((tmp_path / "demo" / "report" / f"real_{name}" / "metrics.json").read_text())
    assert [m["name"] for m in real["models"]] == ["start", "GRPO"]
    assert real["models"][0]["metrics"]["n_questions"] == 2


def test_demo_refuses_stages_whose_dtypes_differ_before_loading_a_model(tmp_path):
  sft_cfgs, grpo_cfg = demo.load_configs()
  other = "float32" if grpo_cfg.model.compute_dtype != "float32" else "bfloat16"
  sft_cfgs[-1].model.compute_dtype = other
  with pytest.raises(ValueError, match=rf"share one model.*SFT pass {len(sft_cfgs)}"):
    demo.run(tmp_path / "demo", sft_cfgs, grpo_cfg, progress=False)
  assert not (tmp_path / "demo").exists() or not any((tmp_path / "demo").iterdir())
