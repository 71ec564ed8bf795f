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
CONFIGS = ("grace", "trust", "arena", "lear", "truthrl", "synthetic_smollm2")


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
  world = synthetic.build_world(c.stages[0].data.seed)
  facts = set(world.capital.values()) | set(world.lives_in.values()) | set(world.founder.values())
  assert all(ex.answers[0] in facts for ex in held)
  again = splits.held_out(c.evals.data, n, [st.data for st in c.stages])
  assert again == held


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
