"""What evaluating a run needs from its config: the checks of config.evals and the reward functions
the run's stages score with.

    from_config.check_config(config)                  # config.evals, before any model loads
    rewards = from_config.last_stage_rewards(config)   # [(name, weight, RewardFn)], logged as reward

launch/evaluate.py builds its parts here, so evaluating a run needs nothing from the training loop;
training (rl/setup.py, rl/validate.py) builds its rewards and checks its validation here too.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

import ml_collections

from grounding_jax import recipes
from grounding_jax.data import splits

RewardSpec = Sequence[tuple[str, float, Callable]]

# A reward option value naming the policy's tokenizer folder (e.g. LEAR's length reward counts its
# tokens, arXiv:2507.15586 §3.2, Eqs. 6-7): a path, so the reward pickles to worker processes and
# loads it there.
POLICY_TOKENIZER = "policy"


def check_config(c: ml_collections.ConfigDict) -> None:
  """Raises ValueError naming the field when config.evals cannot run (its data kind, sample and
  batch sizes, shared-prefix setting)."""
  ev = c.evals
  if ev.data.kind not in splits.KINDS:
    raise ValueError(f"evals.data.kind={ev.data.kind!r}; expected one of {splits.KINDS}")
  if ev.decoding.num_samples < 1 or ev.batch_size < 1:
    raise ValueError(f"evals.decoding.num_samples={ev.decoding.num_samples} and evals.batch_size="
                     f"{ev.batch_size} must be >= 1")
  shared = ev.get("shared_prefix_min_tokens", 0)
  if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
    raise ValueError(f"evals.shared_prefix_min_tokens={shared!r} must be an int >= 0 (0: every "
                     "prompt runs whole)")


def stage_reward_section(config: ml_collections.ConfigDict, st: ml_collections.ConfigDict):
  """The reward.functions stage `st` scores with: its own when set, else the run's."""
  return st.reward.functions if st.reward.get("functions") else config.reward.functions


def policy_folder(view: ml_collections.ConfigDict, tokenizer=None) -> str:
  """The policy's HF folder: config.model.path when it is a folder, else the folder the given
  tokenizer came from, else "" (e.g. model.path "smollm2" before launch/train.py resolves it)."""
  for path in (view.model.path, getattr(tokenizer, "name_or_path", "")):
    if path and os.path.isdir(path):
      return path
  return ""


def reward_options(options: Mapping[str, Any], policy_path: str) -> dict:
  """A reward's config options with tokenizer="policy" replaced by the policy's folder."""
  out = dict(options)
  if out.get("tokenizer") == POLICY_TOKENIZER:
    if not policy_path:
      raise ValueError("a reward option tokenizer='policy' needs the policy's folder: set "
                       "config.model.path to an HF folder (or give the tokenizer folder itself)")
    out["tokenizer"] = policy_path
  return out


def reward_functions(view: ml_collections.ConfigDict, policy_path: str = "",
                     functions=None) -> RewardSpec:
  """[(name, weight, RewardFn)] of `functions` (default view.reward.functions; `policy_path`
  resolves tokenizer="policy" options, default config.model.path).

  Raises:
    ValueError: a judge spec puts a model on a mesh (`mesh=`) while rewards are scored in worker
      processes: the judge must share the trainer process's devices (reward.num_workers=0).
  """
  functions = view.reward.functions if functions is None else functions
  for i, f in enumerate(functions):
    for key, value in dict(f.get("options", {})).items():
      mesh = value.get("mesh") if hasattr(value, "get") else None
      if mesh and value.get("kind") in ("llm", "nli") and view.reward.num_workers > 0:
        mesh = mesh.to_dict() if hasattr(mesh, "to_dict") else mesh
        raise ValueError(f"config.reward.functions[{i}].options.{key}.mesh={mesh!r} "
                         f"shards the judge over the trainer's devices, but reward.num_workers="
                         f"{view.reward.num_workers} scores rewards in worker processes, which cannot "
                         "share them; set --config.reward.num_workers=0 (or drop the judge's mesh)")
  policy_path = policy_path or policy_folder(view)
  return [(f.name, float(f.weight),
           recipes.get_reward(f.name, **reward_options(f.get("options", {}), policy_path)))
          for f in functions]


def last_stage_rewards(config: ml_collections.ConfigDict) -> RewardSpec:
  """The reward functions of the run's last stage: what an evaluation logs as its reward."""
  return reward_functions(config, functions=stage_reward_section(config, config.stages[-1]))
