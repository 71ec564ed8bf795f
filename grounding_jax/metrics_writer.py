"""Training metrics to TensorBoard event files, a JSONL file, a console progress bar and, when asked
for, Weights & Biases.

Only process 0 writes (multi-host runs compute identical global metrics on every host). The log
directory may be a bucket URI (gs://…, through grounding_jax.paths): metrics.jsonl is then rewritten
whole at most every `bucket_flush_seconds` (bucket objects cannot be appended to), and TensorBoard
events go to the bucket when tensorboardX can write there (gs:// needs google-cloud-storage, s3://
boto3; otherwise a warning and no event files, metrics.jsonl still holds every value). Text (a few
rollout samples, rl/rollout_log.py) goes to TensorBoard; tables of rows go to W&B only.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import uuid
from typing import Mapping, Optional, Sequence

import jax
import numpy as np

from grounding_jax import paths


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

  With `wandb_options` (wandb.init's project, entity, name, mode; a non-empty project turns it on)
  the same scalars go to a W&B run, whose id is kept in `<logdir>/wandb_run_id` so that a resumed
  run continues it; W&B keeps only increasing steps, so it drops the rows a resume replays (the
  resumed run's values of those steps are in metrics.jsonl and TensorBoard). `wandb` is imported
  only then.
  """

  def __init__(self, logdir: str | os.PathLike, *, total_steps: Optional[int] = None,
               initial_step: int = 0, console: bool = True,
               console_keys: Sequence[str] = ("reward/mean", "loss", "kl", "completion_length/mean"),
               bucket_flush_seconds: float = 30.0,
               wandb_options: Optional[Mapping[str, str]] = None,
               run_config: Optional[Mapping] = None):
    self.logdir = paths.as_path(logdir)
    self.active = jax.process_index() == 0
    self._console_keys = tuple(console_keys)
    self._tb, self._tb_opened = None, False
    self._bar = None
    self._jsonl = None
    self._bucket_lines: list[str] | None = None  # on a bucket: the whole file, rewritten on flush
    self._bucket_flush_seconds = bucket_flush_seconds
    self._last_upload = 0.0
    self._wandb = None
    if not self.active:
      return
    self.logdir.mkdir(parents=True, exist_ok=True)
    self._path = self.logdir / "metrics.jsonl"
    lines = self._existing_rows()
    self._last_step = int(json.loads(lines[-1])["step"]) if lines else None
    if paths.is_local(self.logdir):
      self._rewrite(lines)  # drops a torn last row and terminates the last line
      self._jsonl = open(self._path, "a", encoding="utf-8")
    else:  # a resumed run keeps the rows already there
      self._bucket_lines = lines
      self._last_upload = time.monotonic()
    if console:
      import tqdm  # pylint: disable=g-import-not-at-top
      self._bar = tqdm.tqdm(total=total_steps, initial=initial_step, unit="step", dynamic_ncols=True)
    if wandb_options and wandb_options.get("project"):
      self._wandb = _wandb_run(self.logdir, wandb_options, run_config)

  def write(self, step: int, metrics: Mapping[str, float]) -> None:
    """Records `metrics` (name -> scalar) at `step`. Non-finite values are kept (as null in JSONL)."""
    if not self.active:
      return
    step = int(step)
    replay = self._last_step is not None and step <= self._last_step
    if replay:
      self._keep_rows_before(step)
    if not self._tb_opened:
      self._tb = _tensorboard_writer(self.logdir / "tb", purge_step=step if replay else None,
                                     filename_suffix=f".{os.getpid()}.{step}")
      self._tb_opened = True
    self._last_step = step
    row = {"step": step}
    for name, value in metrics.items():
      v = float(np.asarray(value))
      row[name] = v if math.isfinite(v) else None
      if self._tb is not None:
        self._tb.add_scalar(name, v, global_step=step)
    if self._wandb is not None:
      self._wandb.log({name: float(np.asarray(value)) for name, value in metrics.items()}, step=step)
    line = json.dumps(row) + "\n"
    if self._jsonl is not None:
      self._jsonl.write(line)
      self._jsonl.flush()
    else:
      self._bucket_lines.append(line)
      if time.monotonic() - self._last_upload >= self._bucket_flush_seconds:
        self._upload()
    if self._bar is not None:
      self._bar.update(1)
      shown = {k.split("/")[0] if k.endswith("/mean") else k: f"{row[k]:.4g}"
               for k in self._console_keys if row.get(k) is not None}
      self._bar.set_postfix(shown, refresh=True)

  def write_text(self, step: int, tag: str, text: str) -> None:
    """A markdown `text` at `step` as a TensorBoard text summary (call after `write` of the step,
    which opens the event file)."""
    if self.active and self._tb is not None:
      self._tb.add_text(tag, text, global_step=int(step))

  def write_table(self, step: int, tag: str, columns: Sequence[str], rows: Sequence[Sequence]) -> None:
    """`rows` (one value per column) at `step` as a W&B table; nothing without W&B."""
    if self.active and self._wandb is not None:
      import wandb  # pylint: disable=g-import-not-at-top  (imported by _wandb_run already)
      self._wandb.log({tag: wandb.Table(columns=list(columns), data=[list(r) for r in rows])},
                      step=int(step))

  def _existing_rows(self) -> list[str]:
    """The rows already in metrics.jsonl, each ending in a newline; a torn last row (a kill mid-write:
    that step is replayed after the checkpoint) is dropped."""
    if not self._path.exists():
      return []
    lines = [line for line in self._path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if lines:
      try:
        json.loads(lines[-1])
      except json.JSONDecodeError:
        lines = lines[:-1]
    return [line + "\n" for line in lines]

  def _keep_rows_before(self, step: int) -> None:
    if self._jsonl is None:
      self._bucket_lines = [line for line in self._bucket_lines if json.loads(line)["step"] < step]
      return
    self._jsonl.close()
    self._rewrite([line for line in self._existing_rows() if json.loads(line)["step"] < step])
    self._jsonl = open(self._path, "a", encoding="utf-8")

  def _rewrite(self, lines: Sequence[str]) -> None:
    tmp = f"{self._path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      f.writelines(lines)
    os.replace(tmp, str(self._path))  # atomic: a kill now leaves the old or the new file, never half

  def _upload(self) -> None:
    self._path.write_text("".join(self._bucket_lines), encoding="utf-8")
    self._last_upload = time.monotonic()

  def flush(self) -> None:
    if not self.active:
      return
    if self._jsonl is not None:
      self._jsonl.flush()
    else:
      self._upload()
    if self._tb is not None:
      self._tb.flush()

  def close(self) -> None:
    if not self.active:
      return
    if self._bar is not None:
      self._bar.close()
    if self._jsonl is not None:
      self._jsonl.close()
    else:
      self._upload()
    if self._tb is not None:
      self._tb.close()
    if self._wandb is not None:
      self._wandb.finish()
    self.active = False


def _tensorboard_writer(logdir, **options):
  """A tensorboardX SummaryWriter for `logdir`, or None (with a warning) where it cannot write.
  Event files are named by the second they open in; callers pass a `filename_suffix` so that a writer
  opened in the same second (a resume in the same process) does not truncate the earlier file."""
  import tensorboardX  # pylint: disable=g-import-not-at-top  (optional at import time)
  where = paths.scheme(logdir)
  if where not in ("", "gs", "s3"):  # tensorboardX would treat "az://…" as a local folder name
    logging.warning("MetricsWriter: tensorboardX cannot write to %s; no TensorBoard events "
                    "(metrics.jsonl has every value)", logdir)
    return None
  try:
    return tensorboardX.SummaryWriter(str(logdir), **options)
  except ImportError as e:  # gs:// needs google-cloud-storage, s3:// boto3
    logging.warning("MetricsWriter: no TensorBoard events under %s (%s; `pip install "
                    "grounding_jax[gcs]` for gs://); metrics.jsonl has every value", logdir, e)
    return None


def _wandb_run(logdir, options: Mapping[str, str], run_config: Optional[Mapping]):
  """A W&B run for wandb.init's `options` (project, entity, name, mode; empty ones left to wandb),
  continuing the run whose id `<logdir>/wandb_run_id` holds (a resumed run), else a new one."""
  try:
    import wandb  # pylint: disable=g-import-not-at-top  (optional: only runs that ask import it)
  except ImportError as e:
    raise ImportError(f"config.logging.wandb.project={options['project']!r} asks for Weights & "
                      "Biases, but wandb is not installed: `pip install wandb` (or set "
                      "logging.wandb.project='')") from e
  id_file = paths.as_path(logdir) / "wandb_run_id"
  run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:12]
  id_file.write_text(run_id)
  init = {k: v for k, v in options.items() if v}
  # W&B's own files need a local folder; a bucket logdir leaves them in wandb's default (./wandb).
  where = dict(dir=str(logdir)) if paths.is_local(logdir) else {}
  return wandb.init(**init, id=run_id, resume="allow", config=dict(run_config or {}), **where)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
  """The rows written by MetricsWriter, in order (a local path or a bucket URI)."""
  text = paths.as_path(path).read_text(encoding="utf-8")
  return [json.loads(line) for line in text.splitlines() if line.strip()]



# JAX's compile-phase events (jax/_src/dispatch.py): tracing to a jaxpr, lowering to MLIR, and XLA's
# backend compilation. The wall-clock time they cover says how much of a step went to building
# programs. Covered, not summed: update_loop.compile_ahead compiles in a thread while the step samples,
# and traces nest, so summed durations could exceed the step's own time.
_COMPILE_EVENTS = frozenset({"/jax/core/compile/jaxpr_trace_duration",
                             "/jax/core/compile/jaxpr_to_mlir_module_duration",
                             "/jax/core/compile/backend_compile_duration"})
_compile_seconds = 0.0
_compile_spans: list[list[float]] = []  # disjoint [start, end] perf_counter spans, sorted by start
_compile_lock = threading.Lock()
_listening = False
_FORGET_AFTER_S = 3600.0  # spans that ended this long before a new event's start can no longer overlap it


def _cover(start: float, end: float) -> float:
  """Adds [start, end] to the covered spans; returns the seconds of it not covered before."""
  global _compile_spans
  kept, new, merged = [], end - start, [start, end]
  for s, e in _compile_spans:  # the spans are disjoint, so their overlaps with [start, end] add up
    if e < start or s > end:  # disjoint: keep (unless long past)
      if e >= start - _FORGET_AFTER_S:
        kept.append([s, e])
    else:  # overlapping: count only the new part, merge
      new -= min(e, end) - max(s, start)
      merged = [min(s, merged[0]), max(e, merged[1])]
  _compile_spans = sorted(kept + [merged])
  return max(new, 0.0)


def _on_event_duration(event: str, duration: float, **kwargs) -> None:
  del kwargs
  global _compile_seconds
  if event in _COMPILE_EVENTS:
    end = time.perf_counter()  # events are reported as they end
    with _compile_lock:
      _compile_seconds += _cover(end - duration, end)


def compile_seconds() -> float:
  """Wall-clock seconds during which this process was tracing, lowering or compiling JAX programs
  (in any thread) since the first call (the listener is registered then): the difference across a
  step is the step's compile time
  (the trainer's `time/compile`, spent inside its sample / reference / update phases)."""
  global _listening
  if not _listening:
    jax.monitoring.register_event_duration_secs_listener(_on_event_duration)
    _listening = True
  return _compile_seconds
