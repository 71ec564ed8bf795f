r"""Does a recipe learn on real questions? Start → SFT → GRPO, evaluated on held-out real questions.

  python launch/real_data_check.py --config=configs/truthrl.py:runlocal --workdir=/tmp/gj_real
  python launch/real_data_check.py --config=configs/truthrl.py:runlocal --held_out_dataset=nq \
      --workdir=/tmp/gj_real_nq                         # train on HotpotQA + MuSiQue, test on NQ
  python launch/real_data_check.py --config=configs/truthrl.py:runlocal --split=dev \
      --workdir=/tmp/gj_real_dev                        # choose settings here, never on test

The real samples in data/real/ (HotpotQA distractor train + dev, MuSiQue-Ans, NQ-open with its gold
passage; data/real/README.md) become short contexts a 135M model can read
(grounding_jax/data/real_contexts.py: the gold passages whole, plus two distractors of ≤ 80 words,
in a seeded order: the question's own first, or with --distractors=pool other questions' only) and
each question an unanswerable twin with its gold passages replaced. The
questions are split by question (per dataset: --test_questions to test, --dev_questions to dev, the
rest to train) or, with --held_out_dataset, by dataset (train on the other two, test on that one).
Each dataset's training questions are halved: the first halves' gold completions are the SFT
warm-up, the second halves the GRPO stage's prompts (with --evidence_contrast, each question's G
samples split over its gold-kept and gold-removed contexts: data/contrast.py). The held-out questions are never trained on;
their ids are listed in the output (OUT/split_ids.json and learning_check.md).

Then launch/learning_check.py's run (one process, one model load): the start model, the SFT model and
the GRPO model each answer the evaluated items (test, or dev with --split=dev), and the table gives
the recipe's headline metric, the reward, answer F1 and EM on answerable items (SQuAD v1.1,
eval/metrics.py), accuracy on answerable items, abstention on the unanswerable twins and the
balanced accuracy (eval/selective.py), each GRPO − SFT and GRPO − start with the paired-bootstrap
95 % interval. Settings are chosen with --split=dev; the test table is read once.

The recipe is the config's (configs/truthrl.py:runlocal: TruthRL's ternary reward with an exact-match
verifier, abstaining with \boxed{I don't know}); its :runlocal sizes hold, except that prompts may
reach 1,280 tokens and completions 208 (MAX_NEW_TOKENS: SFT, GRPO sampling and evaluation), and
that the SFT warm-up leaves out the few rows whose gold completion or prompt is longer than that
(SFT data.overlong="drop") instead of cutting them (a prompt cut on the left loses its instructions
and the prefix the rows share, which SFT then cannot run once per micro-batch). --gold_lengths
prints the gold completions' token lengths against that limit and exits, before any model loads. --reward_f1_threshold=t makes the reward (not the
evaluation) count an answer right when its SQuAD token F1 with a gold alias is ≥ t (a 135M model's
answers are often partly right: dev2's SFT model, F1 21.7 against EM 16.7), and
--abstain_reward_answerable prices abstaining where the gold passages are kept (the demo's −0.5).
Neither got the dev runs past the refusal corner (dev3, dev4 in docs/results.md: the SFT start is
right on ~3 % of its samples), nor did --distractors=pool (dev6). Check a warm-up's answer-or-abstain
choice on the GRPO part before GRPO: launch/probe_branch.py --recipe=truthrl
--data=<workdir>/data/grpo.jsonl
--model=<workdir>/sft/hf. The flags of launch/learning_check.py apply (--config,
--workdir, --split, --sft_steps, --steps, --output_dir, --bootstrap_resamples), with defaults of 24
SFT and 12 GRPO steps.
"""

from __future__ import annotations

import json
import pathlib
import shlex
import sys

import ml_collections
import numpy as np
from absl import app
from absl import flags

from grounding_jax import models
from grounding_jax import recipes
from grounding_jax.data import jsonl
from grounding_jax.data import real_contexts

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import learning_check  # pylint: disable=g-import-not-at-top,wrong-import-position

# learning_check's flags are this script's too: --config (required), --workdir, --split,
# --sft_steps, --steps, --bootstrap_resamples, --output_dir; the defaults below suit the real data.
# Its others (the synthetic warm-up's world and answerable share, validation, question counts) do
# not apply here and are refused when given (`ignored_flags`), rather than silently dropped.
USED_LEARNING_CHECK_FLAGS = ("config", "workdir", "split", "sft_steps", "steps",
                             "bootstrap_resamples", "output_dir")
FLAGS = flags.FLAGS
FLAGS.set_default("workdir", "/tmp/gj_real")
FLAGS.set_default("sft_steps", 24)
FLAGS.set_default("steps", 12)
_HELD_OUT_DATASET = flags.DEFINE_enum("held_out_dataset", "", ["", *real_contexts.FILES],
                                      "'' = split by question; else train on the other datasets and "
                                      "test on this one.")
_TEST = flags.DEFINE_integer("test_questions", 16, "Test questions per dataset (by question), or "
                             "of the held-out dataset ×3 (by dataset); each adds its twin.")
_DEV = flags.DEFINE_integer("dev_questions", 8, "Dev questions per training dataset.")
_CONTRAST = flags.DEFINE_enum("evidence_contrast", "gold_removed", ["", "gold_removed"],
                              "The GRPO stage's data.evidence_contrast ('' = each prompt its own "
                              "group, the twins mixed in).")
_SEED = flags.DEFINE_integer("seed", 0, "Seeds the splits and the contexts.")
_DISTRACTORS = flags.DEFINE_enum(
    "distractors", "own", list(real_contexts.DISTRACTORS), "A short context's distractors: the "
    "question's own non-gold passages first (own: they name its entities, so a gold-removed twin "
    "still looks on topic), or only other questions' passages (pool: a twin holds nothing on the "
    "question, and GRPO's gold-removed condition, drawn from the same contexts, neither).")
_REWARD_F1 = flags.DEFINE_float("reward_f1_threshold", 0.0, "0 = the reward's own judge (the config's: "
                                "exact match under :runlocal); t in (0, 1] = the reward counts an "
                                "answer right when its SQuAD token F1 with a gold alias is >= t "
                                "(judge kind token_f1). Evaluation keeps the config's judge.")
_ABSTAIN_ANSWERABLE = flags.DEFINE_float("abstain_reward_answerable", None, "The reward for "
                                         "abstaining where the gold passages are kept (TruthRL's "
                                         "abstain_reward_answerable; unset = the config's).")
_GOLD_LENGTHS = flags.DEFINE_bool("gold_lengths", False, "Print the recipe's gold completions' "
                                  "token lengths per dataset against MAX_NEW_TOKENS and exit (no "
                                  "model loads).")

REPORTED = ("answer_f1", "answer_em", "accuracy_answerable", "abstention_unanswerable",
            "balanced_accuracy")
MAX_PROMPT_TOKENS = 1280  # the longest short context (4 MuSiQue gold passages + 2) with the prompt
# SFT targets, GRPO samples and evaluated answers: 96 % of the answerable gold completions fit
# (TruthRL's, SmolLM2 tokens with the EOS; --gold_lengths, docs/results.md); SFT drops the rest.
MAX_NEW_TOKENS = 208
SFT_OVERLONG = "drop"


def build_parts(folder, *, held_out_dataset: str = "", test_questions: int = 16,
                dev_questions: int = 8, seed: int = 0, distractors: str = "own") -> dict[str, list]:
  """{"sft", "grpo", "dev", "test"}: Examples with short contexts and twins (real_contexts)."""
  real = real_contexts.load_real(folder)
  if held_out_dataset:
    parts = real_contexts.cross_dataset(real, held_out_dataset, test=3 * test_questions,
                                        dev=dev_questions, seed=seed)
  else:
    parts = real_contexts.split_by_question(real, test=test_questions, dev=dev_questions, seed=seed)
  # Each dataset's training questions halved, so SFT and GRPO both see every dataset (the parts
  # come concatenated by dataset: halving the whole gave SFT no NQ and GRPO almost only NQ).
  by_dataset = {}
  for ex in parts["train"]:
    by_dataset.setdefault(ex.meta["dataset"], []).append(ex)
  sft = [ex for rows in by_dataset.values() for ex in rows[:len(rows) // 2]]
  grpo = [ex for rows in by_dataset.values() for ex in rows[len(rows) // 2:]]
  return {name: real_contexts.with_twins(rows, seed=seed, distractors=distractors) for name, rows in
          (("sft", sft), ("grpo", grpo), ("dev", parts["dev"]), ("test", parts["test"]))}


def write_parts(parts, out: pathlib.Path) -> dict[str, str]:
  """Writes OUT/data/<part>.jsonl and OUT/split_ids.json; returns {part: path}."""
  (out / "data").mkdir(parents=True, exist_ok=True)
  paths = {}
  for name, rows in parts.items():
    paths[name] = str(out / "data" / f"{name}.jsonl")
    jsonl.write_examples(paths[name], rows)
  ids = {name: [ex.id for ex in rows if ex.answerable] for name, rows in parts.items()}
  (out / "split_ids.json").write_text(json.dumps(ids, indent=1) + "\n")
  return paths


def configure(config, paths, *, split: str, evidence_contrast: str, reward_f1_threshold: float = 0.0,
              abstain_reward_answerable: float | None = None):
  """The recipe config pointed at the real parts: GRPO on `grpo`, evaluation on test or dev; with
  `reward_f1_threshold` > 0 the first reward's judge is token F1 >= it (a new ConfigDict, so the
  evaluation's judge, which the recipe config may alias, stays), with `abstain_reward_answerable`
  that reward option set. Raises ValueError when the first reward has no such option."""
  options = config.reward.functions[0].options
  for name, used in (("judge", bool(reward_f1_threshold)),
                     ("abstain_reward", abstain_reward_answerable is not None)):
    if used and name not in options:
      raise ValueError(f"--reward_f1_threshold / --abstain_reward_answerable set the reward option "
                       f"{name!r}, which reward {config.reward.functions[0].name!r} does not have")
  with config.unlocked():
    if reward_f1_threshold:
      options.judge = ml_collections.ConfigDict(dict(kind="token_f1", threshold=reward_f1_threshold))
    if abstain_reward_answerable is not None:
      options.abstain_reward_answerable = abstain_reward_answerable
    st = config.stages[0]
    st.data.update(dict(kind="jsonl", path=paths["grpo"], evidence_contrast=evidence_contrast))
    config.evals.data.update(dict(kind="jsonl", path=paths["test" if split == "heldout" else "dev"]))
    config.evals.num_examples = 0
    config.rollout.max_prompt_tokens = max(int(config.rollout.max_prompt_tokens), MAX_PROMPT_TOKENS)
    config.rollout.max_new_tokens = max(int(config.rollout.max_new_tokens), MAX_NEW_TOKENS)
    if config.evals.decoding.max_new_tokens is not None:
      config.evals.decoding.max_new_tokens = max(int(config.evals.decoding.max_new_tokens),
                                                 MAX_NEW_TOKENS)
  return config


def gold_lengths(rows, recipe_name: str, tokenizer) -> dict[str, np.ndarray]:
  """{dataset: [n] tokens} of the recipe's gold completion of each answerable row, its EOS included
  (what the SFT target holds: sft/data.tokenize_pairs)."""
  recipe = recipes.get_recipe(recipe_name)
  out = {}
  for ex in rows:
    if ex.answerable:
      n = len(tokenizer.encode(recipe.gold_completion(ex), add_special_tokens=False)) + 1
      out.setdefault(ex.meta.get("dataset", "?"), []).append(n)
  return {k: np.asarray(v) for k, v in out.items()}


def length_table(lengths: dict[str, np.ndarray], limit: int) -> str:
  """Markdown: per dataset (and all) the count, median, p90, p95, max and the share ≤ `limit`."""
  every = {**lengths, "all": np.concatenate(list(lengths.values()))}
  lines = [f"| dataset | n | median | p90 | p95 | max | ≤ {limit} |", "|---|---|---|---|---|---|---|"]
  for name, v in every.items():
    lines.append(f"| {name} | {len(v)} | {np.median(v):.0f} | {np.percentile(v, 90):.0f} | "
                 f"{np.percentile(v, 95):.0f} | {v.max()} | {np.mean(v <= limit):.1%} |")
  return "\n".join(lines)


def ignored_flags(flag_values=FLAGS) -> list[str]:
  """learning_check's flags given on the command line that this script does not use."""
  names = {h.name for h in vars(learning_check).values() if isinstance(h, flags.FlagHolder)}
  return sorted(n for n in names - set(USED_LEARNING_CHECK_FLAGS)
                if n in flag_values and flag_values[n].present)


def main(argv):
  del argv
  if ignored := ignored_flags():
    sys.exit(f"real_data_check: {', '.join('--' + n for n in ignored)} not used here (learning_check's "
             f"flags this script passes on: {', '.join('--' + n for n in USED_LEARNING_CHECK_FLAGS)})")
  command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
  out = pathlib.Path(FLAGS.workdir)
  parts = build_parts(real_contexts.DEFAULT_DIR, held_out_dataset=_HELD_OUT_DATASET.value,
                      test_questions=_TEST.value, dev_questions=_DEV.value, seed=_SEED.value,
                      distractors=_DISTRACTORS.value)
  paths = write_parts(parts, out)
  try:  # bad input: one line, before any model loads
    config = learning_check.prepare_config(FLAGS.config, workdir=str(out), steps=FLAGS.steps)
    configure(config, paths, split=FLAGS.split, evidence_contrast=_CONTRAST.value,
              reward_f1_threshold=_REWARD_F1.value,
              abstain_reward_answerable=_ABSTAIN_ANSWERABLE.value)
    learning_check.check_inputs(config, "heldout", None, FLAGS.sft_steps, paths["sft"],
                                dict(overlong=SFT_OVERLONG))
  except (ValueError, FileNotFoundError) as e:
    sys.exit(f"real_data_check: {str(e).splitlines()[0]}")
  if _GOLD_LENGTHS.value:
    tokenizer = models.load_tokenizer(config.model.path)
    recipe = config.stages[0].recipe
    every = [ex for rows in parts.values() for ex in rows]
    for name, rows in (("SFT part", parts["sft"]), ("every part", every)):
      print(f"\n{recipe} gold completions of the answerable questions, {name} (tokens, EOS "
            "included):\n")
      print(length_table(gold_lengths(rows, recipe, tokenizer), int(config.rollout.max_new_tokens)))
    return
  evaluated = "test" if FLAGS.split == "heldout" else "dev"
  about = {"split": f"{evaluated} ({_HELD_OUT_DATASET.value or 'by question'})",
           f"ids_{evaluated}": ", ".join(ex.id for ex in parts[evaluated] if ex.answerable),
           "parts": {k: len(v) for k, v in parts.items()}}
  summary = learning_check.run(config, sft_steps=FLAGS.sft_steps, sft_data=paths["sft"],
                               sft_options=dict(overlong=SFT_OVERLONG),
                               bootstrap_resamples=FLAGS.bootstrap_resamples, command=command,
                               extra_metrics=REPORTED, about_extra=about,
                               output_dir=FLAGS.output_dir or str(out / "real_data_check"))
  print(summary["markdown"])
  print(f"wrote {summary['output_dir']}/learning_check.md and {out}/split_ids.json")


if __name__ == "__main__":
  app.run(main)
