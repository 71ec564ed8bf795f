"""rl/setup.py: the config's model and sampler settings reach the policy and the samplers."""

import pytest

import toy_task
from grounding_jax.rl import setup


@pytest.mark.parametrize("attention", ["auto", "xla"])
def test_model_attention_reaches_the_loaded_policy(tiny_smollm2_dir, tmp_path, attention):
  c = toy_task.toy_config(tmp_path)
  c.model.path = str(tiny_smollm2_dir)
  c.model.attention = attention
  model, tokenizer = setup.load_policy(c, mesh=None)
  assert model.config.attention_implementation == attention
  assert tokenizer is not None


def test_build_tool_only_when_a_stage_samples_several_turns(tmp_path):
  from grounding_jax.tools import retriever
  c = toy_task.toy_config(tmp_path, steps=1)
  assert setup.build_tool(c) is None  # one turn: no corpus is built
  c.rollout.max_turns = 3
  c.search.retriever, c.search.corpus = "bm25", "synthetic"
  c.stages[0].data.update(dict(kind="synthetic", path="", num_examples=8, seed=3,
                               answerable_ratio=0.5, withheld_share=0.5, num_countries=24))
  tool = setup.build_tool(c)
  assert isinstance(tool, retriever.RetrieverTool)
  example = next(e for e in setup.load_stage_examples(c.stages[0].data) if e.answerable)
  gold = {example.passages[i - 1].id for i in example.gold_passage_ids}
  assert gold & set(tool([example.question])[0].doc_ids)  # ids the search metrics compare


def test_rollout_fuse_projections_reaches_the_rollout_and_evaluation_samplers(tmp_path):
  from grounding_jax import recipes
  from grounding_jax.eval.settings import EvalSettings
  from grounding_jax.rl.config import checks
  c = toy_task.toy_config(tmp_path, steps=1)
  recipe = recipes.get_recipe(c.stages[0].recipe)
  assert c.rollout.fuse_projections == "auto"  # on a GPU only: this CPU runs unfused
  assert not setup.sampling_settings(c, recipe).fuse_projections
  assert not EvalSettings.from_config(c).fuse_projections
  c.rollout.fuse_projections = "on"
  checks.check_config(c, need_model_path=False)
  assert setup.sampling_settings(c, recipe).fuse_projections
  assert EvalSettings.from_config(c).fuse_projections
  c.rollout.fuse_projections = "off"
  assert not setup.sampling_settings(c, recipe).fuse_projections


def test_fuse_projections_auto_is_on_for_a_gpu_only(monkeypatch):
  from grounding_jax.sampling import engine
  assert engine.fuse_projections_enabled("on") and not engine.fuse_projections_enabled("off")
  assert engine.fuse_projections_enabled(True) and not engine.fuse_projections_enabled(False)
  for backend, fused in (("gpu", True), ("tpu", False), ("cpu", False)):
    monkeypatch.setattr(engine.jax, "default_backend", lambda b=backend: b)
    assert engine.fuse_projections_enabled("auto") == fused
  with pytest.raises(ValueError, match="'auto', 'on' or 'off'"):
    engine.fuse_projections_enabled("yes")
