"""Evaluation: the harness over recipes and the tools around it.

  harness      a model answers held-out examples (the recipe's rollout and paper decoding, batched
               on the mesh) and its answers are scored: the recipe's table from per-example scores,
               the run's reward, accuracy on answerable / abstention on unanswerable items
  settings     EvalSettings (config.evals over the recipe's paper decoding) and check_examples, the
               check, before any model loads, that the evaluator and rewards can score the examples
  comparison   compare: each model's paired-bootstrap intervals against the first on the headline
               metric, the reward, selective prediction, answer EM / F1 and the two sides
  bootstrap    paired-bootstrap intervals of one model's difference to another on the same questions
  seeds        runs of one check that differ in a seed, read back from their folders: each run's
               gain and the gain pooled over the runs (questions resampled with all their rows)
  selective    selective prediction: coverage, accuracy among answered items, the risk–coverage
               curve and AURC, balanced accuracy (every evaluation row has them)
  report       predictions.jsonl, metrics.json and report.md (the paper's table, one row per model)
  curves       a training run's curves (reward, KL, entropy, lengths, eval metrics) to a PNG
  paper_eval   evaluate(recipe, completions, examples, judge=..., nli=...) -> the paper's numbers
               (each recipe's evaluator lives in grounding_jax/recipes/<recipe>/)
  metrics      pass@k and maj@k over sampled answers
  bertscore    BERTScore-F1 (bert_score 0.3.13 semantics) on a Flax or torch encoder from a folder
  probing      the knowledge-boundary probe (sample a policy many times per question; TruthRL §3.1)
  seqio_tasks  seqio Tasks per dataset × recipe (optional: needs the seqio extra)
  model_ref    which model an HF folder, a workdir, workdir@step or workdir@best is
  from_config  a run config's evals checks and the reward functions its stages score with
Judges (NLI and answer correctness) live in grounding_jax.judges.
"""

from grounding_jax.eval.metrics import em_f1, maj_at_k, pass_at_k
from grounding_jax.eval.paper_eval import evaluate

__all__ = ["em_f1", "evaluate", "maj_at_k", "pass_at_k"]
