"""launch/evaluate.py: every recipe's :runlocal trains 2 steps on a tiny model (validating on its
held-out split at the end), then evaluate.py writes the paper's table for the start model and the
trained one; bad input stops with one line before any model loads.

The runs go through evaluate.py's own `prepare` / `execute` in this process (as its main does after
parsing flags), so the recipes share compiled programs; one test runs the command line itself."""

import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

import launch_script
from grounding_jax.data import synthetic
from grounding_jax.eval import model_ref
from grounding_jax.rl import trainer

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECIPES = ("grace", "trust", "arena", "lear", "truthrl")


def _module(path, name):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


evaluate_cli = launch_script.load("evaluate", "evaluate_cli")


def tiny_runlocal(name, model_dir, workdir):
  """configs/<name>.py:runlocal at test size: 2 prompts × G=2, 12 new tokens, 2 steps (trust: one per
  stage), 4 held-out questions (8 new tokens each). The training shapes are those of
  tests/configs/test_runlocal_golden.py's runs (seed, data, 12 new tokens, micro-batches), so the
  gradient and sampler programs the golden runs compiled come from the session's compilation cache."""
  c = _module(ROOT / "configs" / f"{name}.py", f"config_{name}").get_config("runlocal")
  c.model.path, c.workdir, c.seed = str(model_dir), str(workdir), 3
  c.rollout.prompts_per_step, c.rollout.group_size, c.rollout.max_new_tokens = 2, 2, 12
  if c.dapo.overlong_shaping:
    c.dapo.overlong_buffer = 4
  c.update_loop.num_minibatches, c.update_loop.micro_batch_size = 1, 2
  if c.loss.get("micro_batch_rows"):  # ARENA's per-micro-batch token mean must divide the micro-batch
    c.loss.micro_batch_rows = 2
  c.reward.num_workers = 0
  c.logging.console = False
  for st in c.stages:
    st.num_steps, st.data.num_examples = 2 // len(c.stages), 8
  # Validation in training where the recipe's config has it (ARENA, LEAR): after the last step.
  c.evals.update(dict(every_steps=2 if c.evals.every_steps else 0, num_examples=4, batch_size=4))
  c.evals.decoding.max_new_tokens = 8
  if name == "truthrl":  # two samples per question: pass@2 and maj@2, questions resampled whole
    c.evals.decoding.update(dict(num_samples=2, temperature=1.0))
  if name == "trust":  # NLI judge: the tiny causal LM asked yes/no, for the reward and Trust-Score
    c.reward.functions[0].options.nli = str(model_dir)  # one FieldReference for all three uses
    assert c.evals.judges.nli == c.stages[1].reward.functions[0].options.nli == str(model_dir)
  return c


@pytest.mark.parametrize("name", RECIPES)
def test_runlocal_trains_then_evaluate_writes_the_table(name, tiny_smollm2_dir, tmp_path):
  c = tiny_runlocal(name, tiny_smollm2_dir, tmp_path / "run")
  model_ref.write_run_config(c.workdir, c)  # as launch/train.py does
  trainer.train(c)
  last = json.loads((tmp_path / "run" / "logs" / "metrics.jsonl").read_text().splitlines()[-1])
  assert last["step"] == 2
  assert ("eval/reward" in last and "eval/accuracy_answerable" in last) == bool(c.evals.every_steps)

  models = [str(tiny_smollm2_dir), str(tmp_path / "run")]
  if c.checkpoint.best_metric:  # LEAR keeps its best-on-dev step
    models.append(f"{tmp_path / 'run'}@best")
  out = tmp_path / "eval"
  reader = str(tiny_smollm2_dir) if name == "lear" else None  # LEAR's two-model protocol
  plan = evaluate_cli.prepare(c, models, output_dir=str(out), bootstrap_resamples=500, reader=reader,
                              curves_workdir=str(tmp_path / "run") if name == "grace" else None,
                              command="python launch/evaluate.py ...")
  results, intervals, path = evaluate_cli.execute(plan)

  recipe = plan.settings.recipe
  headline = results[0].metrics
  assert plan.settings.decoding.max_new_tokens == 8 and headline["n_questions"] == 4
  report = path.read_text()
  main, rest = report.split("## Selective prediction")
  table = [line for line in main.splitlines() if line.startswith("| ")]
  assert len(table) == 1 + len(models)  # header + one row per model
  selective_rows = [line for line in rest.splitlines() if line.startswith("| ")]
  assert len(selective_rows) == 1 + len(models) and "AURC" in selective_rows[0]
  summary = json.loads((out / "metrics.json").read_text())
  assert [m["name"] for m in summary["models"]] == [r.name for r in results]
  assert summary["headline_metric"] in summary["columns"]
  for column in ("reward", "accuracy_answerable", "abstention_unanswerable"):
    assert column in summary["columns"] and f"{column}" in results[1].metrics
  selective = ("coverage", "selective_accuracy", "aurc", "balanced_accuracy")
  assert summary["selective_columns"] == list(selective)
  # Each later model against the first: the headline, the reward and the selective metrics always;
  # answer EM / F1 and the two answerability sides where the recipe's rows have them.
  pairs = {(b["model"], b["metric"]) for b in summary["bootstrap"]}
  required = {(r.name, m) for r in results[1:] for m in (summary["headline_metric"], "reward", *selective)}
  optional = {(r.name, m) for r in results[1:] for m in ("answer_em", "answer_f1", "accuracy_answerable",
                                                         "abstention_unanswerable")}
  assert required <= pairs <= required | optional, pairs - required
  for r in results:  # every row has them; the curve ends at full coverage
    assert set(selective) <= set(r.metrics) and 0 <= r.metrics["coverage"] <= 100
    assert summary["risk_coverage"][r.name]["coverage"][-1] == 100.0
  bad = [b for b in summary["bootstrap"] if not b["low"] <= b["difference"] <= b["high"]]
  assert not bad, bad
  k = c.evals.decoding.num_samples
  if k > 1:
    assert {f"pass@{k}", f"maj@{k}"} <= set(summary["columns"])
    for r in results:
      assert r.metrics[f"pass@{k}"] >= r.metrics["accuracy"]  # any of k samples vs each sample
  predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
  assert len(predictions) == 4 * k * len(models)
  row = predictions[-1]
  assert row["prompt"] and "completion" in row and "parsed" in row and "reward" in row["scores"]
  if reader:  # the reader answered from each extract, and its answer is what EM / F1 scored
    assert all(isinstance(p["reader_outputs"], str) for p in predictions)
    assert "reader" in report
  # The held-out questions are none of the training questions.
  train = {ex.question for st in c.stages for ex in synthetic.generate_examples(
      st.data.num_examples, seed=st.data.seed, answerable_ratio=st.data.answerable_ratio)}
  assert not train & {p["question"] for p in predictions}
  assert recipe == c.stages[-1].recipe
  if name == "grace":
    assert (out / "curves.png").stat().st_size > 10_000


def test_bad_input_fails_in_one_line_before_a_model_loads(tmp_path):
  c = _module(ROOT / "configs" / "arena.py", "config_arena_bad").get_config("runlocal")
  # An unknown recipe, a missing folder and a missing step, a bad label count: no model is touched
  # (the model folders below do not exist or hold no weights).
  c.evals.recipe = "no_such_recipe"
  with pytest.raises(ValueError, match=r"^unknown recipe 'no_such_recipe'; available: .*arena"):
    evaluate_cli.prepare(c, ["smollm2"], output_dir=str(tmp_path))
  c.evals.recipe = ""
  with pytest.raises(FileNotFoundError, match=r"/no/such/run: no such folder"):
    evaluate_cli.prepare(c, ["/no/such/run@5"], output_dir=str(tmp_path))
  # A data row that fails the recipe's checks (ARENA needs gold passage ids), via the command line.
  rows = tmp_path / "bad.jsonl"
  rows.write_text(json.dumps({"question": "Who?", "answers": ["x"], "passages": [{"text": "p"}],
                              "id": "row-7"}) + "\n")
  broken = tmp_path / "broken_model"
  broken.mkdir()
  (broken / "config.json").write_text("{}")
  (broken / "model.safetensors").write_text("not weights")  # loading it would fail differently
  proc = subprocess.run(
      [sys.executable, str(ROOT / "launch" / "evaluate.py"), f"--config={ROOT / 'configs' / 'arena.py'}",
       f"--model={broken}", f"--data={rows}", f"--output_dir={tmp_path / 'out'}"],
      capture_output=True, text=True, timeout=300, cwd=ROOT)
  assert proc.returncode != 0
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("evaluate: reward 'arena': example id='row-7'") and "gold_passage_ids" in last
  assert not (tmp_path / "out").exists()
