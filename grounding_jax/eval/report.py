"""The evaluation's files: predictions.jsonl, metrics.json and report.md (the paper's table).

    write(out_dir, recipe_name, results, intervals, about={"data": ..., "command": ...})

report.md has one row per model: the recipe's `metric_columns` (the paper's main table), the mean
reward, accuracy on answerable items and the abstention rate on unanswerable ones (so a model that
refuses everything shows as such), pass@k / maj@k with several samples, and for each model after the
first its paired-bootstrap difference to the first on the headline metric and on the reward. A
second table, "Selective prediction", gives each model's coverage, accuracy among answered items,
AURC and balanced accuracy (eval/selective.py) with the same paired intervals; metrics.json holds
them too, and each model's risk–coverage curve.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Any, Mapping, Sequence

from grounding_jax import recipes
from grounding_jax.eval import bootstrap
from grounding_jax.eval import selective
from grounding_jax.eval.harness import ModelResult

LABELS = {"reward": "reward", "accuracy_answerable": "acc. answerable", "answer_em": "EM answerable",
          "answer_f1": "F1 answerable",
          "abstention_unanswerable": "abstain unanswerable", "coverage": "coverage",
          "selective_accuracy": "sel. acc.", "aurc": "AURC ↓", "balanced_accuracy": "balanced acc.",
          "search/calls_per_completion": "searches", "search/searching_frac": "searching",
          "search/gold_recall": "gold recall"}


def training_signal(history: Sequence[Mapping[str, Any]], keys: Sequence[str]
                    ) -> dict[str, dict[str, float]]:
  """{key: {"first", "last", "mean", "steps"}} of a training run's per-step logged values (the
  trainer's history rows); keys never logged are left out."""
  out = {}
  for key in keys:
    v = [float(row[key]) for row in history if key in row]
    if v:
      out[key] = {"first": v[0], "last": v[-1], "mean": sum(v) / len(v), "steps": len(v)}
  return out


def columns(recipe_name: str, results: Sequence[ModelResult]) -> list[str]:
  """The table's metric columns: the paper's, then reward, the answerable / unanswerable pair, the
  k-sample metrics and, where the policy called a tool, the sampler's search/ metrics, keeping only
  those some row has."""
  recipe = recipes.get_recipe(recipe_name)
  extra = ["reward", "accuracy_answerable", "answer_em", "answer_f1", "abstention_unanswerable"]
  extra += sorted({k for r in results for k in r.metrics if k.startswith(("pass@", "maj@"))})
  # A multi-turn evaluation's sampler metrics (harness row, sampling/multiturn.tool_metrics).
  extra += list(dict.fromkeys(k for r in results for k in r.metrics if k.startswith("search/")))
  cols = list(recipe.metric_columns) + extra
  return [c for c in cols if c in recipe.metric_columns or any(c in r.metrics for r in results)]


def _fmt(v: Any) -> str:
  if v is None or (isinstance(v, float) and math.isnan(v)):
    return "—"
  if isinstance(v, float) and math.isinf(v):
    return "∞"
  return f"{v:.4g}" if isinstance(v, float) else str(v)


def _markdown_table(results: Sequence[ModelResult],
                    intervals: Sequence[Mapping[str, bootstrap.Interval]], cols: Sequence[str],
                    deltas: Sequence[str]) -> str:
  """One row per model: its `cols`, then each of `deltas` as an interval against the first model."""
  deltas = [d for d in deltas if any(d in iv for iv in intervals)]
  head = (["model"] + [LABELS.get(c, c) for c in cols]
          + [f"Δ{LABELS.get(d, d)} vs first [95% CI]" for d in deltas])
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r, iv in zip(results, intervals):
    cells = [r.name] + [_fmt(r.metrics.get(c)) for c in cols]
    cells += [str(iv[d]) if d in iv else "—" for d in deltas]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def table(recipe_name: str, results: Sequence[ModelResult],
          intervals: Sequence[Mapping[str, bootstrap.Interval]]) -> str:
  """The markdown table (one row per model): the recipe's columns, then Δ headline, Δ reward,
  Δ answer F1 on answerable items and, for multi-turn evaluations, Δ searching and Δ gold recall."""
  recipe = recipes.get_recipe(recipe_name)
  deltas = list(dict.fromkeys([recipe.headline_metric, "reward", "answer_f1",
                               "search/searching_frac", "search/gold_recall"]))
  return _markdown_table(results, intervals, columns(recipe_name, results), deltas)


def selective_table(results: Sequence[ModelResult],
                    intervals: Sequence[Mapping[str, bootstrap.Interval]]) -> str:
  """The selective-prediction table: selective.METRICS of each model, then Δ vs the first model."""
  return _markdown_table(results, intervals, list(selective.METRICS), list(selective.METRICS))


def markdown(recipe_name: str, results: Sequence[ModelResult],
             intervals: Sequence[Mapping[str, bootstrap.Interval]], about: Mapping[str, Any]) -> str:
  """report.md: what was evaluated and how, the table, and how to read it."""
  recipe = recipes.get_recipe(recipe_name)
  first = results[0].metrics
  n = int(first.get("n_questions", 0))
  lines = [f"# {recipe.paper}: recipe `{recipe_name}`", ""]
  if about.get("command"):
    lines.append(f"- command: `{about['command']}`")
  for name, spec in (about.get("models") or {}).items():
    lines.append(f"- model `{name}`: {spec}")
  for key in ("reader", "data", "decoding"):
    if about.get(key):
      lines.append(f"- {key}: {about[key]}")
  lines.append(f"- questions: {n} ({int(first.get('n_answerable', 0))} answerable, "
               f"{int(first.get('n_unanswerable', 0))} unanswerable)")
  lines += ["", table(recipe_name, results, intervals), ""]
  any_iv = next((v for iv in intervals for v in iv.values()), None)
  notes = [f"Headline metric: `{recipe.headline_metric}`. Columns are the paper's main table "
           f"(`Recipe.metric_columns`); \"—\" where a column needs a judge or model that was not "
           "configured (config.evals.judges / evals.bertscore) or a subset is empty.",
           f"acc. answerable = mean per-example verdict (\"correct\") on answerable items; abstain "
           f"unanswerable = share of unanswerable items where the model abstained: "
           f"{recipe.abstention}. reward = the run's reward functions "
           "on these completions (mean). EM / F1 answerable = the extracted answer's SQuAD v1.1 "
           "exact match and token F1 against the gold answers, on answerable items."]
  if any_iv is not None:
    notes.append(f"Δ = model − first model on the same questions; interval: paired bootstrap, "
                 f"{any_iv.n_resamples} resamples of the questions, {100 * any_iv.confidence:g} % "
                 "percentile interval.")
  if any(k.startswith("search/") for k in first):
    notes.append("searching = share of completions that called the tool at least once; searches = "
                 "tool calls per completion; gold recall = share of a question's gold passages "
                 "among the passages its calls retrieved (by passage id or text; questions with gold "
                 "passages). From the calls the rollout ran, not from the completion's text.")
  lines += [f"- {note}" for note in notes]
  lines += ["", "## Selective prediction", "", selective_table(results, intervals), "",
            "- coverage = share of items answered (not abstained); sel. acc. = accuracy among the "
            "answered items (an answer to an unanswerable item is wrong); AURC = area under the "
            "risk–coverage curve (arXiv:1705.08500 §2; lower is better), items ranked by the model's "
            "own answer / abstain decision, then by the completion's mean sampler log-prob; balanced "
            "acc. = mean of acc. answerable and abstain unanswerable. All in %."]
  return "\n".join(lines) + "\n"


def write(out_dir: str | os.PathLike, recipe_name: str, results: Sequence[ModelResult],
          intervals: Sequence[Mapping[str, bootstrap.Interval]], about: Mapping[str, Any]
          ) -> pathlib.Path:
  """Writes predictions.jsonl, metrics.json and report.md under `out_dir`; returns report.md's path."""
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  with open(out / "predictions.jsonl", "w", encoding="utf-8") as f:
    for r in results:
      for rec in r.records:
        f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
  recipe = recipes.get_recipe(recipe_name)
  summary = {
      "recipe": recipe_name, "headline_metric": recipe.headline_metric,
      "columns": columns(recipe_name, results), **dict(about),
      "models": [{"name": r.name, "metrics": {k: (None if isinstance(v, float) and not math.isfinite(v)
                                                  else v) for k, v in r.metrics.items()}}
                 for r in results],
      "selective_columns": list(selective.METRICS),
      "risk_coverage": {r.name: selective.curve_points(r.per_example) for r in results
                        if {"correct", "abstained", "item_answerable"} <= set(r.per_example)},
      "bootstrap": [{"model": r.name, "metric": m, "difference": iv.difference, "low": iv.low,
                     "high": iv.high, "confidence": iv.confidence, "n_resamples": iv.n_resamples}
                    for r, ivs in zip(results, intervals) for m, iv in ivs.items()],
  }
  (out / "metrics.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
  path = out / "report.md"
  path.write_text(markdown(recipe_name, results, intervals, about), encoding="utf-8")
  return path
