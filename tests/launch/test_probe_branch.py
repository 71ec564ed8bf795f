"""launch/probe_branch.py on the tiny model: the rows it selects (answerable questions per dataset
with their twins), the lean it reports equal to eval/probing.abstain_branch_probability's (checked
against transformers in tests/eval/test_probing.py), out-of-fold probe scores for every row, and
one table row per model."""

import numpy as np
import pytest

import launch_script
from grounding_jax.data import real_contexts
from grounding_jax.eval import model_ref
from grounding_jax.eval import probing

probe_branch = launch_script.load("probe_branch", "probe_branch_cli")


def test_probe_branch_reports_the_lean_and_a_probe_per_dataset(tiny_smollm2_dir):
  real = real_contexts.load_real(names=("nq", "musique"))
  rows = real_contexts.with_twins(real["nq"][:5] + real["musique"][:5], seed=0, distractors="pool")
  chosen = probe_branch.select(rows, per_dataset=3)
  assert [ex.answerable for ex in chosen] == [True, False] * 6
  assert [ex.meta["dataset"] for ex in chosen[::2]] == ["nq"] * 3 + ["musique"] * 3
  results = probe_branch.probe(chosen, [str(tiny_smollm2_dir)], recipe="truthrl", folds=3, l2=10.0)
  p, scores = results[str(tiny_smollm2_dir)]
  loaded = model_ref.load(str(tiny_smollm2_dir))
  want = probing.abstain_branch_probability(loaded.model, loaded.tokenizer, chosen, recipe="truthrl")
  np.testing.assert_allclose(p, want, rtol=1e-5, atol=1e-7)
  assert scores.shape == (12,) and np.isfinite(scores).all()
  text = probe_branch.table(chosen, results)
  assert text.splitlines()[0] == "| model | nq | musique | all |" and len(text.splitlines()) == 3
  with pytest.raises(ValueError, match="twins"):
    probe_branch.select([ex for ex in rows if ex.answerable], per_dataset=2)
