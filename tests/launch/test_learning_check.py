"""launch/learning_check.py's machinery on a tiny model: base → SFT warm-up → GRPO, each evaluated on
the held-out split with the recipe's metrics; the table's numbers are the evaluations' and the
trainer's logged metrics; no held-out (or dev) item is trained on. Learning itself is shown by the
real SmolLM2 runs in README, not asserted on a random tiny model."""

import importlib.util
import json
import pathlib

import pytest

import launch_script
from grounding_jax.data import splits
from grounding_jax.sft import data as sft_data

ROOT = pathlib.Path(__file__).resolve().parents[2]
learning_check = launch_script.load("learning_check", "learning_check_cli")


def _config(name):
  spec = importlib.util.spec_from_file_location(f"config_{name}", ROOT / "configs" / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config("runlocal")


def tiny(name, model_dir, workdir):
  """configs/<name>.py:runlocal at test size: 2 prompts × G=2, 8 new tokens, 8 training items,
  4 held-out questions."""
  c = _config(name)
  c.model.path, c.workdir, c.seed = str(model_dir), str(workdir), 3
  c.rollout.prompts_per_step, c.rollout.group_size, c.rollout.max_new_tokens = 2, 2, 8
  c.update_loop.micro_batch_size = 2
  c.reward.num_workers = 0
  c.logging.console = False
  for st in c.stages:
    st.data.num_examples = 8
  c.evals.update(dict(num_examples=4, batch_size=4))
  c.evals.decoding.max_new_tokens = 8
  return c


@pytest.mark.parametrize("stage_steps,total,want", [([16], 5, [5]), ([25, 250], 8, [1, 7]),
                                                    ([4, 12], 16, [4, 12]), ([250, 1], 3, [2, 1])])
def test_split_steps_keeps_the_stages_proportions(stage_steps, total, want):
  assert learning_check.split_steps(stage_steps, total) == want


def test_split_steps_needs_a_step_per_stage():
  with pytest.raises(ValueError, match="--steps=1: the config has 2 stages"):
    learning_check.split_steps([4, 12], 1)


def test_heldout_and_dev_items_are_never_trained_on(tiny_smollm2_dir, tmp_path):
  c = learning_check.prepare_config(tiny("grace", tiny_smollm2_dir, tmp_path), steps=2)
  train = {ex.question for st in c.stages for ex in splits.load(st.data)}
  heldout = learning_check.examples_for(c, "heldout", 8)
  dev = learning_check.examples_for(c, "dev", 8)
  assert len(heldout) == len(dev) == 8
  assert not train & {ex.question for ex in heldout + dev}
  assert not {(ex.question, ex.answerable) for ex in heldout} & {(ex.question, ex.answerable)
                                                                 for ex in dev}
  # the SFT warm-up writes targets for the first stage's own items, contexts included
  def items(exs):
    return [(ex.id, ex.question, ex.answerable, tuple(p.text for p in ex.passages)) for ex in exs]
  sft_rows = sft_data.load_examples(learning_check.sft_config(c, 2).data)[0]
  assert items(sft_rows) == items(splits.load(c.stages[0].data))
  c.stages[0].data.update(dict(unanswerable="unrelated", num_passages=3, num_countries=16))
  sft_rows = sft_data.load_examples(learning_check.sft_config(c, 2).data)[0]
  assert items(sft_rows) == items(splits.load(c.stages[0].data))


def test_sft_rows_from_another_world(tiny_smollm2_dir, tmp_path):
  c = learning_check.prepare_config(tiny("grace", tiny_smollm2_dir, tmp_path), steps=2)
  st = c.stages[0].data
  data = learning_check.sft_config(c, 24, world_offset=1000, answerable_ratio=0.75).data
  assert (data.num_examples, data.seed, data.answerable_ratio) == (96, st.seed + 1000, 0.75)
  rows = sft_data.load_examples(data)[0]
  assert len(rows) == 96 and sum(ex.answerable for ex in rows) == 72
  evaluated = splits.load(st) + learning_check.examples_for(c, "heldout", 8)
  names = lambda exs: {w for ex in exs for w in ex.question.split() if w[:1].isupper()}
  assert not (names(rows) - {"What", "Who", "Which", "In", "The"}) & names(evaluated)
  with pytest.raises(ValueError, match="--sft_world_offset"):  # the stage has too few items
    learning_check.sft_config(c, 24)
  with pytest.raises(ValueError, match="sft_answerable_ratio=1.5"):
    learning_check.sft_config(c, 4, world_offset=1, answerable_ratio=1.5)
  assert learning_check.sft_config(c, 2, target="default:0.5,direct:0.5").data.target == \
      "default:0.5,direct:0.5"
  with pytest.raises(ValueError, match="data.target='default:0.5'"):  # before any model loads
    learning_check.sft_config(c, 2, target="default:0.5")


def test_base_sft_grpo_table_from_the_evaluations_and_the_run(tiny_smollm2_dir, tmp_path):
  c = learning_check.prepare_config(tiny("truthrl", tiny_smollm2_dir, tmp_path / "run"), steps=2)
  summary = learning_check.run(c, sft_steps=1, bootstrap_resamples=200, command="python ...",
                               progress=False)
  out = pathlib.Path(summary["output_dir"])
  assert out == tmp_path / "run" / "learning_check"
  saved = json.loads((out / "learning_check.json").read_text())
  metrics = json.loads((out / "metrics.json").read_text())  # evaluate.py's report of the same rows
  assert [m["name"] for m in metrics["models"]] == ["start", "sft", "grpo"]
  by_name = {m["name"]: m["metrics"] for m in metrics["models"]}
  rows = {r["metric"]: r for r in saved["rows"]}
  assert set(rows) == {"reward", "truthfulness"}  # TruthRL's headline metric
  for metric, row in rows.items():
    for name in ("start", "sft", "grpo"):
      assert row[name] == pytest.approx(by_name[name][metric])
    # paired bootstrap: grpo − start and grpo − sft, each interval around its difference
    for key, base in (("vs_start", "start"), ("vs_previous", "sft")):
      iv = row[key]
      assert iv["difference"] == pytest.approx(row["grpo"] - row[base])
      assert iv["low"] <= iv["difference"] <= iv["high"]
  # the training fractions are the trainer's logged per-step metrics
  logged = [json.loads(line) for line in (tmp_path / "run" / "logs" / "metrics.jsonl").read_text()
            .splitlines()]
  assert [r["step"] for r in logged] == [1, 2]
  for k in ("truncated_frac", "zero_variance_frac"):
    assert saved["training"][k]["first"] == pytest.approx(logged[0][k])
    assert saved["training"][k]["last"] == pytest.approx(logged[-1][k])
  # GRPO started from the exported SFT model; the SFT run trained its one step
  assert saved["models"]["sft"] == str(tmp_path / "run" / "sft" / "hf")
  assert json.loads((tmp_path / "run" / "config.json").read_text())["model"]["path"] == \
      saved["models"]["sft"]
  assert (tmp_path / "run" / "sft" / "logs" / "metrics.jsonl").read_text().count("\n") == 1
  md = (out / "learning_check.md").read_text()
  assert "| reward |" in md and "Δ grpo − sft [95% CI]" in md and "zero_variance_frac" in md
  assert (out / "report.md").is_file() and (out / "predictions.jsonl").is_file()
  # Run again on the same workdir, the Trainer would resume from the run's checkpoint (its weights
  # read from there): the start row would not be the start model, so the check refuses.
  again = learning_check.prepare_config(tiny("truthrl", tiny_smollm2_dir, tmp_path / "run"), steps=2)
  with pytest.raises(ValueError, match=r"already holds a GRPO run \(checkpoint step 2\)"):
    learning_check.check_inputs(again)
  # --sft_model: an HF folder, not a run's checkpoint, and not beside --sft_steps
  fresh = learning_check.prepare_config(tiny("truthrl", tiny_smollm2_dir, tmp_path / "b"), steps=2)
  with pytest.raises(ValueError, match=r"@2: GRPO starts from an HF folder, not a run's checkpoint"):
    learning_check.check_inputs(fresh, sft_model=f"{tmp_path / 'run'}@2")
  with pytest.raises(ValueError, match="a warm-up already made: drop --sft_steps"):
    learning_check.check_inputs(fresh, sft_steps=1, sft_model=saved["models"]["sft"])


def test_bad_input_stops_before_a_model_loads(tiny_smollm2_dir, tmp_path):
  c = learning_check.prepare_config(tiny("grace", tiny_smollm2_dir, tmp_path), steps=2)
  with pytest.raises(ValueError, match=r"--sft_steps=3: the first stage has 8 items, enough for 2"):
    learning_check.check_inputs(c, sft_steps=3)
  c.evals.data.update(dict(kind="jsonl", path=str(ROOT / "tests" / "data" / "fixtures" / "x.jsonl")))
  with pytest.raises(ValueError, match="--split=dev: a dev split is drawn from the synthetic world"):
    learning_check.examples_for(c, "dev", 4)


def test_a_searching_recipe_gets_its_retriever_in_every_evaluation_and_in_grpo(tiny_smollm2_dir,
                                                                                tmp_path):
  # configs/search.py:runlocal samples several turns: the check builds the config's retriever once
  # (before, its first evaluation raised "needs a tool"). The warm-up is a folder already made
  # (--sft_model; here the tiny model itself): no SFT runs, the table still has its sft row.
  c = learning_check.prepare_config(tiny("search", tiny_smollm2_dir, tmp_path / "run"), steps=1)
  summary = learning_check.run(c, sft_model=str(tiny_smollm2_dir), bootstrap_resamples=100,
                               command="python ...", progress=False)
  assert [m for m in summary["metrics"]] == ["start", "sft", "grpo"]
  assert summary["models"]["sft"] == str(tiny_smollm2_dir) and not (tmp_path / "run" / "sft").exists()
  assert json.loads((tmp_path / "run" / "config.json").read_text())["model"]["path"] == \
      str(tiny_smollm2_dir)
  for metrics in summary["metrics"].values():
    assert "search/calls_per_completion" in metrics and "search/searching_frac" in metrics
  rows = {r["metric"]: r for r in summary["rows"]}
  assert set(learning_check.SEARCH_METRICS) <= set(rows)
  iv = rows["search/searching_frac"]["vs_previous"]  # GRPO − SFT, paired
  assert iv["difference"] == pytest.approx(rows["search/searching_frac"]["grpo"]
                                           - rows["search/searching_frac"]["sft"])


def test_best_every_reports_the_step_kept_on_the_dev_draw(tiny_smollm2_dir, tmp_path):
  workdir = tmp_path / "run"
  c = learning_check.prepare_config(tiny("truthrl", tiny_smollm2_dir, workdir), steps=2,
                                    best_every=1, dev_examples=4)
  assert (c.evals.split, c.evals.every_steps, c.checkpoint.best_metric) == (
      "dev", 1, "eval/balanced_accuracy")
  summary = learning_check.run(c, bootstrap_resamples=100, command="python ...", progress=False)
  logged = [json.loads(line) for line in (workdir / "logs" / "metrics.jsonl").read_text().splitlines()]
  scores = {r["step"]: r["eval/balanced_accuracy"] for r in logged if "eval/balanced_accuracy" in r}
  assert sorted(scores) == [1, 2]
  # The GRPO row is the kept checkpoint's evaluation: the same items scored from that step's weights.
  kept = max(scores, key=lambda step: (scores[step], -step))  # the first of equal scores stays
  assert summary["models"]["grpo"].startswith(f"{workdir}@best:{kept} (the step kept")
  settings = learning_check.EvalSettings.from_config(c)
  examples = learning_check.examples_for(c, "heldout", c.evals.num_examples)
  loaded = learning_check.model_ref.load(f"{workdir}@best")  # the best-step checkpoint, loaded apart
  assert loaded.ref.name == f"{workdir}@best:{kept}"
  again = learning_check.harness.evaluate_model(
      loaded.model, loaded.tokenizer, examples, settings, name="grpo", progress=False,
      rewards=learning_check.from_config.last_stage_rewards(c), options=settings.evaluate_options())
  assert summary["metrics"]["grpo"] == pytest.approx(again.metrics)


def test_best_every_needs_the_synthetic_dev_draw(tiny_smollm2_dir, tmp_path):
  with pytest.raises(ValueError, match="best_every must be >= 0"):
    learning_check.prepare_config(tiny("truthrl", tiny_smollm2_dir, tmp_path), best_every=-1)
  c = tiny("truthrl", tiny_smollm2_dir, tmp_path)
  c.evals.data.update(dict(kind="jsonl", path="x.jsonl"))
  with pytest.raises(ValueError, match="dev draw of the synthetic world"):
    learning_check.prepare_config(c, best_every=2)
