"""Every recipe config builds (full and :runlocal) and names real rewards and recipes, the default
config runs end to end through launch/train.py, and the Ground-GRPO Instruct variant's forced prefix
is its chat template's empty think block. (Each :runlocal trains 3 steps on a tiny model
in test_runlocal_golden.py.)"""

import importlib.util
import inspect
import json
import pathlib
import subprocess
import sys

import pytest
import tokenizers
import transformers

from grounding_jax.data.schema import Example, Passage
from grounding_jax.eval import from_config
from grounding_jax.recipes import available_recipes, get_recipe, get_reward
from grounding_jax.recipes.search import reward as search_reward

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from recipes.fakes import SubstringNLI  # pylint: disable=g-import-not-at-top,wrong-import-position

# GRPO configs; configs/sft.py (launch/sft.py) is tested in tests/sft/test_sft_launch.py.
CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.py") if p.stem != "sft")


def _load(path):
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
@pytest.mark.parametrize("arg", [None, "runlocal"])
def test_config_builds_with_real_rewards_and_prompts(path, arg, tmp_path):
  c = _load(path).get_config(arg)
  rows = c.rollout.prompts_per_step * c.rollout.group_size
  assert rows % c.update_loop.num_minibatches == 0
  assert (rows // c.update_loop.num_minibatches) % c.update_loop.micro_batch_size == 0
  for st in c.stages:
    assert st.recipe in available_recipes()
    for fn in (st.reward.get("functions") or c.reward.functions):
      options = from_config.reward_options(fn.options, str(tmp_path))  # tokenizer="policy": a folder
      if fn.name.startswith("trust") and arg == "runlocal":
        # Offline, word recall is the NLI judge (judges.LexicalNLIJudge), for Trust-Score too.
        assert options["nli"] == c.evals.judges.nli == "lexical"
      elif fn.name.startswith("trust"):
        # An NLI folder must be named; without one the reward says which option to set.
        with pytest.raises(ValueError, match="nli"):
          get_reward(fn.name, **options)
        continue
      if fn.name.startswith("truthrl") and arg is None and path.stem == "truthrl":
        # The paper's served judge: its URL must be given, and the reward names the flag.
        with pytest.raises(ValueError, match=r"base_url=.*options\.judge\.base_url"):
          get_reward(fn.name, **options)
        continue
      assert callable(get_reward(fn.name, **options))
  if arg == "runlocal":
    assert c.model.path == "smollm2" and all(st.data.kind == "synthetic" for st in c.stages)


def test_trust_runlocal_reward_ranks_a_cited_right_answer_above_a_wrong_one():
  # The learning check's signal (docs/results.md): under the :runlocal NLI stand-in the gold
  # completion earns stage 2's maximum for its example (tags 1 + format 1 + answering 0.5 + EM 0.5 +
  # good citation 0.5; a refusal of an unanswerable item 3.0), and another question's gold answer in
  # the same format earns less. SmolLM2 asked yes/no gave both 2.5.
  from grounding_jax.data import splits  # pylint: disable=g-import-not-at-top
  c = _load(ROOT / "configs" / "trust.py").get_config("runlocal")
  st = c.stages[1]
  examples = splits.load(st.data)[:16]
  (_, _, reward), = from_config.reward_functions(c, str(ROOT),
                                                 from_config.stage_reward_section(c, st))
  recipe = get_recipe(st.recipe)
  gold = [recipe.gold_completion(e) for e in examples]
  out = reward(gold, examples)
  answerable = [bool(e.answerable) for e in examples]
  assert any(answerable) and not all(answerable)
  assert out["reward"].tolist() == [3.5 if a else 3.0 for a in answerable], out
  shifted = [gold[(i + 1) % len(gold)] for i in range(len(gold))]  # another question's answer
  wrong = reward(shifted, examples)["reward"]
  assert all(w < g for w, g, a in zip(wrong, out["reward"], answerable) if a)


def test_default_config_trains_through_the_launcher(tiny_smollm2_dir, tmp_path):
  # A tiny llama with SmolLM2's vocabulary and tokenizer stands in for SmolLM2 to keep this fast.
  model_dir = tiny_smollm2_dir
  workdir = tmp_path / "run"
  cmd = [sys.executable, str(ROOT / "launch" / "train.py"),
         f"--config={ROOT / 'configs' / 'synthetic_smollm2.py'}", f"--workdir={workdir}",
         f"--config.model.path={model_dir}", "--config.stages[0].num_steps=2",
         "--config.rollout.max_new_tokens=8", "--config.reward.num_workers=0"]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-3000:]
  rows = [json.loads(line) for line in (workdir / "logs" / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows] == [1, 2]
  assert all(-1.0 <= r["reward/mean"] <= 1.0 for r in rows)
  assert any((workdir / "checkpoints").iterdir())
  record = json.loads((workdir / "config.json").read_text())  # the run record says which base model
  assert record["model"]["path"] == str(model_dir) and record["model"]["param_dtype"] == "float32"


# A ChatML template with Qwen3's thinking switch (Qwen3's own lines): thinking off pre-fills an empty
# think block after the assistant header.
_QWEN3_LIKE_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}")


def test_trust_instruct_variant_reads_the_templates_empty_think_block():
  # Ground-GRPO Table 1 (Instruct): Qwen3 with thinking off; the reward's forced prefix is exactly
  # what the template leaves at the end of the prompt, so a plain <answer> completion is well formed.
  tok = transformers.PreTrainedTokenizerFast(
      tokenizer_object=tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")),
      unk_token="[UNK]", chat_template=_QWEN3_LIKE_TEMPLATE)
  module = _load(ROOT / "configs" / "trust.py")
  instruct, reasoning = module.get_config("instruct"), module.get_config()
  assert instruct.rollout.enable_thinking is False and reasoning.rollout.enable_thinking is None
  ex = Example(question="Where is it rainiest?", passages=(Passage("Mawsynram is the rainiest place."),),
               answers=("Mawsynram",), answerable=True)
  for st in instruct.stages:
    prompt = get_recipe(st.recipe).render_prompt(ex, tok, enable_thinking=instruct.rollout.enable_thinking)
    fns = st.reward.get("functions") or instruct.reward.functions
    assert all(prompt.endswith(fn.options.forced_prefix) for fn in fns)
  completion = "<answer>Mawsynram is the rainiest place [1].</answer>"
  for config, tag_count, fmt in ((instruct, 1.0, 1.0), (reasoning, 0.5, 0.0)):
    fn = config.stages[1].reward.functions[0]
    reward = get_reward(fn.name, **{**dict(fn.options), "nli": SubstringNLI()})
    out = reward([completion], [ex])
    assert (out["tag_count"][0], out["format"][0]) == (tag_count, fmt)
  with pytest.raises(ValueError, match="unknown preset"):
    module.get_config("instuct")


def test_truthrl_grounded_preset_contrasts_evidence_and_prices_both_corners(tmp_path):
  # :grounded is the demo's evidence-contrast training on TruthRL's recipe (its learning check): the
  # reward built from the config prices an abstention on an answerable item −0.5 and a right answer
  # on an item marked unanswerable (a gold-removed copy) −1; :runlocal's contexts become unrelated.
  module = _load(ROOT / "configs" / "truthrl.py")
  c = module.get_config("runlocal,grounded")
  assert [st.data.evidence_contrast for st in c.stages] == ["gold_removed"]
  assert c.stages[0].data.unanswerable == c.evals.data.unanswerable == "unrelated"
  fn = get_reward("truthrl", **from_config.reward_options(c.reward.functions[0].options, str(tmp_path)))
  answerable = Example(question="Where does Ada live?", answers=("Paris",), answerable=True)
  removed = Example(question="Where does Ada live?", answers=("Paris",), answerable=False)
  right, idk = "\\boxed{Paris}", "\\boxed{I don't know}"
  scores = fn([right, idk, right, idk], [answerable, answerable, removed, removed])["reward"]
  assert list(scores) == [1.0, -0.5, -1.0, 0.0]
  plain = module.get_config("runlocal")  # the paper's prices stay the default
  assert plain.stages[0].data.evidence_contrast == "" and plain.stages[0].data.unanswerable == "mentions"
  assert "correct_reward_unanswerable" not in plain.reward.functions[0].options


def test_truthrl_judge_presets():
  from grounding_jax import judges  # pylint: disable=g-import-not-at-top
  module = _load(ROOT / "configs" / "truthrl.py")
  paper = module.get_config(None).reward.functions[0].options.judge
  assert paper.kind == "openai" and paper.model == "meta-llama/Llama-3.3-70B-Instruct"
  with pytest.raises(ValueError, match=r"needs path=.*options\.judge\.path"):
    get_reward("truthrl", **dict(module.get_config("llm_judge").reward.functions[0].options))
  local = module.get_config("runlocal,llm_judge")
  fn = get_reward("truthrl", **dict(local.reward.functions[0].options))
  assert isinstance(fn.judge, judges.LazyJudge) and fn.judge.spec["mesh"] == {"fsdp": -1}
  assert local.reward.num_workers == 0 and fn.judge._judge is None  # nothing loaded yet
  assert get_reward("truthrl", **dict(module.get_config("runlocal").reward.functions[0].options)
                    ).exact_match_only
  with pytest.raises(ValueError, match="unknown preset"):
    module.get_config("runlocl")
  # A judge sharded over the trainer's devices cannot be scored in worker processes.
  local.reward.num_workers = 2
  with pytest.raises(ValueError, match=r"functions\[0\]\.options\.judge\.mesh=.*num_workers=0"):
    from_config.reward_functions(local)


def test_search_grounded_options_are_the_rewards_defaults():
  """configs/search.py:grounded spells the grounded reward's values out (so a run can set one from
  the command line); they must stay GroundedSearchReward's own defaults."""
  c = _load(ROOT / "configs" / "search.py").get_config("runlocal,grounded")
  params = inspect.signature(search_reward.GroundedSearchReward.__init__).parameters
  assert dict(c.reward.functions[0].options) == {k: p.default for k, p in params.items() if k != "self"}
  assert dict(_load(ROOT / "configs" / "search.py").get_config("runlocal").reward.functions[0].options) == {}


def test_search_grounded_contrast_check_prices_an_unjustified_abstention_at_half_the_rate():
  # The settings its learning check learned with (docs/recipes/search.md): −1 for abstaining where
  # the search found the answer, lr 1e-5; only for the grounded :runlocal contrast check.
  module = _load(ROOT / "configs" / "search.py")
  checked = module.get_config("runlocal,grounded,contrast")
  assert checked.reward.functions[0].options.unjustified_abstain_reward == -1.0
  assert checked.optimizer.learning_rate == 1e-5
  assert checked.stages[0].data.evidence_contrast == "gold_removed"
  for other in ("runlocal,grounded", "runlocal,contrast", "grounded,contrast"):
    c = module.get_config(other)
    assert c.optimizer.learning_rate == module.get_config(other.replace("contrast", "").strip(",")
                                                          ).optimizer.learning_rate, other
    assert c.reward.functions[0].options.get("unjustified_abstain_reward", 0.0) == 0.0, other
