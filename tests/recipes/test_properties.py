"""Properties of every registered recipe over arbitrary unicode and tag soup.

For any completion text: the reward never raises, stays inside the recipe's documented range, every
component is finite and has shape [N], and scoring is deterministic. Also: RewardFn objects pickle
and score identically after a pickle round trip, which is what a process pool does to them
(launch/bench_rewards.py runs them in real worker processes).
"""

import pickle

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st

from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import available_rewards, get_reward
from grounding_jax.recipes.lear import rollout as lear_rollout
from .fakes import ContainsJudge, SubstringNLI

FRAGMENTS = [
    "<think>", "</think>", "<answer>", "</answer>", "<evidence>", "</evidence>", "<llm>", "</llm>",
    "<relevance>", "</relevance>", "<analysis>", "</analysis>", "<reason>", "</reason>", "<extract>",
    "</extract>", "\\boxed{", "{", "}", "[1]", "[2][3]", "[99]", "[1,2]", "[", "]", ",", ".", "\n",
    " ", "Paris", "the Tyne and Irthing", "I don't know", "invalid question",
    "I apologize, but I couldn't find an answer to your question in the search results.",
    "Mawsynram is the rainiest place [1].", "<", "\u2019", "\x00", "İ", "\u200b",
    "<search>", "</search>", "<information>", "</information>", "\n\n<information>Doc 1(Title: Paris) Paris",
]
TAG_SOUP = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=30).map(
    "".join)
COMPLETIONS = st.lists(st.one_of(TAG_SOUP, st.text(max_size=200)), min_size=1, max_size=4)

PASSAGES = (Passage("Paris is the capital of France.", title="Paris"),
            Passage("Mawsynram is the rainiest place.", title="Mawsynram"),
            Passage("The Tyne and Irthing valleys.", title="Stanegate"))
EXAMPLES = [
    Example(question="Capital of France?", passages=PASSAGES, answers=("Paris",),
            evidence=("Paris is the capital of France.",), gold_passage_ids=(1,), answerable=True,
            id="a", meta={"ook": False}),
    Example(question="Rainiest place?", passages=PASSAGES, answers=("Mawsynram", "invalid question"),
            evidence=("",), gold_passage_ids=(2, 3), answerable=False, id="b",
            meta={"ook": True, "dataset": "qampari"}),
]

RECIPES = {
    "grace": {}, "trust_stage1": {"nli": SubstringNLI()}, "trust_stage2": {"nli": SubstringNLI()},
    "arena": {}, "lear": {}, "truthrl": {"judge": ContainsJudge()}, "truthrl_binary": {"judge": "exact_match"},
    "truthrl_knowledge": {"judge": ContainsJudge()}, "naive": {}, "search": {}, "search_grounded": {},
}


def test_every_registered_recipe_is_covered():
  assert sorted(RECIPES) == available_rewards()


def _score(name, completions):
  fn = get_reward(name, **RECIPES[name])
  exs = [EXAMPLES[i % 2] for i in range(len(completions))]
  extra = {k: [c[::-1] for c in completions] for k in lear_rollout.ANSWER_EXTRAS} if name == "lear" else {}
  return fn, fn(completions, exs, **extra)


def _check_properties(name, completions):
  fn, out = _score(name, completions)
  low, high = fn.reward_range
  assert set(out) >= {"reward"}
  for key, value in out.items():
    assert value.shape == (len(completions),) and value.dtype == np.float64, key
    assert np.all(np.isfinite(value)), key
  assert np.all(out["reward"] >= low - 1e-9) and np.all(out["reward"] <= high + 1e-9)
  if name.startswith("trust"):  # unbounded above: ≤ 3 (refusal) or 2.5 + 1.0 per statement
    assert np.all(out["reward"] <= 3.0 + 1.0 * out["n_statements"] + 1e-9)
  _, again = _score(name, completions)
  for key in out:
    np.testing.assert_array_equal(out[key], again[key])


@pytest.mark.parametrize("name", sorted(RECIPES))
@hypothesis.given(completions=COMPLETIONS)
@hypothesis.settings(max_examples=60, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
def test_never_raises_in_range_deterministic(name, completions):
  _check_properties(name, completions)


ODD = ["\ud800<answer>\udfff</answer>", "<think>\x00</think><answer>I apologize\ud83d</answer>",
       "\\boxed{" * 50 + "}" * 3, "<relevance>" + "[" * 5000 + "</relevance>",
       "<evidence>" + "a " * 20000 + "</evidence><answer>a</answer>", "", " " * 3000]


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_odd_completions(name):
  """Lone surrogates, NULs, deep brackets, very long blocks, empty text."""
  _check_properties(name, ODD)


def test_pickle_round_trip():
  completions = ["<evidence>Paris is the capital of France.</evidence><answer>Paris</answer>",
                 "<llm>x</llm><answer>y</answer>"]
  exs = EXAMPLES[:2]
  fns = [get_reward("grace"), get_reward("arena"), get_reward("truthrl", judge="exact_match"), get_reward("naive"),
         get_reward("trust_stage2", nli=SubstringNLI()), get_reward("search_grounded")]
  for fn in fns:
    clone = pickle.loads(pickle.dumps(fn))
    for key, value in fn(completions, exs).items():
      np.testing.assert_array_equal(value, clone(completions, exs)[key])
