"""Every hyper-parameter in the papers' notes is its recipe config's default, or a documented deviation.

Each note in ../shared/papers has one hyper-parameter table (copied in
fixtures/paper_hyperparameter_tables.md). Every row of those tables is classified below, by the
note's own row name:
  Paper(value, read)  the paper (or the authors' code / framework defaults the note cites) states
                      `value`; `read(cfg)` reads ours from the recipe's full config (not :runlocal).
                      If they differ, the recipe's page docs/recipes/<recipe>.md must list the row
                      name under Deviations; if they agree, it must not (a stale deviation fails).
  Open(value, read)   the paper leaves it open: the recipe's page must list it under Decisions, and
                      ours must be the note's recommendation `value` (None when it makes none).
  NotAConfig(reason)  not a setting of a config (hardware, software, model choice, baselines).
"""

import dataclasses
import importlib.util
import inspect
import math
import os
import pathlib
import re
from typing import Any, Callable

import pytest

from grounding_jax.eval import from_config
from grounding_jax.eval import probing
from grounding_jax.recipes import data_presets, get_recipe, get_reward

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "paper_hyperparameter_tables.md"
PAGES = ROOT / "docs" / "recipes"  # one page per recipe: <recipe>.md, its Deviations and Decisions
NOTES = {"grace": "000_grace.md", "trust": "001_lessons_grounded_rlvr.md", "arena": "002_arena.md",
         "lear": "003_lear.md", "truthrl": "004_truthrl.md"}


@dataclasses.dataclass(frozen=True)
class Paper:
  value: Any
  read: Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class Open:
  value: Any
  read: Callable[[Any], Any] | None = None


@dataclasses.dataclass(frozen=True)
class NotAConfig:
  reason: str


def _config(recipe):
  spec = importlib.util.spec_from_file_location(f"{recipe}_config", ROOT / "configs" / f"{recipe}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  c = module.get_config()
  c.module_doc = module.__doc__  # for settings that live in the config's data command
  return c


def _lear_reader():
  """configs/lear.py:reader — LEAR's downstream reader, an SFT config of its own."""
  spec = importlib.util.spec_from_file_location("lear_reader_config", ROOT / "configs" / "lear.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config("reader")


def _reward(c, stage=0):
  """The stage's first reward function as the trainer builds it (judges / NLI left unbuilt; a served
  judge's base_url, which the user gives, filled in)."""
  fns = c.stages[stage].reward.get("functions") or c.reward.functions
  options = from_config.reward_options(fns[0].options, str(ROOT))
  judge = options.get("judge")
  if hasattr(judge, "get") and judge.get("kind") == "openai":
    options["judge"] = {**dict(judge), "base_url": judge.get("base_url") or "http://judge"}
  return get_reward(fns[0].name, **options)


def _rows(c):
  return c.rollout.prompts_per_step * c.rollout.group_size


def _warmup(c):
  o = c.optimizer
  return (o.schedule, o.schedule_unit, o.warmup_steps, o.warmup_ratio, o.min_lr_ratio)


ROWS = {
    "grace": {  # note 000 §5.2 (Table 2 and the authors' train.sh)
        "clip_low": Paper(0.2, lambda c: c.loss.clip_eps_low),
        "clip_high": Paper(0.28, lambda c: c.loss.clip_eps_high),
        "clip_ratio_c": Paper(10.0, lambda c: c.loss.dual_clip),
        "learning_rate": Paper(2e-6, lambda c: c.optimizer.learning_rate),
        "training_steps": Paper(400, lambda c: c.stages[0].num_steps),
        # 50 training steps of linear warm-up, then cosine to 0, stepped once per training step.
        "warmup_steps": Paper(("cosine", "step", 50, 0.0, 0.0), _warmup),
        "weight_decay": Paper(0.1, lambda c: c.optimizer.weight_decay),
        "grad_clip": Paper(1.0, lambda c: c.optimizer.max_grad_norm),
        "max_response_length": Paper((3072, 3072), lambda c: (
            c.rollout.max_new_tokens, get_recipe("grace").eval_decoding.max_new_tokens)),
        "overlong_buffer_length": Paper((True, 1024), lambda c: (c.dapo.overlong_shaping,
                                                                 c.dapo.overlong_buffer)),
        "overlong_penalty_factor": Paper(1.0, lambda c: c.dapo.overlong_factor),
        "train_prompt_batchsize": Paper(32, lambda c: c.rollout.prompts_per_step),
        "group_size": Paper(8, lambda c: c.rollout.group_size),
        "train_prompt_mini_batchsize": Paper((4, 1), lambda c: (c.update_loop.num_minibatches,
                                                                c.update_loop.num_iterations)),
        "temperature": Paper((1.0, 0.6), lambda c: (c.rollout.temperature,
                                                    get_recipe("grace").eval_decoding.temperature)),
        "top_p": Paper((1.0, 0, 0.9), lambda c: (c.rollout.top_p, c.rollout.top_k,
                                                 get_recipe("grace").eval_decoding.top_p)),
    },
    "trust": {  # note 001 §5 (the paper, and TRL <= 0.18 defaults where it is silent)
        "Algorithm / framework": NotAConfig("GRPO is the trainer; its settings are the rows below"),
        "Group size (generations per prompt)": Paper(8, lambda c: c.rollout.group_size),
        # 4 epochs of 300 and 3,000 prompts at 48 prompts a step: 25 and 250 steps.
        "Epochs": Paper((25, 250), lambda c: tuple(st.num_steps for st in c.stages)),
        "Global batch size": Paper(384, _rows),
        "Learning rate": Paper(1e-5, lambda c: c.optimizer.learning_rate),
        "LR schedule / warm-up": Paper(("cosine", "step", 0, 0.1, 0.0), _warmup),
        "KL coefficient β": Paper((0.04, "k3"), lambda c: (c.loss.kl_coef, c.loss.kl_estimator)),
        "Clip ε": Paper((0.2, 0.2), lambda c: (c.loss.clip_eps_low, c.loss.clip_eps_high)),
        "num_iterations (μ)": Paper(1, lambda c: c.update_loop.num_iterations),
        "Advantage": Paper(("group", 1, 1e-4), lambda c: (c.advantage.scale, c.advantage.std_ddof,
                                                          c.advantage.eps)),
        "Loss aggregation": Paper("micro_token_mean", lambda c: c.loss.aggregation),
        # TRL 0.9 (<= 0.17) or 1.0 (0.18): either is the authors'.
        "Sampling temperature (rollouts)": Paper(True, lambda c: c.rollout.temperature in (0.9, 1.0)),
        "Max prompt / completion length": Open(None),
        "Full fine-tune vs LoRA, precision, optimizer": Open(
            ("bfloat16", 0.9, 0.999, 1e-8, 1.0), lambda c: (
                c.model.compute_dtype, c.optimizer.b1, c.optimizer.b2, c.optimizer.eps,
                c.optimizer.max_grad_norm)),
        "Hardware, GPU count, wall-clock": NotAConfig("hardware"),
        "Reward weights": Paper([1.0, 1.0], lambda c: [
            (st.reward.get("functions") or c.reward.functions)[0].weight for st in c.stages]),
    },
    "arena": {  # note 002 §5 (the paper and the authors' TRL 0.16 code)
        "Algorithm": Paper(("group", "k2"), lambda c: (c.advantage.scale, c.loss.kl_estimator)),
        "Base models": NotAConfig("the model is config.model.path, given on the command line"),
        "Group size G (`num_generations`)": Paper(7, lambda c: c.rollout.group_size),
        "Prompts per optimizer step": Paper((256, 1, 1), lambda c: (
            c.rollout.prompts_per_step, c.update_loop.num_minibatches, c.update_loop.num_iterations)),
        "Completions per optimizer step": Paper(1792, _rows),
        # Each device's 4 completions are normalised on their own (TRL's per-device loss).
        "`per_device_train_batch_size`": Paper(("micro_token_mean", 4), lambda c: (
            c.loss.aggregation, c.loss.micro_batch_rows)),
        "`gradient_accumulation_steps`": Paper(64, lambda c: _rows(c) // (7 * 4)),
        "Learning rate": Paper(3e-6, lambda c: c.optimizer.learning_rate),
        "LR schedule": Paper(("cosine", "step", 0, 0.1, 0.0), _warmup),
        "Optimizer": Paper((0.9, 0.999, 1e-8, 0.0), lambda c: (
            c.optimizer.b1, c.optimizer.b2, c.optimizer.eps, c.optimizer.weight_decay)),
        "Grad clipping": Paper(1.0, lambda c: c.optimizer.max_grad_norm),
        "KL coefficient β": Paper(0.04, lambda c: c.loss.kl_coef),
        "KL estimator": Paper("k2", lambda c: c.loss.kl_estimator),
        "Iterations per batch μ": Paper(1, lambda c: c.update_loop.num_iterations),
        "Clip ε": Paper((0.2, 0.2), lambda c: (c.loss.clip_eps_low, c.loss.clip_eps_high)),
        "Epochs": Paper(1, lambda c: 24_500 // (c.stages[0].num_steps * c.rollout.prompts_per_step)),
        "Optimizer steps": Paper(95, lambda c: c.stages[0].num_steps),
        # Sampling at 0.9; log-probs of the raw logits, as the authors' TRL computes them.
        "Rollout temperature": Paper((0.9, 1.0), lambda c: (c.rollout.temperature,
                                                            c.loss.logprob_temperature)),
        "Rollout top-p / top-k": Paper((1.0, 0), lambda c: (c.rollout.top_p, c.rollout.top_k)),
        "Max completion length (train)": Paper(256, lambda c: c.rollout.max_new_tokens),
        "Max prompt length": Paper(0, lambda c: c.rollout.max_prompt_tokens),  # 0 = no truncation
        "Reward weights": Paper((1.0, (1.0, 1.0, 1.0, 1.0), 10.0), lambda c: (
            c.reward.functions[0].weight, tuple(_reward(c).weights), _reward(c).bonus)),
        "Advantage eps": Paper(("group", 1, 1e-4), lambda c: (c.advantage.scale, c.advantage.std_ddof,
                                                              c.advantage.eps)),
        "Loss aggregation": Paper("micro_token_mean", lambda c: c.loss.aggregation),
        "Precision": Paper(("bfloat16", True), lambda c: (c.model.compute_dtype, c.model.remat)),
        "Distributed": NotAConfig("the mesh (config.mesh) replaces DeepSpeed ZeRO-2; same numerics"),
        "Rollout weight sync": NotAConfig("the sampler reads the trained parameters: every step samples "
                                          "the current policy, as the authors' per-step sync"),
        "Seed": Paper((42, 123456), lambda c: (c.seed, data_presets()["arena"].seed)),
        "In-training eval": Paper(25, lambda c: c.get("evals", {}).get("every_steps")),
        "Software": NotAConfig("software versions"),
        "Llama run": NotAConfig("the model is config.model.path"),
    },
    "lear": {  # note 003 §12
        "Policy init": NotAConfig("the model is config.model.path"),
        "Tuning mode": Paper("full-parameter", lambda c: "LoRA" if c.model.lora.rank else
                             "full-parameter"),
        # One epoch of NQ train (79,168 questions) at 64 questions a step.
        "Training data": Paper(79_168 // 64, lambda c: c.stages[0].num_steps),
        "Learning rate": Paper(1e-6, lambda c: c.optimizer.learning_rate),
        "Optimizer": Open((0.9, 0.999, 0.0), lambda c: (c.optimizer.b1, c.optimizer.b2,
                                                        c.optimizer.weight_decay)),
        "Model selection": Paper("best on dev", lambda c: "best on dev" if c.checkpoint.get(
            "best_metric") and c.get("evals", {}).get("every_steps") else "last"),
        "Group size G": Open(8, lambda c: c.rollout.group_size),
        "Batch size (questions/step)": Open(None),
        "Rollout temperature / top-p": Open((1.0, 1.0), lambda c: (c.rollout.temperature,
                                                                   c.rollout.top_p)),
        "Max new tokens (r+e rollout)": Open(768, lambda c: c.rollout.max_new_tokens),
        "Max new tokens (answer passes)": Open(64, lambda c: c.rollout.options.answer_max_new_tokens),
        "Max prompt length": Open(True, lambda c: c.rollout.max_prompt_tokens >= 1536),
        "PPO clip ε": Paper((0.2, 0.2), lambda c: (c.loss.clip_eps_low, c.loss.clip_eps_high)),
        "KL β": Paper(1e-2, lambda c: c.loss.kl_coef),
        # Eq. 11: (R − mean) / max(population std, 0.1), no extra epsilon.
        "ε_std (advantage std floor)": Paper((0, 0.1, 0.0), lambda c: (
            c.advantage.std_ddof, c.advantage.std_floor, c.advantage.eps)),
        "τ (rationale length temp)": Open(None),
        "γ (evidence length skew)": Open(None),
        "ω (evidence compression threshold)": Paper(0.9, lambda c: _reward(c).omega),
        "α^a, α^l, α^f": Paper((0.8, 0.1, 0.1), lambda c: tuple(_reward(c).weights)),
        "Answer-reward combination": Paper(("rationale", "evidence", "full"),
                                           lambda c: _reward(c).answer_passes),
        "Top-k passages": Paper(True, lambda c: "n_ctx=5" in c.module_doc),  # the data command
        "Reader": Paper("LoRA rank 8", lambda c: f"LoRA rank {_lear_reader().model.lora.rank}"),
        "Pilot SFT": NotAConfig("the pilot study (§2.2), not LEAR's training"),
        "Training hardware": NotAConfig("hardware"),
        "Training framework": NotAConfig("not reported; this codebase"),
    },
    "truthrl": {  # note 004 §4.2
        "RL algorithm": Paper(("ternary", 0.0, None), lambda c: (
            _reward(c).scheme, _reward(c).abstain_reward, _reward(c).reasoning)),
        "RL framework": NotAConfig("VeRL; this codebase"),
        "SFT/DPO framework": NotAConfig("baselines' framework"),
        "Hardware": NotAConfig("hardware"),
        "Learning rate (RL)": Paper((1e-6, "constant", 0, 0.0), lambda c: (
            c.optimizer.learning_rate, c.optimizer.schedule, c.optimizer.warmup_steps,
            c.optimizer.warmup_ratio)),
        "Batch size (RL)": Paper((64, 1), lambda c: (c.rollout.prompts_per_step,
                                                     c.update_loop.num_minibatches)),
        "KL coefficient β": Paper((0.001, "k3", 10.0), lambda c: (c.loss.kl_coef, c.loss.kl_estimator,
                                                                  c.loss.kl_clamp)),
        "Clip ratio ε": Paper((0.2, 0.2), lambda c: (c.loss.clip_eps_low, c.loss.clip_eps_high)),
        # data.max_prompt_length=16384 with filter_overlong_prompts=True: longer prompts are dropped.
        "Max context length": Paper((16384, "drop"), lambda c: (c.rollout.max_prompt_tokens,
                                                                c.rollout.overlong_prompts)),
        "Max generated tokens (train)": Paper(2048, lambda c: c.rollout.max_new_tokens),
        '"The maximum token length for all models is fixed at 16k."': Paper(
            16384, lambda c: c.rollout.max_prompt_tokens),
        "Rollout engine": NotAConfig("our sampler replaces vLLM"),
        "Rollout sampling": Paper((1.0, 1.0), lambda c: (c.rollout.temperature, c.rollout.top_p)),
        "**Group size G**": Paper(8, lambda c: c.rollout.group_size),  # the authors' code
        "Entropy bonus": Paper(0.0, lambda c: c.loss.entropy_coef),
        "Epochs / steps": Paper(200, lambda c: c.stages[0].num_steps),  # v2's learning curves
        "Optimizer": Paper((0.01, 1.0), lambda c: (c.optimizer.weight_decay,
                                                   c.optimizer.max_grad_norm)),  # VeRL defaults
        "λ (additive reasoning reward)": Paper(0.5, lambda c: _reward(c).reasoning_weight),
        "Evaluation decoding": Paper((0.0, 2048), lambda c: (
            get_recipe("truthrl").eval_decoding.temperature,
            get_recipe("truthrl").eval_decoding.max_new_tokens)),
        "Judge decoding": Paper("llm", lambda c: "llm" if _reward(c).judge else "exact_match"),
        "Baseline SFT, RFT, R-Tuning": NotAConfig("baselines"),
        "Baseline DPO and iterative DPO": NotAConfig("baselines"),
        "Hyperparameter search space": NotAConfig("a search space (get_sweep sweeps the abstention "
                                                  "reward and β)"),
        "RFT trace sampling": NotAConfig("a baseline's data"),
        "OOK probing": Paper((256, 0.6, 0.9), lambda c: tuple(
            inspect.signature(probing.probe_knowledge).parameters[k].default
            for k in ("num_samples", "temperature", "top_p"))),
    },
}


def _same(ours, paper) -> bool:
  """Equal, floats to 1e-9 relative, element by element in tuples and lists."""
  if isinstance(paper, (tuple, list)):
    return (isinstance(ours, (tuple, list)) and len(ours) == len(paper)
            and all(_same(o, p) for o, p in zip(ours, paper)))
  if isinstance(paper, float) and isinstance(ours, (int, float)) and not isinstance(ours, bool):
    return math.isclose(ours, paper, rel_tol=1e-9)
  return type(ours) is type(paper) and ours == paper or (
      isinstance(paper, int) and not isinstance(paper, bool) and isinstance(ours, int)
      and not isinstance(ours, bool) and ours == paper)


def _tables(text):
  """{note file: [first-column cells]} of the markdown hyper-parameter tables under `## <note>`."""
  out, note = {}, None
  for line in text.splitlines():
    if line.startswith("## "):
      note = line[3:].strip()
      out[note] = []
    elif note and line.startswith("|") and not line.startswith("|---"):
      out[note].append(line.split("|")[1].strip())
  return {k: v[1:] for k, v in out.items()}  # drop each header row


def _doc_rows(section):
  """{(recipe, setting): cells} of the tables under `## <section>` in the recipes' pages."""
  rows = {}
  for recipe in NOTES:
    text = (PAGES / f"{recipe}.md").read_text()
    if f"## {section}\n" not in text:
      continue
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    table = [line for line in body.splitlines() if line.startswith("|")]
    for line in table[2:]:  # after the header row and its |---| rule
      cells = [x.strip() for x in line.strip().strip("|").split("|")]
      assert (recipe, cells[0]) not in rows, f"{recipe}.md {section}: {cells[0]!r} listed twice"
      assert all(cells), f"{recipe}.md {section}: row {cells[0]!r} has an empty cell"
      rows[(recipe, cells[0])] = cells
  return rows


def _notes_dir():
  for base in [os.environ.get("GJ_PAPERS_DIR", "")] + [str(p / "shared" / "papers")
                                                       for p in ROOT.parents]:
    if base and pathlib.Path(base, NOTES["grace"]).is_file():
      return pathlib.Path(base)
  return None


def test_every_row_of_every_notes_table_is_classified():
  tables = _tables(FIXTURE.read_text())
  for recipe, note in NOTES.items():
    assert tables[note] == list(ROWS[recipe]), (
        f"{note}: classify these rows in ROWS[{recipe!r}]: "
        f"{sorted(set(tables[note]) ^ set(ROWS[recipe]))}")


def test_the_copied_tables_are_the_notes_tables():
  notes = _notes_dir()
  if notes is None:
    pytest.skip("../shared/papers is not here; the copied tables stand in")
  copied = FIXTURE.read_text()
  for note in NOTES.values():
    text = (notes / note).read_text()
    table = copied.split(f"## {note}\n\n", 1)[1].split("\n\n", 1)[0]
    assert "\n" + table + "\n" in text, f"{note}'s hyper-parameter table changed; re-copy it"


_CASES = [(recipe, name, row) for recipe, rows in ROWS.items() for name, row in rows.items()
          if not isinstance(row, NotAConfig)]


@pytest.mark.parametrize("recipe,name,row", _CASES, ids=[f"{r}:{n}" for r, n, _ in _CASES])
def test_paper_value_is_the_config_default_or_a_documented_deviation(recipe, name, row):
  c = _config(recipe)
  deviations, decisions = _doc_rows("Deviations"), _doc_rows("Decisions")
  if isinstance(row, Open):
    assert (recipe, name) in decisions, (
        f"{recipe} {name!r}: the paper leaves it open; document our choice under Decisions in "
        f"{(PAGES / f'{recipe}.md').relative_to(ROOT)}")
    if row.value is not None:
      assert _same(row.read(c), row.value), f"{recipe} {name!r}: not the note's default {row.value!r}"
    return
  ours = row.read(c)
  if _same(ours, row.value):
    assert (recipe, name) not in deviations, (
        f"{recipe} {name!r}: the config follows the paper ({ours!r}); drop the stale Deviations row")
  else:
    assert (recipe, name) in deviations, (
        f"{recipe} {name!r}: the paper's {row.value!r} is not the config's {ours!r}; follow the "
        f"paper or add a Deviations row to {(PAGES / f'{recipe}.md').relative_to(ROOT)} saying why")


def test_recipe_pages_hold_deviations_and_decisions_and_readme_links_them():
  assert _doc_rows("Deviations") and _doc_rows("Decisions")
  readme = (ROOT / "README.md").read_text()
  for recipe in NOTES:
    assert re.search(rf"\]\(docs/recipes/{recipe}\.md\)", readme), f"README: link {recipe}.md"
