"""Per-example scores reproduce each recipe's table (so the bootstrap resamples the right statistic),
and the paired bootstrap equals an independent slow re-derivation and agrees with scipy's."""

import sys
import pathlib

import numpy as np
import pytest

from grounding_jax import recipes
from grounding_jax.data import synthetic
from grounding_jax.eval import bootstrap

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from recipes.fakes import ContainsJudge, SubstringNLI  # noqa: E402  pylint: disable=g-import-not-at-top


def _bank(ex, i):
  """Right, wrong and abstaining completions in every recipe's format, varied per example."""
  gold, sentence = ex.answers[0], ex.passages[0].text
  bank = [f"<evidence>{sentence}</evidence><answer>{gold}</answer>",
          "<llm>I recall nothing.</llm><answer>unknown</answer>",
          f"<think>It says so.</think><answer>{gold} [1].</answer>",
          "<think>None fits.</think><answer>I apologize, but I couldn't find an answer to your question "
          "in the search results.</answer>",
          f"<relevance>[1]</relevance><analysis>1 names it.</analysis><answer>{gold}</answer>",
          "<relevance>[1, 2]</relevance><analysis>hm</analysis><answer>wrong</answer>",
          f"<reason>Stated.</reason><extract>{sentence}</extract>",
          f"<think>Known.</think> So \\boxed{{{gold}}}.", "<think>Unsure.</think> \\boxed{I don't know}",
          "\\boxed{a wrong guess}", f"<think>x</think><answer>{gold}</answer>", ""]
  return bank[(7 * i) % len(bank)]


CASES = {  # recipe -> (answerable ratio, evaluate options)
    "grace": (0.5, lambda: {"judge": ContainsJudge()}),
    "trust_stage2": (0.5, lambda: {"nli": SubstringNLI()}),
    "arena": (1.0, lambda: {"judge": ContainsJudge()}),
    "lear": (1.0, lambda: {}),
    "truthrl": (0.5, lambda: {"judge": ContainsJudge()}),
    "naive": (0.5, lambda: {}),
    "search_grounded": (0.5, lambda: {}),
}


def _inputs(name, examples, rows=None):
  """LEAR's reader outputs (right for two of three questions), for the given rows of `examples`."""
  if name != "lear":
    return {}
  outputs = [f"<answer>{ex.answers[0]}</answer>" if i % 3 else "some other answer"
             for i, ex in enumerate(examples)]
  return {"reader_outputs": outputs if rows is None else [outputs[i] for i in rows]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_per_example_scores_reproduce_the_table_on_every_resample(name):
  ratio, options = CASES[name]
  recipe = recipes.get_recipe(name)
  examples = synthetic.generate_examples(36, seed=5, answerable_ratio=ratio)
  completions = [_bank(ex, i) for i, ex in enumerate(examples)]
  result = recipe.evaluate(completions, examples, **options(), **_inputs(name, examples))
  per, table = result["per_example"], recipe.table(result)
  assert all(v.shape == (len(examples),) for v in per.values())
  assert set(np.unique(per["abstained"])) <= {0.0, 1.0} and np.all((0 <= per["correct"]) &
                                                                   (per["correct"] <= 1))
  columns = [c for c in recipe.metric_columns if c in table]
  assert recipe.headline_metric in columns and len(columns) >= 3
  agg = recipe.aggregate(per)
  for c in columns:
    np.testing.assert_allclose(agg[c], table[c], rtol=1e-12, atol=1e-12, err_msg=c)
  if name.startswith("trust"):  # TRUST is a mean of three F1s, not a per-question mean
    assert 0 < table["TRUST"] < 100
  else:  # the headline is a mean: of its per-example column
    np.testing.assert_allclose(np.mean(per[recipe.headline_metric]), table[recipe.headline_metric],
                               rtol=1e-12, atol=1e-12)
  # A bootstrap resample (rows drawn with replacement): the aggregate of its per-example rows is the
  # evaluator's table of those rows.
  rows = np.random.default_rng(0).integers(0, len(examples), size=len(examples))
  sub_ex, sub_c = [examples[i] for i in rows], [completions[i] for i in rows]
  sub = recipe.table(recipe.evaluate(sub_c, sub_ex, **options(), **_inputs(name, examples, rows)))
  resampled = recipe.aggregate({k: v[rows] for k, v in per.items()})
  for c in columns:
    np.testing.assert_allclose(resampled[c], sub[c], rtol=1e-12, atol=1e-12, err_msg=c)


def _slow_interval(a, b, n_resamples, seed, confidence, k=1):
  """The paired bootstrap written out: the same index draw, a loop, a sort, and the percentile by
  linear interpolation between order statistics."""
  n_questions = len(a) // k
  draws = np.random.default_rng(seed).integers(0, n_questions, size=(n_resamples, n_questions))
  diffs = []
  for questions in draws:
    rows = [q * k + j for q in questions for j in range(k)]
    diffs.append(sum(b[r] for r in rows) / len(rows) - sum(a[r] for r in rows) / len(rows))
  diffs.sort()

  def percentile(p):
    pos = p / 100 * (len(diffs) - 1)
    lo = int(np.floor(pos))
    hi = min(lo + 1, len(diffs) - 1)
    return diffs[lo] + (pos - lo) * (diffs[hi] - diffs[lo])

  tail = 100 * (1 - confidence) / 2
  return percentile(tail), percentile(100 - tail)


def test_paired_bootstrap_equals_a_slow_loop_and_agrees_with_scipy():
  from scipy import stats  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(42)
  a = rng.normal(0.4, 0.3, 60)
  b = a + rng.normal(0.1, 0.2, 60)  # paired: b tracks a
  iv = bootstrap.paired_bootstrap(a, b, n_resamples=2000, seed=7)
  lo, hi = _slow_interval(list(a), list(b), 2000, 7, 0.95)
  assert iv.difference == pytest.approx(b.mean() - a.mean(), abs=1e-12)
  assert (iv.low, iv.high) == pytest.approx((lo, hi), abs=1e-12)
  # The statistic path (per-example dicts, e.g. Recipe.aggregate) gives the same interval.
  by_dict = bootstrap.paired_bootstrap({"x": a}, {"x": b}, lambda d: float(np.mean(d["x"])),
                                       n_resamples=2000, seed=7)
  assert (by_dict.low, by_dict.high) == pytest.approx((iv.low, iv.high), abs=1e-12)
  # Several samples per question: a question's rows are resampled together.
  iv2 = bootstrap.paired_bootstrap(a, b, n_resamples=500, seed=1, rows_per_question=3,
                                   confidence=0.9)
  assert (iv2.low, iv2.high) == pytest.approx(_slow_interval(list(a), list(b), 500, 1, 0.9, k=3),
                                              abs=1e-12)
  # scipy's paired percentile bootstrap draws its own indices: the same interval up to Monte Carlo.
  big = bootstrap.paired_bootstrap(a, b, n_resamples=20_000, seed=3)
  ref = stats.bootstrap((a, b), lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
                        paired=True, vectorized=True, method="percentile", n_resamples=20_000,
                        random_state=np.random.default_rng(11)).confidence_interval
  width = big.high - big.low
  assert abs(big.low - ref.low) < 0.03 * width and abs(big.high - ref.high) < 0.03 * width
  assert big.excludes_zero and big.low > 0


def test_lear_reader_prompt_holds_the_question_and_the_extract_alone():
  ex = synthetic.generate_examples(1, seed=2, answerable_ratio=1.0)[0]
  prompt = recipes.get_recipe("lear").reader_prompt(ex, "<reason>why</reason><extract>EVID ONLY</extract>")
  assert prompt.endswith(f"Question: {ex.question} Document: EVID ONLY Answer:")  # Table 7
  assert ex.passages[0].text not in prompt and "why" not in prompt
