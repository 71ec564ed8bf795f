"""Each paper's evaluation by recipe name: completions and Examples in, the paper's table numbers out.

    out = evaluate("truthrl", completions, examples, judge=LLMCorrectnessJudge(backend))

Every evaluator lives with its recipe (`get_recipe(name).evaluate`, grounding_jax/recipes/<recipe>.py):
  grace    EM / BERTScore-F1 / LJ on answerable items, Acc / LJ on unanswerable ones, Overall and
           Balanced accuracy, evidence ROUGE-L (000 §6.3)
  trust    Trust-Score per dataset: AR, F1_GR, F1_AC, F1_GC, TRUST (001 §6.2)
  arena    EM, F1, LJ (fractions, as ARENA prints them), format and relevance scores (002 §6)
  truthrl  Acc, Unc, Hall, T = Acc − Hall, plus the no-box rate (004 §6.2)
  lear     EM, F1 of the reader's answers and the compression ratio of the extracts (003 §9)
Judges are optional where the paper's metric is an LLM judge: without one, LJ is omitted (and GRACE's
aggregates fall back to EM-style correctness, reported as "accuracy_source": "em").
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from grounding_jax.data.schema import Example
from grounding_jax.recipes import get_recipe

_ALIASES = {"trust": "trust_stage2"}  # Trust-Score does not depend on the training stage


def evaluate(recipe: str, completions: Sequence[str], examples: Sequence[Example],
             **kwargs) -> dict[str, Any]:
  """`get_recipe(recipe).evaluate(completions, examples, **kwargs)` ("trust" names Trust-Score)."""
  return get_recipe(_ALIASES.get(recipe, recipe)).evaluate(completions, examples, **kwargs)


def evaluate_lear(reader_outputs: Sequence[str], rollouts: Sequence[str], examples: Sequence[Example], *,
                  length_fn: Callable[[str], int] | None = None,
                  normalizer: str = "squad") -> dict[str, Any]:
  """LEAR's two-model protocol: the reader's answers and the extractor's rollouts (recipes.lear);
  normalizer="hotpot" for HotpotQA's official EM / F1 rule."""
  return get_recipe("lear").evaluate(rollouts, examples, reader_outputs=reader_outputs,
                                     length_fn=length_fn, normalizer=normalizer)
