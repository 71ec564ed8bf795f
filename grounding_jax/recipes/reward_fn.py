"""What a recipe's reward is: `RewardFn`, the contract every reward keeps (named float64 [N]
components, one of them "reward"; a `reward_range`; batch checks whose errors name the example, field
and fix; picklable, for the trainer's process pool), and the example checks every reward uses
(`require_answers`, `require_meta`, `require_extra`, `check_judge_output`), plus DAPO's overlong
penalty (`overlong_penalty`) that rewards and the trainer's collection share."""

from __future__ import annotations

import abc
from typing import Any, Mapping, Sequence

import numpy as np

from grounding_jax.data.schema import Example


class RewardFn(abc.ABC):
  """`fn(completions, examples, **extra) -> {"reward": float64[N], <component>: float64[N], ...}`.

  A recipe subclasses it, sets `name`, implements `score(completions, examples, **extra)` returning
  named float arrays (one of them "reward"), and reports its `reward_range`. The base class checks the
  batch (caller errors raise) and what the recipe returns (recipe bugs raise). Model output never
  raises: recipes turn malformed text into their format penalty. RewardFn objects are plain picklable
  classes (no lambdas, no open handles of their own), so the trainer can ship them to worker processes.
  """

  name: str = "reward"

  @property
  @abc.abstractmethod
  def reward_range(self) -> tuple[float, float]:
    """(low, high) bounds of "reward" under this configuration (high may be +inf)."""

  @abc.abstractmethod
  def score(self, completions: list[str], examples: list[Example],
            **extra: Any) -> dict[str, np.ndarray]:
    """Scores a checked batch; see `__call__`."""

  def __call__(self, completions: Sequence[str], examples: Sequence[Example],
               **extra: Any) -> dict[str, np.ndarray]:
    """Scores N completions, completions[i] written for examples[i].

    Args:
      completions: N decoded completion texts (special tokens removed).
      examples: N `Example`s (repeat an example for each of its G samples).
      **extra: recipe-specific per-completion inputs (see each recipe); the trainer passes
        `completion_lengths` (response tokens) and `truncated` to every recipe, and unknown keys are
        ignored, so the same extras go to any recipe.
    Returns:
      dict of float64 arrays of shape [N]: "reward" (the total) and named components.
    Raises:
      ValueError: mismatched lengths, a non-string completion, or a malformed Example (the message
        names the example id and field).
    """
    completions, examples = list(completions), list(examples)
    if len(completions) != len(examples):
      raise ValueError(f"reward {self.name!r}: got {len(completions)} completions but "
                       f"{len(examples)} examples; pass one example per completion.")
    for i, c in enumerate(completions):
      if not isinstance(c, str):
        raise ValueError(f"reward {self.name!r}: completions[{i}] is {type(c).__name__}, expected str "
                         "(decode token ids before scoring).")
    for i, ex in enumerate(examples):
      if not isinstance(ex, Example):
        raise ValueError(f"reward {self.name!r}: examples[{i}] is {type(ex).__name__}, expected "
                         "grounding_jax.data.schema.Example.")
    out = self.score(completions, examples, **extra)
    n = len(completions)
    if "reward" not in out:
      raise RuntimeError(f"reward {self.name!r} returned no 'reward' key (got {sorted(out)}).")
    result = {}
    for key, value in out.items():
      arr = np.asarray(value, dtype=np.float64)
      if arr.shape != (n,):
        raise RuntimeError(f"reward {self.name!r}: component {key!r} has shape {arr.shape}, "
                           f"expected ({n},).")
      result[key] = arr
    return result

  def __repr__(self) -> str:
    opts = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()))
    return f"{type(self).__name__}({opts})"


def example_error(recipe: str, index: int, example: Example, field: str, problem: str,
                  fix: str = "") -> ValueError:
  """A ValueError naming the recipe, the example (id and batch index), the field and the fix."""
  msg = (f"reward {recipe!r}: example id={example.id!r} (batch index {index}): field "
         f"`{field}` {problem}.")
  return ValueError(msg + (f" {fix}" if fix else ""))


def require_answers(recipe: str, index: int, example: Example) -> tuple[str, ...]:
  """The example's gold answers; raises if there are none or one is not a string."""
  if not example.answers:
    raise example_error(recipe, index, example, "answers", "is empty",
                        "This recipe scores answers against gold answers; fix or drop the row.")
  for a in example.answers:
    if not isinstance(a, str):
      raise example_error(recipe, index, example, "answers", f"holds a {type(a).__name__} ({a!r})",
                          "Answers must be strings.")
  return tuple(example.answers)


def require_meta(recipe: str, index: int, example: Example, key: str, kind: type) -> Any:
  """example.meta[key], checked to be a `kind`."""
  meta: Mapping[str, Any] = example.meta or {}
  if key not in meta:
    raise example_error(recipe, index, example, f"meta[{key!r}]", "is missing",
                        f"This recipe needs meta[{key!r}] ({kind.__name__}).")
  value = meta[key]
  if not isinstance(value, kind):
    raise example_error(recipe, index, example, f"meta[{key!r}]",
                        f"is {type(value).__name__} ({value!r}), expected {kind.__name__}")
  return value


def require_extra(recipe: str, extra: Mapping[str, Any], key: str, n: int) -> list[Any]:
  """extra[key] as a list of length n; raises naming the key when it is missing or mis-sized."""
  if key not in extra or extra[key] is None:
    raise ValueError(f"reward {recipe!r} needs the per-completion input {key}=[...] (length {n}); "
                     f"got extras {sorted(extra)}.")
  value = list(extra[key])
  if len(value) != n:
    raise ValueError(f"reward {recipe!r}: {key} has length {len(value)}, expected {n}.")
  return value


def check_judge_output(recipe: str, who: str, value: Any, n: int) -> np.ndarray:
  """A judge's verdicts as bool[n]; raises (a judge bug, not model output) on a wrong shape."""
  arr = np.asarray(value)
  if arr.shape != (n,):
    raise RuntimeError(f"reward {recipe!r}: {who} returned shape {arr.shape} for {n} inputs; "
                       "judges must return one bool per input.")
  return arr.astype(bool)


def overlong_penalty(lengths: Sequence[int], max_length: int, buffer: int,
                     factor: float = 1.0) -> np.ndarray:
  """DAPO soft overlong punishment (DAPO Eq. 13): min(-(L - (max_length - buffer)) / buffer · factor, 0).

  lengths are response token counts (including <think> and EOS). Returns float64 [N], in
  [−factor, 0] for lengths ≤ max_length; e.g. 3072 / 1024 / 1.0 gives −0.5 at 2560, −1.0 at 3072.
  """
  lengths = np.asarray(lengths, dtype=np.float64)
  expected = max_length - buffer
  return np.minimum(-(lengths - expected) / buffer * factor, 0.0)
