"""The learning check's table (launch/learning_check.py): start / SFT / GRPO rows of the recipe's
reward and headline metric with paired-bootstrap intervals, the GRPO run's training fractions, and
how the check was made.

    rows = summary_rows(recipe, results, versus_start, versus_previous)
    text = markdown(recipe, [r.name for r in results], rows, training_fractions(history), about)
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from grounding_jax import recipes
from grounding_jax.eval import report

# The training run's logged per-step metrics the table reports (rl/collect.py).
TRAIN_FRACTIONS = ("truncated_frac", "zero_variance_frac")


def training_fractions(history: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
  """{metric: {"first", "last", "mean"}} of the trainer's per-step TRAIN_FRACTIONS."""
  return {k: {s: v[s] for s in ("first", "last", "mean")}
          for k, v in report.training_signal(history, TRAIN_FRACTIONS).items()}


def summary_rows(recipe_name: str, results, versus_start, versus_previous,
                 extra_metrics: Sequence[str] = ()) -> list[dict[str, Any]]:
  """[{metric, <row name>: value, ..., "vs_start": Interval, "vs_previous": Interval | None}] for the
  reward, the recipe's headline metric and `extra_metrics` (harness row keys, e.g. answer_f1); the
  intervals are the last row's difference."""
  headline = recipes.get_recipe(recipe_name).headline_metric
  names = list(dict.fromkeys(("reward", headline, *extra_metrics)))
  return [{"metric": m, **{r.name: r.metrics.get(m) for r in results},
           "vs_start": versus_start[-1].get(m),
           "vs_previous": versus_previous[-1].get(m) if versus_previous else None}
          for m in names]


def _fmt(v) -> str:
  return "—" if v is None or not np.isfinite(v) else f"{v:.3g}"


def markdown(recipe_name: str, names: Sequence[str], rows, fractions, about: Mapping[str, Any]) -> str:
  """The learning check's table and how it was made."""
  head = ["metric", *names, f"Δ {names[-1]} − {names[0]} [95% CI]"]
  if len(names) > 2:
    head.append(f"Δ {names[-1]} − {names[-2]} [95% CI]")
  lines = [f"# Learning check: recipe `{recipe_name}`", "", "| " + " | ".join(head) + " |",
           "|" + "---|" * len(head)]
  for r in rows:
    cells = [r["metric"], *[_fmt(r[n]) for n in names], str(r["vs_start"] or "—")]
    if len(names) > 2:
      cells.append(str(r["vs_previous"] or "—"))
    lines.append("| " + " | ".join(cells) + " |")
  lines += ["", "| GRPO training (trainer's logged metrics) | first step | last step | mean over steps |",
            "|---|---|---|---|"]
  for k, v in fractions.items():
    lines.append(f"| {k} | {v['first']:.3g} | {v['last']:.3g} | {v['mean']:.3g} |")
  lines.append("")
  for key in ("command", "split", "data", "sft_steps", "steps", "wall_seconds", "load_average",
              *[k for k in about if k.startswith("ids_")]):
    if key in about:
      lines.append(f"- {key}: {about[key]}")
  return "\n".join(lines) + "\n"


def interval_json(iv) -> dict[str, float] | None:
  """An Interval as JSON (None stays None)."""
  return None if iv is None else {"difference": iv.difference, "low": iv.low, "high": iv.high,
                                  "confidence": iv.confidence}
