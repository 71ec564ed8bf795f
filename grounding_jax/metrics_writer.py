"""Training metrics to TensorBoard event files, a JSONL file and a console progress bar.

Only process 0 writes (multi-host runs compute identical global metrics on every host).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Mapping, Optional, Sequence

import jax
import numpy as np


class MetricsWriter:
  """Writes one dict of scalars per step.

  Files: `<logdir>/metrics.jsonl` (one JSON object per line: {"step": s, name: value, ...}) and
  TensorBoard event files in `<logdir>/tb/`. The console shows a tqdm bar whose postfix holds
  `console_keys`.

  A resumed run replays the steps after its checkpoint, and its rows replace the earlier run's: the
  first write of a step the file already holds drops that step's row and every later one (they belong
  to the trajectory the resumed run re-computes), once, with an atomic rewrite; later writes append.
  A row torn by a kill mid-write is dropped when the file is opened. TensorBoard event files cannot be
  edited in place, so the replay starts a new event file with `purge_step` = the replayed step:
  TensorBoard then hides the earlier events at that step and after (a SessionLog START event, which
  its loader treats as a restart), and shows the replayed values.
  """

  def __init__(self, logdir: str | os.PathLike, *, total_steps: Optional[int] = None,
               initial_step: int = 0, console: bool = True,
               console_keys: Sequence[str] = ("reward/mean", "loss", "kl", "completion_length/mean")):
    self.logdir = pathlib.Path(logdir)
    self.active = jax.process_index() == 0
    self._console_keys = tuple(console_keys)
    self._tb = None
    self._bar = None
    self._jsonl = None
    if not self.active:
      return
    self.logdir.mkdir(parents=True, exist_ok=True)
    self._path = self.logdir / "metrics.jsonl"
    self._last_step = self._repair_and_last_step()
    self._jsonl = open(self._path, "a", encoding="utf-8")
    if console:
      import tqdm  # pylint: disable=g-import-not-at-top
      self._bar = tqdm.tqdm(total=total_steps, initial=initial_step, unit="step", dynamic_ncols=True)

  def write(self, step: int, metrics: Mapping[str, float]) -> None:
    """Records `metrics` (name -> scalar) at `step`. Non-finite values are kept (as null in JSONL)."""
    if not self.active:
      return
    step = int(step)
    replay = self._last_step is not None and step <= self._last_step
    if replay:
      self._keep_rows_before(step)
    if self._tb is None:
      import tensorboardX  # pylint: disable=g-import-not-at-top  (optional at import time)
      # Event files are named by the second they open in; the suffix keeps a writer opened in the
      # same second (a resume in the same process) from truncating the earlier file.
      self._tb = tensorboardX.SummaryWriter(str(self.logdir / "tb"),
                                            purge_step=step if replay else None,
                                            filename_suffix=f".{os.getpid()}.{step}")
    self._last_step = step
    row = {"step": step}
    for name, value in metrics.items():
      v = float(np.asarray(value))
      row[name] = v if math.isfinite(v) else None
      self._tb.add_scalar(name, v, global_step=step)
    self._jsonl.write(json.dumps(row) + "\n")
    self._jsonl.flush()
    if self._bar is not None:
      self._bar.update(1)
      shown = {k.split("/")[0] if k.endswith("/mean") else k: f"{row[k]:.4g}"
               for k in self._console_keys if row.get(k) is not None}
      self._bar.set_postfix(shown, refresh=True)

  def _repair_and_last_step(self) -> Optional[int]:
    """The last step in an existing metrics.jsonl (None if there is none); drops a torn last row."""
    if not self._path.exists():
      return None
    with open(self._path, encoding="utf-8") as f:
      lines = [line for line in f if line.strip()]
    if not lines:
      return None
    try:
      last = json.loads(lines[-1])
    except json.JSONDecodeError:  # killed mid-write: that step is replayed after the checkpoint
      self._rewrite(lines[:-1])
      return self._repair_and_last_step()
    if not lines[-1].endswith("\n"):  # whole but unterminated: the next row must not join it
      self._rewrite(lines)
    return int(last["step"])

  def _keep_rows_before(self, step: int) -> None:
    self._jsonl.close()
    with open(self._path, encoding="utf-8") as f:
      kept = [line for line in f if line.strip() and json.loads(line)["step"] < step]
    self._rewrite(kept)
    self._jsonl = open(self._path, "a", encoding="utf-8")

  def _rewrite(self, lines: Sequence[str]) -> None:
    tmp = self._path.with_name(self._path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
      f.writelines(line if line.endswith("\n") else line + "\n" for line in lines)
    os.replace(tmp, self._path)  # atomic: a kill now leaves the old or the new file, never half

  def flush(self) -> None:
    if self.active:
      self._jsonl.flush()
      if self._tb is not None:
        self._tb.flush()

  def close(self) -> None:
    if not self.active:
      return
    if self._bar is not None:
      self._bar.close()
    self._jsonl.close()
    if self._tb is not None:
      self._tb.close()
    self.active = False


def read_jsonl(path: str | os.PathLike) -> list[dict]:
  """The rows written by MetricsWriter, in order."""
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


# JAX's compile-phase events (jax/_src/dispatch.py): tracing to a jaxpr, lowering to MLIR, and XLA's
# backend compilation. Their durations summed say how much of a step went to building programs.
_COMPILE_EVENTS = frozenset({"/jax/core/compile/jaxpr_trace_duration",
                             "/jax/core/compile/jaxpr_to_mlir_module_duration",
                             "/jax/core/compile/backend_compile_duration"})
_compile_seconds = 0.0
_listening = False


def _on_event_duration(event: str, duration: float, **kwargs) -> None:
  del kwargs
  global _compile_seconds
  if event in _COMPILE_EVENTS:
    _compile_seconds += duration


def compile_seconds() -> float:
  """Seconds this process has spent tracing, lowering and compiling JAX programs since the first
  call (the listener is registered then): the difference across a step is the step's compile time
  (the trainer's `time/compile`, spent inside its sample / reference / update phases)."""
  global _listening
  if not _listening:
    jax.monitoring.register_event_duration_secs_listener(_on_event_duration)
    _listening = True
  return _compile_seconds
