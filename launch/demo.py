r"""`make demo`: SFT then GRPO train SmolLM2-135M-Instruct to answer from the passages; the table shows it.

  python launch/demo.py                               # = make demo (a fresh temporary workdir)
  python launch/demo.py --workdir=/tmp/gj_demo --dev  # on the dev world, where the settings were chosen
  python launch/demo.py --world=5                     # on world 5 (any seed but the reported one: a dev world)
  python launch/demo.py --real_data=hotpotqa=data/real/hotpotqa_distractor_dev_sample.json,\
musique=data/real/musique_ans_train_sample.jsonl     # also the real-data tables (past the budget)

In one process and one model load, on the synthetic grounded-QA world (configs/demo.py says which
settings and why, and what they cost):
  1. evaluates the start model on held-out questions with TruthRL's metrics and reward;
  2. SFT warm-up on gold-formatted completions of another world's questions, in configs/demo.py's
     passes (launch/sft.py's trainer, configs/demo.py:sft then :sft2), evaluates;
  3. GRPO from the SFT model (launch/train.py's trainer, configs/demo.py), evaluates;
  4. writes <workdir>/report/{report.md, metrics.json, predictions.jsonl, curves.png}: the start / SFT /
     GRPO table with paired-bootstrap 95 % intervals (vs start, and GRPO vs SFT), accuracy on answerable
     and abstention on unanswerable items, the GRPO run's zero-variance group fraction, and the
     command that reproduces each row;
  5. with --real_data, evaluates the start and GRPO models on real HotpotQA / MuSiQue samples (does
     learning on the invented world transfer?) into <workdir>/report/real_<name>/.
Each stage is also a command of its own (printed, and in report.md); they give the same rows.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import tempfile
import sys
import time
from typing import Sequence

from absl import app
from absl import flags
import jax
import ml_collections

from grounding_jax import models
from grounding_jax import recipes
from grounding_jax import sampling
from grounding_jax.data import readers
from grounding_jax.data import splits
from grounding_jax.eval import comparison
from grounding_jax.eval import curves
from grounding_jax.eval import from_config
from grounding_jax.eval import harness
from grounding_jax.eval import model_ref
from grounding_jax.eval import report
from grounding_jax.eval.settings import EvalSettings, check_examples
from grounding_jax.models import hf_export
from grounding_jax.rl.config import presets
from grounding_jax.rl import setup
from grounding_jax.rl import trainer as rl_trainer
from grounding_jax.sft import data as sft_data
from grounding_jax.sft import trainer as sft_trainer

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "demo.py"
# Real questions (data/real/README.md: sources, licences), read with the project's readers.
REAL_DATA = ("hotpotqa=data/real/hotpotqa_distractor_dev_sample.json",
             "musique=data/real/musique_ans_train_sample.jsonl")
REAL_MAX_PROMPT_TOKENS = 4096  # their prompts (10-20 paragraphs) run to ~1,800-2,700 tokens: keep all

_WORKDIR = flags.DEFINE_string("workdir", None, "Where every stage writes: a new or empty folder "
                               "(default: a fresh temporary one).")
_DEV = flags.DEFINE_bool("dev", False, "Run on the dev world (configs/demo.py DEV_SEED).")
_WORLD = flags.DEFINE_integer("world", None, "Run on the synthetic world of this seed "
                              "(configs/demo.py:world=N); default: the reported world.")
_REAL = flags.DEFINE_list("real_data", [], "READER=FILE pairs (grounding_jax.data.readers; "
                          "repo-relative or absolute) to evaluate the start and GRPO models on, e.g. "
                          f"--real_data={','.join(REAL_DATA)}; empty = none (past the CPU budget).")
_REAL_N = flags.DEFINE_integer("real_num_examples", 24, "Questions of each real-data file.")


def world_preset(dev: bool = False, world: int | None = None) -> str:
  """configs/demo.py's world preset: "" (the reported world), "dev" or "world=N"."""
  if dev and world is not None:
    raise ValueError(f"--dev and --world={world}: give one")
  return "dev" if dev else ("" if world is None else f"world={world}")


def config_module():
  """configs/demo.py as a module (its constants: SFT_PASSES, SFT_WORLD_OFFSET, ...)."""
  spec = importlib.util.spec_from_file_location("demo_config", CONFIG)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _presets(*names: str) -> str:
  """configs/demo.py's `:arg` naming the given presets (empty names left out)."""
  return ",".join(n for n in names if n)


def load_configs(world: str = ""
                 ) -> tuple[tuple[ml_collections.ConfigDict, ...], ml_collections.ConfigDict]:
  """(SFT passes' configs, GRPO config) of configs/demo.py on `world` (a `world_preset`)."""
  module = config_module()
  sft = tuple(module.get_config(_presets(name, world)) for name in module.SFT_PASSES)
  return sft, module.get_config(world or None)


@dataclasses.dataclass
class Stage:
  name: str
  seconds: float
  load: float  # 1-minute load average at the stage's end (the machine is shared)


class Clock:
  """Per-stage wall time and load average, printed as each stage ends."""

  def __init__(self, total: int):
    self.total, self.stages, self.t0, self.last = total, [], time.perf_counter(), time.perf_counter()

  def start(self, name: str) -> None:
    print(f"\n[{len(self.stages) + 1}/{self.total}] {name} ...", flush=True)

  def done(self, name: str) -> None:
    now = time.perf_counter()
    self.stages.append(Stage(name, now - self.last, os.getloadavg()[0]))
    self.last = now
    print(f"[{len(self.stages)}/{self.total}] {name}: {self.stages[-1].seconds:.0f} s "
          f"(elapsed {(now - self.t0) / 60:.1f} min, load average {self.stages[-1].load:.1f})",
          flush=True)

  def summary(self) -> str:
    total = time.perf_counter() - self.t0
    loads = [s.load for s in self.stages]
    rows = [f"| {s.name} | {s.seconds:.0f} | {s.load:.1f} |" for s in self.stages]
    return "\n".join([f"Wall time {total / 60:.1f} min on {os.cpu_count()} CPU cores; 1-minute load "
                      f"average at stage ends {min(loads):.1f}–{max(loads):.1f} (the machine is "
                      "shared).", "", "| stage | seconds | load |", "|---|---|---|", *rows])


def _config_arg(world: str) -> str:
  """The --config value of configs/demo.py's GRPO config on `world` (a `world_preset`)."""
  return f"configs/demo.py:{world}" if world else "configs/demo.py"


def _sft_dir(i: int, n: int) -> str:
  """SFT pass i's folder under the workdir: the last pass's is `sft` (the SFT row, GRPO's start)."""
  return "sft" if i == n - 1 else f"sft{i + 1}"


def grpo_model_ref(workdir: pathlib.Path, grpo_cfg: ml_collections.ConfigDict) -> str:
  """The GRPO row's model: the run's last step, or with checkpoint.best_metric the step that the
  validation (on the world's dev split: evals.split) kept, `<workdir>/grpo@best`."""
  return f"{workdir}/grpo@best" if grpo_cfg.checkpoint.best_metric else f"{workdir}/grpo"


def commands(workdir: pathlib.Path, world: str = "",
             passes: Sequence[str] = ("sft",), grpo: str = "") -> dict[str, str]:
  """The command that reproduces each row (and stage) on its own (`grpo`: the GRPO row's model,
  grpo_model_ref; default <workdir>/grpo)."""
  config = _config_arg(world)
  w = str(workdir)
  grpo = grpo or f"{w}/grpo"
  sft = []
  for i, name in enumerate(passes):
    path = f" --config.model.path={w}/{_sft_dir(i - 1, len(passes))}/hf" if i else ""
    sft.append(f"python launch/sft.py --config=configs/demo.py:{_presets(name, world)}{path} "
               f"--workdir={w}/{_sft_dir(i, len(passes))}")
  return {
      "SFT": " && ".join(sft),
      "GRPO": (f"python launch/train.py --config={config} --config.model.path={w}/sft/hf "
               f"--workdir={w}/grpo"),
      "evaluate": (f"python launch/evaluate.py --config={config} --model=smollm2 "
                   f"--model={w}/sft --model={grpo} --label=start --label=SFT --label=GRPO "
                   f"--output_dir={w}/eval --curves={w}/grpo"),
  }


def _training_notes(history: Sequence[dict]) -> list[str]:
  """GRPO's per-step signal, first → last step: reward, zero-variance groups, truncation."""
  labels = {"reward/mean": "training reward", "zero_variance_frac": "zero-variance group fraction",
            "truncated_frac": "truncated fraction", "entropy": "entropy"}
  return [f"{labels[k]}: step 1 {v['first']:.3g} → step {v['steps']} {v['last']:.3g} "
          f"(mean {v['mean']:.3g})" for k, v in report.training_signal(history, labels).items()]


def run(workdir: str | os.PathLike,
        sft_cfgs: Sequence[ml_collections.ConfigDict],
        grpo_cfg: ml_collections.ConfigDict, *, real_data: Sequence[str] = (),
        real_num_examples: int = 24, world: str = "", progress: bool = True,
        bootstrap_resamples: int = 10_000) -> dict:
  """Runs every stage (module doc); returns {"results", "intervals", "vs_sft", "report", "real"}.

  `sft_cfgs` are configs/demo.py's SFT passes, each from the previous pass's model. The configs
  are used as given except for their workdirs (<workdir>/sft1, ... for the passes before the last;
  <workdir>/sft, <workdir>/grpo) and model paths (a pass after the first starts from the previous
  pass's HF folder; GRPO from <workdir>/sft/hf, the SFT model). `bootstrap_resamples`: of every
  paired-bootstrap interval in the report.
  """
  workdir = pathlib.Path(workdir).absolute()
  if workdir.exists() and any(workdir.iterdir()):  # the trainers would resume an earlier run
    raise ValueError(f"--workdir={workdir} is not empty; give a new folder (or none: a fresh temporary "
                     "one)")
  clock = Clock(7 if real_data else 6)
  sft_cfgs = [ml_collections.ConfigDict(c) for c in sft_cfgs]
  grpo_cfg = ml_collections.ConfigDict(grpo_cfg)
  base_path = os.path.abspath(presets.resolve_model_path(sft_cfgs[0].model.path))
  for i, c in enumerate(sft_cfgs):
    c.workdir = str(workdir / _sft_dir(i, len(sft_cfgs)))
    c.model.path = str(workdir / _sft_dir(i - 1, len(sft_cfgs)) / "hf") if i else base_path
    c.logging.console = progress
  grpo_cfg.model.path, grpo_cfg.workdir = str(workdir / "sft" / "hf"), str(workdir / "grpo")
  grpo_cfg.logging.console = progress

  # Everything a user can get wrong is checked before the model loads.
  stages = {**{f"SFT pass {i + 1}": c for i, c in enumerate(sft_cfgs)}, "GRPO": grpo_cfg}
  dtypes = {name: (c.model.param_dtype, c.model.compute_dtype) for name, c in stages.items()}
  if len(set(dtypes.values())) > 1:  # one model object goes through every stage
    raise ValueError(f"the demo's stages share one model, so their (model.param_dtype, "
                     f"model.compute_dtype) must agree; got {dtypes}")
  param_dtype, compute_dtype = (models.DTYPES[d] for d in dtypes["GRPO"])
  settings = EvalSettings.from_config(grpo_cfg)
  setup.check_config(grpo_cfg, need_model_path=False)
  examples = splits.held_out(grpo_cfg.evals.data, grpo_cfg.evals.num_examples,
                             [st.data for st in grpo_cfg.stages])
  rewards = from_config.last_stage_rewards(grpo_cfg)
  check_examples(examples, settings, rewards)
  rows, loaded = [], {}  # the passes share one data config: build its rows once (~1.5 s for 256)
  for c in sft_cfgs:
    key = c.data.to_json()
    if key not in loaded:
      loaded[key] = sft_data.load_rows(c.data)
    rows.append(loaded[key])
  real = {}
  for spec in real_data:
    reader, _, path = spec.partition("=")
    if not path:
      raise ValueError(f"--real_data={spec}: expected READER=FILE, e.g. {REAL_DATA[0]}")
    real[reader] = (path, list(readers.read_dataset(reader, ROOT / path, limit=real_num_examples)))
    check_examples(real[reader][1], settings, rewards)
  # Batch 2: with batch 8 and unchunked attention the prefill of ~4,096-token prompts took the process
  # to 18 GB resident and the OOM killer (measured). Query-chunked attention (ModelConfig.
  # attention_query_chunk) now holds 8 x 4,096 in ~6.3 GB resident; batch 2 is what was re-run.
  real_settings = dataclasses.replace(settings, max_prompt_tokens=REAL_MAX_PROMPT_TOKENS, batch_size=2)
  passes = config_module().SFT_PASSES
  if len(passes) != len(sft_cfgs):
    raise ValueError(f"{len(sft_cfgs)} SFT configs for configs/demo.py's {len(passes)} SFT passes "
                     f"{passes}: the report's commands would not reproduce the SFT row")
  grpo_ref = grpo_model_ref(workdir, grpo_cfg)
  cmds = commands(workdir, world, passes, grpo_ref)

  def evaluate(model, tokenizer, name, exs=examples, how=settings):
    result = harness.evaluate_model(model, tokenizer, exs, how, rewards=rewards, name=name,
                                    progress=progress)
    sampling.release_kv_cache()
    m = result.metrics
    print(f"  {name}: truthfulness {m['truthfulness']:.1f}, reward {m['reward']:+.3f}, accuracy on "
          f"answerable {m['accuracy_answerable']:.1f} %, abstention on unanswerable "
          f"{m['abstention_unanswerable']:.1f} %, no box {m['no_box_rate']:.1f} %", flush=True)
    return result

  clock.start("load SmolLM2 and evaluate the start model")
  tokenizer = models.load_tokenizer(base_path)
  # The stages' dtypes (configs/demo.py), as launch/sft.py, launch/train.py and launch/evaluate.py
  # load them for the report's commands.
  model = models.load_pretrained(base_path, dtype=param_dtype, compute_dtype=compute_dtype,
                                 remat=sft_cfgs[0].model.remat)
  start = evaluate(model, tokenizer, "start")
  clock.done("start model: load + evaluate")

  clock.start(f"SFT warm-up ({cmds['SFT']})")
  sft_history = []
  for c, pass_rows in zip(sft_cfgs, rows):
    model_ref.write_run_config(c.workdir, c)
    sft = sft_trainer.SFTTrainer(c, model=model, tokenizer=tokenizer, rows=pass_rows)
    sft_history += sft.train()
    model = sft.model
    del sft  # the optimizer state and the start weights: GRPO needs the memory (24 GB shared)
    jax.clear_caches()  # and the SFT step's compiled program
    hf_export.export_hf(model, pathlib.Path(c.workdir) / "hf", tokenizer_from=base_path,
                        overwrite=True)
  sft_model = model
  del model
  clock.done("SFT")

  clock.start("evaluate the SFT model")
  sft_result = evaluate(sft_model, tokenizer, "SFT")
  clock.done("SFT model: evaluate")

  clock.start(f"GRPO from the SFT model ({cmds['GRPO']})")
  model_ref.write_run_config(grpo_cfg.workdir, grpo_cfg)
  grpo = rl_trainer.Trainer(grpo_cfg, model=sft_model, tokenizer=tokenizer)
  grpo_history = grpo.train()
  if grpo_cfg.checkpoint.best_metric:  # the step kept on the dev split, not the last one
    del grpo  # the last step's parameters and optimizer state
    loaded = model_ref.load(grpo_ref, dtype=param_dtype, compute_dtype=compute_dtype)
    grpo_model = loaded.model
    print(f"  GRPO row: {loaded.ref.name} ({grpo_cfg.checkpoint.best_metric} on the dev split, "
          f"evals.split={grpo_cfg.evals.split!r})", flush=True)
  else:
    grpo_model = grpo.model
  clock.done("GRPO")

  clock.start("evaluate the GRPO model")
  grpo_result = evaluate(grpo_model, tokenizer, "GRPO")
  clock.done("GRPO model: evaluate")

  clock.start("report")
  results = [start, sft_result, grpo_result]
  cmp = dict(seed=settings.seed, n_resamples=bootstrap_resamples)
  intervals = comparison.compare(results, settings.recipe, **cmp)
  vs_sft = comparison.compare([sft_result, grpo_result], settings.recipe, **cmp)[1]
  out = workdir / "report"
  about = {"command": "python " + " ".join(sys.argv) if sys.argv else "launch/demo.py",
           "data": (f"synthetic held-out split: {len(examples)} questions of the training world (seed "
                    f"{grpo_cfg.stages[0].data.seed}) that neither SFT nor GRPO asked"),
           "decoding": dataclasses.asdict(settings.decoding),
           "models": {"start": base_path, "SFT": str(workdir / "sft"), "GRPO": grpo_ref}}
  report_path = report.write(out, settings.recipe, results, intervals, about)
  curves.plot(grpo_cfg.workdir, out / "curves.png")
  clock.done("report")

  real_results = {}
  if real:
    clock.start(f"real data: {', '.join(real)} ({real_num_examples} questions each)")
    # Reloaded: SFT may have reused the start model's buffers.
    base = models.load_pretrained(base_path, dtype=param_dtype, compute_dtype=compute_dtype)
    for name, (source, exs) in real.items():
      pair = [evaluate(base, tokenizer, "start", exs, real_settings),
              evaluate(grpo_model, tokenizer, "GRPO", exs, real_settings)]
      ivs = comparison.compare(pair, settings.recipe, **cmp)
      report.write(out / f"real_{name}", settings.recipe, pair, ivs,
                   {"data": f"{name}: the first {len(exs)} questions of {source} (every paragraph)",
                    "decoding": dataclasses.asdict(settings.decoding),
                    "models": {"start": base_path, "GRPO": grpo_ref}})
      real_results[name] = (pair, ivs)
    clock.done("real data")

  gain = vs_sft.get(recipes.get_recipe(settings.recipe).headline_metric)
  lines = ["", "## GRPO vs SFT (paired bootstrap, same questions)", "",
           *[f"- Δ{k}: {iv} (95 % interval{' above zero' if iv.low > 0 else ''})"
             for k, iv in vs_sft.items()],
           "", "## GRPO training signal (per step, logs/metrics.jsonl)", "",
           *[f"- {x}" for x in _training_notes(grpo_history)],
           f"- SFT loss: step 1 {sft_history[0]['loss']:.3g} → step {len(sft_history)} "
           f"{sft_history[-1]['loss']:.3g}" if sft_history else "- SFT: resumed, no new steps",
           "", "## Reproduce each row", "",
           "- start: the base model, `smollm2` (SmolLM2-135M-Instruct, prepared offline)",
           f"- SFT: `{cmds['SFT']}`", f"- GRPO: `{cmds['GRPO']}`",
           f"- the table: `{cmds['evaluate']}`", ""]
  for name, (pair, ivs) in real_results.items():
    source = real[name][0]
    lines += [f"## Real data: {name} ({int(pair[0].metrics['n_questions'])} questions, {source})", "",
              report.table(settings.recipe, pair, ivs), "",
              f"Reproduce: `python launch/build_data.py --recipe=truthrl --source={name} "
              f"--eval_input={source} --output_dir={workdir}/data_{name}` then `python "
              f"launch/evaluate.py --config={_config_arg(world)} --model=smollm2 "
              f"--model={grpo_ref} --label=start --label=GRPO --data={workdir}/data_{name}/eval.jsonl "
              f"--num_examples={len(pair[0].ids)} --config.rollout.max_prompt_tokens="
              f"{REAL_MAX_PROMPT_TOKENS} --output_dir={workdir}/eval_{name}`", ""]
  lines += ["## Time", "", clock.summary(), ""]
  with open(report_path, "a", encoding="utf-8") as f:
    f.write("\n".join(lines))
  print("\n" + report.table(settings.recipe, results, intervals))
  print("\n".join(lines))
  print(f"wrote {report_path} (with metrics.json, predictions.jsonl, curves.png)")
  return {"results": results, "intervals": intervals, "vs_sft": vs_sft, "report": report_path,
          "real": real_results, "gain": gain, "sft_history": sft_history,
          "grpo_history": grpo_history}


def main(argv):
  del argv
  try:
    world = world_preset(_DEV.value, _WORLD.value)
    sft_cfg, grpo_cfg = load_configs(world)
    workdir = _WORKDIR.value or tempfile.mkdtemp(prefix="grounding_jax_demo_")
    run(workdir, sft_cfg, grpo_cfg, real_data=[p for p in _REAL.value if p],
        real_num_examples=_REAL_N.value, world=world)
  except (ValueError, FileNotFoundError) as e:
    sys.exit(f"demo: {str(e).splitlines()[0]}")


if __name__ == "__main__":
  app.run(main)
