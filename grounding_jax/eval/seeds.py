"""Runs of one check that differ only in a seed (GRPO seeds of one warm-up, say), pooled on the
questions they all answered: each run's gain with its paired-bootstrap interval, and the mean gain
over the runs with an interval that resamples questions, each question's rows from every run
together (eval/bootstrap.py's rows_per_question), so a question counts once however many runs
asked it.

    table = seed_table([read_evaluation(d) for d in dirs], before="sft", after="grpo")
    print(markdown(table))

An evaluation folder is what launch/evaluate.py, launch/learning_check.py and the demo write
(metrics.json names the recipe; predictions.jsonl holds every row's per-example scores).
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
from typing import Mapping, Sequence

import numpy as np

from grounding_jax import recipes
from grounding_jax.eval import comparison
from grounding_jax.eval.harness import ModelResult

# The table's rows: the recipe's headline metric is added first.
METRICS = ("reward", "accuracy_answerable", "abstention_unanswerable", "balanced_accuracy",
           "search/searching_frac", "search/gold_recall")  # the last two for searching recipes


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """One evaluation folder: its recipe and each model row, rebuilt from its files."""
  path: str
  recipe: str
  models: dict[str, ModelResult]


def read_evaluation(eval_dir: str | pathlib.Path) -> Evaluation:
  """The models of an evaluation folder as ModelResults: per_example from predictions.jsonl's
  scores (None -> NaN), metrics from metrics.json. Raises FileNotFoundError / ValueError naming the
  file (and line) that is missing or malformed."""
  folder = pathlib.Path(eval_dir)
  if (folder / "learning_check").is_dir() and not (folder / "metrics.json").exists():
    folder = folder / "learning_check"  # a learning check's workdir
  paths = [folder / "metrics.json", folder / "predictions.jsonl"]
  for p in paths:
    if not p.is_file():
      raise FileNotFoundError(f"{p}: no such file (an evaluation folder holds metrics.json and "
                              "predictions.jsonl)")
  try:
    summary = json.loads(paths[0].read_text())
    recipe, rows = summary["recipe"], {m["name"]: m["metrics"] for m in summary["models"]}
  except (ValueError, KeyError, TypeError) as e:
    raise ValueError(f"{paths[0]}: not an evaluation summary ({type(e).__name__}: {e})") from None
  records: dict[str, list[dict]] = {}
  with open(paths[1], encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      try:
        rec = json.loads(line)
        records.setdefault(rec["model"], []).append(
            {"id": str(rec["id"]), "sample": int(rec["sample"]), "scores": dict(rec["scores"])})
      except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{paths[1]}:{n}: not a prediction row ({type(e).__name__}: {e})") from None
  models = {}
  for name, recs in records.items():
    k = 1 + max(r["sample"] for r in recs)
    columns = sorted({c for r in recs for c in r["scores"]})
    per = {c: np.array([np.nan if r["scores"].get(c) is None else r["scores"][c] for r in recs],
                       np.float64) for c in columns}
    metrics = {m: (math.nan if v is None else v) for m, v in rows.get(name, {}).items()}
    models[name] = ModelResult(name, metrics, per, [], k, [r["id"] for r in recs[::k]])
  return Evaluation(str(folder), recipe, models)


def pool(results: Sequence[ModelResult], name: str) -> ModelResult:
  """One ModelResult of several runs on the same questions: question-major, each question's k rows
  of run 1, then of run 2, ... (num_samples = runs x k), so a bootstrap resamples a question with
  all its runs' rows. Metrics are the runs' means."""
  first = results[0]
  for r in results[1:]:
    if r.ids != first.ids or r.num_samples != first.num_samples:
      raise ValueError(f"runs answered different questions ({len(first.ids)} and {len(r.ids)}, or "
                       "in another order); pooling needs every run on the same ones")
  columns = set.intersection(*(set(r.per_example) for r in results))
  n, k = len(first.ids), first.num_samples
  per = {c: np.stack([np.asarray(r.per_example[c]).reshape(n, k) for r in results], axis=1
                     ).reshape(-1) for c in sorted(columns)}
  names = set.intersection(*(set(r.metrics) for r in results))
  metrics = {m: float(np.mean([r.metrics[m] for r in results])) for m in sorted(names)}
  return ModelResult(name, metrics, per, [], k * len(results), list(first.ids))


def seed_table(evaluations: Sequence[Evaluation], *, before: str = "sft", after: str = "grpo",
               n_resamples: int = 10_000, seed: int = 0) -> dict:
  """{"recipe", "runs": [path], "metrics": [name], "before"/"after": {metric: mean over runs},
  "per_run": [{metric: Interval}], "pooled": {metric: Interval}}: after − before on each run and
  pooled over the runs. Every run must be of one recipe, hold both rows and ask the same questions."""
  if not evaluations:
    raise ValueError("no evaluation folders given")
  recipe = evaluations[0].recipe
  for ev in evaluations:
    if ev.recipe != recipe:
      raise ValueError(f"{ev.path}: recipe {ev.recipe!r}, not {recipe!r} like {evaluations[0].path}")
    missing = {before, after} - set(ev.models)
    if missing:
      raise ValueError(f"{ev.path}: no model row {sorted(missing)}; rows: {sorted(ev.models)}")
  rows = [pool([ev.models[which] for ev in evaluations], which) for which in (before, after)]
  kw = dict(n_resamples=n_resamples, seed=seed)
  per_run = [comparison.compare([ev.models[before], ev.models[after]], recipe, **kw)[1]
             for ev in evaluations]
  pooled = comparison.compare(rows, recipe, **kw)[1]
  headline = recipes.get_recipe(recipe).headline_metric
  names = [m for m in dict.fromkeys((headline, *METRICS)) if m in pooled]
  return {"recipe": recipe, "runs": [ev.path for ev in evaluations], "metrics": names,
          **{key: {m: row.metrics.get(m, math.nan) for m in names}
             for key, row in zip(("before", "after"), rows)},
          "per_run": [{m: iv[m] for m in names} for iv in per_run],
          "pooled": {m: pooled[m] for m in names}, "labels": (before, after)}


def markdown(table: Mapping) -> str:
  """The table: one row per metric; the two rows' means over runs, each run's difference with its
  interval, and the pooled difference with its interval."""
  before, after = table["labels"]
  runs = len(table["runs"])
  head = ([f"{before} (mean)", f"{after} (mean)"] + [f"run {i + 1}: Δ [95% CI]" for i in range(runs)]
          + [f"pooled over {runs} runs: Δ [95% CI]"])
  lines = ["| metric | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
  for m in table["metrics"]:
    cells = [f"{table['before'][m]:.4g}", f"{table['after'][m]:.4g}",
             *(str(r[m]) for r in table["per_run"]), f"**{table['pooled'][m]}**"]
    lines.append(f"| {m} | " + " | ".join(cells) + " |")
  lines.append("")
  lines += [f"- run {i + 1}: {p}" for i, p in enumerate(table["runs"])]
  lines.append(f"- Δ = {after} − {before}; pooled: each question's rows from every run resampled "
               "together (paired bootstrap, grounding_jax/eval/seeds.py)")
  return "\n".join(lines) + "\n"
