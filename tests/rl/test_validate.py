"""Validation while training: eval/<metric> rows on the held-out split, the best checkpoint kept beside
the newest (checkpoint.best_metric), and a stopped-and-resumed run keeps the best of the steps
before the stop."""

import importlib.util
import json
import pathlib
import sys

import pytest

from grounding_jax import checkpoints
from grounding_jax.data import jsonl
from grounding_jax.data import splits
from grounding_jax.data.schema import Example
from grounding_jax.eval import from_config
from grounding_jax.eval import settings as eval_settings
from grounding_jax.eval import model_ref
from grounding_jax.rl import validate

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import toy_task  # noqa: E402  pylint: disable=g-import-not-at-top

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _config(tmp_path, mode="min"):
  c = toy_task.toy_config(tmp_path, steps=5, lr=3e-2)
  c.checkpoint.every_steps = 2
  path = tmp_path / "heldout.jsonl"
  jsonl.write_examples(path, [Example(question=ex.question, answers=("w3",), id=f"held{i}")
                              for i, ex in enumerate(toy_task.make_examples(16, seed=9))])
  c.evals.update(dict(every_steps=1, num_examples=16, batch_size=16))
  c.evals.data.update(dict(kind="jsonl", path=str(path)))
  # Sampled with the same key at every step, so the metric moves only as the policy does (it rises:
  # the toy reward is what the run trains on).
  c.evals.decoding.update(dict(max_new_tokens=8, temperature=1.0))
  c.checkpoint.update(dict(best_metric="eval/reward", best_mode=mode))
  return c


def test_best_metric_keeps_the_best_step_and_resuming_keeps_it(tiny_checkpoint, tmp_path):
  # Mode "min" on a metric that rises keeps step 1: after the resume at step 3 that holds only if the
  # resumed run compares against the best before the stop (a fresh tracker would keep step 4).
  c = _config(tmp_path, mode="min")
  ckpt = tiny_checkpoint("llama")
  toy_task.make_trainer(ckpt, tmp_path, c).train(max_steps=3)  # stop after step 3, then resume
  toy_task.make_trainer(ckpt, tmp_path, c).train()
  rows = [json.loads(line) for line in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
  values = [r["eval/reward"] for r in rows]
  assert all("eval/em" in r and "eval/completion_length/mean" in r for r in rows)
  assert len(set(values)) > 2, values  # the metric moves, so the choice of step is a real one
  best = min(values)
  best_step = values.index(best) + 1  # strict improvement: the first step reaching it
  assert best_step < 3 < len(values) and values[-1] > best
  kept = checkpoints.Checkpointer(tmp_path / validate.BEST_DIR)
  assert kept.all_steps() == [best_step]
  assert kept.read_meta()["best"] == {"metric": "eval/reward", "value": best, "step": best_step}
  newest = checkpoints.Checkpointer(tmp_path / "checkpoints").read_meta()
  assert newest["step"] == 5 and newest["best"]["step"] == best_step
  # workdir@best names it (the run record says which base model its checkpoints belong to).
  c.model.path = str(ckpt)
  model_ref.write_run_config(tmp_path, c)
  assert model_ref.resolve(f"{tmp_path}@best").step == best_step


def test_bad_validation_settings_fail_before_training(tmp_path):
  c = toy_task.toy_config(tmp_path)
  c.checkpoint.best_metric = "eval/f1"
  with pytest.raises(ValueError, match=r"best_metric='eval/f1' needs validation: set evals.every_steps"):
    validate.check_config(c)
  c.evals.every_steps, c.checkpoint.best_metric = 1, "f1"
  with pytest.raises(ValueError, match=r"must name a validation metric, e.g. 'eval/f1'"):
    validate.check_config(c)
  c.checkpoint.best_metric, c.evals.data.kind = "", "jsonl"
  with pytest.raises(ValueError, match=r"evals.data.kind='jsonl' needs evals.data.path"):
    validate.check_config(c)
  c.evals.data.kind, c.evals.shared_prefix_min_tokens = "synthetic", -1
  with pytest.raises(ValueError, match=r"evals.shared_prefix_min_tokens=-1 must be an int >= 0"):
    from_config.check_config(c)  # evaluation's check (launch/evaluate.py); training runs it too
  with pytest.raises(ValueError, match=r"evals.shared_prefix_min_tokens=-1 must be an int >= 0"):
    validate.check_config(c)
  # The selective-prediction metrics name their direction: a mode against it is a mistake.
  c.evals.shared_prefix_min_tokens, c.checkpoint.best_metric = 0, "eval/balanced_accuracy"
  c.checkpoint.best_mode = "min"
  with pytest.raises(ValueError, match=r"'eval/balanced_accuracy' is better when higher, but "
                     r"checkpoint.best_mode='min'; set checkpoint.best_mode='max'"):
    validate.check_config(c)
  c.checkpoint.best_metric, c.checkpoint.best_mode = "eval/aurc", "max"
  with pytest.raises(ValueError, match=r"better when lower, .* set checkpoint.best_mode='min'"):
    validate.check_config(c)
  c.checkpoint.best_mode = "min"
  validate.check_config(c)


def test_the_validator_is_built_on_first_use_not_with_the_trainer(tiny_checkpoint, tmp_path,
                                                                  monkeypatch):
  # Building a Trainer (e.g. for its startup report) loads no held-out split and no BERT encoder;
  # `train` builds the validator before its first step, and the encoder loads at the first run.
  c = _config(tmp_path)
  c.evals.bertscore = "/a/bert/folder"
  loaded, scorers = [], []
  held_out = splits.held_out
  monkeypatch.setattr(splits, "held_out", lambda *a, **k: loaded.append(a[0]) or held_out(*a, **k))
  monkeypatch.setattr(eval_settings, "BertScorer", lambda path: scorers.append(path) or "scorer")
  tr = toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c)
  assert tr._validator is None and not loaded and not scorers
  validator = tr.validator
  assert len(loaded) == 1 and len(validator.examples) == 16 and not scorers
  assert tr.validator is validator  # built once
  assert validator.options()["bertscorer"] == "scorer" and validator.options()
  assert scorers == ["/a/bert/folder"]


def test_no_validator_without_validation(tiny_checkpoint, tmp_path):
  c = toy_task.toy_config(tmp_path)
  assert c.evals.every_steps == 0
  assert toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c).validator is None


def test_the_best_checkpoint_can_be_chosen_on_balanced_accuracy(tiny_checkpoint, tmp_path):
  # Held-out questions half answerable, half not: every validation row has the selective-prediction
  # metrics, and eval/balanced_accuracy picks the kept step like any other metric.
  c = _config(tmp_path, mode="max")
  c.stages[0].num_steps = 3
  path = tmp_path / "heldout_labelled.jsonl"
  jsonl.write_examples(path, [Example(question=ex.question, answers=("w3",), id=f"held{i}",
                                      answerable=i % 2 == 0)
                              for i, ex in enumerate(toy_task.make_examples(16, seed=9))])
  c.evals.data.path = str(path)
  c.checkpoint.best_metric = "eval/balanced_accuracy"
  validate.check_config(c)
  toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c).train()
  rows = [json.loads(line) for line in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
  for r in rows:
    for k in ("coverage", "selective_accuracy", "aurc"):
      assert f"eval/{k}" in r
    both = (r["eval/accuracy_answerable"] + r["eval/abstention_unanswerable"]) / 2
    assert r["eval/balanced_accuracy"] == pytest.approx(both)
  values = [r["eval/balanced_accuracy"] for r in rows]
  best_step = values.index(max(values)) + 1  # strict improvement: the first step reaching it
  kept = checkpoints.Checkpointer(tmp_path / validate.BEST_DIR)
  assert kept.all_steps() == [best_step]
  assert kept.read_meta()["best"] == {"metric": "eval/balanced_accuracy", "value": max(values),
                                      "step": best_step}


def test_validation_on_the_dev_split_asks_none_of_the_reported_questions():
  # configs/truthrl.py:runlocal (a synthetic world) validating on its dev split: the questions are
  # data/splits.dev_split's, none of them in the held-out split launch/evaluate.py reports.
  spec = importlib.util.spec_from_file_location("truthrl_config", ROOT / "configs" / "truthrl.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  c = module.get_config("runlocal")
  c.evals.update(dict(every_steps=2, split="dev", dev_examples=6))
  c.checkpoint.best_metric = "eval/balanced_accuracy"
  specs = [st.data for st in c.stages]
  v = validate.build(c, None, None, lambda: [])
  assert [ex.question for ex in v.examples] == [
      ex.question for ex in splits.dev_split(c.evals.data, 6, specs, num_test=c.evals.num_examples)]
  reported = splits.held_out(c.evals.data, c.evals.num_examples, specs)
  assert not {ex.question for ex in v.examples} & {ex.question for ex in reported}
  c.evals.data.update(dict(kind="jsonl", path="heldout.jsonl"))
  with pytest.raises(ValueError, match="evals.split='dev' draws from the synthetic world"):
    validate.check_config(c)
  c.evals.split = "train"
  with pytest.raises(ValueError, match="evals.split='train'"):
    validate.check_config(c)
