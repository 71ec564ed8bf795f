"""Setting a run up from its config: checks, the mesh, the policy, and each stage's parts.

A stage sees the run's config with its own overrides applied (`stage_config`): its recipe, reward
functions, loss and optimizer. From that view come the stage's sampling settings, reward functions,
prompt renderer, optimizer and compiled update programs. Nothing here runs a step.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import ml_collections
from flax import nnx

from grounding_jax import models
from grounding_jax import optim
from grounding_jax import parallel
from grounding_jax import recipes
from grounding_jax import tools as retrievers
from grounding_jax.data import contrast
from grounding_jax.data import splits
from grounding_jax.eval import from_config
from grounding_jax.models import lora
from grounding_jax.rl.config import checks as config_checks
from grounding_jax.rl import collect
from grounding_jax.rl import health
from grounding_jax.rl import update as update_lib
from grounding_jax.sampling import engine
from grounding_jax.sampling import rollout as rollout_lib
from grounding_jax.sampling import tools

RewardSpec = from_config.RewardSpec
_PROGRAMS: dict = {}  # (graphdef, optimizer key, UpdateSettings) -> jitted (train_step, logprob_fn)


def check_config(c: ml_collections.ConfigDict, *, read_data: bool = True,
                 need_model_path: bool = True) -> None:
  """Every config value checked before any model or data loads (rl/config/checks.py), with the recipe
  registry's checks of reward names and options, stage recipes and their rollout options; raises
  config_checks.ConfigError with one line per bad value."""

  def check_reward(name, options):
    if options.get("tokenizer") == from_config.POLICY_TOKENIZER:  # resolved when the stage is built
      options = {**options, "tokenizer": None}
    return recipes.get_reward(name, **options).reward_range

  def check_recipe(name, rollout_options):
    recipes.get_recipe(name).check_rollout_options(rollout_options)

  config_checks.check_config(c, process_count=jax.process_count(), check_reward=check_reward,
                             check_recipe=check_recipe, read_data=read_data,
                             need_model_path=need_model_path)
  problems = []
  for i, st in enumerate(c.stages):  # what the update builds from each stage's view
    view, per_prompt = stage_config(c, st), None
    try:
      per_prompt = samples_per_prompt(c, st)
      update_lib.settings_from_config(view, per_prompt)
    except ValueError as e:
      problems.append(f"config.stages[{i}] ({st.name}): {e}")
    searches = getattr(recipes.get_recipe(st.recipe), "tool_format", None) is not None
    if evidence_conditions(st) and searches and c.rollout.max_turns <= 1:
      problems.append(f"config.stages[{i}].data.evidence_contrast={st.data.evidence_contrast!r}: "
                      f"recipe {st.recipe!r} reads its passages from a search tool, not its prompt, "
                      f"and rollout.max_turns={c.rollout.max_turns} runs no search, so the gold_kept "
                      "and gold_removed prompts are the same; set rollout.max_turns > 1 and "
                      "search.retriever")
    if (evidence_conditions(st) and view.advantage.contrast_baseline == "condition"
        and view.advantage.std_ddof == 1 and per_prompt is not None and per_prompt < 2):
      problems.append(f"config.advantage.contrast_baseline='condition' with stage {st.name!r}'s "
                      f"{per_prompt} sample(s) per condition: each condition's group needs >= 2 "
                      "samples for advantage.std_ddof=1; raise rollout.group_size")
    if c.abstention.control and not recipes.get_recipe(st.recipe).abstention_component:
      problems.append(f"config.abstention.control={c.abstention.control!r}: stage {st.name!r}'s "
                      f"recipe {st.recipe!r} marks no abstention in its reward "
                      "(Recipe.abstention_component); the control needs one")
  if problems:
    raise config_checks.ConfigError(problems)


def stage_config(config: ml_collections.ConfigDict, st: ml_collections.ConfigDict
                 ) -> ml_collections.ConfigDict:
  """The run's config as stage `st` sees it: its `loss` and `optimizer` fields applied over the run's,
  and its `reward.functions` (when set) in place of the run's."""
  view = copy.deepcopy(config)
  with view.unlocked():
    for section in ("loss", "optimizer"):
      overrides = st[section].to_dict()
      unknown = sorted(set(overrides) - set(view[section]))
      if unknown:
        raise ValueError(f"stages[{st.name!r}].{section} sets unknown fields {unknown}; known: "
                         f"{sorted(view[section])}")
      view[section].update(overrides)
    view.reward.functions = from_config.stage_reward_section(view, st)
  return view


def run_mesh(c: ml_collections.ConfigDict):
  """The run's mesh (config.mesh; None for one device). Raises ValueError when it leaves out the
  devices of some process: its hosts would train apart."""
  mesh = parallel.mesh_from_config(c.mesh)
  if parallel.spanned_processes(mesh) != jax.process_count():
    raise ValueError(f"{jax.process_count()} processes share one run, but config.mesh="
                     f"{c.mesh.to_dict()} covers the devices of {parallel.spanned_processes(mesh)}; "
                     f"give the mesh all {jax.device_count()} devices (e.g. fsdp=-1)")
  return mesh


def has_weights(model) -> bool:
  """False for a model whose parameters are abstract (jax.ShapeDtypeStructs: nnx.eval_shape, or
  load_pretrained(read_weights=False)), which a resumed run fills from its checkpoint."""
  return not any(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(nnx.state(model)))


def load_policy(c: ml_collections.ConfigDict, mesh, model=None, tokenizer=None,
                read_weights: bool = True):
  """(model on the mesh, tokenizer): the given ones, or loaded from config.model.path (its
  architecture alone with read_weights=False: a resumed run's checkpoint holds the weights), with
  the adapters of config.model.lora added unless the model has some; raises
  health.NonFiniteWeightsError when a weight is NaN or inf (naming the tensor), and ValueError for
  a model without weights under LoRA (its frozen base weights come from model.path)."""
  source = "the model passed to the Trainer" if model is not None else c.model.path
  loaded = model is None
  if model is None:
    model = models.load_pretrained(c.model.path, dtype=models.DTYPES[c.model.param_dtype],
                                   compute_dtype=models.DTYPES[c.model.compute_dtype],
                                   remat=c.model.remat, remat_policy=c.model.remat_policy,
                                   scan_layers=c.model.scan_layers,
                                   attention_implementation=c.model.attention,
                                   packed_attention=c.model.packed_attention, mesh=mesh,
                                   read_weights=read_weights)
    tokenizer = tokenizer or models.load_tokenizer(c.model.path)
  weights = has_weights(model)
  if not weights and c.model.lora.rank > 0:
    raise ValueError(f"{source} has no weights (abstract), which only a run resumed without LoRA "
                     "can take (model.lora.rank=0): LoRA's frozen base weights are read from the "
                     "model")
  adding = c.model.lora.rank > 0 and not lora.has_adapters(model)
  if adding:  # fresh adapters, B = 0: the base model's outputs
    model = lora.add_from_config(model, c.model.lora, c.seed)
  if mesh is not None and (adding or not loaded):  # load_pretrained placed the base weights
    model = parallel.shard_model(model, mesh)  # an abstract model: the restore target's shardings
  if tokenizer is None:
    raise ValueError("a tokenizer is needed: pass tokenizer= or set config.model.path")
  if weights:  # an abstract model's come from a checkpoint, written only when finite
    health.check_start_weights(model, source)
  return model, tokenizer


def load_stage_examples(data: ml_collections.ConfigDict) -> list:
  """The dataset of a stage: kind "synthetic" (grounding_jax.data.synthetic) or "jsonl" (a file)."""
  return splits.load(data)


def fit_prompt_limit(view: ml_collections.ConfigDict, name: str, examples: Sequence[Any],
                     prompt_fn: Callable[[Any], str], tokenizer,
                     contrast: Optional[collect.EvidenceContrast] = None) -> list:
  """The stage's examples under rollout.overlong_prompts: all of them ("truncate": the sampler cuts
  long prompts on the left), or those whose prompt fits in rollout.max_prompt_tokens ("drop"; the
  count dropped is printed). With evidence-contrast groups an example stays only if every one of
  its condition prompts fits."""
  r = view.rollout
  if r.overlong_prompts != "drop":
    return list(examples)
  if contrast is None:
    kept, dropped = rollout_lib.drop_overlong(examples, prompt_fn, tokenizer, r.max_prompt_tokens)
  else:
    _, over = rollout_lib.drop_overlong(contrast.prompts(examples), prompt_fn, tokenizer,
                                        r.max_prompt_tokens)
    gone = {i // len(contrast.conditions) for i in over}
    kept, dropped = [ex for i, ex in enumerate(examples) if i not in gone], sorted(gone)
  print(f"[data] stage {name!r}: dropped {len(dropped)} of {len(examples)} examples whose prompts "
        f"exceed rollout.max_prompt_tokens={r.max_prompt_tokens} (rollout.overlong_prompts='drop')",
        flush=True)
  if not kept:
    raise ValueError(f"stage {name!r}: every prompt is longer than rollout.max_prompt_tokens="
                     f"{r.max_prompt_tokens}; raise the limit or use rollout.overlong_prompts='truncate'")
  return kept


def prompt_fn(recipe: recipes.Recipe, tokenizer, enable_thinking: Optional[bool]
              ) -> Callable[[Any], str]:
  """Example -> the recipe's default prompt through the tokenizer's chat template."""
  return lambda ex: recipe.render_prompt(ex, tokenizer, enable_thinking=enable_thinking)


def evidence_conditions(st: ml_collections.ConfigDict) -> tuple[str, ...]:
  """The evidence conditions of stage `st`'s contrast groups (data.evidence_contrast); () = off."""
  return contrast.CONTRASTS[st.data.get("evidence_contrast", "")]


def samples_per_prompt(view: ml_collections.ConfigDict, st: ml_collections.ConfigDict) -> int:
  """Completions sampled per prompt: G, or G/k with k evidence conditions (each question's G
  samples split over its k condition prompts)."""
  k = len(evidence_conditions(st)) or 1
  if view.rollout.group_size % k:
    raise ValueError(f"data.evidence_contrast={st.data.evidence_contrast!r} splits a group over {k} "
                     f"prompts, but rollout.group_size={view.rollout.group_size} is not a multiple "
                     f"of {k}")
  return view.rollout.group_size // k


def evidence_contrast(st: ml_collections.ConfigDict, examples: Sequence[Any], seed: int,
                      tool=None) -> tuple[list, Optional[collect.EvidenceContrast]]:
  """(the examples the stage's stream draws, its evidence-contrast groups or None). With
  data.evidence_contrast on, the stream draws the questions with gold passages (examples labelled
  answerable=False are left out, their count printed: each question's gold_removed prompt plays
  their part), and the distractors come from every passage of the stage's data. `tool`: the search
  tool of a stage that samples several turns; the gold_removed rows' searches withhold each
  question's gold passages from it, so an in-process corpus must hold them (checked here)."""
  names = evidence_conditions(st)
  if not names:
    return list(examples), None
  questions, dropped = contrast.contrast_questions(examples)
  print(f"[data] stage {st.name!r}: evidence-contrast groups {names}; {len(questions)} questions, "
        f"{dropped} examples labelled unanswerable left out", flush=True)
  if tool is not None and hasattr(tool, "missing"):
    check_gold_in_corpus(st, questions, tool)
  return questions, collect.EvidenceContrast(names, contrast.distractor_pool(examples), seed)


def check_gold_in_corpus(st: ml_collections.ConfigDict, questions: Sequence[Any], tool) -> None:
  """Raises when a contrast question's gold passage is not in the search tool's corpus (by id or
  text): its gold_kept rows could not find the answer and its gold_removed rows would withhold
  nothing, yet count as unanswerable."""
  bad = [(q, tool.missing(q.passages[i - 1] for i in q.gold_passage_ids)) for q in questions]
  bad = [(q, miss) for q, miss in bad if miss]
  if bad:
    q, miss = bad[0]
    raise ValueError(f"stage {st.name!r}: data.evidence_contrast={st.data.evidence_contrast!r} "
                     f"withholds each question's gold passages from its gold_removed rows' "
                     f"searches, but {len(bad)} of {len(questions)} questions have a gold passage "
                     f"the search corpus does not hold (by id or text), e.g. example {q.id!r}: "
                     f"{miss[0].id!r} {miss[0].text[:60]!r}; build search.corpus from the same "
                     "passages as the stage's data (tools/corpus.py) or leave evidence_contrast empty")


def build_tool(config: ml_collections.ConfigDict):
  """The tool `config.search` describes (grounding_jax/tools) when a stage samples several turns,
  else None (a single-turn run builds no corpus)."""
  if all(stage_config(config, spec).rollout.max_turns <= 1 for spec in config.stages):
    return None
  return retrievers.from_config(config.search, data_spec=config.stages[0].data)


def check_tool(config: ml_collections.ConfigDict, tool) -> None:
  """Raises before anything loads when a stage samples several turns (rollout.max_turns > 1) and
  no tool was given for the policy to call, or one that cannot withhold passages per query where
  the stage's evidence-contrast groups need it (sampling/tools.withholds)."""
  for spec in config.stages:
    turns = stage_config(config, spec).rollout.max_turns
    if tool is not None and turns > 1 and evidence_conditions(spec) and not tools.withholds(tool):
      raise ValueError(f"stage {spec.name!r}: data.evidence_contrast={spec.data.evidence_contrast!r} "
                       f"withholds the gold passages from the gold_removed rows' searches, but the "
                       f"tool {tool!r} cannot filter per query; use search.retriever bm25 | dense | "
                       "hybrid | http, or a tool with `withholds = True` (sampling/tools.py)")
    if tool is None and turns > 1:
      raise ValueError(f"stage {spec.name!r}: rollout.max_turns={turns} > 1 needs a tool for the "
                       "policy to call: set search.retriever (e.g. 'bm25' with search.corpus), pass "
                       "Trainer(tool=...), or set rollout.max_turns=1.")


def sampling_settings(view: ml_collections.ConfigDict, recipe: recipes.Recipe,
                      group_size: Optional[int] = None, tool=None) -> rollout_lib.SamplingSettings:
  """The rollout's sampling settings; the sampler stops at the recipe's stop strings and the config's.
  `group_size`: completions per prompt (samples_per_prompt), default rollout.group_size. `tool`:
  what the policy calls when rollout.max_turns > 1 (sampling/tools.Tool), in the recipe's
  `tool_format` (default Search-R1's tags)."""
  r = view.rollout
  stop = tuple(recipe.stop) + tuple(s for s in r.stop if s not in recipe.stop)
  if r.max_turns > 1 and tool is None:
    raise ValueError(f"rollout.max_turns={r.max_turns} > 1 needs a tool for the policy to call: "
                     "pass Trainer(tool=...) (e.g. a retriever over the corpus) or set "
                     "rollout.max_turns=1.")
  return rollout_lib.SamplingSettings(
      group_size=group_size or r.group_size, max_new_tokens=r.max_new_tokens, temperature=r.temperature,
      top_p=r.top_p, top_k=r.top_k, stop=stop, max_prompt_tokens=r.max_prompt_tokens,
      max_turns=r.max_turns, tool=tool if r.max_turns > 1 else None,
      shared_prefix_min_tokens=r.common_prefix_min_tokens,
      fuse_projections=engine.fuse_projections_enabled(r.fuse_projections),
      tool_format=getattr(recipe, "tool_format", None) or tools.ToolFormat())


def optimizer(view: ml_collections.ConfigDict, grpo_steps: int):
  """(optimizer, cache key) of a stage: a fresh schedule over its `grpo_steps` GRPO steps of
  μ × num_minibatches optimizer updates each (optimizer.schedule_unit says which of the two warm-up
  and decay count); equal keys share programs."""
  u = view.update_loop
  updates_per_step = u.num_iterations * u.num_minibatches
  return (optim.build_optimizer(view.optimizer, grpo_steps, updates_per_step),
          (view.optimizer.to_json(sort_keys=True), grpo_steps, updates_per_step))


def programs(graphdef, optimizer_, key, settings: update_lib.UpdateSettings):
  """Jitted (train_step, logprob_fn), shared by stages and trainers with the same model structure,
  optimizer config (the key determines the optimizer) and settings, so they compile once."""
  key = (graphdef, key, settings)
  if key not in _PROGRAMS:
    _PROGRAMS[key] = (update_lib.make_train_step(graphdef, optimizer_, settings),
                      update_lib.make_logprob_fn(graphdef, settings))
  return _PROGRAMS[key]


def stage_rewards(given: Optional[RewardSpec | Mapping[str, RewardSpec]], st,
                  view: ml_collections.ConfigDict, tokenizer=None) -> RewardSpec:
  """The stage's reward functions: passed to the Trainer (one list, or one per stage name), else
  built from the stage view's config (tokenizer="policy" options name the policy's folder)."""
  spec = given.get(st.name) if isinstance(given, Mapping) else given
  if spec is not None:
    return list(spec)
  return from_config.reward_functions(view, from_config.policy_folder(view, tokenizer))
