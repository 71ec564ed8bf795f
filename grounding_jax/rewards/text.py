"""The old path of the shared text metrics; they live in grounding_jax.text.metrics."""

from grounding_jax.text.metrics import (NORMALIZERS, REFUSAL_FLAG, REFUSAL_SENTENCE, REFUSAL_THRESHOLD,
                                        em_f1, exact_match, is_abstention, is_refusal, normalize_answer,
                                        normalize_answer_arena, normalize_answer_truthrl, partial_ratio,
                                        refusal_score, rouge_l_f1, rouge_tokenize, token_f1)

__all__ = ["NORMALIZERS", "REFUSAL_FLAG", "REFUSAL_SENTENCE", "REFUSAL_THRESHOLD", "em_f1", "exact_match",
           "is_abstention", "is_refusal", "normalize_answer", "normalize_answer_arena",
           "normalize_answer_truthrl", "partial_ratio", "refusal_score", "rouge_l_f1", "rouge_tokenize",
           "token_f1"]
