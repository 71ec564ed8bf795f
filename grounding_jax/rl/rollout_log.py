"""Readable rollouts: what the policy wrote at a step, how the recipe read it and what it scored.

Every `logging.rollouts_every` steps (0 = off) the trainer writes

    <workdir>/rollouts/step_<N>.jsonl     one line per completion the step trained on

and a TensorBoard text summary (tag `rollouts`) of the best and the worst completion of the first
few groups; with W&B on (logging.wandb.project) the lines go there too, as a table. One line:

    step, stage           the logged step (as in metrics.jsonl) and the stage's name
    group, sample         the advantage group (a question: with evidence-contrast groups, all of
                          its conditions) and the completion's index in it
    id, question          the example's id and question; `prompt`, the rendered prompt text, only on
                          the first line of each prompt (the next G-1 lines share it)
    answerable, condition the example's label (null: unlabelled) and, in a contrast group, its
                          evidence condition (gold_kept / gold_removed / ...)
    completion            the sampled text; num_tokens, truncated (hit max_new_tokens)
    answer, parsed        recipe.answer and the recipe's parse of it (a dataclass's fields, or the
                          value); abstained, when the recipe's reward has an abstention component
    reward, rewards       the total the advantages normalise and each component by name
    advantage, trained    the completion's advantage; False where the loss masks the row out
                          (DAPO's truncated completions, skipped groups)

The rows are process 0's groups (a multi-host run's other hosts hold the rest); the values are the
host's own (the step's rewards and advantages, already on the host: no device transfer). The files
are small (a step's texts), written whole through grounding_jax.paths (local or bucket).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Optional

import jax
import numpy as np

from grounding_jax import metrics_writer
from grounding_jax import paths
from grounding_jax.data import contrast as contrast_lib
from grounding_jax.rl import collect

SHOWN_GROUPS = 4  # groups whose best and worst completion the TensorBoard text shows
_TABLE_COLUMNS = ("step", "stage", "group", "sample", "id", "question", "completion", "answer",
                  "reward", "advantage", "rewards", "answerable", "truncated", "num_tokens")


def due(every: int, step: int) -> bool:
  """Whether logged step `step` (from 1) writes its rollouts under logging.rollouts_every=`every`."""
  return bool(every) and step % every == 0


def _plain(value: Any) -> Any:
  """`value` as JSON: numpy scalars as Python numbers, dataclasses as dicts of their fields."""
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  if isinstance(value, np.generic):
    return value.item()
  return value


def rows(step: int, stage: str, batch: collect.GroupBatch, recipe, prompt_fn: Callable[[Any], str],
         group_size: int) -> list[dict]:
  """One dict per completion of `batch` (the line fields above); `group_size` is an advantage
  group's rows (config.rollout.group_size)."""
  ro = batch.rollout
  examples = ro.row_examples()
  abstain = recipe.abstention_component
  out = []
  for i, text in enumerate(ro.texts):
    ex = examples[i]
    line = {"step": int(step), "stage": stage, "group": i // group_size, "sample": i % group_size,
            "id": ex.id, "question": ex.question}
    if i % ro.group_size == 0:  # the first row of its prompt
      line["prompt"] = prompt_fn(ex)
    line["answerable"] = ex.answerable
    condition = ex.meta.get(contrast_lib.CONDITION_KEY, "")
    if condition:
      line["condition"] = condition
    line.update(completion=text, num_tokens=int(ro.lengths[i]), truncated=bool(ro.truncated[i]),
                answer=recipe.answer(text), parsed=_plain(recipe.parse(text)))
    if abstain in batch.values:
      line["abstained"] = bool(batch.values[abstain][i] > 0.5)
    line["reward"] = float(batch.values["reward"][i])
    line["rewards"] = {k: float(v[i]) for k, v in sorted(batch.values.items()) if k != "reward"}
    line.update(advantage=float(batch.advantages[i]), trained=bool(batch.loss_mask[i].any()))
    out.append(line)
  return out


def samples_markdown(lines: list[dict], shown_groups: int = SHOWN_GROUPS) -> str:
  """The best and the worst completion of the first `shown_groups` groups, as markdown."""
  parts = []
  for g in sorted({line["group"] for line in lines})[:shown_groups]:
    group = [line for line in lines if line["group"] == g]
    best = max(group, key=lambda line: line["reward"])
    worst = min(group, key=lambda line: line["reward"])
    for label, line in (("best", best), ("worst", worst)) if best is not worst else (("all", best),):
      components = ", ".join(f"{k} {v:.3g}" for k, v in line["rewards"].items())
      parts.append(f"**group {g} · {label} · sample {line['sample']}** · reward {line['reward']:.3g}"
                   f" ({components}) · advantage {line['advantage']:.3g} · answer "
                   f"`{line['answer']}`\n\nQ: {line['question']}\n\n```\n{line['completion']}\n```")
  return "\n\n---\n\n".join(parts)


class RolloutLog:
  """Writes the readable rollouts of the steps `due` under `<workdir>/rollouts` (process 0 only)."""

  def __init__(self, workdir: str, every: int, writer: metrics_writer.MetricsWriter):
    self.every, self.writer = every, writer
    self.folder = paths.as_path(workdir) / "rollouts"
    self.active = bool(every) and jax.process_index() == 0

  def write(self, step: int, stage: str, batch: Optional[collect.GroupBatch], recipe,
            prompt_fn: Callable[[Any], str], group_size: int) -> None:
    """Writes step `step`'s file, TensorBoard text and W&B table when the step is due."""
    if not self.active or batch is None or not due(self.every, step):
      return
    lines = rows(step, stage, batch, recipe, prompt_fn, group_size)
    self.folder.mkdir(parents=True, exist_ok=True)
    (self.folder / f"step_{step}.jsonl").write_text(
        "".join(json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in lines),
        encoding="utf-8")
    self.writer.write_text(step, "rollouts", samples_markdown(lines))
    self.writer.write_table(step, "rollouts", _TABLE_COLUMNS, [
        [json.dumps(line[c]) if c == "rewards" else line[c] for c in _TABLE_COLUMNS]
        for line in lines])


def read(workdir: str, step: int) -> list[dict]:
  """The lines of `<workdir>/rollouts/step_<step>.jsonl`."""
  return metrics_writer.read_jsonl(paths.as_path(workdir) / "rollouts" / f"step_{step}.jsonl")
