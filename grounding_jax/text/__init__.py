"""What every recipe and evaluator shares about text: metrics, sentence splitting and tag parsing.

  metrics    each paper's answer normaliser, EM / F1 (one row or a batch; HotpotQA's official F1
             rule), ROUGE-L, Trust-Score's
             refusal test, TruthRL's abstention test
  sentences  NLTK-identical English sentence splitting, offline; the sentence that states an answer
  tags       `<tag>…</tag>` blocks, the text after `</think>`, `\\boxed{}` — linear-time, never raising

This package sits just above models/ (it imports no other package of ours), so data/, judges/,
recipes/ and eval/ all read text through it.
"""

from grounding_jax.text.metrics import (NORMALIZERS, REFUSAL_FLAG, REFUSAL_SENTENCE, em_f1,
                                        exact_match, hotpot_f1, is_abstention, is_refusal,
                                        normalize_answer,
                                        normalize_answer_arena, normalize_answer_truthrl,
                                        refusal_score, rouge_l_f1, token_f1)
from grounding_jax.text.sentences import answer_sentence, split_sentences

__all__ = ["NORMALIZERS", "answer_sentence", "REFUSAL_FLAG", "REFUSAL_SENTENCE", "em_f1",
           "exact_match", "hotpot_f1",
           "is_abstention", "is_refusal", "normalize_answer", "normalize_answer_arena", "normalize_answer_truthrl",
           "refusal_score", "rouge_l_f1", "split_sentences", "token_f1"]
