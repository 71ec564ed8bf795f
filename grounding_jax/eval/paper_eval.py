"""Each paper's evaluation by recipe name: completions and Examples in, the paper's table numbers out.

    out = evaluate(NAME, completions, examples, judge=..., nli=...)   # NAME: a recipe or an alias

Every evaluator lives with its recipe (`get_recipe(name).evaluate`, grounding_jax/recipes/<recipe>/);
`recipes.evaluator(name)` also takes a recipe's `aliases` (e.g. Trust-Score's, which does not depend
on the training stage). Judges are optional where the paper's metric is an LLM judge: without one,
LJ is omitted (and GRACE's aggregates fall back to EM-style correctness, reported as
"accuracy_source": "em"). A recipe with a two-model protocol takes the reader's answers as
`reader_outputs=` (see its `reader_prompt`).
"""

from __future__ import annotations

from typing import Any, Sequence

from grounding_jax import recipes
from grounding_jax.data.schema import Example


def evaluate(recipe: str, completions: Sequence[str], examples: Sequence[Example],
             **kwargs) -> dict[str, Any]:
  """`recipes.evaluator(recipe).evaluate(completions, examples, **kwargs)`."""
  return recipes.evaluator(recipe).evaluate(completions, examples, **kwargs)
