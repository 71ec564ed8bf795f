r"""Runs a config's sweep: one launch/train.py run per override set in ROOT/<name>/, then a summary.

  # print one command per run (for a scheduler), run nothing
  python launch/sweep.py --config=configs/grace.py --workdir_root=gs://my-bucket/sweeps/grace --dry_run
  # run them one after another here (finished runs are skipped), or only some of them
  python launch/sweep.py --config=configs/truthrl.py:runlocal --workdir_root=/tmp/sweep_truthrl
  python launch/sweep.py --config=configs/lear.py --workdir_root=/runs/lear_tau --only=0,3
  # fields for every run, as for train.py; then only (re)write the summary of runs done elsewhere
  python launch/sweep.py --config=configs/grace.py --config.model.path=/ckpt/Qwen3-4B --workdir_root=...
  python launch/sweep.py --config=configs/grace.py --workdir_root=... --summary_only

A config file declares its sweep beside get_config, as a grid (every combination; the last field
varies fastest) or as a list of override dicts:

  def get_sweep(arg=None):
    return {"optimizer.learning_rate": [1e-6, 2e-6], "loss.kl_coef": [0.0, 1e-3]}
    return [{"preset": "dapo"}, {"preset": "dr_grpo", "optimizer.learning_rate": 1e-6}]

Keys are dotted config fields (`stages[0].num_steps`, `reward.functions[0].options.tau`) or "preset",
a function of grounding_jax.rl.config.presets (or a list of them) applied as train.py's --preset
applies it (grounding_jax.rl.config.overrides: fields win over presets). A module-level function
rather than a `config.sweep` field because launch/train.py only calls get_config: a run's ConfigDict
then holds only fields the trainer reads and never its siblings' values, and a sweep can name
presets, which are functions rather than field values (big_vision's get_hyper lives beside
get_config the same way).

Run names come from the overridden fields ("learning_rate=1e-06,kl_coef=0.001"; "base" for {}),
restricted to [A-Za-z0-9._=,+-] and made unique. A run is finished when its newest checkpoint's step
equals the config's total steps (Σ stages[i].num_steps; the trainer always checkpoints the last
step). ROOT/summary.json and ROOT/summary.md list every run of the sweep (not only those run now):
its overrides, status, step, and the final and best values of reward/mean and of every eval/<metric>
in <workdir>/logs/metrics.jsonl (best = max, min for keys matching --lower_is_better). For readers
(e.g. an evaluation report), summary.json is {"config": "path[:arg]", "runs": [{"index", "name",
"workdir", "overrides", "status" (finished | partial | not started | failed), "step", "total_steps",
"exit_code" (null if not run by this call), "metrics": {key: {"final", "final_step", "best",
"best_step", "higher_is_better"}}}]}.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.util
import itertools
import json
import math
import os
import pathlib
import re
import shlex
import subprocess
import sys
from typing import Any, Mapping, Sequence

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from grounding_jax import checkpoints
from grounding_jax import metrics_writer
from grounding_jax import paths
from grounding_jax.rl.config import overrides as overrides_lib

_REPO = pathlib.Path(__file__).resolve().parents[1]

_CONFIG = config_flags.DEFINE_config_file("config", None, "configs/*.py[:arg] declaring get_sweep; "
                                          "--config.<field> flags apply to every run.")
_ROOT = flags.DEFINE_string("workdir_root", None, "Runs go to <workdir_root>/<name>/ (local or gs://).")
_ONLY = flags.DEFINE_list("only", [], "Run only these runs (indices or names); the summary lists all.")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print one train.py command per unfinished run.")
_SUMMARY_ONLY = flags.DEFINE_bool("summary_only", False, "Run nothing; write the summary.")
_ENTRY = flags.DEFINE_string("entry", "launch/train.py", "The launcher each run starts.")
_PYTHON = flags.DEFINE_string("python", sys.executable, "Python for the runs.")
_LOWER = flags.DEFINE_string("lower_is_better", r"hallucinat|loss|error|(^|/)kl$",
                             "Metrics matching this regex are best at their minimum.")
flags.mark_flags_as_required(["config", "workdir_root"])

_NAME_CHARS = re.compile(r"[^A-Za-z0-9._=,+-]")
_MAX_NAME = 120


@dataclasses.dataclass
class Run:
  index: int
  name: str
  overrides: dict[str, Any]
  workdir: str
  total_steps: int


# ----------------------------------------------------------------------------- declaring and naming
def load_sweep(config_spec: str) -> list[dict[str, Any]]:
  """The override dicts declared by `get_sweep(arg)` in the config file of "path[:arg]"."""
  path, _, arg = config_spec.partition(":")
  spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  if not hasattr(module, "get_sweep"):
    raise ValueError(f"{path} declares no sweep: add `def get_sweep(arg=None)` beside get_config "
                     f"returning a grid {{field: [values]}} or a list of override dicts")
  return expand(module.get_sweep(arg or None), where=f"{path}:get_sweep({arg or ''})")


def expand(declared: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]],
           where: str = "sweep") -> list[dict[str, Any]]:
  """Override dicts from a grid (cartesian product, last key fastest) or a list of dicts."""
  if isinstance(declared, Mapping):
    for key, values in declared.items():
      if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{where}: grid entry {key!r} must be a non-empty list of values, got "
                         f"{values!r}")
    keys = list(declared)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(declared[k] for k in keys))]
  if isinstance(declared, (list, tuple)) and all(isinstance(d, Mapping) for d in declared):
    if not declared:
      raise ValueError(f"{where}: the list of runs is empty")
    return [dict(d) for d in declared]
  raise ValueError(f"{where} returned {type(declared).__name__}; expected a dict "
                   f"{{field: [values]}} (a grid) or a list of override dicts")


def _short_keys(keys: Sequence[str]) -> dict[str, str]:
  """Each dotted key's shortest suffix (whole components) that no other key ends with."""
  parts = {k: [p for p in re.split(r"[.\[\]]+", k) if p] for k in keys}
  out = {}
  for k in keys:
    for n in range(1, len(parts[k]) + 1):
      suffix = parts[k][-n:]
      if all(parts[o][-n:] != suffix for o in keys if o != k):
        break
    out[k] = ".".join(suffix)
  return out


def _format(value: Any) -> str:
  if isinstance(value, bool):
    return str(value).lower()
  if isinstance(value, float):
    return f"{value:g}"
  if isinstance(value, (list, tuple)):
    return "+".join(_format(v) for v in value)
  return str(value)


def run_names(runs: Sequence[Mapping[str, Any]]) -> list[str]:
  """A filesystem-safe, unique name per run, built from its overridden fields."""
  keys = list(dict.fromkeys(k for r in runs for k in r))
  short = _short_keys(keys)
  names, seen = [], {}
  for r in runs:
    name = ",".join(f"{short[k]}={_format(v)}" for k, v in r.items()) or "base"
    name = _NAME_CHARS.sub("_", name)
    if len(name) > _MAX_NAME:  # keep it readable and within file-name limits; the hash keeps it unique
      digest = hashlib.sha1(json.dumps(r, sort_keys=True, default=str).encode()).hexdigest()[:8]
      name = f"{name[:_MAX_NAME - 9]}-{digest}"
    seen[name] = seen.get(name, 0) + 1
    names.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
  return names


# ----------------------------------------------------------------------------- runs and their state
def total_steps(config) -> int:
  if "stages" not in config:
    raise ValueError("launch/sweep.py needs a GRPO config with `stages` (its total steps decide "
                     "whether a run is finished)")
  return sum(int(st.num_steps) for st in config.stages)


def make_runs(base_config, declared: Sequence[dict[str, Any]], root: str,
              fixed: Mapping[str, Any] = ()) -> list[Run]:
  """One Run per override dict; each run's config is built (and its fields checked) here."""
  root = os.fspath(paths.as_path(root))
  runs = []
  for i, (name, ov) in enumerate(zip(run_names(declared), declared)):
    try:
      config = overrides_lib.apply(copy.deepcopy(base_config), ov, fixed)
    except ValueError as e:
      raise ValueError(f"sweep run {i} ({name}): {e}") from e
    runs.append(Run(i, name, dict(ov), f"{root.rstrip('/')}/{name}", total_steps(config)))
  return runs


def run_state(run: Run) -> tuple[str, int | None]:
  """("finished" | "partial" | "not started", newest checkpoint step)."""
  step = checkpoints.latest_step(f"{run.workdir}/checkpoints")
  if step is None:
    return "not started", None
  return ("finished" if step >= run.total_steps else "partial"), step


def command(run: Run, config_spec: str, fixed: Mapping[str, Any], *, python: str,
            entry: str) -> list[str]:
  """The train.py argv of `run`: the config, the shared fields, the run's overrides, its workdir."""
  return [python, entry, f"--config={config_spec}", *overrides_lib.to_flags(dict(fixed)),
          *overrides_lib.to_flags(run.overrides), f"--workdir={run.workdir}"]


def selected(runs: Sequence[Run], only: Sequence[str]) -> list[Run]:
  if not only:
    return list(runs)
  by_key = {str(r.index): r for r in runs} | {r.name: r for r in runs}
  missing = [o for o in only if o not in by_key]
  if missing:
    raise ValueError(f"--only={','.join(only)}: no run {missing}; runs are 0..{len(runs) - 1} "
                     f"or names {[r.name for r in runs]}")
  indices = dict.fromkeys(by_key[o].index for o in only)  # in the order given, once each
  return [runs[i] for i in indices]


# ----------------------------------------------------------------------------- summary
def metric_summary(rows: Sequence[Mapping[str, Any]], lower_is_better: str) -> dict[str, dict]:
  """Final and best value (with steps) of reward/mean and every eval/* key in metrics rows."""
  by_key: dict[str, dict[int, float]] = {}
  for row in rows:  # a resumed run may log a step twice: the later row wins
    for key, value in row.items():
      if (key == "reward/mean" or key.startswith("eval/")) and value is not None \
          and math.isfinite(value):
        by_key.setdefault(key, {})[int(row["step"])] = float(value)
  out = {}
  for key in sorted(by_key):
    values = by_key[key]
    higher = not re.search(lower_is_better, key)
    best = max(values.values()) if higher else min(values.values())
    best_step = min(s for s, v in values.items() if v == best)  # the first step that reached it
    final_step = max(values)
    out[key] = {"final": values[final_step], "final_step": final_step, "best": values[best_step],
                "best_step": best_step, "higher_is_better": higher}
  return out


def summarize(runs: Sequence[Run], config_spec: str, exit_codes: Mapping[int, int],
              lower_is_better: str) -> dict:
  entries = []
  for run in runs:
    state, step = run_state(run)
    if exit_codes.get(run.index, 0) != 0:
      state = "failed"
    log = paths.as_path(run.workdir) / "logs" / "metrics.jsonl"
    rows = metrics_writer.read_jsonl(log) if log.exists() else []
    entries.append({"index": run.index, "name": run.name, "workdir": run.workdir,
                    "overrides": run.overrides, "status": state, "step": step,
                    "total_steps": run.total_steps, "exit_code": exit_codes.get(run.index),
                    "metrics": metric_summary(rows, lower_is_better)})
  return {"config": config_spec, "runs": entries}


def _cell(v: Any) -> str:
  if isinstance(v, float):
    return f"{v:.4g}"
  return "" if v is None else str(v).replace("|", "\\|")


def summary_markdown(summary: Mapping[str, Any]) -> str:
  runs = summary["runs"]
  keys = list(dict.fromkeys(k for r in runs for k in r["overrides"]))
  short = _short_keys(keys)
  metrics = sorted({m for r in runs for m in r["metrics"]}, key=lambda m: (m != "reward/mean", m))
  head = ["#", "run", *(short[k] for k in keys), "status", "step"]
  for m in metrics:
    head += [f"{m} final", f"{m} best (step)"]
  lines = [f"# Sweep of {summary['config']}", "",
           "Final = the value at the last logged step; best = the max (min where lower is better) "
           "over all logged steps.", "", "| " + " | ".join(head) + " |",
           "|" + "---|" * len(head)]
  for r in runs:
    row = [str(r["index"]), r["name"], *(_cell(_format(r["overrides"][k]) if k in r["overrides"]
                                             else None) for k in keys),
           r["status"], f"{'–' if r['step'] is None else r['step']}/{r['total_steps']}"]
    for m in metrics:
      s = r["metrics"].get(m)
      row += ([_cell(s["final"]), f"{_cell(s['best'])} ({s['best_step']})"] if s else ["", ""])
    lines.append("| " + " | ".join(row) + " |")
  return "\n".join(lines) + "\n"


def write_summary(root: str, summary: Mapping[str, Any]) -> None:
  out = paths.as_path(root)
  out.mkdir(parents=True, exist_ok=True)
  (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
  (out / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")


# ----------------------------------------------------------------------------- main
def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}; per-run fields go in get_sweep, shared "
                         f"ones as --config.<field>=<value>")
  if not flags.FLAGS["verbosity"].present:  # orbax logs every checkpoint directory it reads
    logging.set_verbosity(logging.WARNING)
  config_spec = config_flags.get_config_filename(flags.FLAGS["config"])
  fixed = dict(config_flags.get_override_values(flags.FLAGS["config"]))
  # Runs start in this directory, like this command: the config path means the same to them.
  entry = _ENTRY.value if os.path.exists(_ENTRY.value) else str(_REPO / _ENTRY.value)
  declared = load_sweep(config_spec)
  runs = make_runs(_CONFIG.value, declared, _ROOT.value, fixed)
  chosen = [] if _SUMMARY_ONLY.value else selected(runs, _ONLY.value)
  exit_codes = {}
  for run in chosen:
    state, step = run_state(run)
    if state == "finished":
      print(f"# {run.index} {run.name}: finished (step {step} of {run.total_steps}), skipped",
            flush=True)
      continue
    cmd = command(run, config_spec, fixed, python=_PYTHON.value, entry=entry)
    print(shlex.join(cmd), flush=True)
    if not _DRY_RUN.value:
      exit_codes[run.index] = subprocess.run(cmd).returncode
      if exit_codes[run.index]:
        print(f"# {run.index} {run.name}: exit code {exit_codes[run.index]}", flush=True)
  if _DRY_RUN.value:
    return
  summary = summarize(runs, config_spec, exit_codes, _LOWER.value)
  write_summary(_ROOT.value, summary)
  print(f"# summary: {_ROOT.value.rstrip('/')}/summary.md", flush=True)
  failed = [run.name for run in runs if exit_codes.get(run.index)]
  if failed:
    sys.exit(f"{len(failed)} run(s) failed: {failed}")


if __name__ == "__main__":
  app.run(main)
