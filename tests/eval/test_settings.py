"""check_examples names the row and field a reward cannot score, the judge the evaluator misses, and a
reader given to a recipe without the two-model protocol, before any model loads."""

import pytest

from grounding_jax import recipes
from grounding_jax.data import synthetic
from grounding_jax.eval.settings import EvalSettings, check_examples


def test_check_examples_names_the_row_and_the_missing_judge():
  examples = synthetic.generate_examples(4, seed=0, answerable_ratio=0.5)  # unanswerable: no gold ids
  settings = EvalSettings(recipe="arena", decoding=recipes.Decoding())
  with pytest.raises(ValueError, match=r"id='synthetic-0-\d'.*gold_passage_ids"):
    check_examples(examples, settings, [("arena", 1.0, recipes.get_reward("arena"))])
  trust = EvalSettings(recipe="trust_stage2", decoding=recipes.Decoding())
  with pytest.raises(ValueError, match=r"missing 1 required keyword-only argument: 'nli'.*config.evals"):
    check_examples(examples, trust)
  check_examples(examples, EvalSettings(recipe="trust_stage2", decoding=trust.decoding,
                                        judges={"nli": "/not/loaded/by/the/check"}))
  with pytest.raises(ValueError, match=r"'truthrl' has no two-model protocol"):
    check_examples(examples, EvalSettings(recipe="truthrl", decoding=trust.decoding), reader=True)
