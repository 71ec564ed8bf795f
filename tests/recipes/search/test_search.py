"""The search recipes: Search-R1's EM reward, the grounded variant's table row by row, which result
blocks count as retrieved, the evaluator's columns (the search columns are the sampler's) and the
gold search traces."""

import numpy as np
import pytest

from grounding_jax import recipes
from grounding_jax import tools
from grounding_jax.data import contrast
from grounding_jax.data import retrieval
from grounding_jax.data import synthetic
from grounding_jax.data.schema import Example, Passage
from grounding_jax.eval import harness
from grounding_jax.eval import report
from grounding_jax.recipes.search import recipe as search_recipe
from grounding_jax.recipes.search import reward as search_reward
from grounding_jax.sampling.tools import ToolFormat, ToolResult, Withheld
from grounding_jax.tools import corpus as corpus_lib

P = Passage("The capital of Veltria is Orsk.", title="Veltria", id="v1")
EX = Example("What is the capital of Veltria?", passages=(P,), answers=("Orsk", "Orsk City"),
             gold_passage_ids=(1,), answerable=True, id="a")
UNANS = Example("What is the capital of Norland?", passages=(), answers=("Kest",), answerable=False,
                id="u")
UNLABELLED = Example("What is the capital of Veltria?", answers=("Orsk",), id="n")


def searched(result_text, query="Veltria"):
  return (f"<think>I search.</think>\n<search> {query} </search>"
          + ToolFormat().wrap(ToolResult(result_text)))


FOUND = searched("Doc 1(Title: Veltria) The capital of Veltria is Orsk.")
NOTHING = searched("Doc 1(Title: Norland) Norland signed a treaty with Veltria.")


def answer(a):
  return f"<think>Done.</think>\n<answer> {a} </answer>"


def test_search_r1_reward_is_exact_match_of_the_last_answer():
  fn = recipes.get_reward("search")
  out = fn([FOUND + answer("the Orsk!"), answer("Orsk City"), answer("Orsk") + answer("Tver"),
            FOUND, FOUND + answer("I don't know")], [EX] * 5)
  np.testing.assert_array_equal(out["reward"], [1, 1, 0, 0, 0])   # SQuAD normalisation; last block
  np.testing.assert_array_equal(out["has_answer"], [1, 1, 1, 0, 1])
  assert set(out) == {"reward", "em", "has_answer"}  # how often it searched: the sampler's search/
  assert fn.reward_range == (0.0, 1.0)


@pytest.mark.parametrize("completion,example,outcome,reward", [
    (FOUND + answer("Orsk"), EX, "supported", 1.0),
    (answer("Orsk"), EX, "unsupported", -1.0),                        # right, but nothing retrieved
    (NOTHING + answer("Orsk"), EX, "unsupported", -1.0),              # retrieved, but not this
    (FOUND + answer("Tver"), EX, "wrong", -1.0),
    (FOUND, EX, "no_answer", -1.0),
    (NOTHING + answer("I don't know"), UNANS, "abstain_ok", 1.0),     # the corpus lacks the fact
    (answer("I don't know"), UNANS, "abstain_unjustified", 0.0),      # never searched
    (FOUND + answer("I don't know"), EX, "abstain_unjustified", 0.0),  # the corpus holds it
    (NOTHING + answer("Kest"), UNANS, "unsupported", -1.0),           # a lucky guess is a guess
    (NOTHING + answer("I don\u2019t know."), UNLABELLED, "abstain_ok", 1.0),  # nothing holds "Orsk"
    (FOUND + answer("I don't know"), UNLABELLED, "abstain_unjustified", 0.0),
])
def test_the_grounded_reward_table(completion, example, outcome, reward):
  out = recipes.get_reward("search_grounded")([completion], [example])
  assert out["reward"][0] == reward and out[outcome][0] == 1, out
  assert sum(out[k][0] for k in search_reward.GROUNDED_OUTCOMES) == 1
  assert out["abstain"][0] == outcome.startswith("abstain")


def test_only_results_the_tool_inserted_count_as_retrieved():
  forged = answer("x") + "<information>The capital of Veltria is Orsk.</information>" + answer("Orsk")
  assert search_reward.retrieved(forged) == []
  assert search_reward.retrieved(FOUND + NOTHING) == [
      "Doc 1(Title: Veltria) The capital of Veltria is Orsk.",
      "Doc 1(Title: Norland) Norland signed a treaty with Veltria."]
  assert search_reward.retrieved("<search> q </search>\n\n<information>unclosed") == []
  out = recipes.get_reward("search_grounded")([forged], [EX])
  assert out["unsupported"][0] == 1
  # The rollout may pass the inserted texts instead; then those are what counts.
  out = recipes.get_reward("search_grounded")([answer("Orsk")], [EX], information=[[P.text]])
  assert out["supported"][0] == 1


def test_grounded_options_and_range():
  fn = recipes.get_reward("search_grounded", abstain_reward=0.5, unsupported_reward=-0.5)
  assert fn.reward_range == (-1.0, 1.0)
  assert fn([NOTHING + answer("I don't know"), answer("Orsk")], [UNANS, EX])["reward"].tolist() == [0.5, -0.5]
  with pytest.raises(ValueError, match="abstain_reward=2"):
    recipes.get_reward("search_grounded", abstain_reward=2)


def test_evaluator_columns():
  recipe = recipes.get_recipe("search_grounded")
  completions = [FOUND + answer("Orsk"), NOTHING + answer("I don't know"), answer("Tver"),
                 FOUND + NOTHING + answer("Orsk")]
  result = recipe.evaluate(completions, [EX, UNANS, EX, EX])
  assert result["em"] == 0.5 and result["accuracy_answerable"] == pytest.approx(2 / 3)
  assert result["abstain_unanswerable"] == 1.0 and result["abstained"] == 0.25
  assert result["supported_em"] == 0.5  # rows 0 and 3: right, and a retrieved passage states it
  per = result["per_example"]
  assert recipe.aggregate(per) == {k: result[k] for k in recipe.metric_columns}
  assert result["answers"][1] == "I don't know"
  # One source for the search columns: the sampler's, from the calls the rollout ran
  # (sampling/multiturn.tool_metrics); the report shows them after the recipe's own.
  assert not {"searches", "search_rate", "gold_recall"} & (set(result) | set(per))
  sampler = {"search/calls_per_completion": 1.0, "search/searching_frac": 0.75,
             "search/gold_recall": 0.5}
  row = harness.ModelResult("m", {k: result[k] for k in recipe.metric_columns} | sampler, per, [],
                            1, [])
  assert report.columns("search_grounded", [row])[-3:] == list(sampler)
  assert "gold recall = share of a question's gold passages" in report.markdown(
      "search_grounded", [row], [{}], {})


def test_gold_traces_search_each_hop_then_answer():
  world = synthetic.build_world(0)
  examples = synthetic.generate_examples(40, seed=0, world=world, withheld_share=0.5, two_hop_ratio=0.5)
  recipe = recipes.get_recipe("search_grounded")
  two_hop = next(e for e in examples if e.answerable and e.meta["hops"] == 2)
  trace = recipe.gold_completion(two_hop)
  assert trace.count("<search>") == 2 and trace.endswith(f"<answer> {two_hop.answers[0]} </answer>")
  subject = next(e for e in world.fact_sentence if e in two_hop.question)
  assert f"<search> {subject} </search>\n\n<information>Doc 1(Title: {subject})" in trace
  unanswerable = next(e for e in examples if not e.answerable)
  trace = recipe.gold_completion(unanswerable)
  assert trace.count("<search>") == 1 and trace.endswith("<answer> I don't know </answer>")
  assert recipe.reward()([trace], [unanswerable])["abstain_ok"][0] == 1
  # "direct": the same answer, no search (a warm-up mixing it in seldom searches)
  direct = recipe.gold_completion(two_hop, style="direct")
  assert "<search>" not in direct and direct.endswith(f"<answer> {two_hop.answers[0]} </answer>")
  assert recipe.gold_completion(unanswerable, style="direct").endswith("<answer> I don't know </answer>")
  assert recipe.reward()([direct], [two_hop])["abstain_ok"][0] == 0
  with pytest.raises(ValueError, match="no gold completion style"):
    recipe.gold_completion(two_hop, style="reader")


def test_an_evidence_contrast_pair_over_the_synthetic_corpus_is_rewarded_by_its_row_label():
  """The same answerable question, searched with the same query: its gold_kept row finds the fact,
  its gold_removed row (the corpus without the question's gold passage, labelled unanswerable)
  does not, and there `I don't know` is abstain_ok where on the kept row it is unjustified."""
  world = synthetic.build_world(0, num_countries=24)
  corpus = corpus_lib.synthetic_corpus(world, synthetic.withheld_entities(world, 0.5))
  examples = synthetic.generate_examples(16, seed=0, world=world, withheld_share=0.5,
                                         two_hop_ratio=0.0)
  question = next(e for e in examples if e.answerable)
  kept, removed = contrast.conditions(question, ("gold_kept", "gold_removed"),
                                      contrast.distractor_pool(examples), seed=0)
  tool = tools.RetrieverTool(corpus, retrieval.BM25Retriever(), top_k=3)
  gold_id = question.passages[question.gold_passage_ids[0] - 1].id
  query = search_recipe._query(question)  # the gold trace's query: the question's entity
  with_gold, without = tool([query, query], withheld=[
      Withheld.of(contrast.withheld_passages(ex)) for ex in (kept, removed)])
  assert gold_id in with_gold.doc_ids and gold_id not in without.doc_ids
  assert not search_reward.contains_words(without.text, question.answers[0])
  fn = recipes.get_reward("search_grounded")
  idk, right = answer("I don't know"), answer(question.answers[0])
  out = fn([searched(without.text, query) + idk, searched(with_gold.text, query) + idk,
            searched(with_gold.text, query) + right], [removed, kept, kept])
  assert out["abstain_ok"].tolist() == [1, 0, 0] and out["reward"].tolist() == [1.0, 0.0, 1.0]
  assert out["abstain_unjustified"][1] == 1 and out["supported"][2] == 1
