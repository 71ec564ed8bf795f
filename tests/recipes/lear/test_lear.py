"""LEAR reward: length-reward vectors of Eqs. 6-7 (arXiv:2507.15586 §3.2), the Eq. 9 combination, lengths in the
policy's tokens (a tokenizer folder that pickles as its path), Table 6's answer-pass subsets."""

import math
import pickle

import ml_collections
import numpy as np
import pytest

from grounding_jax import models
from grounding_jax.data.schema import Example, Passage
from grounding_jax.eval import from_config
from grounding_jax.recipes import get_reward
from grounding_jax.recipes.lear import recipe as lear
from grounding_jax.recipes.lear import rollout as lear_rollout

RATIONALE = [((200, 50, 0.5), 0.997527), ((25, 50, 0.5), 0.119203), ((50, 50, 0.3), 0.5),
             ((100, 50, 1.0), 0.731059), ((100, 50, 0.1), 0.999955), ((40, 50, 0.2), 0.222700)]
EVIDENCE = [((50, 650, 0.9, 0.5), 1.0), ((130, 650, 0.9, 0.5), 0.894427),
            ((130, 650, 0.9, 1.0), 0.8), ((325, 650, 0.9, 0.3), 0.812252),
            ((650, 650, 0.9, 0.5), 0.0), ((800, 650, 0.9, 0.5), 0.0)]


@pytest.mark.parametrize("args,expected", RATIONALE)
def test_length_reward_rationale(args, expected):
  assert lear.length_reward_rationale(*args) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("args,expected", EVIDENCE)
def test_length_reward_evidence(args, expected):
  assert lear.length_reward_evidence(*args) == pytest.approx(expected, abs=1e-6)


def test_length_edge_cases_are_finite():
  assert lear.length_reward_rationale(0, 0, 0.1) == 0.5
  assert 0 <= lear.length_reward_rationale(10**6, 1, 0.1) <= 1
  assert 0 <= lear.length_reward_rationale(1, 10**6, 0.1) <= 1
  assert lear.length_reward_evidence(0, 0, 0.9, 0.5) == 1.0


PASSAGES = tuple(Passage(" ".join(["word"] * 100), title=f"t{i}") for i in range(5))  # L_P = 500
EX = Example(question="Who wrote Hamlet?", passages=PASSAGES, answers=("William Shakespeare",),
             id="lear-1")


def test_full_reward_by_hand():
  rationale = " ".join(["r"] * 40)  # L_r = 40
  evidence = " ".join(["e"] * 20)  # L_e = 20, compression 0.96 >= 0.9
  rollout = f"<reason>{rationale}</reason>\n<extract>{evidence}</extract>"
  extras = dict(answers_rationale=["<answer>Shakespeare</answer>"],
                answers_evidence=["<answer>William Shakespeare</answer>"],
                answers_full=["<answer>William Shakespeare</answer>"])
  out = get_reward("lear", tau=0.5, gamma=0.5)([rollout], [EX], **extras)
  f1_r = 2 * 1.0 * 0.5 / 1.5
  r_ans = (f1_r + 1 + 1) / 3
  r_len = (1 / (1 + math.exp(-(40 / 20 - 1) / 0.5)) + 1.0) / 2
  assert out["f1_rationale"][0] == pytest.approx(f1_r)
  assert out["format"][0] == 1.0
  assert out["len_passages"][0] == 500 and out["len_rationale"][0] == 40
  assert out["reward"][0] == pytest.approx(0.8 * r_ans + 0.1 * r_len + 0.1)


def test_bad_rollout_and_missing_answer_tags():
  extras = dict(answers_rationale=["Shakespeare"], answers_evidence=[""],
                answers_full=["<answer>William Shakespeare</answer>"])
  out = get_reward("lear")(["<reason>unfinished"], [EX], **extras)
  assert out["f1_rationale"][0] == 0.0  # no <answer> block -> 0 ([DECISION])
  assert out["length"][0] == 0.0 and out["format"][0] == 0.0
  assert out["reward"][0] == pytest.approx(0.8 / 3)


def test_tokenizer_lengths():
  class CharTokenizer:
    def encode(self, s, add_special_tokens=False):
      return list(s)

  rollout = "<reason>abcd</reason><extract>ab</extract>"
  extras = {k: ["<answer>x</answer>"] for k in lear_rollout.ANSWER_EXTRAS}
  out = get_reward("lear", tokenizer=CharTokenizer())([rollout], [EX], **extras)
  assert out["len_rationale"][0] == 4 and out["len_evidence"][0] == 2
  assert out["len_passages"][0] == 5 * (100 * 4 + 99)


def test_tokenizer_folder_counts_the_policys_tokens_and_pickles_as_a_path(smollm2_dir):
  # Lengths in the policy's tokenizer tokens. The config names tokenizer="policy";
  # the trainer's set-up resolves it to the policy's folder, and the reward loads it lazily.
  options = from_config.reward_options({"tokenizer": "policy", "tau": 0.5}, str(smollm2_dir))
  assert options == {"tokenizer": str(smollm2_dir), "tau": 0.5}
  fn = get_reward("lear", **options)
  rationale, evidence = "Hamlet's author: William Shakespeare (1564-1616).", "Shakespeare wrote it."
  rollout = f"<reason>{rationale}</reason><extract>{evidence}</extract>"
  extras = {k: ["<answer>William Shakespeare</answer>"] for k in lear_rollout.ANSWER_EXTRAS}
  shipped = pickle.loads(pickle.dumps(fn))  # as to a reward worker: no tokenizer object inside
  assert len(pickle.dumps(fn)) < 2000
  out = shipped([rollout], [EX], **extras)
  tok = models.load_tokenizer(smollm2_dir)
  count = lambda s: len(tok.encode(s, add_special_tokens=False))
  assert (out["len_rationale"][0], out["len_evidence"][0]) == (count(rationale), count(evidence))
  assert out["len_rationale"][0] != len(rationale.split())
  assert out["len_passages"][0] == 5 * count(PASSAGES[0].text)
  with pytest.raises(ValueError, match="config.model.path"):
    from_config.reward_options({"tokenizer": "policy"}, "")
  # model.path "smollm2" (before launch/train.py resolves it): the given tokenizer's folder.
  view = ml_collections.ConfigDict({"model": {"path": "smollm2"}})
  assert from_config.policy_folder(view, tok) == str(smollm2_dir)
  assert from_config.policy_folder(view) == ""
  with pytest.raises(ValueError, match="resolves it"):
    get_reward("lear", tokenizer="policy")
  with pytest.raises(ValueError, match="not a folder"):
    get_reward("lear", tokenizer="/no/such/folder")


def test_answer_passes_pick_the_f1s_the_answer_reward_averages():
  # Table 6: LEAR trained on subsets of the three answer rewards, averaged.
  rollout = "<reason>r r r</reason><extract>e</extract>"
  extras = dict(answers_rationale=["<answer>Shakespeare</answer>"],
                answers_evidence=["<answer>Marlowe</answer>"],
                answers_full=["<answer>William Shakespeare</answer>"])
  f1 = {"rationale": 2 * 1.0 * 0.5 / 1.5, "evidence": 0.0, "full": 1.0}
  for passes in (("rationale",), ("evidence", "full"), ("rationale", "evidence", "full")):
    out = get_reward("lear", answer_passes=passes)([rollout], [EX], **extras)
    assert out["answer"][0] == pytest.approx(np.mean([f1[p] for p in passes]))
    assert out["f1_evidence"][0] == 0.0 and out["f1_full"][0] == 1.0  # all three still logged
  assert get_reward("lear").answer_passes == lear.ANSWER_PASSES
  for bad in ((), ("reader",), ("full", "full")):
    with pytest.raises(ValueError, match="answer_passes"):
      get_reward("lear", answer_passes=bad)


def test_missing_extras_and_malformed_example_raise():
  fn = get_reward("lear")
  with pytest.raises(ValueError, match="answers_rationale"):
    fn(["x"], [EX])
  extras = {k: ["<answer>x</answer>"] for k in lear_rollout.ANSWER_EXTRAS}
  with pytest.raises(ValueError, match="length 1, expected 2"):
    fn(["x", "y"], [EX, EX], **extras)
  no_passages = Example(question="q", answers=("a",), id="lear-bad")
  with pytest.raises(ValueError, match=r"lear-bad.*passages"):
    fn(["x"], [no_passages], **extras)
  np.testing.assert_allclose(fn.reward_range, (0, 1))


def test_compression_ratio():
  out = lear.compression_ratio([1000, 600, 500], [50, 20, 0])
  assert out["cr_total"] == pytest.approx(2100 / 70)
  assert out["cr_mean"] == pytest.approx((20 + 30) / 2)
  assert out["n_empty"] == 1
