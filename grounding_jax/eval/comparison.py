"""Models that answered the same questions, compared: paired-bootstrap intervals of each model's
difference to the first (eval/bootstrap.py) on the recipe's headline metric, the reward, the
selective-prediction metrics, answer EM / F1, the two answerability sides and, for multi-turn
evaluations, the search metrics (searches, searching share, gold recall).

    results = [evaluate_model(start, ...), evaluate_model(trained, ...)]   # eval/harness.py
    intervals = compare(results, settings.recipe)   # [{}, {metric: Interval}]
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from grounding_jax import recipes
from grounding_jax.eval import bootstrap
from grounding_jax.eval import metrics as metrics_lib
from grounding_jax.eval import selective
from grounding_jax.eval.harness import ModelResult
from grounding_jax.sampling import multiturn


def compare(results: Sequence[ModelResult], recipe_name: str, *, n_resamples: int = 10_000,
            seed: int = 0, confidence: float = 0.95) -> list[dict[str, bootstrap.Interval]]:
  """For each model after the first: paired-bootstrap intervals of its difference to the first on
  the recipe's headline metric, the reward, the selective-prediction metrics (eval/selective.py:
  coverage, selective_accuracy, aurc, balanced_accuracy), answer_em / answer_f1, the two sides
  (accuracy_answerable, abstention_unanswerable) and, where both evaluations called a tool, the
  search/ metrics, {metric: Interval}; the first model's entry is {}."""
  recipe = recipes.get_recipe(recipe_name)
  headline = recipe.headline_metric
  first = results[0]
  out: list[dict[str, bootstrap.Interval]] = [{}]
  for r in results[1:]:
    if r.ids != first.ids or r.num_samples != first.num_samples:
      raise ValueError(f"models {first.name!r} and {r.name!r} answered different questions; a paired "
                       "bootstrap needs the same examples in the same order")
    kw = dict(n_resamples=n_resamples, seed=seed, confidence=confidence,
              rows_per_question=r.num_samples)
    batched = dict(kw, batched=True)  # these statistics take every resample at once
    if recipe.aggregates_batched:  # column means: resample only the columns they read
      entry = bootstrap.paired_bootstraps(_metric_columns(first, recipe), _metric_columns(r, recipe),
                                          lambda d: {headline: recipe.aggregate(d)[headline]},
                                          **batched)
    else:
      entry = {headline: bootstrap.paired_bootstrap(first.per_example, r.per_example,
                                                    lambda d: recipe.aggregate(d)[headline], **kw)}
    if "reward" in r.per_example and "reward" in first.per_example:
      entry["reward"] = bootstrap.paired_bootstrap(first.per_example["reward"],
                                                   r.per_example["reward"], **kw)
    entry.update(bootstrap.paired_bootstraps(_selective_columns(first), _selective_columns(r),
                                             selective.summary, **batched))
    subsets = {**bootstrap.paired_bootstraps(_answer_columns(first), _answer_columns(r),
                                             metrics_lib.answer_summary, **batched),
               **bootstrap.paired_bootstraps(_selective_columns(first), _selective_columns(r),
                                             selective.sides, **batched)}
    if "searches" in r.per_example and "searches" in first.per_example:  # multi-turn evaluations
      subsets.update(bootstrap.paired_bootstraps(_search_columns(first), _search_columns(r),
                                                 _search_summary, **batched))
    # Only where the questions have the subset (no unanswerable items: no abstention side).
    entry.update({k: v for k, v in subsets.items() if not np.isnan(v.difference)})
    out.append(entry)
  return out


def _metric_columns(result: ModelResult, recipe) -> dict[str, np.ndarray]:
  """The per-example columns the base Recipe.aggregate reads (its metric_columns)."""
  return {k: result.per_example[k] for k in recipe.metric_columns if k in result.per_example}


def _selective_columns(result: ModelResult) -> dict[str, np.ndarray]:
  """The per-example columns selective.summary reads (a small dict, so resampling it is cheap)."""
  keys = ("correct", "abstained", "item_answerable", "confidence")
  return {k: result.per_example[k] for k in keys if k in result.per_example}


def _answer_columns(result: ModelResult) -> dict[str, np.ndarray]:
  """The per-example columns metrics_lib.answer_summary reads."""
  return {k: result.per_example[k] for k in ("item_answerable",) + metrics_lib.ANSWER_METRICS}


def _search_columns(result: ModelResult) -> dict[str, np.ndarray]:
  """The per-example tool-call columns of a multi-turn evaluation (eval/harness.py)."""
  return {k: np.asarray(result.per_example[k], np.float64) for k in ("searches", "gold_recall")}


def _search_summary(per: Mapping[str, np.ndarray]) -> dict[str, float]:
  """The sampler's search/ metrics (sampling/multiturn.tool_metrics) of these rows (or of each
  resample's, [R, N]); gold recall NaN where none of them has a gold passage id."""
  m = multiturn.tool_metrics(per["searches"], per["gold_recall"])
  m.setdefault("search/gold_recall", float("nan"))
  return m
