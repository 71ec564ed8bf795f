"""Rollouts: render prompts, sample G completions each, and keep whole groups together.

A `Rollout` is host-side numpy, prompt-major (row = prompt * G + g, `group_rows`). Several rollout
rounds (DAPO dynamic sampling) are merged with `concat` and filtered group-wise with `take_groups`.
A recipe's rollout returns a `RolloutRound`: the trained sequences, the texts its reward scores and
the reward's extra inputs (the standard rollout scores the sampled texts; LEAR adds answer passes).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import jax
import numpy as np

from grounding_jax.data import contrast
from grounding_jax.sampling.multiturn import generate_turns
from grounding_jax.sampling.prompts import encode_prompts, tokenize_prompts
from grounding_jax.sampling.tools import Tool, ToolFormat, Withheld

OVERLONG_PROMPTS = ("truncate", "drop")  # what happens to prompts over max_prompt_tokens


def group_rows(groups, group_size: int) -> np.ndarray:
  """Row indices of prompt groups `groups` in a prompt-major batch: [g·G, …, g·G + G − 1] for each g."""
  groups = np.asarray(groups, np.int64)
  return (groups[:, None] * group_size + np.arange(group_size)[None]).reshape(-1)


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
  """How a rollout samples (config.rollout): G completions per prompt, limits and decoding."""
  group_size: int
  max_new_tokens: int
  temperature: float = 1.0
  top_p: float = 1.0
  top_k: int = 0
  stop: tuple[str, ...] = ()
  max_prompt_tokens: int = 0  # 0 = no limit; longer prompts lose tokens on the left (or, with
                              # config.rollout.overlong_prompts="drop", never reach the sampler)
  shared_prefix_min_tokens: int = 0  # a batch's common prompt prefix of at least this many
                                     # tokens is prefilled once (generate_ids); 0 = off
  max_turns: int = 1  # generation segments; > 1: the policy may call `tool` (sampling/multiturn.py)
  fuse_projections: bool = False  # q/k/v and gate/up as one GEMM each (generate_ids)
  tool: Tool | None = dataclasses.field(default=None, compare=False)  # needed when max_turns > 1
  tool_format: ToolFormat = ToolFormat()  # the recipe's call and result tags


@dataclasses.dataclass
class Rollout:
  """One or more rounds of sampled groups.

  Attributes:
    examples: [P] the prompt's Example.
    prompt_ids, prompt_mask: int32 / bool [P, Lp], left-padded.
    completion_ids, completion_mask, sampler_logp: [N, L], N = P * group_size.
    lengths: int32 [N]; truncated: bool [N]; texts: [N].
    group_size: G.
    policy_mask: bool [N, L], False at tokens a tool inserted (multi-turn); None: all sampled.
    tool_calls: [N] each row's executed calls (multiturn.ToolCall); None for one turn.
  """
  examples: list
  prompt_ids: np.ndarray
  prompt_mask: np.ndarray
  completion_ids: np.ndarray
  completion_mask: np.ndarray
  sampler_logp: np.ndarray
  lengths: np.ndarray
  truncated: np.ndarray
  texts: list
  group_size: int
  policy_mask: np.ndarray | None = None
  tool_calls: list | None = None

  @property
  def num_groups(self) -> int:
    return len(self.examples)

  def sampled_mask(self) -> np.ndarray:
    """bool [N, L]: the completion tokens the policy sampled (the loss's tokens; a tool's inserted
    tokens are context only)."""
    return self.completion_mask if self.policy_mask is None else self.completion_mask & self.policy_mask

  def sampled_lengths(self) -> np.ndarray:
    """int32 [N]: each completion's sampled tokens (what length penalties count)."""
    return self.lengths if self.policy_mask is None else self.sampled_mask().sum(axis=1).astype(np.int32)

  def row_examples(self) -> list:
    """[N] each row's Example (repeated G times), as rewards expect."""
    return [ex for ex in self.examples for _ in range(self.group_size)]


@dataclasses.dataclass
class RolloutRound:
  """One round of a recipe's rollout.

  Attributes:
    rollout: the sequences the update trains on.
    completions: [N] the texts the reward scores (usually `rollout.texts`).
    extras: the reward's extra per-row inputs (name -> [N] list), e.g. LEAR's answer passes.
  """
  rollout: Rollout
  completions: list
  extras: dict


def sample(model, tokenizer, examples: Sequence[Any], prompt_fn: Callable[[Any], str],
           settings: SamplingSettings, *, seed: jax.Array, mesh=None) -> Rollout:
  """Samples `settings.group_size` completions for each example's rendered prompt.

  `model` is a Transformer or its (graphdef, state) split (generate_ids). Prompts longer than
  `settings.max_prompt_tokens` (> 0) lose tokens on the left (VeRL truncation='left'). With
  settings.max_turns > 1 the policy may call settings.tool between turns (multiturn.generate_turns),
  and an example that withholds passages (a gold_removed prompt, data/contrast.withheld_passages)
  searches without them.
  """
  prompts = [prompt_fn(ex) for ex in examples]
  ids, mask = tokenize_prompts(tokenizer, prompts)
  limit = settings.max_prompt_tokens
  if limit and ids.shape[1] > limit:
    ids, mask = ids[:, -limit:], mask[:, -limit:]
  gen = generate_turns(
      model, ids, mask, tool=settings.tool, tool_format=settings.tool_format,
      max_turns=settings.max_turns, max_new_tokens=settings.max_new_tokens,
      temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k,
      num_samples=settings.group_size, stop=tuple(settings.stop), tokenizer=tokenizer, seed=seed,
      mesh=mesh, shared_prefix_min_tokens=settings.shared_prefix_min_tokens,
      fuse_projections=settings.fuse_projections,
      withheld=[Withheld.of(contrast.withheld_passages(ex)) for ex in examples])
  return Rollout(examples=list(examples), prompt_ids=np.asarray(gen.prompt_ids, np.int32),
                 prompt_mask=np.asarray(gen.prompt_mask, bool),
                 completion_ids=np.asarray(gen.token_ids, np.int32),
                 completion_mask=np.asarray(gen.completion_mask, bool),
                 sampler_logp=np.asarray(gen.logprobs, np.float32),
                 lengths=np.asarray(gen.lengths, np.int32), truncated=np.asarray(gen.truncated, bool),
                 texts=list(gen.texts), group_size=settings.group_size,
                 policy_mask=gen.policy_mask, tool_calls=gen.tool_calls)


def drop_overlong(examples: Sequence[Any], prompt_fn: Callable[[Any], str], tokenizer,
                  max_prompt_tokens: int) -> tuple[list, list[int]]:
  """(the examples whose rendered prompt fits in `max_prompt_tokens` tokens, the indices of the
  others). TruthRL's VeRL run filters such prompts out of the dataset instead of truncating them
  (the authors' VeRL config for arXiv:2509.25760: filter_overlong_prompts=True); dropping them
  before the stream draws keeps every step's prompt count, so group shapes stay static. Prompts are
  counted as the sampler tokenises them."""
  if max_prompt_tokens <= 0:
    raise ValueError(f"max_prompt_tokens={max_prompt_tokens}: dropping overlong prompts needs a "
                     "limit > 0")
  examples = list(examples)
  lengths = [len(ids) for ids in encode_prompts(tokenizer, [prompt_fn(ex) for ex in examples])]
  dropped = [i for i, n in enumerate(lengths) if n > max_prompt_tokens]
  gone = set(dropped)
  return [ex for i, ex in enumerate(examples) if i not in gone], dropped


def _left_pad(x: np.ndarray, width: int, value) -> np.ndarray:
  if x.shape[1] == width:
    return x
  pad = np.full((x.shape[0], width - x.shape[1]), value, x.dtype)
  return np.concatenate([pad, x], axis=1)


def concat(rollouts: Sequence[Rollout], pad_id: int = 0) -> Rollout:
  """Merges rounds (same G and completion width); prompts are left-padded to a common width."""
  if len(rollouts) == 1:
    return rollouts[0]
  width = max(r.prompt_ids.shape[1] for r in rollouts)
  cat = lambda name: np.concatenate([getattr(r, name) for r in rollouts])
  turns = any(r.policy_mask is not None for r in rollouts)
  return Rollout(
      examples=[e for r in rollouts for e in r.examples],
      prompt_ids=np.concatenate([_left_pad(r.prompt_ids, width, pad_id) for r in rollouts]),
      prompt_mask=np.concatenate([_left_pad(r.prompt_mask, width, False) for r in rollouts]),
      completion_ids=cat("completion_ids"), completion_mask=cat("completion_mask"),
      sampler_logp=cat("sampler_logp"), lengths=cat("lengths"), truncated=cat("truncated"),
      texts=[t for r in rollouts for t in r.texts], group_size=rollouts[0].group_size,
      policy_mask=np.concatenate([r.sampled_mask() for r in rollouts]) if turns else None,
      tool_calls=[c for r in rollouts for c in (r.tool_calls or [[]] * len(r.texts))]
      if turns else None)


def take_groups(r: Rollout, groups: Sequence[int]) -> Rollout:
  """The rollout restricted to `groups` (indices of prompts), in that order."""
  groups = np.asarray(groups, np.int64)
  rows = group_rows(groups, r.group_size)
  return Rollout(examples=[r.examples[g] for g in groups], prompt_ids=r.prompt_ids[groups],
                 prompt_mask=r.prompt_mask[groups], completion_ids=r.completion_ids[rows],
                 completion_mask=r.completion_mask[rows], sampler_logp=r.sampler_logp[rows],
                 lengths=r.lengths[rows], truncated=r.truncated[rows],
                 texts=[r.texts[i] for i in rows], group_size=r.group_size,
                 policy_mask=None if r.policy_mask is None else r.policy_mask[rows],
                 tool_calls=None if r.tool_calls is None else [r.tool_calls[i] for i in rows])
