"""Seeded, balanced draws from dataset files (the papers' samples), mixed into splits with a hold-out."""

import json
import random

import pytest

from grounding_jax.data import mixture, readers
from grounding_jax.data.mixture import Draw, Holdout, sample_indices

FIX = __import__("pathlib").Path(__file__).parent / "fixtures"
HOTPOT_TRAIN = FIX / "hotpotqa_train_sample_16.json"


def _trust_file(path, n=40):
  """A Trust-Score-format file whose row i is answerable iff i % 3 != 0 (answers_found in a doc)."""
  rows = [{"question": f"Question {i}?", "sample_id": f"q{i}", "answers": [[f"answer {i}"]],
           "docs": [{"title": f"Doc {i}", "text": f"Text {i}.", "answers_found": [int(i % 3 != 0)]},
                    {"title": "Other", "text": "Unrelated.", "answers_found": [0]}]}
          for i in range(n)]
  path.write_text(json.dumps(rows))
  return path


def test_a_first_draw_is_the_grace_authors_sample():
  # GRACE's preprocess.py: random.Random(123456).sample(range(len(data)), n), indices sorted.
  labels = [True] * 100
  rows, report = sample_indices(labels, Draw("train", "hotpotqa", "train", 20), seed=123456)
  assert rows == sorted(random.Random(123456).sample(range(100), 20))
  assert report["drawn"] == 20 and report["shortfall"] == 0 and report["rows"] == 100
  # Asking for more than the file has takes it all (as the authors' `_sample_list`) and says so.
  rows, report = sample_indices(labels[:7], Draw("train", "hotpotqa", "train", 20), seed=123456)
  assert rows == list(range(7)) and report["shortfall"] == 13


def test_balanced_draw_takes_answerable_then_unanswerable():
  labels = [i % 3 != 0 for i in range(30)] + [None] * 5  # 20 answerable, 10 not, 5 unlabelled
  rows, report = sample_indices(labels, Draw("s2", "asqa", "train", 12, answerable=6), seed=1)
  assert sum(labels[i] is True for i in rows) == 6 and sum(labels[i] is False for i in rows) == 6
  assert all(labels[i] is not None for i in rows) and rows == sorted(rows)
  rows, report = sample_indices(labels, Draw("s2", "asqa", "train", 30, answerable=10), seed=1,
                                taken=set(range(0, 30, 3)))  # every unanswerable row already taken
  assert report["drawn_unanswerable"] == 0 and report["shortfall"] == 20
  assert report["available_unanswerable"] == 0


def test_stage_samplers_are_balanced_disjoint_and_seeded(tmp_path):
  files = {("asqa", "train"): _trust_file(tmp_path / "asqa.json")}
  draws = [Draw.parse("stage1=asqa:train:6:6"), Draw.parse("stage2=asqa:train:10:5")]
  mix = mixture.build_mixture(draws, files, seed=42)
  stage1, stage2 = mix.splits["stage1"], mix.splits["stage2"]
  number = lambda ex: int(ex.id[1:])
  assert len(stage1) == 6 and all(ex.answerable and number(ex) % 3 for ex in stage1)
  assert sum(ex.answerable for ex in stage2) == 5 and sum(not ex.answerable for ex in stage2) == 5
  assert all((number(ex) % 3 != 0) == ex.answerable for ex in stage2)  # labels from answers_found
  assert not {ex.id for ex in stage1} & {ex.id for ex in stage2}
  again = mixture.build_mixture(draws, files, seed=42)
  assert [ex.id for ex in again.splits["stage2"]] == [ex.id for ex in stage2]
  other = mixture.build_mixture(draws, files, seed=7)
  assert [ex.id for ex in other.splits["stage2"]] != [ex.id for ex in stage2]
  assert [r["drawn_answerable"] for r in mix.draws] == [6, 5]


def test_several_sources_are_shuffled_together_and_a_holdout_split_off():
  files = {("hotpotqa", "train"): HOTPOT_TRAIN, ("musique", "train"): FIX / "musique_ans_train_3.jsonl"}
  draws = [Draw("train", "hotpotqa", "train", 10), Draw("train", "musique", "train", None)]
  mix = mixture.build_mixture(draws, files, seed=123456, holdout=Holdout("heldout", "train", count=4))
  train, held = mix.splits["train"], mix.splits["heldout"]
  assert (len(train), len(held)) == (9, 4) and mix.sizes == {"train": 9, "heldout": 4}
  hotpot = list(readers.read_dataset("hotpotqa", HOTPOT_TRAIN))
  want_hotpot = {hotpot[i].id for i in sorted(random.Random(123456).sample(range(16), 10))}
  musique = {ex.id for ex in readers.read_dataset("musique", FIX / "musique_ans_train_3.jsonl")}
  assert {ex.id for ex in train + held} == want_hotpot | musique
  order = [ex.meta["dataset"] for ex in train + held]
  assert order != sorted(order, key=lambda d: d != "hotpotqa")  # mixed, not hotpotqa then musique
  assert mix.holdout == {"from": "train", "into": "heldout", "count": 4}


def test_a_whole_file_split_is_streamed():
  mix = mixture.build_mixture([Draw("test", "hotpotqa", "eval")],
                              {("hotpotqa", "eval"): FIX / "hotpotqa_dev_distractor_5.json"}, seed=0)
  assert not isinstance(mix.splits["test"], list) and mix.sizes["test"] is None
  assert list(mix.splits["test"]) == list(readers.read_dataset(
      "hotpotqa", FIX / "hotpotqa_dev_distractor_5.json"))


def test_draw_specs_and_errors(tmp_path):
  assert Draw.parse("stage2=asqa:train:1000:500") == Draw("stage2", "asqa", "train", 1000, 500)
  assert Draw.parse("test=qasper:eval:all") == Draw("test", "qasper", "eval", None)
  assert Draw.parse("train=hotpotqa:train:0").spec() == "train=hotpotqa:train:0"
  for bad in ("hotpotqa:train:10", "train=hotpotqa", "train=hotpotqa:train:ten"):
    with pytest.raises(ValueError, match="SPLIT=SOURCE:ROLE"):
      Draw.parse(bad)
  with pytest.raises(ValueError, match="answerable=11"):
    Draw("s", "asqa", "train", 10, answerable=11)
  with pytest.raises(ValueError, match="--input=musique:train=PATH"):
    mixture.build_mixture([Draw("train", "musique", "train", 5)], {}, seed=0)
  unlabelled = tmp_path / "hotpot_test.json"  # a test-set file: no answers, so no labels
  rows = json.loads((FIX / "hotpotqa_dev_distractor_5.json").read_text())
  unlabelled.write_text(json.dumps([{k: v for k, v in r.items() if k != "answer"} for r in rows]))
  with pytest.raises(ValueError, match="no answerability labels"):
    mixture.build_mixture([Draw("train", "hotpotqa", "train", 2, 1)],
                          {("hotpotqa", "train"): unlabelled}, seed=0)
