"""Evaluation: the harness over recipes and the tools around it.

  paper_eval   evaluate(recipe, completions, examples, judge=..., nli=...) -> the paper's numbers
               (each recipe's evaluator lives in grounding_jax/recipes/<recipe>.py)
  metrics      pass@k and maj@k over sampled answers (and the recipes' metrics under their old names)
  bertscore    BERTScore-F1 (bert_score 0.3.13 semantics) on a Flax or torch encoder from a folder
  probing      TruthRL's knowledge-boundary probe (sample a policy many times per question)
  seqio_tasks  seqio Tasks per dataset × recipe (optional: needs the seqio extra)
Judges (NLI and answer correctness) live in grounding_jax.judges.
"""

from grounding_jax.eval.metrics import (compression_ratio, em_f1, grace_accuracy, grace_error_analysis,
                                        maj_at_k, pass_at_k, truthfulness)
from grounding_jax.eval.paper_eval import evaluate, evaluate_lear

__all__ = ["compression_ratio", "em_f1", "evaluate", "evaluate_lear", "grace_accuracy",
           "grace_error_analysis", "maj_at_k", "pass_at_k", "truthfulness"]
