"""Evidence-contrast groups in a searching rollout: the gold_removed rows of a question search the
corpus without its gold passages while its gold_kept rows, asking the same query, find them; the
collector logs each condition's search and reward metrics and the reward sees each row's label;
the setup refuses a tool that cannot withhold and a corpus without the gold passages."""

import jax
import numpy as np
import pytest

from grounding_jax.data import contrast as contrast_lib
from grounding_jax.data import retrieval
from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import get_recipe
from grounding_jax.rl import collect
from grounding_jax.rl import config as config_lib
from grounding_jax.rl import data_stream
from grounding_jax.rl import host_batch
from grounding_jax.rl import reward_pool
from grounding_jax.rl import setup
from grounding_jax.sampling import multiturn
from grounding_jax.sampling import rollout as rollout_lib
from grounding_jax import tools
from scripted_policy import FORMAT, STOP, DictTool

# The scripted policy (tests/scripted_policy.py) after " cherry" writes " box mars halt": it
# searches "mars", and goes on from the last word of the result. BM25 ranks the gold passage first
# for "mars"; without it, the other passage that names mars.
GOLD = Passage("mars mars lemon", id="gold")
OTHER = Passage("mars wax", id="other")
CORPUS = [GOLD, OTHER, Passage("the river flows to the sea", id="river")]
QUESTION = Example(question="Where is mars?", passages=(GOLD, Passage("the river", id="r2")),
                   answers=("lemon",), gold_passage_ids=(1,), answerable=True, id="q0")
FILLER = Example(question="What flows?", passages=(Passage("a distant hill", id="hill"),),
                 answers=("water",), answerable=False, id="q1")


def prompt(example):
  return " the story of cherry"


def _tool():
  return tools.RetrieverTool(CORPUS, retrieval.BM25Retriever(), top_k=1, cache_size=16)


def _settings(group_size, tool):
  return rollout_lib.SamplingSettings(group_size=group_size, max_new_tokens=24, temperature=0.0,
                                      stop=STOP, max_turns=3, tool=tool, tool_format=FORMAT)


def test_the_same_query_finds_the_gold_only_in_the_gold_kept_rows(scripted, tokenizer):
  pool = contrast_lib.distractor_pool([QUESTION, FILLER])
  examples = contrast_lib.conditions(QUESTION, ("gold_kept", "gold_removed"), pool, seed=0)
  tool = _tool()
  ro = rollout_lib.sample(scripted, tokenizer, examples, prompt, _settings(2, tool),
                          seed=jax.random.key(0))
  calls = ro.tool_calls
  assert [[c.query for c in row] for row in calls] == [["mars"]] * 4  # one query, every row
  assert [row[0].result.doc_ids for row in calls] == [("gold",)] * 2 + [("other",)] * 2
  assert all("lemon" in t for t in ro.texts[:2]) and not any("lemon" in t for t in ro.texts[2:])
  # The cache holds the two conditions apart: the kept rows' entry and the removed rows' (masked).
  assert tool.cache.get(("mars", 1)).doc_ids == ("gold",)
  assert tool.cache.get(("mars", 1, frozenset({0}))).doc_ids == ("other",)
  # Gold recall is measured on the kept rows only (the removed rows have no gold passages).
  counts, recall = multiturn.tool_call_stats(ro)
  assert counts.tolist() == [1, 1, 1, 1]
  np.testing.assert_array_equal(recall, [1.0, 1.0, np.nan, np.nan])


def test_a_tool_that_cannot_withhold_is_refused_where_a_row_withholds(scripted, tokenizer):
  pool = contrast_lib.distractor_pool([QUESTION, FILLER])
  examples = contrast_lib.conditions(QUESTION, ("gold_kept", "gold_removed"), pool, seed=0)
  with pytest.raises(ValueError, match="cannot filter per query"):
    rollout_lib.sample(scripted, tokenizer, examples, prompt, _settings(1, DictTool()),
                       seed=jax.random.key(0))
  # Without a withholding row the same tool runs as before.
  ro = rollout_lib.sample(scripted, tokenizer, examples[:1], prompt, _settings(1, DictTool()),
                          seed=jax.random.key(0))
  assert ro.tool_calls[0][0].result.doc_ids == ("d1",)


class LabelReward:
  """Picklable: 1 where the row's example is labelled unanswerable, and whether the gold passage's
  word reached the completion."""

  reward_range = (0.0, 1.0)

  def __call__(self, completions, examples, **extra):
    unanswerable = np.array([ex.answerable is False for ex in examples], np.float64)
    found = np.array(["lemon" in c for c in completions], np.float64)
    return {"reward": unanswerable, "unanswerable": unanswerable, "found_gold": found}


def _config():
  c = config_lib.default_config()
  c.rollout.update(dict(prompts_per_step=1, group_size=4, max_new_tokens=24, max_turns=3))
  c.update_loop.micro_batch_size = 4
  c.stages = [config_lib.stage("search", num_steps=1, recipe="naive",
                               data=dict(evidence_contrast="gold_removed"))]
  return c


def test_the_collector_logs_each_conditions_search_and_the_reward_sees_each_rows_label(
    scripted, tokenizer):
  c = _config()
  st = c.stages[0]
  view = setup.stage_config(c, st)
  tool = _tool()
  questions, contrast = setup.evidence_contrast(st, [QUESTION, FILLER], seed=0, tool=tool)
  assert questions == [QUESTION]
  pool = reward_pool.RewardPool([("label", 1.0, LabelReward())], num_workers=0, on_error="raise")
  settings = _settings(setup.samples_per_prompt(view, st), tool)
  collector = collect.Collector(view, get_recipe("naive"), tokenizer, None,
                                host_batch.HostBatches(None), pool, prompt, settings, contrast)
  batch = collector.collect(jax.random.key(0), data_stream.ExampleStream(questions, seed=0),
                            scripted)
  m = batch.metrics
  assert [ex.meta[contrast_lib.CONDITION_KEY] for ex in batch.rollout.examples] == [
      "gold_kept", "gold_removed"]
  # The reward saw the gold_removed rows as unanswerable, the gold_kept rows as answerable.
  assert (m["contrast/gold_kept/reward/mean"], m["contrast/gold_removed/reward/mean"]) == (0.0, 1.0)
  assert m["contrast/gold_kept/reward/found_gold"] == 1.0
  assert m["contrast/gold_removed/reward/found_gold"] == 0.0
  # Each condition's search metrics: both search once; gold recall only where there is gold.
  assert m["contrast/gold_kept/search/calls_per_completion"] == 1.0
  assert m["contrast/gold_removed/search/searching_frac"] == 1.0
  assert m["contrast/gold_kept/search/gold_recall"] == 1.0
  assert "contrast/gold_removed/search/gold_recall" not in m
  assert m["search/gold_recall"] == 1.0  # over the rows with gold: the kept ones


def test_setup_refuses_a_corpus_without_the_gold_and_a_tool_that_cannot_withhold():
  st = _config().stages[0]
  elsewhere = tools.RetrieverTool([OTHER, Passage("the river flows", id="river")],
                                  retrieval.BM25Retriever())
  with pytest.raises(ValueError, match=r"1 of 1 questions have a gold passage the search corpus "
                                       r"does not hold.*'q0': 'gold'"):
    setup.evidence_contrast(st, [QUESTION, FILLER], seed=0, tool=elsewhere)
  # The gold passage under another id, with the same text, is the same passage.
  renamed = tools.RetrieverTool([Passage(" mars  mars lemon", id="w7"), OTHER],
                                retrieval.BM25Retriever())
  assert setup.evidence_contrast(st, [QUESTION, FILLER], seed=0, tool=renamed)[0] == [QUESTION]
  c = _config()
  with pytest.raises(ValueError, match="cannot filter per query"):
    setup.check_tool(c, DictTool())
  setup.check_tool(c, _tool())
  c.stages[0].data.evidence_contrast = ""
  setup.check_tool(c, DictTool())  # no contrast: any tool


def test_a_search_recipe_with_contrast_must_search():
  c = _config()
  c.stages[0].recipe = "search_grounded"
  c.rollout.max_turns = 1
  with pytest.raises(ValueError, match="reads its passages from a search tool.*max_turns=1"):
    setup.check_config(c, need_model_path=False)
  c.rollout.max_turns = 3
  setup.check_config(c, need_model_path=False)
  c.stages[0].recipe = "naive"  # a recipe whose prompt holds its passages: contrast without search
  c.rollout.max_turns = 1
  setup.check_config(c, need_model_path=False)
