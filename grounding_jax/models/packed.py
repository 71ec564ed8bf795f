"""Attention over a group's packed continuations: one masked stream, rows, or blocks.

GRPO's G completions of one prompt run as one packed stream per group
(Transformer.hidden_states_shared_prefix, logprobs.completion_logprobs):

    prefix (the prompt, or the instructions all groups share)   attended by every stream token
    stream = [shared rest of the prompt | completion 0 | completion 1 | ... | padding]

Every weight matmul of a layer runs the stream as it is, with no padding between completions. A
completion token attends to the prefix, the shared rest and its own completion's past; nothing else.
Attention can run that stream in three ways (`model.packed_attention`):

  "stream"  one [P, S + P] score matrix per group (P stream columns, S prefix tokens) under a
            block-diagonal mask built from the segment ids. Simple, but most pairs are masked out:
            8 completions of 256 tokens after a 400-token prompt score 5.0 M pairs where 1.1 M
            are attended.
  "rows"    the completions' queries, keys and values are gathered into G rows of L columns (L:
            the completion width), each row attends to [prefix | shared rest | itself] under a
            causal mask, and the outputs are scattered back to their stream columns; the shared
            rest (R columns) attends to [prefix | itself] apart. R·(S + R) + G·L·(S + R + L) pairs:
            1.3 M in the example above.
  "blocks"  the stream's columns in blocks of B = 64 queries, each over [prefix | shared rest |
            the L columns before the block and the block itself], which holds every key a
            completion token needs; no gather of queries, no scatter back.
            R·(S + R) + ⌈P/B⌉·B·(S + R + B + L) pairs: 1.5 M in the example above.
  "auto"    whichever scores fewest pairs (`choose`): rows when a group's completions fill their
            G·L columns, blocks when they are shorter (8 completions of ~60 tokens above, a stream
            of 512 columns: 0.37 M pairs in blocks, 0.47 M as a stream, 1.3 M as rows), the stream
            when it is short next to B + L.

All three compute the same attention up to float rounding (each query's softmax runs over the
same keys; tests/models/test_packed.py). The gathers and the scatter move [groups, P, heads,
head_dim] activations, little next to the scores they save. Every kernel of models/attention.py
runs each layout (rows and blocks are plain rows with a one-per-row prefix, kv_layout "bskd").
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

MODES = ("auto", "rows", "blocks", "stream")

# A stream token that every later token of its group attends to: the rest of a prompt after the
# prefix all groups share (segment ids of Transformer.hidden_states_shared_prefix). Other negative
# segment ids are padding; 0 .. G − 1 name a group's completions.
SHARED_SEGMENT = -2

# Stream columns a "blocks" query block holds (fewer when completions are shorter): each query
# scores its block and the L columns before it, so a smaller block scores fewer pairs, and 64
# still makes [64, S + R + 64 + L] score matrices that keep an accelerator's matmul units busy.
BLOCK = 64


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PackedRows:
  """Where each completion token of a packed stream sits, for attention run as rows (`layout`).

  Attributes:
    cols: int32 [groups, G·L]: the stream column of token t of completion i at index i·L + t;
      the stream's width P (out of range: dropped when scattering back) past the completion's end.
    valid: bool [groups, G·L], True where `cols` names a token.
    shared: bool [groups, R], True at the stream's first R columns that hold the shared rest.
    rows_per_group: G (static).
    width: L, columns of one row (static).
  """
  cols: jax.Array
  valid: jax.Array
  shared: jax.Array
  rows_per_group: int = dataclasses.field(metadata=dict(static=True))
  width: int = dataclasses.field(metadata=dict(static=True))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PackedBlocks:
  """A packed stream for attention run in blocks of its columns (`blocks`).

  Attributes:
    mask: bool [groups · n, B, B + L]: which of its window's keys each query of a block attends
      to (n = ⌈P / B⌉ blocks a group; the window: the L columns before the block and the block).
    shared: bool [groups, R], True at the stream's first R columns that hold the shared rest.
    width: L >= every completion's length (static); block: B, query columns a block holds (static).
  """
  mask: jax.Array
  shared: jax.Array
  width: int = dataclasses.field(metadata=dict(static=True))
  block: int = dataclasses.field(metadata=dict(static=True))


# Either layout run by `attend` (what Attention.shared_prefix hands over instead of a mask).
LAYOUTS = (PackedRows, PackedBlocks)


def block_size(width: int) -> int:
  """B for completions of at most `width` columns: BLOCK, or `width` when that is smaller."""
  return min(BLOCK, width)


def pairs(mode: str, *, prefix: int, stream: int, shared: int, rows_per_group: int,
          width: int) -> int:
  """Query-key pairs one group's stream scores in `mode` ("rows", "blocks" or "stream"); the
  prefix's own attention (the same in all) is left out."""
  if mode == "stream":
    return stream * (prefix + stream)
  if mode == "blocks":
    b = block_size(width)
    return shared * (prefix + shared) + -(-stream // b) * b * (prefix + shared + b + width)
  return shared * (prefix + shared) + rows_per_group * width * (prefix + shared + width)


def choose(mode: str, *, prefix: int, stream: int, shared: int, rows_per_group: int,
           width: int) -> str:
  """"rows", "blocks" or "stream": `mode` itself, or for "auto" the one that scores fewest pairs
  (`pairs`; ties go to the simpler layout, the stream first).

  Args:
    mode: one of MODES (ModelConfig.packed_attention).
    prefix: S, prefix tokens every stream token attends to.
    stream: P, the stream's columns.
    shared: R, the stream's first columns that may hold the shared rest of a prompt (0: none).
    rows_per_group: G, completions per group; width: L, the longest one's columns.
  Raises:
    ValueError: an unknown mode (naming the choices).
  """
  if mode not in MODES:
    raise ValueError(f"packed_attention={mode!r}; expected one of {MODES}")
  if mode != "auto":
    return mode
  sizes = dict(prefix=prefix, stream=stream, shared=shared, rows_per_group=rows_per_group,
               width=width)
  return min(("stream", "blocks", "rows"), key=lambda m: pairs(m, **sizes))


def continuation_mask(mode: str, segment_ids: jax.Array, *, prefix: int,
                      rows: tuple[int, int] | None, shared: int
                      ) -> jax.Array | PackedRows | PackedBlocks:
  """What the stream's tokens attend to among themselves, as the attention layers take it: a bool
  [groups, P, P] mask (each token: its own completion's past, and the shared rest), or the
  completions as rows (`layout`) or the stream in blocks (`blocks`) where `choose` picks them.

  Args:
    mode: ModelConfig.packed_attention.
    segment_ids: int32 [groups, P] (`layout`'s); prefix: S, the prefix's tokens.
    rows: (G, L) when the stream is laid out as `layout` says; None: always the mask.
    shared: R >= every group's shared rest (with `rows`).
  """
  p = segment_ids.shape[1]
  mode = "stream" if rows is None else choose(mode, prefix=prefix, stream=p, shared=shared,
                                              rows_per_group=rows[0], width=rows[1])
  if mode == "rows":
    return layout(segment_ids, *rows, shared)
  if mode == "blocks":
    return blocks(segment_ids, rows[1], shared)
  same = (segment_ids[:, :, None] == segment_ids[:, None, :]) & (segment_ids[:, None, :] >= 0)
  same |= (segment_ids == SHARED_SEGMENT)[:, None, :]
  return same & jnp.tril(jnp.ones((p, p), bool))[None]


def layout(segment_ids: jax.Array, rows_per_group: int, width: int, shared: int) -> PackedRows:
  """The rows of packed streams laid out as [shared rest | completion 0 | 1 | ... | padding].

  Args:
    segment_ids: int32 [groups, P]: SHARED_SEGMENT at the shared rest (the stream's first columns),
      then i at completion i's tokens, consecutive and in order, then negative padding.
    rows_per_group: G; width: L >= every completion's length; shared: R >= every group's rest.
  """
  groups, p = segment_ids.shape
  counts = jnp.sum(segment_ids[:, :, None] == jnp.arange(rows_per_group)[None, None], axis=1)
  rest = jnp.sum(segment_ids == SHARED_SEGMENT, axis=1)
  start = rest[:, None] + jnp.cumsum(counts, axis=1) - counts              # [groups, G]
  t = jnp.arange(width, dtype=jnp.int32)
  valid = t[None, None] < counts[..., None]                               # [groups, G, L]
  cols = jnp.where(valid, start[..., None] + t, p).astype(jnp.int32)
  return PackedRows(cols.reshape(groups, -1), valid.reshape(groups, -1),
                    segment_ids[:, :shared] == SHARED_SEGMENT, rows_per_group, width)


def _block_columns(p: int, block: int, width: int) -> tuple[np.ndarray, np.ndarray]:
  """(queries [n, B], window keys [n, B + L]): the stream columns of each block's queries and of
  the keys it reads (before column 0 or past P − 1 where a block is at an end)."""
  q_cols = np.arange(-(-p // block) * block).reshape(-1, block)
  return q_cols, q_cols[:, :1] - width + np.arange(block + width)[None]


def blocks(segment_ids: jax.Array, width: int, shared: int) -> PackedBlocks:
  """A packed stream (`layout`'s segment ids) in blocks of `block_size(width)` queries, each over
  its window: every key a completion token needs (at most L − 1 back) is there, and the mask keeps
  the token's own completion's past."""
  groups, p = segment_ids.shape
  b = block_size(width)
  q_cols, k_cols = _block_columns(p, b, width)
  seg = jnp.pad(segment_ids, ((0, 0), (0, q_cols.size - p)), constant_values=-1)
  seg_q = seg[:, q_cols]                                                     # [groups, n, B]
  seg_k = jnp.where((k_cols >= 0) & (k_cols < p), seg[:, np.clip(k_cols, 0, p - 1)], -1)
  mask = ((seg_q[..., :, None] == seg_k[..., None, :]) & (seg_q[..., :, None] >= 0)
          & (k_cols[:, None, :] <= q_cols[:, :, None]))                     # [groups, n, B, B + L]
  return PackedBlocks(mask.reshape(-1, b, b + width), segment_ids[:, :shared] == SHARED_SEGMENT,
                      width, b)


def attend(attention: Callable[..., jax.Array], q: jax.Array, k: jax.Array, v: jax.Array,
           packed: PackedRows | PackedBlocks, prefix: tuple[jax.Array, jax.Array, jax.Array]
           ) -> jax.Array:
  """The stream's attention output, run as rows or in blocks.

  Args:
    attention: `attention(q, k, v, mask, prefix=(k, v, mask))` over rows with one prefix each
      (Attention._attention: models/attention.attention with the model's kernel).
    q: [groups, P, q_heads, head_dim]; k, v: [groups, P, kv_heads, head_dim], the stream's projected
      (rotated) queries, keys and values.
    packed: the stream's layout (`continuation_mask`).
    prefix: (keys, values [groups or 1, S, kv_heads, head_dim], mask bool [groups or 1, S]).
  Returns:
    [groups, P, q_heads, head_dim] in v's dtype; at padding columns, anything finite.
  """
  groups, r = q.shape[0], packed.shared.shape[1]
  kp, vp, mp = (jnp.broadcast_to(x, (groups, *x.shape[1:])) for x in prefix)
  # What a completion token reads before its own completion: the prefix, then the shared rest.
  before = (jnp.concatenate([kp, k[:, :r]], axis=1), jnp.concatenate([vp, v[:, :r]], axis=1),
            jnp.concatenate([mp, packed.shared], axis=1))
  run = _attend_rows if isinstance(packed, PackedRows) else _attend_blocks
  out = run(attention, q, k, v, packed, before)
  if r:  # the shared rest itself: [prefix | its own past]
    causal = jnp.tril(jnp.ones((r, r), bool))[None] & packed.shared[:, None, :]
    own = attention(q[:, :r], k[:, :r], v[:, :r], causal, prefix=(kp, vp, mp))
    out = out.at[:, :r].set(jnp.where(packed.shared[..., None, None], own, out[:, :r]))
  return out


def _attend_rows(attention, q, k, v, rows: PackedRows, before) -> jax.Array:
  """Each completion a row of L columns over [before | itself]; zeros at columns of no row."""
  groups, p = q.shape[:2]
  g, width = rows.rows_per_group, rows.width
  cols = jnp.minimum(rows.cols, p - 1)[..., None, None]
  as_rows = lambda x: jnp.take_along_axis(x, cols, axis=1).reshape(groups * g, width, *x.shape[2:])
  per_row = lambda x: jnp.repeat(x, g, axis=0)
  mask = jnp.tril(jnp.ones((width, width), bool))[None] & rows.valid.reshape(groups * g, 1, width)
  out_rows = attention(as_rows(q), as_rows(k), as_rows(v), mask, prefix=tuple(map(per_row, before)))
  out = jnp.zeros((*q.shape[:-1], v.shape[-1]), v.dtype)
  at = jnp.arange(groups)[:, None]
  return out.at[at, rows.cols].set(out_rows.reshape(groups, g * width, *out_rows.shape[2:]),
                                   mode="drop")


def _attend_blocks(attention, q, k, v, stream: PackedBlocks, before) -> jax.Array:
  """The stream's columns in blocks of B queries, each over [before | its window] (`blocks`)."""
  groups, p = q.shape[:2]
  b, width = stream.block, stream.width
  q_cols, k_cols = _block_columns(p, b, width)
  n = q_cols.shape[0]
  window = lambda x: x[:, np.clip(k_cols, 0, p - 1)].reshape(groups * n, b + width, *x.shape[2:])
  q_blocks = jnp.pad(q, ((0, 0), (0, n * b - p), (0, 0), (0, 0))).reshape(groups * n, b,
                                                                          *q.shape[2:])
  out = attention(q_blocks, window(k), window(v), stream.mask,
                  prefix=tuple(jnp.repeat(x, n, axis=0) for x in before))
  return out.reshape(groups, n * b, *out.shape[2:])[:, :p]
