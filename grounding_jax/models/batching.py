"""What the retrieval encoders share: padding token rows into few static shapes, and an embedding cache.

The text encoders (bert.SentenceEncoder, embedding.DecoderEmbedder, reranker.CrossEncoder) run jitted
programs on batches of tokenized text. Padding every batch to a power-of-two number of rows and a
power-of-two length keeps the number of compiled programs small while a single query does not pay
for a full batch.
"""

from __future__ import annotations

import collections
from typing import Iterator, Sequence

import numpy as np


def bucket(n: int, *, low: int, high: int) -> int:
  """The smallest power of two ≥ n, clipped to [low, high]."""
  return min(max(low, 1 << max(n - 1, 0).bit_length()), high)


def pad_rows(rows: Sequence[Sequence[int]], *, max_rows: int, max_length: int, left: bool = False,
             pad_id: int = 0, min_length: int = 16) -> tuple[np.ndarray, np.ndarray]:
  """Token-id rows -> (int32 ids [R, L], bool mask [R, L]) with R, L powers of two.

  R = bucket(len(rows)) ≤ max_rows and L = bucket(longest row) ≤ max_length; rows longer than
  max_length raise (truncate when tokenizing). Extra rows are all padding (mask False). `left` puts
  the padding before the tokens (decoders: the last column is every row's last token).
  """
  if len(rows) > max_rows:
    raise ValueError(f"{len(rows)} rows exceed max_rows={max_rows}; split the batch first.")
  longest = max((len(r) for r in rows), default=1)
  if longest > max_length:
    raise ValueError(f"a row of {longest} tokens exceeds max_length={max_length}; truncate it when "
                     "tokenizing.")
  n_rows = bucket(len(rows), low=1, high=max_rows)
  length = bucket(longest, low=min(min_length, max_length), high=max_length)
  ids = np.full((n_rows, length), pad_id, np.int32)
  mask = np.zeros((n_rows, length), bool)
  for i, row in enumerate(rows):
    span = slice(length - len(row), length) if left else slice(0, len(row))
    ids[i, span] = row
    mask[i, span] = True
  return ids, mask


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
  """Indices in batches of ≤ batch_size, shortest texts first, so a batch pads only to its own
  longest text (a corpus of mixed lengths otherwise pads most rows to its long ones)."""
  order = sorted(range(len(lengths)), key=lengths.__getitem__)
  for start in range(0, len(order), batch_size):
    yield order[start:start + batch_size]


class EmbeddingCache:
  """An LRU map text -> embedding, so the chunks a GRACE build encodes for the dense retriever, the
  first stage of the reranker and the test retriever are encoded once."""

  def __init__(self, size: int):
    self.size = size  # texts kept
    self._items: collections.OrderedDict[str, np.ndarray] = collections.OrderedDict()

  def lookup(self, texts: Sequence[str], encode, dim: int) -> np.ndarray:
    """float32 [len(texts), dim]: cached rows, and `encode(missing texts) -> [M, dim]` for the rest."""
    missing = list(dict.fromkeys(t for t in texts if t not in self._items))
    if missing:
      for text, emb in zip(missing, encode(missing)):
        self._items[text] = emb
    out = (np.stack([self._items[t] for t in texts]) if texts
           else np.zeros((0, dim), np.float32))
    for t in texts:
      self._items.move_to_end(t)
    while len(self._items) > self.size:
      self._items.popitem(last=False)
    return out
