r"""Does a model's answer-or-abstain choice follow the evidence, and does its representation know?

  python launch/probe_branch.py --data=<run>/data/grpo.jsonl --recipe=truthrl --model=smollm2 \
      --model=<run>/sft/hf
  python launch/probe_branch.py --data=F --model=M --per_dataset=32 --recipe=truthrl

For gold-kept questions and their gold-removed twins (a JSONL of Examples, e.g. the parts that
launch/real_data_check.py writes: each answerable row followed by its twin), one forward pass a row
to where the recipe's answering and abstaining gold completions part (TruthRL's "<think>Document"
or "<think>None"; eval/probing.py), and per model and dataset:
  - the lean: mean p(abstain) / (p(abstain) + p(answer)) on kept / removed copies;
  - head AUROC: that probability on removed against kept (0.5: the choice ignores the evidence);
  - probe AUROC: a ridge classifier on the hidden state at the same position, cross-validated with
    a question and its twin in the same fold (probing.ridge_probe_scores): whether "is the gold
    there" is linearly readable from the representation, whatever the head makes of it.
A high probe AUROC with a head near 0.5 says the warm-up has not yet taught the head what the
model already represents (more or better SFT can help); both near 0.5, that the model does not
represent it at this size and data. Run it on a warm-up before spending GRPO steps on it
(docs/results.md, the real-data dev runs). ~2.7 s a row of ~1,000 tokens on the 2-core CPU for
SmolLM2-135M.
"""

from __future__ import annotations

import collections

import numpy as np
from absl import app
from absl import flags

from grounding_jax.data import jsonl
from grounding_jax.eval import model_ref
from grounding_jax.eval import probing

_DATA = flags.DEFINE_string("data", None, "A JSONL of Examples: gold-kept rows and their gold-removed "
                            "twins (answerable=False, the same question).", required=True)
_MODEL = flags.DEFINE_multi_string("model", None, "HF folder, 'smollm2', workdir or workdir@step; "
                                   "repeat for more rows.", required=True)
_RECIPE = flags.DEFINE_string("recipe", None, "The recipe whose gold completions give the branch "
                              "(one of recipes.available_recipes()).", required=True)
_PER_DATASET = flags.DEFINE_integer("per_dataset", 32, "Answerable questions per dataset (meta "
                                    "'dataset'), each with its twin; 0 = all.")
_FOLDS = flags.DEFINE_integer("folds", 4, "Cross-validation folds of the linear probe.")
_L2 = flags.DEFINE_float("l2", 100.0, "The ridge penalty on standardised hidden states.")


def select(rows, per_dataset: int):
  """The first `per_dataset` answerable rows of each dataset with every unanswerable row of the same
  question (0 = all); raises ValueError when a side is missing."""
  counts = collections.Counter()
  keep = set()
  for ex in rows:
    name = ex.meta.get("dataset", "?")
    if ex.answerable and (not per_dataset or counts[name] < per_dataset):
      counts[name] += 1
      keep.add(ex.question)
  out = [ex for ex in rows if ex.question in keep]
  if not any(ex.answerable for ex in out) or all(ex.answerable for ex in out):
    raise ValueError("probe_branch: the data needs answerable rows and their unanswerable twins "
                     "(the same question, answerable=False)")
  return out


def table(rows, results: dict[str, tuple[np.ndarray, np.ndarray]]) -> str:
  """Markdown: per model, per dataset and all, 'lean kept / removed, head AUROC, probe AUROC'."""
  kept = np.array([ex.answerable for ex in rows])
  dataset = np.array([ex.meta.get("dataset", "?") for ex in rows])
  names = [*dict.fromkeys(dataset), None]
  lines = ["| model | " + " | ".join(n or "all" for n in names) + " |",
           "|---|" + "---|" * len(names)]
  for model, (p, scores) in results.items():
    cells = []
    for n in names:
      s = np.ones(len(rows), bool) if n is None else dataset == n
      cells.append(f"{p[s & kept].mean():.2f} / {p[s & ~kept].mean():.2f}, head "
                   f"{probing.auroc(p[s & ~kept], p[s & kept]):.2f}, probe "
                   f"{probing.auroc(scores[s & ~kept], scores[s & kept]):.2f}")
    lines.append(f"| {model} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def probe(rows, specs, *, recipe: str, folds: int = 4, l2: float = 100.0
          ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """{model: (the lean p(abstain) [N], the linear probe's out-of-fold scores [N])}."""
  removed = np.array([not ex.answerable for ex in rows])
  results = {}
  for spec in specs:
    m = model_ref.load(spec)
    hidden, branch = probing.branch_hidden_states(m.model, m.tokenizer, rows, recipe=recipe)
    scores = probing.ridge_probe_scores(hidden, removed, [ex.question for ex in rows], folds=folds,
                                        l2=l2)
    results[spec] = (probing.abstain_probability_of(m.model, hidden, branch), scores)
    print(f"{spec}: done", flush=True)
  return results


def main(argv):
  del argv
  try:
    rows = select(list(jsonl.read_examples(_DATA.value)), _PER_DATASET.value)
  except (ValueError, FileNotFoundError) as e:
    raise SystemExit(str(e).splitlines()[0]) from e
  results = probe(rows, _MODEL.value, recipe=_RECIPE.value, folds=_FOLDS.value, l2=_L2.value)
  kept = sum(ex.answerable for ex in rows)
  print(f"\n{len(rows)} rows ({kept} kept, {len(rows) - kept} removed) of {_DATA.value}; cell = "
        f"lean to abstain on kept / removed, head AUROC, probe AUROC (ridge l2={_L2.value:g}, "
        f"{_FOLDS.value} folds by question)\n")
  print(table(rows, results))


if __name__ == "__main__":
  app.run(main)
