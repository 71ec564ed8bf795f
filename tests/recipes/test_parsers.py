"""Parsers: the quirks of each authors' code, reproduced, and the reward registry."""

import pytest

from grounding_jax.data.schema import Example
from grounding_jax.recipes import available_rewards, get_reward
from grounding_jax.recipes.grace import recipe as grace
from grounding_jax.recipes.lear import recipe as lear
from grounding_jax.recipes.lear import rollout as lear_rollout
from grounding_jax.recipes.trust import recipe as trust
from grounding_jax.recipes.trust import score as trust_score

# --- Ground-GRPO / Trust-Eval helpers (Trust-Eval's code) -----------------------------------------


@pytest.mark.parametrize("stmt,ids,clean", [
    ("Josef Bican scored 805 goals [1][2].", [0, 1], "Josef Bican scored 805 goals."),
    ("A [1,2] b.", [0], "A,2 b."),  # the "\[\d+" regex reads only the first int of "[1,2]"
    ("No citation.", [], "No citation."),
    ("X [12] | y", [11], "X y"),
])
def test_citations(stmt, ids, clean):
  assert trust_score.citation_ids(stmt) == ids
  assert trust_score.remove_citations(stmt) == clean


def test_parse_trust_tag_count_and_format():
  ok = trust.parse("<think>a</think>\n<answer> b [1]. </answer>\n")
  assert ok.tag_count == 1.0 and ok.format_ok and ok.answer == "b [1]."
  assert trust.parse("<think>a</think><answer>  </answer>").format_ok is False  # empty
  assert trust.parse("<think><think>a</think><answer>b</answer>").tag_count == 0.75
  assert trust.parse("").tag_count == 0.0


def test_qampari_items():
  assert trust_score.split_qampari_items("Marazan [1], Stephen Morris [1], Beyond [2].") == [
      "Marazan [1]", "Stephen Morris [1]", "Beyond [2]"]
  assert trust_score.split_qampari_items(" , ,") == []


# --- GRACE (the authors' code) --------------------------------------------------------------------


def test_parse_grace_fields():
  out = grace.parse("<think>x</think>\n<evidence> e </evidence>\n<answer>a</answer>")
  assert (out.format_ok, out.path, out.evidence, out.answer) == (True, "evidence", " e ", "a")
  quirk = grace.parse("<answer>x<evidence>e</evidence></answer>")  # evidence inside answer
  assert quirk.format_ok and quirk.path == "evidence" and quirk.answer == "x<evidence>e</evidence>"
  assert not grace.parse("<answer>x<evidence>e</evidence></answer>", strict_format=True).format_ok


# --- LEAR (Eq. 8) ---------------------------------------------------------------------------------


def test_lear_format():
  rollout = "<reason>r</reason>\n<extract>e</extract>"
  assert lear.format_ok(rollout, "<answer>a</answer>")
  assert not lear.format_ok(rollout, "a")  # no answer block
  assert not lear.format_ok("<reason></reason><extract>e</extract>", "<answer>a</answer>")
  assert not lear.format_ok(rollout + "<extract>e</extract>", "<answer>a</answer>")
  assert lear_rollout.parse_rollout("<reason>r</reason>").evidence is None
  assert lear.answer("<answer> x </answer>") == " x " and lear.answer("x") == ""
  assert lear.reader_answer("plain x") == "plain x"


# --- naive baseline and the registry --------------------------------------------------------------


def test_naive_reward():
  ex = Example(question="q", answers=("Paris",), id="n")
  fn = get_reward("naive")
  out = fn(["<think>r</think>\n<answer>The Paris</answer>", "<answer>Paris</answer>",
            "<think>a < b</think><answer>x</answer>"], [ex] * 3)
  assert out["format"].tolist() == [1, 0, 0]
  assert out["accuracy"].tolist() == [1, 1, 0]
  assert out["reward"].tolist() == [2, 1, 0]


def test_registry_errors():
  assert "grace" in available_rewards() and "truthrl_knowledge" in available_rewards()
  with pytest.raises(ValueError, match="unknown reward 'nope'.*grace"):
    get_reward("nope")
  with pytest.raises(ValueError, match="reward 'arena': bad options"):
    get_reward("arena", alpha=1.0)
