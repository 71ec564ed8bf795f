"""Every recipe's `:runlocal` config, run for 3 fixed-seed GRPO steps on a tiny model, logs the same
metrics as the recording in golden/runlocal_metrics.json; its prompts and its reward on a bank of
hand-written completions equal golden/recipe_outputs.json; a 3-step toy run with every update option
on (KL, DAPO refill, μ = 2, two mini-batches) logs the metrics of golden/toy_metrics.json.

The recording was made before the recipe restructure (issue 13) moved prompts, parsers, rewards and
the trainer's parts into new homes, so this test is the proof that the move changed structure, not
results. Timings are left out (they vary); every other logged metric is compared.

Re-record (only when a change is meant to alter results; say why in the commit):
  GJ_RECORD_GOLDEN=1 python -m pytest tests/configs/test_runlocal_golden.py
"""

import importlib.util
import json
import os
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden" / "runlocal_metrics.json"
RECIPE_CONFIGS = ("grace", "trust", "arena", "lear", "truthrl", "synthetic_smollm2")
RECORD = bool(os.environ.get("GJ_RECORD_GOLDEN"))
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "rl")]  # toy_task, recipes.fakes
_VOLATILE = ("time/", "throughput/", "perf/")  # perf/: MFU and FLOP/s are timings
# Metrics added after the recording (issue 18): the non-finite guard's counts, which these finite runs
# must report as 0, and the health monitors (rl/health.py), which must be finite; both are checked
# here and left out of the comparison.
_ADDED_AFTER_RECORDING = ("nonfinite/", "reward/nonfinite_frac")
_MONITORS = ("health/",)
# Added after the recording (issue 15): the reward by the prompts' answerability
# (rl/collect.answerability_metrics); checked against the pooled reward, not compared.
_ANSWERABILITY = ("answerable_frac", "answerable/", "unanswerable/")


def _load(name):
  path = ROOT / "configs" / f"{name}.py"
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def shrink(c, model_dir, workdir):
  """The recipe's :runlocal settings at test size: 2 prompts × G=2, 12 new tokens, 3 steps in all
  (trust: 2 steps of stage 1, then 1 of stage 2, so the stage hand-over runs too)."""
  c.model.path = str(model_dir)
  c.workdir = str(workdir)
  c.seed = 3
  c.rollout.prompts_per_step, c.rollout.group_size = 2, 2
  c.rollout.max_new_tokens = 12
  if c.dapo.overlong_shaping:
    c.dapo.overlong_buffer = 4
  c.update_loop.num_minibatches, c.update_loop.micro_batch_size = 1, 2
  if c.loss.aggregation == "micro_token_mean":  # ARENA's groups of 4 rows, halved with the batch
    c.loss.micro_batch_rows = 2
  c.reward.num_workers = 0
  c.logging.console = False
  c.checkpoint.every_steps = 100
  c.evals.every_steps, c.checkpoint.best_metric = 0, ""  # training only (validation: tests/launch)
  steps = [2, 1] if len(c.stages) > 1 else [3]
  for st, n in zip(c.stages, steps):
    st.num_steps = n
    st.data.num_examples = 8
  return c


def run_recipe(name, model_dir, workdir):
  """Logged metrics (timings removed) of the 3-step run of configs/<name>.py:runlocal."""
  from grounding_jax.rl import trainer  # pylint: disable=g-import-not-at-top
  c = shrink(_load(name).get_config("runlocal"), model_dir, workdir)
  if name == "trust":  # the citation reward's NLI judge: the tiny causal LM, asked yes/no
    for fns in [c.reward.functions] + [st.reward.get("functions") or [] for st in c.stages]:
      for fn in fns:
        fn.options.nli = str(model_dir)
  trainer.train(c)
  rows = [json.loads(line) for line in (workdir / "logs" / "metrics.jsonl").read_text().splitlines()]
  return [{k: v for k, v in r.items() if not k.startswith(_VOLATILE)} for r in rows]


@pytest.mark.parametrize("name", RECIPE_CONFIGS)
def test_runlocal_metrics_match_the_recording(name, tiny_smollm2_dir, tmp_path):
  _check_rows(run_recipe(name, tiny_smollm2_dir, tmp_path), GOLDEN, name)


def _record_or_load(path, key, value):
  if RECORD:
    golden = json.loads(path.read_text()) if path.exists() else {}
    golden[key] = value
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
  return json.loads(path.read_text())[key]


def _check_rows(got, path, key):
  for r in got:
    assert all(v == 0 for k, v in r.items() if k.startswith(_ADDED_AFTER_RECORDING)), r
    assert all(np.isfinite(v) for k, v in r.items() if k.startswith(_MONITORS)), r
    if "answerable_frac" in r:
      share = r["answerable_frac"]
      pooled = (share * r.get("answerable/reward/mean", 0.0)
                + (1 - share) * r.get("unanswerable/reward/mean", 0.0))
      np.testing.assert_allclose(pooled, r["reward/mean"], rtol=1e-6, atol=1e-9)
  skip = _ADDED_AFTER_RECORDING + _MONITORS + _ANSWERABILITY
  got = [{k: v for k, v in r.items() if not k.startswith(skip)} for r in got]
  want = _record_or_load(path, key, got)
  assert [r["step"] for r in got] == [r["step"] for r in want]
  for g, w in zip(got, want):
    assert sorted(g) == sorted(w), (sorted(set(g) ^ set(w)))
    for k in w:
      if w[k] is None:
        assert g[k] is None, (g["step"], k)
      else:
        # Float sums may differ in the last bits between CPUs; sampled tokens and rewards do not.
        np.testing.assert_allclose(g[k], w[k], rtol=2e-4, atol=1e-6, err_msg=f"step {g['step']} {k}")


def _completion_bank(ex):
  """Hand-written completions in every recipe's format, right and wrong, for one example."""
  gold = ex.answers[0] if ex.answers else "nothing"
  sentence = ex.passages[0].text if ex.passages else "no passage"
  return [
      f"<evidence>{sentence}</evidence><answer>{gold}</answer>",
      "<llm>I recall nothing relevant.</llm><answer>unknown</answer>",
      f"<think>The documents say it.</think><answer>{gold} [1].</answer>",
      "<think>None fits.</think><answer>I apologize, but I couldn't find an answer to your question "
      "in the search results.</answer>",
      f"<relevance>[1]</relevance><analysis>Passage 1 names it.</analysis><answer>{gold}</answer>",
      "<relevance>[1, 2]</relevance><analysis>hm</analysis><answer>wrong</answer>",
      f"<reason>It is stated.</reason><extract>{sentence}</extract>",
      f"<think>Known.</think> So the answer is \\boxed{{{gold}}}.",
      "<think>Unsure.</think> \\boxed{I don't know}",
      "\\boxed{a wrong guess}",
      "",
      "<answer>unclosed",
  ]


def _stage_rewards(c, st, policy_path):
  from grounding_jax.eval import from_config  # pylint: disable=g-import-not-at-top
  from grounding_jax.recipes import get_reward  # pylint: disable=g-import-not-at-top
  from recipes.fakes import SubstringNLI  # pylint: disable=g-import-not-at-top
  out = []
  for fn in (st.reward.get("functions") or c.reward.functions):
    options = from_config.reward_options(fn.options, policy_path)  # tokenizer="policy" (LEAR)
    if fn.name.startswith("trust"):
      options["nli"] = SubstringNLI()
    out.append((fn.name, float(fn.weight), get_reward(fn.name, **options)))
  return out


def recipe_outputs(name, tokenizer):
  """Rendered prompts of the first 3 examples of every stage, and every reward function's output on
  the completion bank of those examples (LEAR: the gold answer in all three answer passes)."""
  from grounding_jax import recipes  # pylint: disable=g-import-not-at-top
  from grounding_jax.rl import setup  # pylint: disable=g-import-not-at-top
  c = _load(name).get_config("runlocal")
  c.stages[0].data.num_examples = 8
  out = {}
  for st in c.stages:
    st.data.num_examples = 8
    examples = setup.load_stage_examples(st.data)[:3]
    rendered = [recipes.get_recipe(st.recipe).render_prompt(
        ex, tokenizer, enable_thinking=c.rollout.enable_thinking) for ex in examples]
    completions, rows = [], []
    for ex in examples:
      bank = _completion_bank(ex)
      completions += bank
      rows += [ex] * len(bank)
    golds = [f"<answer>{ex.answers[0] if ex.answers else ''}</answer>" for ex in rows]
    extras = dict(answers_rationale=golds, answers_evidence=golds, answers_full=golds,
                  lengths=[len(x) for x in completions], truncated=[False] * len(completions))
    scores = {fn_name: {k: np.round(v, 10).tolist() for k, v in fn(completions, rows, **extras).items()}
              for fn_name, _, fn in _stage_rewards(c, st, tokenizer.name_or_path)}
    out[st.name] = {"prompts": rendered, "scores": scores}
  return out


@pytest.mark.parametrize("name", RECIPE_CONFIGS)
def test_recipe_prompts_and_rewards_match_the_recording(name, smollm2_dir):
  from grounding_jax import models  # pylint: disable=g-import-not-at-top
  got = recipe_outputs(name, models.load_tokenizer(smollm2_dir))
  want = _record_or_load(GOLDEN.parent / "recipe_outputs.json", name, got)
  assert got.keys() == want.keys()
  for stage in want:
    assert got[stage]["prompts"] == want[stage]["prompts"]
    assert got[stage]["scores"].keys() == want[stage]["scores"].keys()
    for fn_name, comps in want[stage]["scores"].items():
      assert sorted(got[stage]["scores"][fn_name]) == sorted(comps)
      for k, v in comps.items():
        np.testing.assert_allclose(got[stage]["scores"][fn_name][k], v, rtol=1e-9, atol=1e-9,
                                   err_msg=f"{stage} {fn_name} {k}")


def test_toy_run_with_every_update_option_matches_the_recording(tiny_checkpoint, tmp_path):
  import toy_task  # pylint: disable=g-import-not-at-top
  c = toy_task.toy_config(tmp_path, steps=3, lr=1e-2)
  c.seed = 5
  c.dapo.dynamic_sampling = True
  c.dapo.max_sampling_rounds = 2
  c.dapo.overlong_shaping = True
  c.dapo.overlong_buffer = 3
  c.loss.clip_eps_high = 0.28
  c.loss.kl_coef = 0.05
  c.update_loop.num_iterations = 2
  c.update_loop.num_minibatches = 2
  c.update_loop.micro_batch_size = 4
  c.checkpoint.every_steps = 100
  toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c).train()
  rows = [json.loads(line) for line in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
  rows = [{k: v for k, v in r.items() if not k.startswith(_VOLATILE)} for r in rows]
  assert any(r["loss"] != 0 for r in rows)  # the update really ran
  _check_rows(rows, GOLDEN.parent / "toy_metrics.json", "toy")
