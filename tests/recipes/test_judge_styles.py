"""The papers' judge styles (recipes/<recipe>/judge.py): their prompts against the authors' strings,
and their reply parsers beside the generic robust one."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grounding_jax.judges import prompts as jp
from grounding_jax.recipes.arena import judge as arena_judge
from grounding_jax.recipes.grace import judge as grace_judge
from grounding_jax.recipes.truthrl import judge as truthrl_judge

_REPLY_TEXT = st.one_of(st.text(max_size=200), st.sampled_from(['{"score": 1}', "yes", "No.", "{", "}{", '"score":']))


def test_arena_and_grace_prompts_are_the_papers_strings():
  # ARENA `src/gpt_eval.py` (arXiv:2505.13258 Table 8; typed here independently of the module).
  answer, golds = "Paris", ["Paris", "City of Light"]
  expected = ('*************Consider a knowledge Q&A RAG task to test the capability of a testing model, the correct answer list is:*************\n' + str(golds)
              + '\n\n\n\n*************Here is the model\'s response:*************\n' + answer
              + '\n\n\n\n*************Please check if the model\'s answer is correct. As long as the model\'s answer hits any item (or synonym) in the correct answer list, it can be considered correct. You only need to answer "yes" or "no".*************')
  assert arena_judge.arena_judge_prompt(golds, answer) == expected
  assert grace_judge.grace_judge_prompt(golds, answer) == expected.replace(str(golds), "Paris\nCity of Light")
  msgs = truthrl_judge.truthrl_messages("q?", "g", "p")
  assert msgs[0]["content"].startswith(truthrl_judge.TRUTHRL_INSTRUCTIONS + "\nYou should make the judgment")
  assert msgs[1]["content"] == "Question: q?\n Ground truth: g\n Prediction: p\n"


@pytest.mark.parametrize("reply,robust,arena,grace", [
    ("yes", True, True, True), ("Yes.", True, True, False), ("**No**", False, False, False),
    ("no", False, False, False), ("I think the answer is yes", True, True, False),
    ("Nope", None, False, False), ("", None, None, False), (None, None, None, None),
    ("<think>no wait</think> yes", True, True, False)])
def test_yes_no_parsers(reply, robust, arena, grace):
  assert jp.parse_yes_no(reply) is robust
  assert arena_judge.parse_yes_no_arena(reply) is arena
  assert grace_judge.parse_yes_no_grace(reply) is grace


@pytest.mark.parametrize("reply,expected", [
    ('{"score": 1, "explanation": "ok"}', True), ('{"explanation": "x", "score": 0}', False),
    ('bla {"score": 0} then {"score": 1}', True), ('{"score": 2}', None), ("score is 1", None),
    ('```json\n{"explanation": "a", "score":1}\n```', True), ('{"score": "1"}', True), ("{", None),
    (12, None), ('{"explanation": "{nested}", "score": 1}', True)])
def test_json_score_parser(reply, expected):
  assert truthrl_judge.parse_json_score(reply) is expected


@settings(max_examples=200, deadline=None)
@given(reply=_REPLY_TEXT)
def test_parsers_never_raise_on_arbitrary_replies(reply):
  for parse in (jp.parse_yes_no, arena_judge.parse_yes_no_arena, grace_judge.parse_yes_no_grace, truthrl_judge.parse_json_score):
    assert parse(reply) in (True, False, None)
