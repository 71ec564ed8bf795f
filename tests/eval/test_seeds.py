"""eval/seeds.py and launch/seed_table.py: evaluation folders written by eval/report.py read back,
runs pooled question-major, and the pooled interval equal to a question-clustered bootstrap computed
here by hand; bad folders fail naming the file (and line)."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from grounding_jax.eval import bootstrap
from grounding_jax.eval import comparison
from grounding_jax.eval import report
from grounding_jax.eval import seeds
from grounding_jax.eval.harness import ModelResult

ROOT = pathlib.Path(__file__).resolve().parents[2]
N = 12  # questions: the first half answerable


def _result(name, rng, p_correct):
  """A TruthRL-scored model on N questions: right, abstained or wrong per row, as eval/harness.py
  lays the columns out (truthfulness +1 / 0 / −1, the reward the same)."""
  answerable = np.arange(N) < N // 2
  outcome = rng.choice(3, size=N, p=[p_correct, 0.3, 0.7 - p_correct])  # 0 right, 1 abstain, 2 wrong
  correct, abstained = (outcome == 0).astype(float), (outcome == 1).astype(float)
  per = {"truthfulness": correct - (outcome == 2), "correct": correct, "abstained": abstained,
         "item_answerable": answerable.astype(float), "confidence": rng.normal(size=N),
         "answer_em": correct, "answer_f1": correct, "reward": correct - (outcome == 2),
         "completion_length": np.full(N, 9.0), "truncated": np.zeros(N)}
  ids = [f"q{i}" for i in range(N)]
  metrics = {"truthfulness": 100 * per["truthfulness"].mean(), "reward": per["reward"].mean(),
             "accuracy_answerable": 100 * correct[answerable].mean(),
             "abstention_unanswerable": 100 * abstained[~answerable].mean(), "balanced_accuracy": 50.0}
  records = [{"model": name, "id": ids[i], "sample": 0, "question": ids[i],
              "scores": {k: float(v[i]) for k, v in per.items()}} for i in range(N)]
  records[0]["scores"]["confidence"] = None  # a NaN score is written as null and read back as NaN
  per["confidence"][0] = np.nan
  return ModelResult(name, metrics, per, records, 1, ids)


def _write_run(path, seed):
  rng = np.random.default_rng(seed)
  results = [_result("sft", rng, 0.3), _result("grpo", rng, 0.6)]
  report.write(path, "truthrl", results, comparison.compare(results, "truthrl", n_resamples=200),
               {"command": "test"})
  return results


def test_folders_read_back_pool_question_major_and_the_pooled_interval_is_clustered(tmp_path):
  runs = [_write_run(tmp_path / f"run{s}", s) for s in range(3)]
  evals = [seeds.read_evaluation(tmp_path / f"run{s}") for s in range(3)]
  assert evals[0].recipe == "truthrl" and set(evals[0].models) == {"sft", "grpo"}
  for name, want in zip(("sft", "grpo"), runs[1]):
    got = evals[1].models[name]
    assert got.ids == want.ids and got.num_samples == 1
    for k, v in want.per_example.items():
      np.testing.assert_array_equal(got.per_example[k], v)
  pooled = seeds.pool([ev.models["grpo"] for ev in evals], "grpo")
  assert pooled.num_samples == 3 and pooled.ids == runs[0][1].ids
  # Question-major: question i's rows are runs 0, 1, 2.
  np.testing.assert_array_equal(pooled.per_example["reward"][3:6],
                                [r[1].per_example["reward"][1] for r in runs])

  table = seeds.seed_table(evals, n_resamples=2000, seed=5)
  assert table["metrics"] == ["truthfulness", "reward", "accuracy_answerable",
                              "abstention_unanswerable", "balanced_accuracy"]
  # Each run's row is that run's own paired bootstrap.
  own = bootstrap.paired_bootstrap(runs[2][0].per_example["reward"], runs[2][1].per_example["reward"],
                                   n_resamples=2000, seed=5)
  assert table["per_run"][2]["reward"] == own
  # The pooled reward by hand: per question the mean gain over the runs, questions resampled.
  gain = np.mean([r[1].per_example["reward"] - r[0].per_example["reward"] for r in runs], axis=0)
  draws = gain[bootstrap.resample_indices(N, 2000, 5)].mean(axis=1)
  iv = table["pooled"]["reward"]
  np.testing.assert_allclose(iv.difference, gain.mean(), atol=1e-12)
  np.testing.assert_allclose([iv.low, iv.high], np.percentile(draws, [2.5, 97.5]), atol=1e-12)
  # Accuracy on answerable items: the runs' mean; the two rows' levels are the runs' means.
  acc = [r[1].metrics["accuracy_answerable"] - r[0].metrics["accuracy_answerable"] for r in runs]
  np.testing.assert_allclose(table["pooled"]["accuracy_answerable"].difference, np.mean(acc))
  np.testing.assert_allclose(table["after"]["reward"], np.mean([r[1].metrics["reward"] for r in runs]))
  text = seeds.markdown(table)
  assert "| reward |" in text and "pooled over 3 runs" in text and str(tmp_path / "run2") in text


def test_a_searching_policys_runs_get_the_search_rows(tmp_path):
  """Evaluations with the sampler's tool-call columns (a multi-turn recipe's) add the searching
  share and gold recall to the table."""
  for s in range(2):
    rng = np.random.default_rng(s)
    results = [_result("sft", rng, 0.3), _result("grpo", rng, 0.6)]
    for r, calls in zip(results, (np.zeros(N), rng.integers(0, 3, N) * 1.0)):
      r.per_example.update(searches=calls, gold_recall=np.where(calls > 0, 1.0, 0.0))
      for i, rec in enumerate(r.records):
        rec["scores"].update(searches=float(calls[i]), gold_recall=float(calls[i] > 0))
    report.write(tmp_path / f"run{s}", "truthrl", results,
                 comparison.compare(results, "truthrl", n_resamples=100), {"command": "test"})
  evals = [seeds.read_evaluation(tmp_path / f"run{s}") for s in range(2)]
  table = seeds.seed_table(evals, n_resamples=200)
  assert table["metrics"][-2:] == ["search/searching_frac", "search/gold_recall"]
  share = np.mean([ev.models["grpo"].per_example["searches"] > 0 for ev in evals])
  np.testing.assert_allclose(table["pooled"]["search/searching_frac"].difference, share)


def test_bad_folders_name_the_file_and_line(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"nothing/metrics.json: no such file"):
    seeds.read_evaluation(tmp_path / "nothing")
  _write_run(tmp_path / "a", 0)
  _write_run(tmp_path / "b", 1)
  with open(tmp_path / "b" / "predictions.jsonl", "a") as f:
    f.write('{"model": "grpo", "id": "q0"}\n')
  with pytest.raises(ValueError, match=r"b/predictions.jsonl:25: not a prediction row"):
    seeds.read_evaluation(tmp_path / "b")
  a = seeds.read_evaluation(tmp_path / "a")
  with pytest.raises(ValueError, match=r"no model row \['GRPO'\]"):
    seeds.seed_table([a], after="GRPO")
  other = seeds.Evaluation("c", "truthrl", {k: ModelResult(k, v.metrics, v.per_example, [], 1,
                                                           v.ids[::-1]) for k, v in a.models.items()})
  with pytest.raises(ValueError, match="different questions"):
    seeds.seed_table([a, other], n_resamples=100)
  with pytest.raises(ValueError, match="recipe 'grace', not 'truthrl'"):
    seeds.seed_table([a, seeds.Evaluation("d", "grace", a.models)])


def test_command_line_prints_the_table_and_writes_json(tmp_path):
  for s in range(2):
    _write_run(tmp_path / f"run{s}", s)
  out = tmp_path / "seeds.json"
  proc = subprocess.run([sys.executable, str(ROOT / "launch" / "seed_table.py"),
                         f"--run={tmp_path / 'run0'}", f"--run={tmp_path / 'run1'}",
                         "--bootstrap_resamples=200", f"--out={out}"],
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "# truthrl: grpo − sft over 2 runs" in proc.stdout and "| truthfulness |" in proc.stdout
  saved = json.loads(out.read_text())
  assert saved["runs"] == [str(tmp_path / "run0"), str(tmp_path / "run1")]
  assert set(saved["pooled"]["reward"]) >= {"difference", "low", "high"}
  bad = subprocess.run([sys.executable, str(ROOT / "launch" / "seed_table.py"),
                        f"--run={tmp_path / 'none'}"],
                       capture_output=True, text=True, timeout=300)
  assert bad.returncode != 0 and bad.stderr.strip().splitlines()[-1].startswith("seed_table: ")
