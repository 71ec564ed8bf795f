"""Supervised warm-up / distillation: completion-only next-token loss (see sft/trainer.py), on rows of
(prompt or chat messages, target) read by sft/data.py."""

from grounding_jax.sft.data import SFTRow, load_rows, read_jsonl, render, tokenize_pairs
from grounding_jax.sft.trainer import SFTTrainer, default_config

__all__ = ["SFTRow", "SFTTrainer", "default_config", "load_rows", "read_jsonl", "render",
           "tokenize_pairs"]
