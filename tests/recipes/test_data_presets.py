"""Each recipe's data mixes (Recipe.data_presets), collected by recipes.data_presets()."""

from grounding_jax import recipes
from grounding_jax.data import readers
from grounding_jax.data.mixture import Draw

PRESETS = recipes.data_presets()


def test_presets_are_the_papers_mixes():
  # (preset, split, source, role, count, answerable) as GRACE (arXiv:2601.04525 §4.1), Ground-GRPO
  # (arXiv:2506.15522 §3) and ARENA (arXiv:2505.13258 §4.1, Table 2) give them.
  want = {
      "grace_hotpotqa": [("train", "hotpotqa", "train", 2000, None), ("test", "hotpotqa", "eval", 500, None)],
      "grace_qasper": [("train", "qasper", "train", None, None), ("test", "qasper", "eval", None, None)],
      "arena": [("train", "hotpotqa", "train", 10000, None), ("train", "2wikimultihopqa", "train", 10000, None),
                ("train", "musique", "train", 5000, None)]
               + [(f"test_{d}", d, "eval", 500, None) for d in ("hotpotqa", "2wikimultihopqa", "musique")],
      "trust": [("stage1", d, "train", 100, 100) for d in ("asqa", "qampari", "eli5")]
               + [("stage2", d, "train", 1000, 500) for d in ("asqa", "qampari", "eli5")],
  }
  assert set(PRESETS) == set(want)
  for name, rows in want.items():
    preset = PRESETS[name]
    got = [Draw.parse(s) for s in preset.draws]
    assert [(d.split, d.source, d.role, d.count, d.answerable) for d in got] == rows, name
    assert all(s in readers.available_readers() for s in {d.source for d in got}), name
  assert [PRESETS[n].seed for n in ("grace_hotpotqa", "arena", "trust")] == [123456, 123456, 42]
  assert PRESETS["arena"].holdout == "heldout=train:500"
  assert PRESETS["grace_hotpotqa"].grace_construct and not PRESETS["arena"].grace_construct
