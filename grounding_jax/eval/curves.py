"""A training run's curves from <workdir>/logs/metrics.jsonl to one PNG (matplotlib, no display).

    plot(workdir, "curves.png")

Panels: the reward and its components, the same over the answerable and over the unanswerable
prompts (`answerable/reward/...`, rl/collect.answerability_metrics), the abstention rate on each
side (`health/abstain_*`, rl/health.py's corner alarm), KL, entropy, completion lengths
(mean / min / max and the truncated share) and the held-out eval metrics logged by validation
(`eval/...`), each against the step. A panel whose metrics the run did not log (KL with kl_coef = 0,
eval without config.evals, the split on unlabelled data) is left out.
"""

from __future__ import annotations

import math
import os
import pathlib

import matplotlib

matplotlib.use("Agg")  # files only; no display on a server
from matplotlib import pyplot  # noqa: E402  (after the backend is chosen)

from grounding_jax import metrics_writer  # noqa: E402

_REWARD_SKIP = ("reward/std", "reward/failed_frac")


def _panels(keys: set[str]) -> list[tuple[str, list[str]]]:
  reward = (["reward/mean"] if "reward/mean" in keys else []) + sorted(
      k for k in keys if k.startswith("reward/") and k != "reward/mean" and k not in _REWARD_SKIP)
  lengths = [k for k in ("completion_length/mean", "completion_length/min", "completion_length/max")
             if k in keys]
  sides = [(f"{side} prompts", sorted(k for k in keys if k.startswith(f"{side}/reward/")))
           for side in ("answerable", "unanswerable")]
  abstain = [k for k in ("health/abstain_answerable", "health/abstain_unanswerable") if k in keys]
  panels = [("reward", reward), *sides, ("abstention (the corner alarm)", abstain),
            ("KL", [k for k in ("kl",) if k in keys]),
            ("entropy", [k for k in ("entropy",) if k in keys]), ("completion length", lengths),
            ("truncated share", [k for k in ("truncated_frac",) if k in keys])]
  evals = sorted(k for k in keys if k.startswith("eval/") and not k.startswith("eval/reward/"))
  panels.append(("held-out eval", evals))
  return [(title, series) for title, series in panels if series]


def plot(workdir: str | os.PathLike, out_png: str | os.PathLike) -> pathlib.Path:
  """Draws the curves of the run in `workdir`; returns the PNG's path.

  Raises:
    FileNotFoundError: the workdir has no logs/metrics.jsonl (not a training workdir, or no step yet).
  """
  log = pathlib.Path(workdir) / "logs" / "metrics.jsonl"
  if not log.is_file():
    raise FileNotFoundError(f"{log} is missing: --curves needs a training workdir that has logged "
                            "at least one step")
  rows = metrics_writer.read_jsonl(log)
  keys = {k for r in rows for k, v in r.items() if isinstance(v, (int, float))} - {"step", "stage"}
  panels = _panels(keys)
  cols = 2
  nrows = max(1, math.ceil(len(panels) / cols))
  fig, axes = pyplot.subplots(nrows, cols, figsize=(6 * cols, 3.2 * nrows), squeeze=False)
  for ax, (title, series) in zip(axes.flat, panels):
    for key in series:
      points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
      if points:
        steps, values = zip(*points)
        ax.plot(steps, values, marker="o" if len(points) < 30 else None, markersize=3, label=key)
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
  for ax in list(axes.flat)[len(panels):]:
    ax.axis("off")
  fig.suptitle(str(workdir), fontsize=9)
  fig.tight_layout()
  out = pathlib.Path(out_png)
  out.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(out, dpi=110)
  pyplot.close(fig)
  return out
