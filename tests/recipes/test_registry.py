"""The recipe registry, table-driven: every registered recipe renders its prompt, parses its format,
rewards a right answer above a wrong one, and evaluates with its paper's metrics.

Each row holds an example and two completions written by hand in the recipe's format (one right,
one wrong) and what the recipe must read from the right one. The expectations come from the papers'
formats (notes 000–004), not from the code.
"""

import numpy as np
import pytest

from grounding_jax import recipes
from grounding_jax.data.schema import Example, Passage

from .fakes import SubstringNLI

P1 = Passage("Orsk is the capital of Veltria.", title="Veltria", id="p1")
P2 = Passage("Tver lies on the Volga.", title="Tver", id="p2")
EX = Example("What is the capital of Veltria?", passages=(P1, P2), answers=("Orsk",),
             evidence=("Orsk is the capital of Veltria.",), gold_passage_ids=(1,), answerable=True,
             id="ex1", meta={"dataset": "asqa", "answers_found": [[1], [0]]})

# A search recipe's completion holds the results the tool inserted after its </search>.
SEARCHED = ("<think>Search.</think>\n<search> Veltria </search>\n\n<information>Doc 1(Title: Veltria) "
            "Orsk is the capital of Veltria.</information>\n\n")
ROWS = {
    # name: (right, wrong, answer read from right, reward options, evaluate options)
    "grace": ("<evidence>Orsk is the capital of Veltria.</evidence><answer>Orsk</answer>",
              "<evidence>Tver lies on the Volga.</evidence><answer>Tver</answer>", "Orsk", {}, {}),
    "trust_stage1": ("<think>Doc 1 says it.</think><answer>Orsk is the capital of Veltria [1].</answer>",
                     "<think>Guess.</think><answer>The capital is Tver [2].</answer>",
                     "Orsk is the capital of Veltria [1].", {"nli": SubstringNLI()}, {"nli": SubstringNLI()}),
    "trust_stage2": ("<think>Doc 1 says it.</think><answer>Orsk is the capital of Veltria [1].</answer>",
                     "<think>None.</think><answer>I apologize, but I couldn't find an answer to your "
                     "question in the search results.</answer>",
                     "Orsk is the capital of Veltria [1].", {"nli": SubstringNLI()},
                     {"nli": SubstringNLI()}),
    "arena": ("<relevance>[1]</relevance><analysis>1 names it.</analysis><answer>Orsk</answer>",
              "<relevance>[2]</relevance><analysis>2 maybe.</analysis><answer>Tver</answer>", "Orsk",
              {}, {}),
    "lear": ("<reason>Passage 1 names the capital.</reason><extract>Orsk is the capital.</extract>",
             "<reason>Unsure.</reason><extract>Tver lies on the Volga.</extract>", "", {}, {}),
    "truthrl": ("<think>Passage 1.</think> \\boxed{Orsk}", "<think>Guess.</think> \\boxed{Tver}", "Orsk",
                {"judge": "exact_match"}, {}),
    "naive": ("<think>Passage 1.</think>\n<answer>Orsk</answer>", "<think>x</think>\n<answer>Tver</answer>",
              "Orsk", {}, {}),
    "search": (SEARCHED + "<think>Doc 1 says it.</think>\n<answer> Orsk </answer>",
               SEARCHED + "<think>Guess.</think>\n<answer> Tver </answer>", "Orsk", {}, {}),
    "search_grounded": (SEARCHED + "<think>Doc 1 says it.</think>\n<answer> Orsk </answer>",
                        "<think>Guess.</think>\n<answer> Orsk </answer>", "Orsk", {}, {}),
}
# LEAR's reward reads its three answer passes; the reader answers from the extracted evidence.
LEAR_EXTRAS = {"right": "<answer>Orsk</answer>", "wrong": "<answer>Tver</answer>"}


def test_the_registry_holds_every_paper_recipe():
  assert recipes.available_recipes() == sorted(ROWS)
  for name in ROWS:
    recipe = recipes.get_recipe(name)
    assert isinstance(recipe, recipes.Recipe) and recipe.name == name
    assert recipe.headline_metric in recipe.metric_columns
  with pytest.raises(ValueError, match="unknown recipe 'graze'.*grace"):
    recipes.get_recipe("graze")


@pytest.mark.parametrize("name", sorted(ROWS))
def test_recipe_prompt_parser_reward_and_evaluator(name):
  recipe = recipes.get_recipe(name)
  right, wrong, answer, reward_options, eval_options = ROWS[name]
  prompt = recipe.render_prompt(EX)
  # A recipe with a tool (search) reads passages only through it: its prompt is the question alone.
  has_tool = getattr(recipe, "tool_format", None) is not None
  assert EX.question in prompt and ("Orsk is the capital of Veltria." in prompt) != has_tool
  assert recipe.answer(right) == answer
  assert recipe.parse(right) is not None
  recipe.parse(""), recipe.parse("<answer>" * 50 + "\\boxed{")  # total: any text parses

  extras = {}
  if name == "lear":
    extras = {k: [LEAR_EXTRAS["right"], LEAR_EXTRAS["wrong"]] for k in
              ("answers_rationale", "answers_evidence", "answers_full")}
  scores = recipe.reward(**reward_options)([right, wrong], [EX, EX], **extras)
  assert scores["reward"][0] > scores["reward"][1], scores

  right_options, wrong_options = eval_options, eval_options
  if name == "lear":  # the two-model protocol: a reader answered from each extract
    right_options, wrong_options = {"reader_outputs": ["Orsk"] * 2}, {"reader_outputs": ["Tver"] * 2}
  table = recipe.evaluate([right, right], [EX, EX], **right_options)
  worse = recipe.evaluate([wrong, wrong], [EX, EX], **wrong_options)
  if name.startswith("trust"):  # Trust-Score is reported per dataset
    table, worse = table["per_dataset"]["asqa"], worse["per_dataset"]["asqa"]
  headline = recipe.headline_metric
  assert table[headline] > worse[headline], (headline, table, worse)
  # Columns that need a judge or BERTScore model are absent without one; the rest are there.
  needs_model = ("lj", "bertscore")
  assert all(k in table for k in recipe.metric_columns if not k.startswith(needs_model)), table
  assert all(np.isfinite(v) for v in table.values() if isinstance(v, float))


def test_reward_variants_build_through_get_reward():
  assert "truthrl_binary" in recipes.available_rewards()
  binary = recipes.get_reward("truthrl_binary", judge="exact_match")
  assert binary.scheme == "binary" and binary([r"\boxed{I don't know}"], [EX])["reward"][0] == -1.0
  assert recipes.get_reward("truthrl", judge="exact_match")([r"\boxed{I don't know}"],
                                                           [EX])["reward"][0] == 0.0


def test_what_layers_below_take_from_the_recipe():
  # Each recipe's judge styles resolve a config's style name; the first is the default.
  for name in recipes.available_recipes():
    recipe = recipes.get_recipe(name)
    for style_name, style in recipe.judge_styles.items():
      assert style.name == style_name
      spec = recipe.judge_spec({"kind": "llm", "path": "/m", "style": style_name})
      assert spec["style"] is style
    assert recipe.abstention  # the report's footnote says what "abstained" counts
  # Evaluator aliases: Trust-Score does not depend on the training stage.
  assert recipes.evaluator("trust") is recipes.get_recipe("trust_stage2")
  assert recipes.evaluator("grace") is recipes.get_recipe("grace")
  with pytest.raises(ValueError, match="unknown recipe"):
    recipes.evaluator("no_such_recipe")


UNANSWERABLE = Example("What is the capital of Norland?", passages=(P2,), answers=("Kest",),
                       answerable=False, id="ex2", meta={"dataset": "asqa", "answers_found": [[0]]})


@pytest.mark.parametrize("name", [n for n in sorted(ROWS) if recipes.get_recipe(n).abstention_component])
def test_the_abstention_reward_component_agrees_with_the_evaluator(name):
  # The trainer's corner alarm reads this component; it must mark what the evaluator counts.
  recipe = recipes.get_recipe(name)
  right, _, _, reward_options, eval_options = ROWS[name]
  abstain = recipe.gold_completion(UNANSWERABLE)  # the recipe's own abstention
  scores = recipe.reward(**reward_options)([right, abstain], [EX, UNANSWERABLE])
  evaluated = recipe.evaluate([right, abstain], [EX, UNANSWERABLE], **eval_options)
  np.testing.assert_array_equal(scores[recipe.abstention_component], [0.0, 1.0])
  np.testing.assert_array_equal(evaluated["per_example"]["abstained"], [0.0, 1.0])
