"""Each recipe's gold completion (the SFT target, sft/data.py) is in its recipe's format: it parses,
states the gold answer, and earns its reward's maximum — or, where a length term or abstention caps
the reward, the best the example allows.

Examples come from the synthetic world with GRACE's evidence layout (a two-hop question's supporting
sentences as one reference string), half of them unanswerable from their passages.
"""

import numpy as np
import pytest

from grounding_jax import recipes
from grounding_jax.data import synthetic
from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import get_recipe, get_reward
from grounding_jax.recipes.lear import rollout as lear_rollout
from grounding_jax.text import tags
from .fakes import SubstringNLI

EXAMPLES = synthetic.generate_examples(16, seed=3, answerable_ratio=0.5, join_evidence=True)
ANSWERABLE = [e for e in EXAMPLES if e.answerable]
UNANSWERABLE = [e for e in EXAMPLES if not e.answerable]
# GRACE App. B.3 (arXiv:2601.04525), typed from the paper.
NOTE_GRACE_UNANSWERABLE = "<llm> The question is unanswerable </llm><answer> Unanswerable </answer>"


def _score(name, completions, examples, **options):
  extras = {}
  if name == "lear":  # the three answer passes answer with the gold answer
    extras = {k: [f"<answer>{e.answers[0]}</answer>" for e in examples] for k in lear_rollout.ANSWER_EXTRAS}
  return get_reward(name, **options)(completions, examples, **extras)


def _gold(name, examples, **kw):
  return [get_recipe(name).gold_completion(e, **kw) for e in examples]


def test_the_table_covers_every_recipe():
  assert sorted(TABLE) == recipes.available_recipes()


def _grace():
  out = _score("grace", _gold("grace", ANSWERABLE), ANSWERABLE)
  assert (out["reward"] == get_reward("grace").reward_range[1]).all(), out  # 6.5: the maximum
  unans = _gold("grace", UNANSWERABLE)
  assert set(unans) == {NOTE_GRACE_UNANSWERABLE}
  out = _score("grace", unans, UNANSWERABLE)  # the <llm> path's maximum: format + path
  assert (out["reward"] == 1.5).all() and (out["llm_path"] == 1).all()
  return [get_recipe("grace").parse(c).format_ok for c in _gold("grace", EXAMPLES)]


def _trust(stage):
  name = f"trust_stage{stage}"
  gold = _gold(name, ANSWERABLE)
  out = _score(name, gold, ANSWERABLE, nli=SubstringNLI())
  # Every statement that states a gold answer earns EM and a good citation; nothing is penalised.
  assert (out["format"] == 1).all() and (out["tag_count"] == 1).all() and (out["em"] >= 0.5).all()
  np.testing.assert_array_equal(out["citation"], out["em"])
  if stage == 2:
    assert (out["refusal"] == 0.5).all()  # the answering bonus
    refusals = _score(name, _gold(name, UNANSWERABLE), UNANSWERABLE, nli=SubstringNLI())
    assert (refusals["refused"] == 1).all() and (refusals["refusal"] == 1.0).all()
    assert (refusals["reward"] == 3.0).all()  # tags 1 + format 1 + refusal 1: its maximum
  return [get_recipe(name).parse(c).format_ok for c in gold]


def _arena():
  out = _score("arena", _gold("arena", ANSWERABLE), ANSWERABLE)
  assert (out["reward"] == get_reward("arena").reward_range[1]).all(), out  # 13 with the bonus
  direct = _gold("arena", ANSWERABLE, style="direct")
  assert direct == [e.answers[0] for e in ANSWERABLE]  # SFT-direct: the short answer alone
  with pytest.raises(ValueError, match="gold_passage_ids"):
    _gold("arena", UNANSWERABLE[:1])
  return [get_recipe("arena").parse(c).format_ok for c in _gold("arena", ANSWERABLE)]


def _lear():
  gold = _gold("lear", ANSWERABLE)
  out = _score("lear", gold, ANSWERABLE)
  assert (out["answer"] == 1).all() and (out["format"] == 1).all()
  # The length term (Eqs. 6-7) rewards a rationale longer than its evidence and evidence far shorter
  # than the passages; one short passage set caps it below 1, so "near" the maximum.
  assert (out["len_reward_rationale"] > 0.9).all() and (out["reward"] >= 0.97).all(), out
  return [get_recipe("lear").parse(c).evidence is not None for c in gold]


def _truthrl():
  gold = _gold("truthrl", ANSWERABLE)
  assert (_score("truthrl", gold, ANSWERABLE, judge="exact_match")["reward"] == 1).all()
  assert [get_recipe("truthrl").answer(c) for c in gold] == [e.answers[0] for e in ANSWERABLE]
  unans = _gold("truthrl", UNANSWERABLE)
  assert (_score("truthrl", unans, UNANSWERABLE, judge="exact_match")["abstain"] == 1).all()
  # Abstaining is the maximum where the model cannot know: the knowledge-enhanced reward gives +1.
  ook = [Example(**{**vars(e), "meta": {**e.meta, "ook": True}}) for e in UNANSWERABLE]
  assert (_score("truthrl_knowledge", unans, ook, judge="exact_match")["reward"] == 1).all()
  return [tags.extract_boxed(c) is not None for c in gold + unans]


def _naive():
  out = _score("naive", _gold("naive", EXAMPLES), EXAMPLES)
  assert (out["reward"] == get_reward("naive").reward_range[1]).all(), out  # 2
  return [get_recipe("naive").parse(c)[0] for c in _gold("naive", EXAMPLES)]


def _search(name):
  gold = _gold(name, ANSWERABLE)
  assert (_score(name, gold, ANSWERABLE)["reward"] == 1).all()
  assert [get_recipe(name).answer(c) for c in gold] == [e.answers[0] for e in ANSWERABLE]
  unans = _gold(name, UNANSWERABLE)
  out = _score(name, unans, UNANSWERABLE)
  # Search-R1's EM has no abstention (0, as a wrong answer); the grounded variant's maximum is +1.
  assert (out["reward"] == (1 if name == "search_grounded" else 0)).all(), out
  return [c.count("<search>") >= 1 and get_recipe(name).answer(c) for c in gold + unans]


TABLE = {"grace": _grace, "trust_stage1": lambda: _trust(1), "trust_stage2": lambda: _trust(2),
         "arena": _arena, "lear": _lear, "truthrl": _truthrl, "naive": _naive,
         "search": lambda: _search("search"), "search_grounded": lambda: _search("search_grounded")}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_gold_completion_parses_and_earns_the_maximum(name):
  assert ANSWERABLE and UNANSWERABLE and any(e.meta["hops"] == 2 for e in ANSWERABLE)
  parsed = TABLE[name]()
  assert parsed and all(parsed), name


def test_gold_completion_contents_and_errors():
  ex = ANSWERABLE[0]
  evidence = ex.evidence[0]
  assert get_recipe("grace").gold_completion(ex) == f"<evidence>{evidence}</evidence><answer>{ex.answers[0]}</answer>"
  trust = get_recipe("trust_stage2").gold_completion(ex)
  ids = "".join(f"[{i}]" for i in ex.gold_passage_ids)
  assert trust.startswith(f"<think>Documents {ids} state the answer.</think><answer>")
  refusal = get_recipe("trust_stage2").gold_completion(UNANSWERABLE[0])
  assert refusal.endswith("<answer>I apologize, but I couldn't find an answer to your question in the "
                          "search results.</answer>")
  assert get_recipe("truthrl").gold_completion(UNANSWERABLE[0]).endswith("\\boxed{I don't know}")
  arena = get_recipe("arena").gold_completion(ex)
  assert arena.startswith(f"<relevance>\n{sorted(ex.gold_passage_ids)}\n</relevance>\n\n<analysis>\n")
  assert arena.endswith(f"</analysis>\n\n<answer>\n{ex.answers[0]}\n</answer>")
  # A passage with "<" in its evidence cannot break ARENA's or the naive baseline's [^<]* sections.
  odd = Example("q?", passages=(Passage("x < y holds."),), answers=("y",), evidence=("x < y holds.",),
                gold_passage_ids=(1,), answerable=True, id="odd")
  assert get_recipe("arena").parse(get_recipe("arena").gold_completion(odd)).format_ok
  assert get_recipe("naive").parse(get_recipe("naive").gold_completion(odd))[0]
  with pytest.raises(ValueError, match=r"gold completion: example id='none' has no answers"):
    get_recipe("truthrl").gold_completion(Example("q?", id="none", answerable=True,
                                                  gold_passage_ids=(1,), passages=(Passage("p"),)))
  with pytest.raises(ValueError, match=r"no gold completion style 'direct'; known: \['default'\]"):
    get_recipe("grace").gold_completion(ex, style="direct")
