"""Group-relative advantages, computed on the host in numpy.

Rows are prompt-major: rows [g*G, (g+1)*G) are the G completions of prompt g. One scalar advantage per
completion; the policy loss broadcasts it to every completion token (GRPO, DAPO).
"""

from __future__ import annotations

import numpy as np

SCALES = ("group", "batch", "batch_tokens", "none")
CONTRAST_BASELINES = ("shared", "condition")  # config advantage.contrast_baseline


def group_advantages(rewards: np.ndarray, group_size: int, *, scale: str = "group", std_ddof: int = 1,
                     std_floor: float = 0.0, eps: float = 1e-4, leave_one_out: bool = False,
                     std_tolerance: float = 0.0,
                     token_counts: np.ndarray | None = None) -> np.ndarray:
  """Group-normalised advantages.

  A_i = (r_i − b_i) / (max(std, std_floor) + eps), where
    b_i = mean of r over i's group (GRPO), or the mean of the *other* G−1 rewards (RLOO, leave_one_out);
    std = std of r over i's group (scale="group"; GRPO, DAPO), over the whole batch (scale="batch";
          TRL `scale_rewards="batch"`: the std of the raw rewards, one per completion), or 1 with
          no floor/eps (scale="none"; Dr.GRPO).
  Groups whose rewards are all equal (std <= std_tolerance) get exactly 0 (no signal), except under
  "batch_tokens".

  scale="batch_tokens" is REINFORCE++-baseline as verl computes it
  (`compute_reinforce_plus_plus_baseline_outcome_advantage`, arXiv:2501.03262): c_i = r_i − b_i is
  given to each of the completion's `token_counts[i]` loss tokens and whitened over all the batch's
  tokens, A_i = (c_i − m) / max(sqrt(v + eps), std_floor) with m, v the token-weighted mean and
  variance of c (v with `std_ddof` over tokens; verl: 1 and eps 1e-8 under the root). It differs
  from "batch", which divides the centred rewards by the std of the raw rewards, per completion, and
  does not re-centre: "batch" is not REINFORCE++-baseline. A zero-variance group gets −m / sqrt(v),
  as in verl (m is 0 when every completion has the same length).
  Under "batch" and "batch_tokens" the statistics are over the rows given (one host's).

  Args:
    rewards: float [N], N = num_groups * group_size, prompt-major.
    group_size: G.
    scale: "group" | "batch" | "none".
    std_ddof: 1 = unbiased std (torch default: TRL, VeRL, ARENA); 0 = population std (LEAR Eq. 11).
    std_floor: LEAR Eq. 11 divides by max(std, 0.1).
    eps: added to the denominator (TRL/ARENA 1e-4, VeRL 1e-6).
    leave_one_out: RLOO baseline.
    std_tolerance: a group whose population std is <= this counts as zero-variance (0 = exactly equal).
    token_counts: int [N], each completion's loss tokens; required by scale="batch_tokens".
  Returns:
    float32 [N].
  """
  rewards = np.asarray(rewards, dtype=np.float64)
  if rewards.ndim != 1:
    raise ValueError(f"rewards must be 1-D [N], got shape {rewards.shape}")
  if group_size < 1 or rewards.shape[0] % group_size:
    raise ValueError(f"{rewards.shape[0]} rewards do not split into groups of group_size={group_size}")
  if scale not in SCALES:
    raise ValueError(f"scale={scale!r}; expected one of {SCALES}")
  if leave_one_out and group_size < 2:
    raise ValueError("leave_one_out needs group_size >= 2")
  if std_ddof not in (0, 1) or (std_ddof == 1 and group_size < 2 and scale == "group"):
    raise ValueError(f"std_ddof={std_ddof} with group_size={group_size}; use 0 or 1 (1 needs G >= 2)")
  r = rewards.reshape(-1, group_size)  # [groups, G]
  mean = r.mean(axis=1, keepdims=True)
  if leave_one_out:
    baseline = (r.sum(axis=1, keepdims=True) - r) / (group_size - 1)
  else:
    baseline = mean
  centred = r - baseline
  if scale == "group":
    std = r.std(axis=1, ddof=std_ddof, keepdims=True)
    adv = centred / (np.maximum(std, std_floor) + eps)
  elif scale == "batch":
    std = rewards.std(ddof=std_ddof) if rewards.size > std_ddof else 0.0
    adv = centred / (max(std, std_floor) + eps)
  elif scale == "batch_tokens":
    return _whiten_over_tokens(centred.reshape(-1), token_counts, std_ddof, std_floor, eps)
  else:
    adv = centred
  adv[zero_variance_groups(rewards, group_size, std_tolerance)] = 0.0
  return adv.reshape(-1).astype(np.float32)


def _whiten_over_tokens(centred, token_counts, std_ddof, std_floor, eps) -> np.ndarray:
  """verl's masked_whiten of per-completion values repeated over their tokens, one per completion."""
  if token_counts is None or np.shape(token_counts) != centred.shape:
    got = None if token_counts is None else np.shape(token_counts)
    raise ValueError(f"scale='batch_tokens' needs token_counts [N={centred.shape[0]}], the loss "
                     f"tokens of each completion; got {got}")
  w = np.asarray(token_counts, np.float64)
  tokens = w.sum()
  if tokens <= std_ddof:
    return np.zeros(centred.shape, np.float32)
  mean = (w * centred).sum() / tokens
  var = (w * (centred - mean) ** 2).sum() / (tokens - std_ddof)
  return ((centred - mean) / max(np.sqrt(var + eps), std_floor)).astype(np.float32)


def zero_variance_groups(rewards: np.ndarray, group_size: int, tolerance: float = 0.0) -> np.ndarray:
  """bool [num_groups]: True where the prompt's rewards are all equal (tolerance 0), or where their
  population std is <= tolerance (F1, ROUGE or judge rewards that differ by float noise)."""
  r = np.asarray(rewards, dtype=np.float64).reshape(-1, group_size)
  equal = np.all(r == r[:, :1], axis=1)
  return equal | (r.std(axis=1) <= tolerance) if tolerance > 0 else equal

