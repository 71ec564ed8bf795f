"""Prompt token rows: tokenising rendered prompts, left padding, length buckets, a shared prefix.

  ids, mask = tokenize_prompts(tokenizer, prompts)    # left-padded int32 ids, bool mask [P, L]
  bucket_length(270)                                  # 320: the compiled width for 270 tokens
  common_prefix_length(ids, mask)                     # tokens every row's prompt begins with

Shared by the sampler (generate.py), the GRPO update's packing (rl/update.py) and the SFT trainer's
shared-prefix packing (sft/trainer.py).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def bucket_length(n: int, minimum: int = 16) -> int:
  """Smallest of minimum * {1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, ...} that is >= n.

  Four buckets per octave (<= 25% padding): prompts are prefilled and attended over at their
  bucket's width, so coarser buckets cost more than the extra compiles they save (a 270-token
  prompt ran at 384 with two buckets per octave, at 320 with four).
  """
  if n <= minimum:
    return minimum
  octave = minimum * 2 ** max(0, math.floor(math.log2(n / minimum)))
  for quarter in range(4, 9):
    b = octave * quarter // 4
    if b >= n:
      return b
  return octave * 2


def common_prefix_length(ids: np.ndarray, mask: np.ndarray) -> int:
  """Tokens that every row's real (mask True, LEFT-padded) tokens begin with; 0 for no rows."""
  ids, mask = np.asarray(ids), np.asarray(mask).astype(bool)
  if not len(ids):
    return 0
  rows = [r[m] for r, m in zip(ids, mask)]
  shared = min(len(r) for r in rows)
  for r in rows[1:]:
    differ = np.nonzero(r[:shared] != rows[0][:shared])[0]
    shared = int(differ[0]) if len(differ) else shared
  return shared


def encode_prompts(tokenizer, prompts: Sequence[str]) -> list[list[int]]:
  """Token ids of rendered prompt texts. Special tokens (BOS) are added unless the text already
  starts with the tokenizer's BOS token, so chat-templated prompts are not given a second BOS."""
  bos = getattr(tokenizer, "bos_token", None)
  return [tokenizer.encode(p, add_special_tokens=not (bos and p.startswith(bos))) for p in prompts]


def tokenize_prompts(tokenizer, prompts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
  """Left-padded int32 ids and bool mask [P, Lmax] for rendered prompt texts (encode_prompts)."""
  if not prompts:
    raise ValueError("prompts is empty.")
  encoded = encode_prompts(tokenizer, prompts)
  empty = [i for i, e in enumerate(encoded) if not e]
  if empty:
    raise ValueError(f"prompts {empty[:5]} tokenise to no tokens; every prompt needs at least one.")
  return left_pad(encoded, tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
  """Token-id rows -> (int32 ids, bool mask) [len(rows), longest], LEFT-padded with `pad_id`."""
  width = max(len(r) for r in rows)
  ids = np.full((len(rows), width), pad_id, np.int32)
  mask = np.zeros((len(rows), width), bool)
  for i, r in enumerate(rows):
    ids[i, width - len(r):] = r
    mask[i, width - len(r):] = True
  return ids, mask
