r"""Does a recipe learn? Start model vs the same model after GRPO, on held-out items, with intervals.

  python launch/learning_check.py --config=configs/grace.py:runlocal --workdir=/tmp/gj_lc_grace
  python launch/learning_check.py --config=configs/truthrl.py:runlocal --steps=4 --workdir=/tmp/gj_lc_truthrl
  # choose settings on the dev draw (never on the held-out split the table reports)
  python launch/learning_check.py --config=configs/arena.py:runlocal --split=dev --workdir=/tmp/gj_lc_dev

In one process: (1) loads the policy as launch/train.py does (config.model.path, on config.mesh);
(2) evaluates it on the held-out items with the recipe's own metrics (grounding_jax/eval/harness.py:
the recipe's rollout, evaluator and the run's reward, as launch/evaluate.py); (3) trains it with GRPO
on the config's stages (grounding_jax.rl.trainer, launch/train.py's code path); (4) evaluates the
trained policy on the same items; (5) prints and writes OUT/learning_check.md and .json: reward and
the recipe's headline metric, start → trained, each with the paired-bootstrap 95 % interval of the
difference (grounding_jax/eval/bootstrap.py), beside the training run's truncated-completion and
zero-variance-group fractions (first step, last step, mean over steps: the trainer's logged
`truncated_frac` and `zero_variance_frac`), the wall time and the machine's load average.
OUT (default <workdir>/learning_check) also holds evaluate.py's report.md, metrics.json and
predictions.jsonl.

Held-out items are never trained on: for a synthetic run they are the training world's other
questions (data/splits.py, synthetic.held_out_examples). `--split=dev` scores a second draw of
unasked questions that also excludes the held-out ones, for choosing settings; the held-out table
is then read once. The evaluation decoding is the config's (config.evals.decoding over the recipe's
paper decoding; :runlocal sets the rollout's token limit).

--steps overrides the total number of GRPO steps, shared between the stages in the config's
proportions (at least one each: trust's stage 1 and stage 2).

--best_every=N: the GRPO row is the step kept on a dev draw of the world (synthetic data), as the
demo's default does (issue 34: a step before the shared answer-or-abstain choice swung to a
corner): the run validates every N steps on --dev_examples questions that neither training nor the
held-out split ask (config.evals.split="dev") and keeps the step with the best --best_metric
(checkpoint.best_metric; default balanced accuracy, the mean of accuracy on answerable and
abstention on unanswerable items). 0 (default): the last step.

--sft_steps=N warms up on N x 4 gold completions first: of the first stage's own items by default
(at most its num_examples / 4 steps), or with --sft_world_offset=K of the world seed + K (the
stage's context options, --sft_answerable_ratio answerable), as the demo's SFT draws another world;
--sft_target mixes gold-completion styles (a warm-up that seldom searches, for the search recipes).
--sft_model=F starts GRPO from a warm-up already made instead (an HF folder, e.g. an earlier check's
<workdir>/sft/hf): the table keeps its start / sft / grpo rows, and a second GRPO seed of the same
warm-up costs no second SFT.
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import sys
import time
from typing import Any, Mapping, Sequence

from absl import app
from absl import flags
from ml_collections import config_flags
import numpy as np

from grounding_jax import checkpoints
from grounding_jax import models
from grounding_jax import parallel
from grounding_jax import sampling
from grounding_jax.data import splits
from grounding_jax.eval import check_report
from grounding_jax.eval import comparison
from grounding_jax.eval import from_config
from grounding_jax.eval import harness
from grounding_jax.eval import model_ref
from grounding_jax.eval import report
from grounding_jax.eval.settings import EvalSettings, check_examples
from grounding_jax.models import hf_export
from grounding_jax.rl.config import presets
from grounding_jax.rl import setup
from grounding_jax.rl import trainer as trainer_lib
from grounding_jax.sft import data as sft_data
from grounding_jax.sft import trainer as sft_trainer

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to a configs/*.py file[:arg].",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "The GRPO run's checkpoints and logs (overrides config).")
_STEPS = flags.DEFINE_integer("steps", None, "Total GRPO steps (default: the config's stages').")
_NUM_EXAMPLES = flags.DEFINE_integer("num_examples", None, "Held-out questions (default "
                                     "config.evals.num_examples).")
_SPLIT = flags.DEFINE_enum("split", "heldout", ["heldout", "dev"], "heldout: the config's held-out "
                           "split; dev: a separate draw for choosing settings (synthetic data only).")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Default <workdir>/learning_check.")
_SFT_STEPS = flags.DEFINE_integer("sft_steps", 0, "SFT warm-up steps (4 rows each) on the recipe's "
                                  "gold completions of the first stage's training items before GRPO "
                                  "(0 = none); the table then has a row for the SFT model too.")
_SFT_WORLD = flags.DEFINE_integer("sft_world_offset", 0, "With --sft_steps: 0 = the warm-up's rows are "
                                  "the first stage's own items; N > 0 = --sft_steps x 4 rows of the "
                                  "world seed + N (another world: none of the evaluated world's "
                                  "entities, as the demo's SFT), so the warm-up is not capped by the "
                                  "stage's item count.")
_SFT_RATIO = flags.DEFINE_float("sft_answerable_ratio", None, "With --sft_world_offset: the share of "
                                "answerable rows (default: the first stage's answerable_ratio).")
_SFT_TARGET = flags.DEFINE_string("sft_target", "default", "With --sft_steps: the gold completions' "
                                  "style, or a mix of styles (SFT data.target): e.g. the search "
                                  "recipes' 'default:0.25,direct:0.75' leaves a warm-up that mostly "
                                  "answers without searching.")
_SFT_MODEL = flags.DEFINE_string("sft_model", None, "Instead of --sft_steps: the warm-up's exported HF "
                                 "folder (e.g. an earlier check's <workdir>/sft/hf); GRPO starts "
                                 "from it and the table has its sft row.")
_RESAMPLES = flags.DEFINE_integer("bootstrap_resamples", 10_000, "Paired-bootstrap resamples.")
_BEST_EVERY = flags.DEFINE_integer("best_every", 0, "> 0: validate every this many GRPO steps on a "
                                   "dev draw and report the kept step (module doc); 0 = the last step.")
_BEST_METRIC = flags.DEFINE_string("best_metric", "eval/balanced_accuracy", "With --best_every: the "
                                   "validation metric the kept step maximises (checkpoint.best_metric).")
_DEV_EXAMPLES = flags.DEFINE_integer("dev_examples", 32, "With --best_every: dev questions validated.")
flags.mark_flags_as_required(["config"])

# A searching recipe's table adds whether it searches and what it found, and the two answerability
# sides (issue 38: searches rise, answers from what was found, abstains where nothing was).
SEARCH_METRICS = ("search/searching_frac", "search/calls_per_completion", "search/gold_recall",
                  "accuracy_answerable", "abstention_unanswerable")


def split_steps(stage_steps: Sequence[int], total: int) -> list[int]:
  """`total` steps shared between stages in proportion to `stage_steps`, at least 1 each, summing to
  `total` (e.g. trust's 25 + 250 with total 8 → [1, 7])."""
  if total < len(stage_steps):
    raise ValueError(f"--steps={total}: the config has {len(stage_steps)} stages; give at least one "
                     "step per stage")
  weights = np.asarray(stage_steps, np.float64) / float(sum(stage_steps))
  out = [max(1, int(round(w * total))) for w in weights]
  out[-1] = total - sum(out[:-1])
  while out[-1] < 1:  # rounding gave the early stages too much
    i = int(np.argmax(out[:-1]))
    out[i] -= 1
    out[-1] += 1
  return out


def prepare_config(config, *, workdir=None, steps=None, best_every: int = 0,
                   best_metric: str = "eval/balanced_accuracy", dev_examples: int = 32):
  """The run's config: workdir, model folder resolved, GRPO steps, and no in-training validation or
  best-checkpoint choice (the check evaluates start and end itself) unless `best_every` > 0: then
  validation on the world's dev draw every `best_every` steps keeps the step with the best
  `best_metric` (the GRPO row). Raises ValueError on a negative best_every or dev_examples < 1."""
  if best_every < 0 or (best_every and dev_examples < 1):
    raise ValueError(f"--best_every={best_every} / --dev_examples={dev_examples}: best_every must be "
                     ">= 0 (0 = the last step) and dev_examples >= 1")
  if best_every and config.evals.data.kind != "synthetic":
    raise ValueError(f"--best_every validates on a dev draw of the synthetic world; evals.data.kind="
                     f"{config.evals.data.kind!r}")
  with config.unlocked():
    if workdir:
      config.workdir = workdir
    config.model.path = os.path.abspath(presets.resolve_model_path(config.model.path))
    if steps is not None:
      for st, n in zip(config.stages, split_steps([st.num_steps for st in config.stages], steps)):
        st.num_steps = n
    config.evals.every_steps = 0
    config.checkpoint.best_metric = ""
    config.checkpoint.every_steps = sum(st.num_steps for st in config.stages)
    if best_every:
      config.evals.update(dict(every_steps=best_every, split="dev", dev_examples=dev_examples))
      config.checkpoint.best_metric = best_metric
  return config


def examples_for(config, split: str, num_examples: int) -> list:
  """The held-out split (config.evals.data), or with split="dev" a draw of the same world's questions
  that neither the training stages nor the held-out split ask."""
  train_specs = [st.data for st in config.stages]
  if split == "heldout":
    return splits.held_out(config.evals.data, num_examples, train_specs)
  try:
    return splits.dev_split(config.evals.data, num_examples, train_specs)
  except ValueError as e:
    raise ValueError(f"--split=dev: {e}") from None


def sft_config(config, steps: int, data_path: str | None = None, world_offset: int = 0,
               answerable_ratio: float | None = None, overlong: str = "cut", target: str = "default"):
  """configs/sft.py:runlocal for a warm-up before GRPO: the first stage recipe's prompt and gold
  completion (`Recipe.gold_completion`) of that stage's own training items (same synthetic draw, so
  no held-out item is seen) — or of the Examples file `data_path` (launch/real_data_check.py's SFT
  part) — `steps` updates of 4 rows at a constant lr 5e-5 (the demo's warm-up rate: the format must
  land in a few steps), prompts cut at the rollout's limit; a target past the rollout's
  max_new_tokens is cut, with a warning, or left out with overlong="drop" (SFT data.overlong).
  `world_offset` > 0: the rows are steps x 4 items of the world seed + world_offset instead (the
  stage's context options, `answerable_ratio` or the stage's share answerable): no entity of the
  evaluated world, and as many rows as the steps need. `target`: the gold completions' style or a
  mix of styles (SFT data.target, e.g. "default:0.25,direct:0.75")."""
  c = sft_trainer.default_config()
  st = config.stages[0]
  if st.data.kind != "synthetic" and not data_path:
    raise ValueError(f"--sft_steps needs a synthetic first stage; stages[0].data.kind={st.data.kind!r}")
  c.workdir = str(pathlib.Path(config.workdir) / "sft")
  c.model.update(dict(path=config.model.path, remat=True, compute_dtype=config.model.compute_dtype))
  c.data.update(dict(kind="recipe", recipe=st.recipe, enable_thinking=config.rollout.enable_thinking,
                     max_prompt_tokens=int(config.rollout.max_prompt_tokens),
                     max_completion_tokens=int(config.rollout.max_new_tokens), overlong=overlong,
                     target=target))
  sft_data.target_styles(target, 4, 0)  # a malformed mix fails here, before any model loads
  if data_path:
    if world_offset or answerable_ratio is not None:
      raise ValueError("--sft_world_offset / --sft_answerable_ratio draw synthetic rows; this "
                       "warm-up reads an Examples file")
    with open(data_path, encoding="utf-8") as f:
      rows = sum(1 for line in f if line.strip())
    c.data.update(dict(source="jsonl", path=str(data_path), num_examples=rows))
  else:
    # The stage's own draw: its world size and context options too (the generator's defaults
    # otherwise, e.g. "mentions" contexts for a stage with "unrelated" ones, or a world of another
    # size, whose items are not the stage's).
    c.data.update(dict(source="synthetic", num_examples=int(st.data.num_examples),
                       seed=int(st.data.seed), answerable_ratio=float(st.data.answerable_ratio),
                       **splits.synthetic_options(st.data)))
    if world_offset < 0:
      raise ValueError(f"--sft_world_offset={world_offset}: use 0 (the stage's items) or > 0")
    if world_offset:
      ratio = st.data.answerable_ratio if answerable_ratio is None else answerable_ratio
      if not 0.0 <= float(ratio) <= 1.0:
        raise ValueError(f"--sft_answerable_ratio={ratio}: a share in [0, 1]")
      c.data.update(dict(num_examples=4 * steps, seed=int(st.data.seed) + world_offset,
                         answerable_ratio=float(ratio)))
  c.batch_size, c.micro_batch_size, c.num_epochs = 4, 2, 1
  c.optimizer.update(dict(learning_rate=5e-5, schedule="constant", warmup_ratio=0.0))
  c.checkpoint.every_steps = steps
  c.logging.console = False
  if steps > int(c.data.num_examples) // c.batch_size:
    raise ValueError(f"--sft_steps={steps}: the first stage has {c.data.num_examples} items, enough "
                     f"for {int(c.data.num_examples) // c.batch_size} steps of {c.batch_size} rows; "
                     "lower --sft_steps, raise stages[0].data.num_examples, or draw the rows from "
                     "another world (--sft_world_offset)")
  return c


def sft_warmup(config, steps: int, data_path: str | None = None, **options) -> str:
  """Runs the warm-up (sft_config; `options`: its world_offset, answerable_ratio, overlong, target) and
  returns its exported HF folder, the GRPO start model."""
  c = sft_config(config, steps, data_path, **options)
  model_ref.write_run_config(c.workdir, c)
  sft = sft_trainer.SFTTrainer(c)
  sft.train(max_steps=steps)
  folder = pathlib.Path(c.workdir) / "hf"
  hf_export.export_hf(sft.model, folder, tokenizer_from=c.model.path, overwrite=True)
  return str(folder)


def check_inputs(config, split: str = "heldout", num_examples: int | None = None, sft_steps: int = 0,
                 sft_data: str | None = None, sft_options: Mapping[str, Any] | None = None,
                 sft_model: str | None = None):
  """(EvalSettings, examples, rewards) after checking what a user can get wrong — the recipe, the
  split, the data against the evaluator and rewards, the judges, the warm-up's size or the given
  warm-up model — before any model loads, and that the workdir holds no GRPO run yet. Raises
  ValueError / FileNotFoundError."""
  if sft_model:
    if sft_steps:
      raise ValueError(f"--sft_model={sft_model} is a warm-up already made: drop --sft_steps")
    if model_ref.resolve(sft_model).step is not None:
      raise ValueError(f"--sft_model={sft_model}: GRPO starts from an HF folder, not a run's "
                       "checkpoint (an SFT run exports one: <workdir>/hf)")
  settings = EvalSettings.from_config(config)
  held = checkpoints.latest_step(pathlib.Path(config.workdir) / "checkpoints")
  if held is not None:  # a Trainer there resumes: its "start" would be that step, not the model
    raise ValueError(f"--workdir={config.workdir} already holds a GRPO run (checkpoint step {held}); "
                     "the check starts from the model: give a new --workdir")
  n = config.evals.num_examples if num_examples is None else num_examples
  examples = examples_for(config, split, n)
  rewards = from_config.last_stage_rewards(config)
  check_examples(examples, settings, rewards)
  if sft_steps:
    sft_trainer.check_config(sft_config(config, sft_steps, sft_data, **(sft_options or {})))
  return settings, examples, rewards


def run(config, *, split: str = "heldout", num_examples: int | None = None, sft_steps: int = 0,
        output_dir: str | None = None, bootstrap_resamples: int = 10_000, command: str = "",
        progress: bool = True, sft_data: str | None = None,
        sft_options: Mapping[str, Any] | None = None, extra_metrics: Sequence[str] = (),
        about_extra: Mapping[str, Any] | None = None, sft_model: str | None = None
        ) -> dict[str, Any]:
  """The whole check on a prepared config (prepare_config); returns the summary written to
  OUT/learning_check.json (with "markdown" and "output_dir" added). `sft_data`: an Examples file
  for the warm-up instead of the first stage's synthetic draw; `sft_options`: sft_config's
  world_offset, answerable_ratio, overlong (its data.overlong) and target; `sft_model`: a warm-up already
  made (an HF folder) instead of `sft_steps`."""
  t0, load_start = time.perf_counter(), os.getloadavg()
  settings, examples, rewards = check_inputs(config, split, num_examples, sft_steps, sft_data,
                                             sft_options, sft_model)
  warm = bool(sft_steps or sft_model)
  out = pathlib.Path(output_dir or pathlib.Path(config.workdir) / "learning_check")
  options = settings.evaluate_options()  # judges built once, on first use
  tool = setup.build_tool(config)  # a searching recipe's retriever: every evaluation and GRPO use it
  kw = dict(rewards=rewards, options=options, progress=progress, tool=tool)
  results = []
  base_path = config.model.path
  if warm:  # the base model's row, then the warm-up; GRPO starts from the SFT model
    mesh = parallel.mesh_from_config(config.mesh)
    loaded = model_ref.load(model_ref.resolve(base_path), compute_dtype=models.DTYPES[config.model.compute_dtype],
                            mesh=mesh)
    results.append(harness.evaluate_model(loaded.model, loaded.tokenizer, examples, settings,
                                          name="start", mesh=mesh, **kw))
    del loaded
    sampling.release_kv_cache()
    with config.unlocked():
      config.model.path = (model_ref.resolve(sft_model).hf_folder if sft_model else  # "smollm2" too
                           sft_warmup(config, sft_steps, sft_data, **(sft_options or {})))
  model_ref.write_run_config(config.workdir, config)
  trainer = trainer_lib.Trainer(config, tool=tool)
  kw["mesh"] = trainer.mesh
  results.append(harness.evaluate_model(trainer.model, trainer.tokenizer, examples, settings,
                                        name="sft" if warm else "start", **kw))
  sampling.release_kv_cache()
  history = trainer.train()
  steps = sum(st.num_steps for st in config.stages)
  grpo_ref = f"{config.workdir}@{steps}"
  if config.checkpoint.best_metric:  # the step kept on the dev draw, not the last one
    mesh, tokenizer = trainer.mesh, trainer.tokenizer
    del trainer  # the last step's parameters and optimizer state
    sampling.release_kv_cache()
    loaded = model_ref.load(f"{config.workdir}@best", mesh=mesh,
                            compute_dtype=models.DTYPES[config.model.compute_dtype])
    grpo_ref = (f"{loaded.ref.name} (the step kept: {config.checkpoint.best_metric} on "
                f"{config.evals.dev_examples} dev questions every {config.evals.every_steps} steps)")
    policy = loaded.model
  else:
    policy, tokenizer = trainer.policy(), trainer.tokenizer
  results.append(harness.evaluate_model(policy, tokenizer, examples, settings, name="grpo", **kw))
  cmp = dict(n_resamples=bootstrap_resamples, seed=settings.seed)
  versus_start = comparison.compare(results, settings.recipe, **cmp)
  versus_previous = comparison.compare(results[-2:], settings.recipe, **cmp) if warm else None
  names = [r.name for r in results]
  about = {"command": command, "split": split,
           "data": f"{len(examples)} {split} questions ({config.evals.data.kind}), decoding "
                   f"T={settings.decoding.temperature} top-p={settings.decoding.top_p} "
                   f"{settings.decoding.max_new_tokens} new tokens",
           "sft_steps": sft_steps, "steps": steps, "wall_seconds": round(time.perf_counter() - t0, 1),
           "load_average": f"{load_start[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end (1-min)",
           "models": {"start": base_path, **({"sft": config.model.path} if warm else {}),
                      "grpo": grpo_ref}, **(about_extra or {})}
  report.write(out, settings.recipe, results, versus_start, about)
  if tool is not None:
    extra_metrics = (*extra_metrics, *SEARCH_METRICS)
  rows = check_report.summary_rows(settings.recipe, results, versus_start, versus_previous,
                                   extra_metrics)
  fractions = check_report.training_fractions(history)
  text = check_report.markdown(settings.recipe, names, rows, fractions, about)
  (out / "learning_check.md").write_text(text)
  summary = {"recipe": settings.recipe, **about, "training": fractions,
             "rows": [{**r, "vs_start": check_report.interval_json(r["vs_start"]),
                       "vs_previous": check_report.interval_json(r["vs_previous"])} for r in rows],
             "metrics": {r.name: r.metrics for r in results},
             "history": [{k: v for k, v in h.items() if k == "step" or k.startswith((
                 "reward", "loss", "truncated", "zero_var", "completion_length", "time/step"))}
                         for h in history]}
  (out / "learning_check.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
  return {**summary, "markdown": text, "output_dir": str(out)}


def main(argv):
  del argv
  command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
  try:  # bad input: one line, before any model loads
    if _BEST_EVERY.value and _SPLIT.value == "dev":
      raise ValueError("--best_every validates on the dev draw, so the check cannot also report on "
                       "it: use --split=heldout")
    config = prepare_config(_CONFIG.value, workdir=_WORKDIR.value, steps=_STEPS.value,
                            best_every=_BEST_EVERY.value, best_metric=_BEST_METRIC.value,
                            dev_examples=_DEV_EXAMPLES.value)
    sft_options = dict(world_offset=_SFT_WORLD.value, answerable_ratio=_SFT_RATIO.value,
                       target=_SFT_TARGET.value)
    if not _SFT_STEPS.value and (_SFT_WORLD.value or _SFT_RATIO.value is not None or
                                 _SFT_TARGET.value != "default"):
      raise ValueError("--sft_world_offset / --sft_answerable_ratio / --sft_target shape the "
                       "warm-up: give --sft_steps")
    check_inputs(config, _SPLIT.value, _NUM_EXAMPLES.value, _SFT_STEPS.value,
                 sft_options=sft_options, sft_model=_SFT_MODEL.value)
  except (ValueError, FileNotFoundError) as e:
    sys.exit(f"learning_check: {str(e).splitlines()[0]}")
  summary = run(config, split=_SPLIT.value, num_examples=_NUM_EXAMPLES.value,
                sft_steps=_SFT_STEPS.value, output_dir=_OUTPUT_DIR.value,
                bootstrap_resamples=_RESAMPLES.value, command=command, sft_options=sft_options,
                sft_model=_SFT_MODEL.value)
  print(summary["markdown"])
  print(f"wrote {summary['output_dir']}/learning_check.md (with learning_check.json, report.md, "
        "metrics.json, predictions.jsonl)")


if __name__ == "__main__":
  app.run(main)
