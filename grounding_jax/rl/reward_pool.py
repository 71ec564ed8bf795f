"""Host rewards in a process pool, with a timeout per batch; failures are reported, never hang the loop.

Rows are scored in chunks (one chunk per worker task). A chunk that raises is re-scored row by row in
the worker so the report names the failing example ids. A chunk still running when the batch timeout
expires is abandoned: the pool is terminated and re-created, and its rows count as failed.
A row whose total reward is NaN or inf counts as failed too. What happens to failed rows
(`on_error`) never rewards the failure:
  "min"   — score them at the reward's minimum (`reward_floor`): a judge timeout ranks with the worst
            answer, never above a wrong one (TruthRL's floor is −1; a 0 would earn a positive advantage);
  "skip"  — the caller drops their groups (the trainer masks them out of the loss);
  "raise" — stop with the failing example ids.
There is no "zero": it equals "min" for rewards whose floor is 0 and rewards failure for the others.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import time
import traceback
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

ON_ERROR = ("min", "skip", "raise")


def reward_floor(functions: Sequence[tuple[str, float, Callable]]) -> float:
  """The lowest total Σ weight · fn(...)["reward"] can take: Σ weight · low over positive weights
  (and weight · high over negative ones), from each function's `reward_range` = (low, high).

  Raises:
    ValueError: a function has no `reward_range`, or its bound is infinite (names the function).
  """
  floor = 0.0
  for name, weight, fn in functions:
    if not weight:
      continue
    bounds = getattr(fn, "reward_range", None)
    if bounds is None:
      raise ValueError(f"reward {name!r} ({type(fn).__name__}) has no reward_range, so "
                       "reward.on_error='min' cannot score its failed rows at its minimum; give it a "
                       "reward_range property (low, high), or set reward.on_error='skip' or 'raise'")
    bound = float(bounds[0] if weight > 0 else bounds[1])
    if not math.isfinite(bound):
      raise ValueError(f"reward {name!r}: reward_range {tuple(bounds)} has no finite "
                       f"{'low' if weight > 0 else 'high'} bound for weight {weight}, so "
                       "reward.on_error='min' has no minimum to score failed rows at; set "
                       "reward.on_error='skip' (drop their groups) or 'raise'")
    floor += float(weight) * bound
  return floor


@dataclasses.dataclass
class RewardResult:
  """Scores of one rollout batch.

  Attributes:
    values: name -> float64 [N]; "reward" is the weighted total; components are "<fn>/<component>"
      (just "<component>" when there is one function). Failed rows hold 0 in the components and, in
      "reward", the floor (on_error="min") or 0 ("skip": their groups are dropped).
    failed: bool [N], rows whose reward raised, timed out or was not finite.
    errors: human-readable lines, one per failure: "example <id> (row r): <error>".
    nonfinite: bool [N], the failed rows whose total reward was NaN or inf.
  """
  values: dict[str, np.ndarray]
  failed: np.ndarray
  errors: list[str]
  nonfinite: np.ndarray


def _score_chunk(fns: Sequence[tuple[str, float, Callable]], completions, examples, extras):
  """Runs in a worker. Returns (values: name -> [n], failures: [(row, message)]); failed rows hold 0."""
  def run(cs, es, ex):
    out = {}
    total = np.zeros(len(cs))
    for name, weight, fn in fns:
      scores = fn(cs, es, **ex)
      total = total + weight * np.asarray(scores["reward"], np.float64)
      for k, v in scores.items():
        out[k if len(fns) == 1 else f"{name}/{k}"] = np.asarray(v, np.float64)
    out["reward"] = total
    return out

  try:
    return run(completions, examples, extras), []
  except Exception:  # pylint: disable=broad-except
    pass
  # Something raised: score row by row so the report can name the failing examples.
  values: dict[str, np.ndarray] = {}
  failures = []
  for i in range(len(completions)):
    try:
      row = run(completions[i:i + 1], examples[i:i + 1], {k: v[i:i + 1] for k, v in extras.items()})
    except Exception as e:  # pylint: disable=broad-except
      failures.append((i, f"{type(e).__name__}: {e}"))
      continue
    for k, v in row.items():
      values.setdefault(k, np.zeros(len(completions)))[i] = v[0]
  if not failures:  # fails only as a batch
    failures = [(i, traceback.format_exc(limit=2)) for i in range(len(completions))]
  return values, failures


def _warm_up(functions) -> int:
  """Runs in a worker: unpickling `functions` imported their modules; nothing else to do."""
  return len(functions)


class RewardPool:
  """Scores completions with weighted reward functions, in worker processes.

  Args:
    functions: [(name, weight, RewardFn)] — picklable callables `fn(completions, examples, **extra)`.
    num_workers: worker processes; 0 scores in this process (then no timeout can be enforced).
    timeout_seconds: wall-clock budget for one batch.
    on_error: "min" | "skip" | "raise" (module docstring).
    chunk_size: rows per worker task (default: N / num_workers, rounded up).
  """

  def __init__(self, functions: Sequence[tuple[str, float, Callable]], *, num_workers: int = 2,
               timeout_seconds: float = 300.0, on_error: str = "min",
               chunk_size: Optional[int] = None):
    if on_error not in ON_ERROR:
      hint = (" ('zero' is gone: it scores a failed row above a wrong answer when the reward's floor "
              "is below 0; 'min' is the same as 0 where the floor is 0)") if on_error == "zero" else ""
      raise ValueError(f"reward.on_error={on_error!r}; expected one of {ON_ERROR}{hint}")
    if not functions:
      raise ValueError("reward.functions is empty; configure at least one reward")
    self.floor = reward_floor(functions) if on_error == "min" else 0.0
    self.functions = list(functions)
    self.num_workers = int(num_workers)
    self.timeout_seconds = float(timeout_seconds)
    self.on_error = on_error
    self.chunk_size = chunk_size
    self._pool = None

  def _get_pool(self):
    if self._pool is None and self.num_workers > 0:
      # spawn: the trainer process runs JAX threads, which fork() would copy in a broken state.
      self._pool = multiprocessing.get_context("spawn").Pool(self.num_workers)
      # Start-up (interpreter, imports, unpickling the reward functions) is not scoring time: wait
      # for it outside the per-batch timeout, with its own generous limit.
      try:
        self._pool.map_async(_warm_up, [self.functions] * self.num_workers, chunksize=1).get(
            timeout=max(120.0, self.timeout_seconds))
      except multiprocessing.TimeoutError as e:
        self.close()
        raise RuntimeError(f"reward workers did not start within {max(120.0, self.timeout_seconds)}s; "
                           "set reward.num_workers=0 to score in-process") from e
    return self._pool

  def close(self) -> None:
    if self._pool is not None:
      self._pool.terminate()
      self._pool.join()
      self._pool = None

  def __del__(self):
    try:
      self.close()
    except Exception:  # pylint: disable=broad-except
      pass

  def __call__(self, completions: Sequence[str], examples: Sequence[Any],
               extras: Optional[Mapping[str, Sequence[Any]]] = None) -> RewardResult:
    """Scores N completions (completions[i] for examples[i]); see RewardResult."""
    n = len(completions)
    extras = {k: list(v) for k, v in (extras or {}).items()}
    completions, examples = list(completions), list(examples)
    pool = self._get_pool()
    size = self.chunk_size or max(1, -(-n // max(self.num_workers, 1)))
    starts = list(range(0, n, size))
    chunk_results: dict[int, tuple] = {}
    if pool is None:
      for s in starts:
        sl = slice(s, s + size)
        chunk_results[s] = _score_chunk(self.functions, completions[sl], examples[sl],
                                        {k: v[sl] for k, v in extras.items()})
    else:
      handles = {s: pool.apply_async(_score_chunk, (
          self.functions, completions[s:s + size], examples[s:s + size],
          {k: v[s:s + size] for k, v in extras.items()})) for s in starts}
      deadline = time.monotonic() + self.timeout_seconds
      timed_out = []
      for s, h in handles.items():
        try:
          chunk_results[s] = h.get(timeout=max(deadline - time.monotonic(), 0.0))
        except multiprocessing.TimeoutError:
          timed_out.append(s)
        except Exception as e:  # pylint: disable=broad-except  (e.g. unpicklable result)
          chunk_results[s] = ({}, [(i, f"{type(e).__name__}: {e}")
                                     for i in range(len(completions[s:s + size]))])
      if timed_out:
        self.close()  # the hung workers die with the pool; the next batch gets a fresh one
        for s in timed_out:
          m = len(completions[s:s + size])
          chunk_results[s] = ({}, [(i, f"timed out after {self.timeout_seconds:.0f}s")
                                     for i in range(m)])
    return self._assemble(n, size, chunk_results, examples)

  def _assemble(self, n, size, chunk_results, examples) -> RewardResult:
    values: dict[str, np.ndarray] = {}
    failed = np.zeros(n, bool)
    errors = []
    for s, (vals, failures) in sorted(chunk_results.items()):
      for i, msg in failures:
        row = s + i
        failed[row] = True
        errors.append(f"example {getattr(examples[row], 'id', '') or '?'} (row {row}): {msg}")
      for k, v in vals.items():
        values.setdefault(k, np.zeros(n))[s:s + len(v)] = v
    values.setdefault("reward", np.zeros(n))
    nonfinite = ~failed & ~np.isfinite(values["reward"])
    for row in np.flatnonzero(nonfinite):
      failed[row] = True
      errors.append(f"example {getattr(examples[row], 'id', '') or '?'} (row {row}): reward is "
                    f"{values['reward'][row]} (not finite)")
    for k in values:
      values[k][failed] = 0.0
    values["reward"][failed] = self.floor
    if errors and self.on_error == "raise":
      raise RuntimeError("reward failed on %d row(s):\n  %s\nSet reward.on_error='min' or 'skip' "
                         "to continue past such rows." % (int(failed.sum()), "\n  ".join(errors[:10])))
    return RewardResult(values=values, failed=failed, errors=errors, nonfinite=nonfinite)
