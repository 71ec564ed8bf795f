"""ARENA reward: unit-test vectors verified against the authors' code (arXiv:2505.13258 §3.3) and the value space."""

import numpy as np
import pytest

from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import get_reward

PASSAGES = tuple(Passage(f"passage {i}") for i in range(1, 7))
EX = Example(question="Where?", passages=PASSAGES, answers=("Paris",), gold_passage_ids=(1, 5),
             id="arena-1")
CANON = "<relevance>\n[1,5]\n</relevance>\n\n<analysis>\nx\n</analysis>\n\n<answer>\nParis\n</answer>"
R = "<relevance>[1]</relevance><analysis>x</analysis><answer>y</answer>"

FORMAT = [  # (completion, format score)
    (CANON, 1), (" " + R, 0), (R + "\n", 1), (R + "\nextra", 1), (R + " extra", 0),
    ("<relevance>[1]</relevance><analysis>3 < 4</analysis><answer>y</answer>", 0),
    ("<relevance>[1]</relevance> hi <analysis>x</analysis><answer>y</answer>", 0),
]


@pytest.mark.parametrize("completion,expected", FORMAT)
def test_format_vectors(completion, expected):
  assert get_reward("arena")([completion], [EX])["format"][0] == expected


RELEVANCE = [("[1,5]", 1), ("[1, 5]", 1), ("[5,1,1]", 1), ("[1.0,5.0]", 1), ("[1]", 0.5),
             ("[1,2,5]", 0.5), ("[2]", 0), ("[]", 0), ("1,5", 0), ("3", 0), ('["1","5"]', 0),
             ("[[1],[5]]", 0), ('{"1": 5}', 0), ("[1, 5", 0)]


@pytest.mark.parametrize("ids,expected", RELEVANCE)
def test_relevance_vectors(ids, expected):
  completion = f"<relevance>{ids}</relevance><analysis>x</analysis><answer>Paris</answer>"
  assert get_reward("arena")([completion], [EX])["relevance"][0] == expected


def test_figure1_examples_and_totals():
  fn = get_reward("arena")
  comps = [
      "<relevance>[2]</relevance><analysis>x</analysis><answer>London</answer>",  # (1, 0, 0, 0)
      "<relevance>[1,5]</relevance> <analysis>a < b</analysis><answer>the Paris</answer>",  # (0,1,1,0)
      "<relevance>[1]</relevance><analysis>x</analysis><answer>PARIS.</answer>",  # (1, 1, .5, 0)
      CANON,  # (1, 1, 1, +10)
  ]
  out = fn(comps, [EX] * 4)
  np.testing.assert_allclose(out["format"], [1, 0, 1, 1])
  np.testing.assert_allclose(out["accuracy"], [0, 1, 1, 1])
  np.testing.assert_allclose(out["relevance"], [0, 1, 0.5, 1])
  np.testing.assert_allclose(out["bonus"], [0, 0, 0, 10])
  np.testing.assert_allclose(out["reward"], [1, 2, 2.5, 13])
  assert fn.reward_range == (0.0, 13.0)


def test_accuracy_uses_arena_normalisation():
  ex = Example(question="q", passages=PASSAGES, answers=("U.S.",), gold_passage_ids=(1,), id="n")
  out = get_reward("arena")(["<answer>u s</answer>", "<answer>US</answer>"], [ex, ex])
  np.testing.assert_allclose(out["accuracy"], [1, 0])  # "U.S." -> "u s", not "us"


@pytest.mark.parametrize("ids,match", [((), "empty"), ((0, 1), "outside 1..6"), ((7,), "outside"),
                                       ((-1,), "outside")])
def test_malformed_gold_ids_raise(ids, match):
  ex = Example(question="q", passages=PASSAGES, answers=("a",), gold_passage_ids=ids, id="bad-ids")
  with pytest.raises(ValueError, match=rf"bad-ids.*gold_passage_ids.*{match}"):
    get_reward("arena")(["x"], [ex])


def test_missing_answers_raise():
  ex = Example(question="q", passages=PASSAGES, gold_passage_ids=(1,), id="no-ans")
  with pytest.raises(ValueError, match=r"no-ans.*answers"):
    get_reward("arena")(["x"], [ex])


def test_accuracy_variants_f1_and_judge():
  from ..fakes import ContainsJudge  # pylint: disable=g-import-not-at-top
  comps = ["<relevance>[1,5]</relevance><analysis>x</analysis><answer>Paris France</answer>",
           "<relevance>[1,5]</relevance><analysis>x</analysis><answer>Paris</answer>",
           "<relevance>[1,5]</relevance><analysis>x</analysis><answer> </answer>"]
  f1 = get_reward("arena", accuracy="f1")(comps, [EX] * 3)
  np.testing.assert_allclose(f1["accuracy"], [2 / 3, 1, 0])
  np.testing.assert_allclose(f1["bonus"], [0, 10, 0])  # the bonus still needs accuracy == 1
  judge = ContainsJudge()
  out = get_reward("arena", accuracy="judge", judge=judge)(comps, [EX] * 3)
  np.testing.assert_allclose(out["accuracy"], [1, 1, 0])
  np.testing.assert_allclose(out["reward"], [13, 13, 2])
  assert judge.calls == [(["Where?"], ["Paris France"], [["Paris"]])]  # EM and empty: no call
  with pytest.raises(ValueError, match="judge"):
    get_reward("arena", accuracy="judge")
