"""What a recipe is: everything one paper fixes about a grounded-QA task, in one object.

A `Recipe` names its prompt templates (chat messages from an Example), the stop strings its rollouts
need, how a completion is parsed and what answer it states, its reward (`reward(**options)`, a
`RewardFn`), its paper's evaluation (`evaluate(completions, examples, ...)` → the numbers of the
paper's main table), the decoding its paper evaluates with, and how its rollouts are sampled
(`rollout(...)`; the standard one samples G completions per prompt, LEAR adds answer passes).

The RL trainer reads all of this through `get_recipe(name)` and never names a recipe itself.

A recipe also writes the gold completion of an example in its own format (`gold_completion`): the
target of its paper's SFT baseline, used by sft/data.py to build SFT rows from Examples.

A recipe also carries what the layers below it take as arguments: its judge styles (`judge_styles`,
the papers' correctness-judge prompts and reply parsers, for `judges/`), what it counts as abstaining
in a report (`abstention`, for eval/report.py) and its papers' data mixes (`data_presets`, for
data/mixture.py and launch/build_data.py).

Shared pieces for the recipe folders: `fill` (template placeholders), `render` (chat template),
`Decoding`, the evaluators' per-example columns (`subset_column`, `column_mean`) and the abstention
of recipes whose papers define none (`says_unanswerable`). `RewardFn` and the example checks every
reward uses are in reward_fn.py; what a gold completion is built from (`has_answer_in_context`,
`gold_answer`, `gold_support`) in gold.py.
"""

from __future__ import annotations

import abc
import dataclasses
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from grounding_jax import judges
from grounding_jax import text
from grounding_jax.data import mixture
from grounding_jax.data.schema import Example, Passage
from grounding_jax.models.tokenizer import render_chat
from grounding_jax.recipes.reward_fn import RewardFn
from grounding_jax.sampling import rollout as rollout_lib

Messages = list[dict[str, str]]


# ------------------------------------------------------------------------------------------ prompts

def fill(template: str, **values: str) -> str:
  """Replaces each `{key}` of the template in one pass. Like the authors' `str.replace` (the texts hold
  literal braces such as `\\boxed{}`), but inserted text is never scanned again, so a passage that
  happens to contain "{A}" or "{question}" (LaTeX, code) is kept intact."""
  pattern = re.compile("|".join(re.escape("{" + k + "}") for k in values))
  return pattern.sub(lambda m: values[m.group(0)[1:-1]], template)


def titled(p: Passage, include_titles: bool = True) -> str:
  """"title\\ntext" (or the text alone when there is no title or titles are off)."""
  return f"{p.title}\n{p.text}" if include_titles and p.title else p.text


def with_passages(ex: Example, passages: Sequence[Passage]) -> Example:
  return dataclasses.replace(ex, passages=tuple(passages))


def render(messages: Messages, tokenizer: Any = None, *, enable_thinking: bool | None = None) -> str:
  """The prompt text: the messages through the tokenizer's chat template with the generation header
  (Qwen3's `enable_thinking` passed only when set), or the last message's content without a tokenizer."""
  if tokenizer is None:
    return messages[-1]["content"]
  return render_chat(tokenizer, messages, add_generation_prompt=True, enable_thinking=enable_thinking)


@dataclasses.dataclass(frozen=True)
class Decoding:
  """How a paper samples its evaluation answers (temperature 0 = greedy)."""
  temperature: float = 0.0
  top_p: float = 1.0
  max_new_tokens: int = 512
  num_samples: int = 1


# ------------------------------------------------------------------------------------- evaluators

def check_aligned(completions: Sequence[Any], examples: Sequence[Example]) -> None:
  """Evaluators' input check: one completion per example."""
  if len(completions) != len(examples):
    raise ValueError(f"{len(completions)} completions for {len(examples)} examples.")


# ------------------------------------------------------------------------------ per-example scores
# Every evaluator also returns "per_example": name -> float64 [N], one value per completion, from which
# `Recipe.aggregate` recomputes its table exactly (so a bootstrap can resample examples). Columns of a
# subset metric hold NaN outside the subset; "correct" (the answer's verdict, in [0, 1]) and
# "abstained" (0 / 1, the recipe's own notion of declining to answer) are there for every recipe.

def subset_column(values: Any, mask: Any, scale: float = 1.0) -> np.ndarray:
  """float64 [N]: scale · values where `mask`, NaN elsewhere (a metric over a subset of the rows)."""
  values = np.broadcast_to(np.asarray(values, np.float64), np.shape(mask))
  return np.where(np.asarray(mask, bool), scale * values, np.nan)


def column_mean(values: Any) -> float | np.ndarray:
  """The mean of a per-example column without its NaN rows; 0.0 when no row counts (as the
  evaluators report an empty subset). A column [..., N] with leading axes (the bootstrap's
  resamples) gives an array of those means."""
  v = np.asarray(values, np.float64)
  counted = ~np.isnan(v)
  n = counted.sum(-1)
  mean = np.where(n > 0, np.where(counted, v, 0.0).sum(-1) / np.maximum(n, 1), 0.0)
  return float(mean) if mean.ndim == 0 else mean


# What `says_unanswerable` counts, in words, for the report of a recipe whose paper defines no abstention.
DEFAULT_ABSTENTION = ("an answer that is Trust-Score's refusal or says \"I don't know\" (the paper "
                      "defines no abstention)")


def says_unanswerable(answer: str) -> bool:
  """Abstention for recipes whose papers define none (ARENA, LEAR, naive): the stated answer is
  Trust-Score's refusal (fuzzy match of its refusal flag, `text.is_refusal`) or contains TruthRL's
  "I don't know" (`text.is_abstention`)."""
  return text.is_refusal(answer) or text.is_abstention(answer)


# ------------------------------------------------------------------------------------------ recipes

class Recipe(abc.ABC):
  """One paper's grounded-QA recipe. Subclasses set the class attributes and override what differs.

  Attributes:
    name: the registry name (get_recipe(name)).
    paper: the paper it reproduces, with its arXiv id.
    templates: template name -> builder(example, **options) -> Messages; "default" is the training
      prompt, other names are the paper's baselines (e.g. GRACE's 3-shot prompts).
    stop: stop strings the rollout and evaluation sampling honour.
    eval_decoding: the paper's evaluation decoding.
    reward_variants: other registered reward names -> the reward options they stand for (e.g.
      "truthrl_binary" -> {"scheme": "binary"}); get_reward(variant) builds them.
    headline_metric: the key of `evaluate`'s result that the paper ranks models by.
    metric_columns: the keys of `evaluate`'s result in the order of the paper's main table.
    rollout_extras: the per-completion extras its `rollout` passes to the reward (LEAR's answers).
    judge_styles: style name -> judges.JudgeStyle, the correctness judges its paper defines (the
      first is the default); `judge_spec` resolves a config's `style=` name with them.
    abstention: what "abstained" means in its per-example columns, for the report's footnote.
    abstention_component: the component of its reward that is 1 where a completion abstains (its
      `abstention` while training: the trainer logs its mean over the answerable and the
      unanswerable prompts as health/abstain_*); "" where the reward marks none.
    data_presets: preset name -> data.mixture.Preset, its papers' data mixes (build_data --preset).
    aliases: other names `eval.paper_eval.evaluate` accepts for this recipe's evaluator.
    required_judges: the reward options its default reward cannot do without, each a judge: "nli"
      (an NLI judge) or "judge" (a correctness judge); benchmarks pass stand-ins by these names.
  """

  name: str = ""
  paper: str = ""
  templates: Mapping[str, Callable[..., Messages]] = {}
  stop: tuple[str, ...] = ()
  eval_decoding: Decoding = Decoding()
  reward_variants: Mapping[str, Mapping[str, Any]] = {}
  headline_metric: str = ""
  metric_columns: tuple[str, ...] = ()
  rollout_extras: tuple[str, ...] = ()
  judge_styles: Mapping[str, judges.JudgeStyle] = {}
  abstention: str = DEFAULT_ABSTENTION
  abstention_component: str = ""
  data_presets: Mapping[str, mixture.Preset] = {}
  aliases: tuple[str, ...] = ()
  required_judges: tuple[str, ...] = ()

  # --- prompts
  def messages(self, example: Example, *, template: str = "default", **options: Any) -> Messages:
    """The chat messages ([{"role", "content"}]) of `example` under one of `templates`; `options` are
    the template's formatting options (e.g. GRACE: numbered, include_titles)."""
    if template not in self.templates:
      raise ValueError(f"recipe {self.name!r} has no prompt template {template!r}; "
                       f"known: {sorted(self.templates)}")
    try:
      return self.templates[template](example, **options)
    except TypeError as e:
      raise TypeError(f"recipe {self.name!r} template {template!r}: {e}") from e

  def render_prompt(self, example: Example, tokenizer: Any = None, *,
                    enable_thinking: bool | None = None, template: str = "default",
                    **options: Any) -> str:
    """The prompt text of `example` (chat template applied when a tokenizer is given)."""
    return render(self.messages(example, template=template, **options), tokenizer,
                  enable_thinking=enable_thinking)

  # --- reading completions
  @abc.abstractmethod
  def parse(self, completion: str) -> Any:
    """The recipe's structured reading of a completion (never raises)."""

  @abc.abstractmethod
  def answer(self, completion: str) -> str:
    """The answer a completion states, as the paper's evaluator extracts it ("" when none)."""

  # --- reward and evaluation
  @abc.abstractmethod
  def reward(self, **options: Any) -> RewardFn:
    """The recipe's RewardFn built with `options` (each reward class's constructor arguments)."""

  @abc.abstractmethod
  def evaluate(self, completions: Sequence[str], examples: Sequence[Example],
               **kwargs: Any) -> dict[str, Any]:
    """The paper's evaluation numbers for `completions[i]` answering `examples[i]`, plus
    "per_example" (name -> float64 [N], see `aggregate`) and "answers" ([N] the answers scored)."""

  def table(self, result: Mapping[str, Any]) -> dict[str, float]:
    """`evaluate`'s result as one flat row of numbers (the metric_columns and the evaluator's extras)."""
    return {k: float(v) for k, v in result.items()
            if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)}

  def aggregate(self, per_example: Mapping[str, np.ndarray]) -> dict[str, float]:
    """The metric_columns of `table(evaluate(...))` recomputed from its "per_example" columns, for
    any subset or resample of the rows (the bootstrap's statistic). Here each column's mean over its
    non-NaN rows; recipes with a metric that is not a mean (balanced accuracy, a compression ratio,
    Trust-Score's F1s) override it. This one also takes columns [R, N] (R resamples' rows) and
    returns arrays [R] (`aggregates_batched`)."""
    return {k: column_mean(per_example[k]) for k in self.metric_columns if k in per_example}

  @property
  def aggregates_batched(self) -> bool:
    """Whether `aggregate` takes columns [R, N] at once: the column means above do; an override
    is assumed not to (the bootstrap then calls it once per resample)."""
    return type(self).aggregate is Recipe.aggregate

  def reader_prompt(self, example: Example, completion: str, tokenizer: Any = None) -> str | None:
    """The two-model protocol: the prompt on which a separate reader model answers from what
    `completion` extracted (LEAR); None when the recipe has no such protocol. The reader's outputs go
    to `evaluate(..., reader_outputs=...)`."""
    del example, completion, tokenizer
    return None

  def evaluate_inputs(self, round_: rollout_lib.RolloutRound) -> dict[str, Any]:
    """`evaluate` keyword arguments that the recipe's own evaluation rollout provides (LEAR: the
    policy's answers from its extracts, when no separate reader is given); none by default."""
    del round_
    return {}

  # --- judges
  def judge_spec(self, spec: Any) -> Any:
    """A judge config value with its `style=` name resolved to this recipe's JudgeStyle (see
    judges.with_style); other values pass through."""
    return judges.with_style(spec, self.judge_styles)

  # --- supervised targets
  def gold_completion(self, example: Example, *, style: str = "default") -> str:
    """The completion this recipe's format gives `example`: the gold answer (and evidence or
    citations, as the format asks), or the recipe's abstention when the context lacks the answer.
    It is the target of the paper's SFT baseline where the paper states one (each recipe cites its
    paper; where it does not, the recipe folder says what it chose). `style` names another target a
    paper's baselines use (e.g. ARENA's "direct"); sft/data.py builds SFT rows from it.

    Raises:
      ValueError: an unknown style, or an example that lacks what the target states (its answers).
    """
    raise NotImplementedError(f"recipe {self.name!r} defines no gold completion, so SFT rows cannot "
                              "be built from it (sft data.kind='recipe'); use data.kind='jsonl'")

  def _check_style(self, style: str, styles: Sequence[str] = ("default",)) -> None:
    if style not in styles:
      raise ValueError(f"recipe {self.name!r} has no gold completion style {style!r}; known: "
                       f"{list(styles)}")

  # --- rollouts
  def check_rollout_options(self, options: Mapping[str, Any]) -> None:
    """Raises ValueError naming rollout options (config.rollout.options) this recipe does not take."""
    if options:
      raise ValueError(f"recipe {self.name!r} takes no rollout options (config.rollout.options); "
                       f"got {sorted(options)}")

  def rollout(self, model, tokenizer, examples: Sequence[Example], prompt_fn: Callable[[Example], str],
              settings: rollout_lib.SamplingSettings, *, seed, mesh=None,
              options: Mapping[str, Any] | None = None) -> rollout_lib.RolloutRound:
    """Samples `settings.group_size` completions per example (the standard GRPO rollout).

    `options` are the recipe's rollout options from `config.rollout.options` (none here).
    Returns the trained sequences, the texts the reward scores and the reward's extra inputs.
    """
    self.check_rollout_options(options or {})
    ro = rollout_lib.sample(model, tokenizer, examples, prompt_fn, settings, seed=seed, mesh=mesh)
    return rollout_lib.RolloutRound(rollout=ro, completions=list(ro.texts), extras={})

  def __repr__(self) -> str:
    return f"<recipe {self.name!r} ({self.paper})>"
