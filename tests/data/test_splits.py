"""The held-out split of a synthetic run never holds an item the run trains on: for every recipe's
:runlocal config its questions (and ids) are disjoint from every training stage's, the answerable
share is exact, and the same config gives the same split."""

import importlib.util
import json
import pathlib

import pytest

from grounding_jax.data import jsonl
from grounding_jax.data import splits
from grounding_jax.data import synthetic

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = ("grace", "trust", "arena", "lear", "truthrl", "synthetic_smollm2", "search")


def _config(name):
  spec = importlib.util.spec_from_file_location(name, ROOT / "configs" / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config("runlocal")


@pytest.mark.parametrize("name", CONFIGS)
def test_runlocal_held_out_split_is_disjoint_from_training(name):
  c = _config(name)
  train = [ex for st in c.stages for ex in splits.load(st.data)]
  held = splits.held_out(c.evals.data, c.evals.num_examples, [st.data for st in c.stages])
  n = c.evals.num_examples  # :runlocal's held-out size (presets.runlocal)
  assert len(held) == n > 0
  asked = {ex.question for ex in train}
  assert not asked & {ex.question for ex in held}
  assert not {ex.id for ex in train} & {ex.id for ex in held}
  assert sum(bool(ex.answerable) for ex in held) == round(n * c.evals.data.answerable_ratio)
  # Same world: every held-out answer is a fact of the training world (entities are shared).
  world = synthetic.build_world(c.stages[0].data.seed,
                                splits.synthetic_options(c.stages[0].data)["num_countries"])
  facts = set(world.capital.values()) | set(world.lives_in.values()) | set(world.founder.values())
  assert all(ex.answers[0] in facts for ex in held)
  again = splits.held_out(c.evals.data, n, [st.data for st in c.stages])
  assert again == held


def test_num_passages_sizes_the_training_and_the_held_out_contexts_alike():
  train_spec = dict(kind="synthetic", num_examples=16, seed=3, answerable_ratio=0.5,
                    unanswerable="unrelated", num_passages=3)
  eval_spec = dict(train_spec, seed=0)
  train = splits.load(train_spec)
  held = splits.held_out(eval_spec, 8, [train_spec])
  assert {len(ex.passages) for ex in [*train, *held]} == {3}
  # The same questions as the generator's own draw (the spec only passes the size through).
  assert train == synthetic.generate_examples(16, seed=3, unanswerable="unrelated", num_passages=3)
  # Absent, the world's default of five.
  del train_spec["num_passages"]
  assert {len(ex.passages) for ex in splits.load(train_spec)} == {5}


def test_a_larger_world_holds_a_larger_held_out_split_of_the_training_worlds_facts():
  train_spec = dict(kind="synthetic", num_examples=64, seed=3, answerable_ratio=0.5,
                    unanswerable="unrelated", num_passages=3, num_countries=24)
  with pytest.raises(ValueError, match="not in the"):  # the default 12 countries: too few left
    splits.held_out(dict(train_spec, seed=0), 128, [dict(train_spec, num_countries=12)])
  held = splits.held_out(dict(train_spec, seed=0), 128, [train_spec])
  assert len(held) == 128 and sum(ex.answerable for ex in held) == 64
  assert not {ex.question for ex in held} & {ex.question for ex in splits.load(train_spec)}
  # The questions are about the training world's (24-country) entities: its passages answer them.
  world = synthetic.build_world(3, num_countries=24)
  texts = {p.text for p in world.passages.values()}
  assert all(p.text in texts for ex in held for p in ex.passages)
  # A dev draw excluding the held-out split shares no question with it or with training.
  dev = splits.held_out(dict(train_spec, seed=0), 32, [train_spec], exclude=held, seed_offset=1)
  assert not {ex.question for ex in dev} & {ex.question for ex in held}


def test_held_out_split_refuses_more_questions_than_the_world_has_left(tmp_path):
  train = synthetic.generate_examples(256, seed=0)
  with pytest.raises(ValueError, match=r"not in the \d+ distinct training questions.*evals.num_examples"):
    synthetic.held_out_examples(200, train=train, world=synthetic.build_world(0))
  # A jsonl held-out split is the file itself (its first num_examples rows), validated as it is read.
  path = tmp_path / "heldout.jsonl"
  jsonl.write_examples(path, train[:5])
  assert splits.held_out({"kind": "jsonl", "path": str(path)}, 3, []) == train[:3]
  path.write_text(path.read_text() + json.dumps({"question": 7}) + "\n")
  with pytest.raises(ValueError, match=r"heldout.jsonl:6"):
    splits.held_out({"kind": "jsonl", "path": str(path)}, 0, [])


def test_a_search_worlds_held_out_split_is_labelled_against_the_training_worlds_withheld_facts():
  # configs/search.py:runlocal withholds half the facts from the corpus; the held-out split (whose
  # own spec does not say so) must be labelled against the same ones.
  c = _config("search")
  held = splits.held_out(c.evals.data, c.evals.num_examples, [st.data for st in c.stages])
  world = synthetic.build_world(c.stages[0].data.seed, c.stages[0].data.num_countries)
  withheld = synthetic.withheld_entities(world, c.stages[0].data.withheld_share)
  assert withheld
  for ex in held:
    named = next(e for e in world.fact_sentence if e in ex.question)
    chain = [named] + [m[named] for t, m in (("capital_of_home", world.lives_in),
                                             ("home_of_founder", world.founder))
                       if ex.meta["question_type"] == t]
    assert withheld.isdisjoint(chain) == ex.answerable, ex.question


def test_the_dev_split_asks_what_neither_training_nor_the_held_out_split_asks():
  # The demo's world: 64 training questions, 128 held-out, and a dev split of 32 beside them.
  train_spec = dict(kind="synthetic", num_examples=64, seed=3, answerable_ratio=0.625,
                    unanswerable="unrelated", num_passages=3, num_countries=24)
  eval_spec = dict(train_spec, seed=3, answerable_ratio=0.5)
  held = splits.held_out(eval_spec, 128, [train_spec])
  dev = splits.dev_split(eval_spec, 32, [train_spec], num_test=128)
  assert len(dev) == 32 and sum(ex.answerable for ex in dev) == 16
  asked = {ex.question for ex in [*held, *splits.load(train_spec)]}
  assert not asked & {ex.question for ex in dev}
  assert dev == splits.dev_split(eval_spec, 32, [train_spec], num_test=128)
  with pytest.raises(ValueError, match="dev file as evals.data.path"):
    splits.dev_split(dict(kind="jsonl", path="x.jsonl"), 8, [])
