r"""Evaluates models into a paper's table: held-out answers, the recipe's metrics, bootstrap intervals.

  # a run's start model and its trained checkpoint on the config's held-out split (for :runlocal, the
  # synthetic world's questions the run never trained on)
  python launch/evaluate.py --config=configs/grace.py:runlocal --model=smollm2 --model=/tmp/gj_grace \
      --output_dir=/tmp/gj_grace_eval --curves=/tmp/gj_grace
  # any data file of Examples, a chosen checkpoint, the best one (checkpoint.best_metric) and labels
  python launch/evaluate.py --config=configs/arena.py --model=/ckpt/Qwen2.5-7B-Instruct \
      --model=/runs/arena@50 --model=/runs/arena@best --label=start --label=step50 --label=best \
      --data=/data/arena_hotpotqa/test.jsonl --num_examples=500 --output_dir=/runs/arena/eval
  # LEAR's two-model protocol: a separate reader answers from each extract
  python launch/evaluate.py --config=configs/lear.py:runlocal --model=/tmp/gj_lear \
      --reader=/ckpt/Qwen2.5-1.5B-Instruct --output_dir=/tmp/gj_lear_eval

--model is an HF folder, "smollm2", a training or SFT workdir (its newest checkpoint), workdir@step or
workdir@best. Decoding is the recipe's paper evaluation decoding unless config.evals.decoding sets it
(--config.evals.decoding.num_samples=8 adds pass@8 / maj@8); judges come from config.evals.judges.
Writes OUT/predictions.jsonl (prompt, completion, parsed fields, per-example scores),
OUT/metrics.json and OUT/report.md, prints the table, and with --curves draws the run's training
curves to OUT/curves.png. Every model after the first gets a paired-bootstrap 95 % interval of its
difference to the first on the headline metric and on the reward. Bad input (an unknown recipe, a
missing checkpoint step, a data row that fails validation, a judge the evaluator needs) stops with one
line naming it, before any model loads. On a mesh spanning hosts, start it on every host: each answers
its share and process 0 writes (predictions.jsonl then holds process 0's share).
"""

from __future__ import annotations

import dataclasses
import pathlib
import shlex
import sys
import time
from typing import Any, Optional

from absl import app
from absl import flags
from absl import logging
import jax
from ml_collections import config_flags

from grounding_jax import models
from grounding_jax import parallel
from grounding_jax import sampling
from grounding_jax import tools as retrievers
from grounding_jax.data import splits
from grounding_jax.eval import comparison
from grounding_jax.eval import curves
from grounding_jax.eval import from_config
from grounding_jax.eval import harness
from grounding_jax.eval import model_ref
from grounding_jax.eval import report
from grounding_jax.eval.settings import EvalSettings, check_examples

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file[:arg].",
                                          lock_config=True)
_MODEL = flags.DEFINE_multi_string("model", None, "HF folder, 'smollm2', workdir, workdir@step or "
                                   "workdir@best; repeat for several rows (the first is the baseline).")
_LABEL = flags.DEFINE_multi_string("label", None, "Row labels, one per --model (default: the model).")
_DATA = flags.DEFINE_string("data", None, "A JSONL file of Examples (default: the config's held-out "
                            "split, config.evals.data).")
_NUM_EXAMPLES = flags.DEFINE_integer("num_examples", None, "Questions to evaluate (default: "
                                     "config.evals.num_examples; 0 = all of a file).")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where predictions.jsonl, metrics.json and "
                                  "report.md go.")
_READER = flags.DEFINE_string("reader", None, "A reader model (LEAR's two-model protocol).")
_CURVES = flags.DEFINE_string("curves", None, "A training workdir whose curves go to OUT/curves.png.")
_RESAMPLES = flags.DEFINE_integer("bootstrap_resamples", 10_000, "Paired-bootstrap resamples.")
flags.mark_flags_as_required(["config", "model", "output_dir"])


def describe_data(config, data_path, examples) -> str:
  if data_path:
    return f"{data_path} (first {len(examples)})"
  d = config.evals.data
  if d.kind == "synthetic":
    return (f"synthetic held-out split: {len(examples)} questions of the training world (stage data "
            f"seed {config.stages[0].data.seed}) that no training stage asks (draw seed {d.seed})")
  return f"{d.path} (first {len(examples)})"


def load_examples(config, data_path, num_examples):
  """The examples to evaluate: --data, else the config's held-out split."""
  n = config.evals.num_examples if num_examples is None else num_examples
  if data_path:
    return splits.load({"kind": "jsonl", "path": data_path}, limit=n)
  if config.evals.data.kind == "jsonl" and not config.evals.data.path:
    raise ValueError("no evaluation data: pass --data=FILE.jsonl or set config.evals.data.path")
  return splits.held_out(config.evals.data, n, [st.data for st in config.stages])


@dataclasses.dataclass
class Plan:
  """What `prepare` checked: everything `execute` needs before it loads a model."""
  config: Any
  settings: EvalSettings
  refs: list
  labels: list
  reader: Optional[model_ref.ModelRef]
  examples: list
  rewards: list
  output_dir: str
  about: dict
  curves_workdir: Optional[str] = None
  bootstrap_resamples: int = 10_000


def prepare(config, model_specs, *, output_dir, data=None, num_examples=None, reader=None,
            curves_workdir=None, labels=None, bootstrap_resamples=10_000, command="") -> Plan:
  """Checks every input a user can get wrong, before any model loads: the recipe, the models (and
  their steps), the labels, the curves workdir, the data rows against the recipe's evaluator and
  rewards, and the judges the evaluator needs. Raises ValueError / FileNotFoundError (one line)."""
  settings = EvalSettings.from_config(config)  # an unknown recipe fails here
  from_config.check_config(config)
  refs = [model_ref.resolve(m) for m in model_specs]
  reader_ref = model_ref.resolve(reader) if reader else None
  labels = list(labels or [])
  if labels and len(labels) != len(refs):
    raise ValueError(f"{len(labels)} --label values for {len(refs)} --model values; give one each")
  if curves_workdir and not (pathlib.Path(curves_workdir) / "logs" / "metrics.jsonl").is_file():
    raise FileNotFoundError(f"--curves={curves_workdir}: no logs/metrics.jsonl there (a training "
                            "workdir that has logged a step)")
  examples = load_examples(config, data, num_examples)
  rewards = from_config.last_stage_rewards(config)
  check_examples(examples, settings, rewards, reader=reader_ref is not None)
  about = {"command": command, "data": describe_data(config, data, examples),
           "decoding": dataclasses.asdict(settings.decoding)}
  if reader_ref is not None:
    about["reader"] = reader_ref.spec
  return Plan(config, settings, refs, labels or [r.name for r in refs], reader_ref, examples, rewards,
              output_dir, about, curves_workdir, bootstrap_resamples)


def execute(plan: Plan):
  """Loads each model in turn, evaluates it, and writes the report (process 0).

  Returns (results, intervals, report.md path or None on other processes).
  """
  config, settings = plan.config, plan.settings
  mesh = parallel.mesh_from_config(config.mesh)
  compute = models.DTYPES[config.model.compute_dtype]
  attention = config.model.get("attention")  # the attention kernel (models/attention.py)
  options = settings.evaluate_options()  # judges are built once, on first use, for every model
  # rollout.max_turns > 1: the policy searches (config.search: the retriever and its corpus)
  tool = (retrievers.from_config(config.search, data_spec=config.stages[0].data)
          if config.rollout.max_turns > 1 else None)
  reader = None
  if plan.reader is not None:
    loaded = model_ref.load(plan.reader, compute_dtype=compute, mesh=mesh,
                            attention_implementation=attention)
    reader = (loaded.model, loaded.tokenizer)
  results = []
  for ref, name in zip(plan.refs, plan.labels):
    t0 = time.perf_counter()
    loaded = model_ref.load(ref, compute_dtype=compute, mesh=mesh, attention_implementation=attention)
    results.append(harness.evaluate_model(loaded.model, loaded.tokenizer, plan.examples, settings,
                                          rewards=plan.rewards, mesh=mesh, reader=reader, name=name,
                                          options=options, tool=tool))
    del loaded
    sampling.release_kv_cache()
    logging.info("evaluated %s in %.1f s", name, time.perf_counter() - t0)
  intervals = comparison.compare(results, settings.recipe, n_resamples=plan.bootstrap_resamples,
                              seed=settings.seed)
  about = {**plan.about, "models": {name: ref.spec for name, ref in zip(plan.labels, plan.refs)}}
  path = None
  if jax.process_index() == 0:
    path = report.write(plan.output_dir, settings.recipe, results, intervals, about)
    if plan.curves_workdir:
      curves.plot(plan.curves_workdir, pathlib.Path(plan.output_dir) / "curves.png")
  return results, intervals, path


def main(argv):
  del argv
  command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
  try:  # bad input: one line naming it, before any model loads
    plan = prepare(_CONFIG.value, _MODEL.value, output_dir=_OUTPUT_DIR.value, data=_DATA.value,
                   num_examples=_NUM_EXAMPLES.value, reader=_READER.value,
                   curves_workdir=_CURVES.value, labels=_LABEL.value,
                   bootstrap_resamples=_RESAMPLES.value, command=command)
  except (ValueError, FileNotFoundError) as e:
    sys.exit(f"evaluate: {str(e).splitlines()[0]}")
  results, intervals, path = execute(plan)
  if path is not None:
    print(report.table(plan.settings.recipe, results, intervals))
    print(f"\nwrote {path} (with metrics.json, predictions.jsonl"
          f"{', curves.png' if plan.curves_workdir else ''})")


if __name__ == "__main__":
  app.run(main)
