r"""Several runs of one check, one table: each run's gain and the gain pooled over the runs.

  python launch/seed_table.py --run=/tmp/gj_lc_s0 --run=/tmp/gj_lc_s1 --run=/tmp/gj_lc_s2
  python launch/seed_table.py --run=A/eval --run=B/eval --before=start --after=GRPO --out=/tmp/seeds.json

Each --run is an evaluation folder (launch/evaluate.py's --output_dir, a learning check's
<workdir>/learning_check or the workdir itself, the demo's <workdir>/report) of runs that asked the
same questions and differ in a seed (GRPO seeds of one warm-up, say). Per metric (the recipe's
headline, the reward, accuracy on answerable and abstention on unanswerable items, balanced
accuracy): the --before and --after rows' means over the runs, each run's after − before with its
paired-bootstrap 95 % interval, and the mean over the runs with an interval that resamples questions,
each with its rows from every run (grounding_jax/eval/seeds.py). Nothing is trained or loaded: it
reads the folders' metrics.json and predictions.jsonl. A run's own interval can differ from its
check's table in the last digit: the check drew its resamples with the run's seed, this with
--bootstrap_seed.
"""

from __future__ import annotations

import json
import pathlib
import sys

from absl import app
from absl import flags

from grounding_jax.eval import check_report
from grounding_jax.eval import seeds

_RUN = flags.DEFINE_multi_string("run", None, "An evaluation folder (or a learning check's workdir); "
                                 "repeat, once per run.", required=True)
_BEFORE = flags.DEFINE_string("before", "sft", "The model row the gain is measured from.")
_AFTER = flags.DEFINE_string("after", "grpo", "The model row the gain is measured to.")
_RESAMPLES = flags.DEFINE_integer("bootstrap_resamples", 10_000, "Paired-bootstrap resamples.")
_SEED = flags.DEFINE_integer("bootstrap_seed", 0, "Seeds the bootstrap's resample draw.")
_OUT = flags.DEFINE_string("out", None, "Also write the table as JSON here.")


def main(argv):
  del argv
  try:
    table = seeds.seed_table([seeds.read_evaluation(r) for r in _RUN.value], before=_BEFORE.value,
                             after=_AFTER.value, n_resamples=_RESAMPLES.value, seed=_SEED.value)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"seed_table: {e}")
  print(f"# {table['recipe']}: {_AFTER.value} − {_BEFORE.value} over {len(table['runs'])} runs\n")
  print(seeds.markdown(table))
  if _OUT.value:
    as_json = {**{k: table[k] for k in ("recipe", "runs", "metrics", "before", "after", "labels")},
               "per_run": [{m: check_report.interval_json(iv) for m, iv in r.items()}
                           for r in table["per_run"]],
               "pooled": {m: check_report.interval_json(iv) for m, iv in table["pooled"].items()},
               "command": " ".join(["python launch/seed_table.py", *sys.argv[1:]])}
    pathlib.Path(_OUT.value).write_text(json.dumps(as_json, indent=1) + "\n")
    print(f"wrote {_OUT.value}")


if __name__ == "__main__":
  app.run(main)
