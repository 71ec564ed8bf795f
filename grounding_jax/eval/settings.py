"""How a model is evaluated: EvalSettings (config.evals over the recipe's paper decoding: judges,
batching, stop strings, the rollout's options) and `check_examples`, the check that the recipe's
evaluator and the run's rewards can score the examples, run before any model loads.

    settings = EvalSettings.from_config(config)
    check_examples(examples, settings, rewards)       # ValueError naming the row and field
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

import ml_collections

from grounding_jax import judges
from grounding_jax import recipes
from grounding_jax.data.schema import Example
from grounding_jax.eval.bertscore import BertScorer
from grounding_jax.sampling import engine
from grounding_jax.sampling import rollout as rollout_lib

RewardSpec = Sequence[tuple[str, float, Callable]]  # [(name, weight, RewardFn)], as the trainer's


@dataclasses.dataclass(frozen=True)
class EvalSettings:
  """How a model is evaluated (config.evals over the recipe's paper defaults).

  Attributes:
    recipe: the recipe name (its prompt, stop strings, rollout, evaluator and decoding).
    decoding: temperature, top-p, new-token limit and samples per question.
    batch_size: questions per sampler call.
    stop: stop strings besides the recipe's (config.rollout.stop).
    max_prompt_tokens: longer prompts lose tokens on the left (config.rollout.max_prompt_tokens).
    enable_thinking: Qwen3's chat-template switch (config.rollout.enable_thinking).
    rollout_options: the recipe's rollout options (config.rollout.options; LEAR's answer passes).
    judges: `Recipe.evaluate` judge arguments by name -> judge spec (judges.lazy builds each on first
      use): "nli" (an NLI judge) or e.g. "judge" (a correctness judge).
    bertscore: a BERT folder for GRACE's BERTScore-F1 ("" = the column is left out).
    reader_max_new_tokens: answer length of a separate reader (the two-model protocol).
    seed: seeds sampling (batch b uses fold_in(key(seed), b)).
    shared_prefix_min_tokens: a batch's common prompt prefix of at least this many tokens is
      prefilled once and read once per decode step (one sample per question; 0 = off).
    fuse_projections: the sampler runs q/k/v and gate/up as one GEMM each
      (config.rollout.fuse_projections, 'auto' = on a GPU; sampling.generate_ids).
  """
  recipe: str
  decoding: recipes.Decoding
  batch_size: int = 32
  stop: tuple[str, ...] = ()
  max_prompt_tokens: int = 0
  enable_thinking: Optional[bool] = None
  rollout_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  judges: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  bertscore: str = ""
  reader_max_new_tokens: int = 64
  seed: int = 0
  shared_prefix_min_tokens: int = 0
  max_turns: int = 1
  fuse_projections: bool = False

  @classmethod
  def from_config(cls, config: ml_collections.ConfigDict) -> "EvalSettings":
    """From a run config: config.evals (recipe "" = the last stage's; unset decoding fields = the
    recipe's `eval_decoding`) and the rollout's stop strings, prompt limit and options."""
    ev = config.evals
    name = ev.recipe or config.stages[-1].recipe
    paper = recipes.get_recipe(name).eval_decoding
    d = ev.decoding
    decoding = recipes.Decoding(
        temperature=paper.temperature if d.temperature is None else float(d.temperature),
        top_p=paper.top_p if d.top_p is None else float(d.top_p),
        max_new_tokens=paper.max_new_tokens if d.max_new_tokens is None else int(d.max_new_tokens),
        num_samples=int(d.num_samples))
    specs = {k: (v.to_dict() if isinstance(v, ml_collections.ConfigDict) else v)
             for k, v in ev.judges.items()}
    return cls(recipe=name, decoding=decoding, batch_size=int(ev.batch_size),
               stop=tuple(config.rollout.stop), max_prompt_tokens=int(config.rollout.max_prompt_tokens),
               enable_thinking=config.rollout.enable_thinking,
               rollout_options=config.rollout.options.to_dict(),
               judges={k: v for k, v in specs.items() if _configured(v)},
               bertscore=ev.bertscore, reader_max_new_tokens=int(ev.reader_max_new_tokens),
               seed=int(ev.seed),
               shared_prefix_min_tokens=int(ev.get("shared_prefix_min_tokens", 0)),
               max_turns=int(config.rollout.get("max_turns", 1)),
               fuse_projections=engine.fuse_projections_enabled(
                   config.rollout.get("fuse_projections", "auto")))

  def evaluate_options(self) -> dict[str, Any]:
    """The judge arguments of `Recipe.evaluate`, each built when first called."""
    recipe = recipes.get_recipe(self.recipe)  # a correctness judge's style name is the recipe's
    out = {k: judges.lazy(spec, role="nli") if k == "nli"
           else judges.lazy(recipe.judge_spec(spec), role="correctness")
           for k, spec in self.judges.items()}
    if self.bertscore:
      out["bertscorer"] = BertScorer(self.bertscore)
    return out


def _configured(spec: Any) -> bool:
  """A judge spec that names a judge: not None / "", nor a dict whose kind is left empty (a config's
  placeholder, e.g. judge=dict(kind="", path="", style=NAME) until --config.evals.judges.judge.kind=llm)."""
  if isinstance(spec, Mapping):
    return bool(spec.get("kind"))
  return spec not in (None, "")


def check_examples(examples: Sequence[Example], settings: EvalSettings, rewards: RewardSpec = (), *,
                   reader: bool = False) -> None:
  """Raises ValueError naming the example and field when the recipe's evaluator or a reward cannot
  score `examples`, the evaluator needs a judge that is not configured, or a reader is given to a
  recipe without the two-model protocol. Cheap (empty completions, no judge is called): run it
  before any model loads."""
  recipe = recipes.get_recipe(settings.recipe)
  if not examples:
    raise ValueError("no evaluation examples (evals.num_examples is 0, or the data file is empty)")
  if reader and recipe.reader_prompt(examples[0], "") is None:
    raise ValueError(f"recipe {recipe.name!r} has no two-model protocol; a reader applies to recipes "
                     "with a reader prompt (lear)")
  n, examples = len(examples), list(examples)
  blank = [""] * n
  round_ = rollout_lib.RolloutRound(rollout=None, completions=blank,
                                    extras={k: blank for k in recipe.rollout_extras})
  try:  # judges as None: the keys say which are configured, and no model is loaded
    recipe.evaluate(blank, examples, **{k: None for k in settings.judges},
                    **recipe.evaluate_inputs(round_))
  except TypeError as e:  # a judge argument missing, or one the evaluator does not take
    raise ValueError(f"recipe {settings.recipe!r} evaluation: {e}; config.evals.judges holds the "
                     "evaluator's judge arguments (nli=FOLDER for trust, judge=dict(kind=..., path=...) "
                     "for grace / arena / truthrl)") from e
  for _, _, fn in rewards:
    fn(blank, examples, completion_lengths=[0] * n, truncated=[False] * n, **round_.extras)
