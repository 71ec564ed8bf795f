"""Attention kernels, and the one function the model calls to run them.

    out = attention(q, k, v, mask, kv_layout=..., prefix=..., query_chunk=..., implementation=...)

Every kernel computes the same thing: scaled dot-product attention (arXiv:1706.03762 §3.2.1) with
grouped-query heads (arXiv:2305.13245 §2.2) of T queries over S keys under a boolean mask. They
differ in how much they hold at once and in what they read:

  plain           all T x S float32 scores at once (`_plain`).
  query-chunked   T > query_chunk queries, a chunk at a time against all keys: exact, and only
                  [chunk, S] scores held at once (`_query_chunked`).
  shared prefix   rows that continue a shared prefix (a GRPO group's prompt, the instructions a
                  batch of prompts begins with) also attend to all of its real tokens. Keys as
                  projected (the training pass, one prefix per packed row): the prefix's keys go
                  before the row's own (`_prepend_prefix`). A KV cache (prefill and decode, G rows
                  per prefix): the prefix is scored apart, read once per group (`_grouped_prefix`).

Which code runs them is `implementation` (`model.attention` in a config), resolved in
`resolve_implementation` and dispatched in `attention` by the `_KERNELS` table; the model never
names a kernel. What each kernel runs, path by path (S: keys; T: queries of one call):

  path                          "xla"                 "cudnn" (GPU only)
  training pass, plain mask     `_plain`              cuDNN flash attention, mask as a bias
  query-chunked (T > chunk)     `_query_chunked`      one cuDNN call (flash holds O(T) already)
  packed shared prefix (bskd)   `_prepend_prefix`     [prefix | row] keys, one cuDNN call
  prefill into a KV cache       `_plain` (bksd)       cuDNN over the cache, transposed to bskd
  decode (T = 1, cached)        `_plain` (bksd)       falls back to xla (see `_cudnn`)
  grouped prefix (bksd cache)   `_grouped_prefix`     falls back to xla (see `_cudnn`)

"cudnn" is `jax.nn.dot_product_attention(implementation="cudnn")` (FlashAttention-style fused
softmax, arXiv:2205.14135 §3.1) with the boolean mask passed as a mask, which JAX turns into an
additive bias, so any mask the model builds (causal, left padding, packed rows, a prefix) is
expressed exactly. It needs bf16/fp16 queries and keys, head_dim a multiple of 8 and at most 128
(256 on Hopper and later), and, where it is differentiated, an even T and S (cuDNN with a bias);
asking for it elsewhere raises a ValueError naming `model.attention`. "auto" runs "cudnn" on a GPU
where those hold (`cudnn_unsupported` says why not), else "xla"; "xla" on CPU and TPU. No Pallas
kernel is wired in yet: TPU splash attention takes a static mask and segment ids rather than the
[rows, T, S] mask the model builds, the TPU flash kernel takes a bias but not grouped-query heads,
and neither can be checked without a TPU. Only "xla" runs on CPU; tests/models/
test_attention_cudnn.py checks "cudnn"'s own code (layouts, prefix, fallbacks) on CPU with JAX's
"xla" implementation in cuDNN's place, and cuDNN itself only where a GPU is present.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

# kv_layout: keys and values as projected, sequence-major [batch, S, kv_heads, head_dim] ("bskd"),
# or as a KVCache holds them, head-major [batch, kv_heads, S, head_dim] ("bksd"): there each
# (row, kv head) is one contiguous [S, head_dim] matrix that both attention dots read as stored,
# where a sequence-major cache made XLA:CPU copy (transpose) each layer's whole cache every step.
KV_LAYOUTS = ("bskd", "bksd")


def attention(q_bthd: jax.Array, k: jax.Array, v: jax.Array, mask_bts: jax.Array, *,
              kv_layout: str = "bskd", prefix: tuple[jax.Array, jax.Array, jax.Array] | None = None,
              query_chunk: int = 0, implementation: str = "xla") -> jax.Array:
  """Grouped-query attention of T queries over S keys; the kernel is chosen by `implementation`.

  Args:
    q_bthd: [rows, T, q_heads, head_dim] queries (RoPE applied); q_heads % kv_heads == 0, and query
      head h reads kv head h // (q_heads / kv_heads), as in HF's repeat_kv.
    k, v: [rows, S, kv_heads, head_dim] ("bskd") or [rows, kv_heads, S, head_dim] ("bksd").
    mask_bts: bool[rows, T, S], True where query t may attend to key s. A query row with no True
      (left padding) gives finite garbage, never NaN.
    kv_layout: "bskd" (keys as projected) or "bksd" (a KVCache, head-major).
    prefix: optional (k_prefix, v_prefix, prefix_mask) of shared prefixes, laid out like `k`, `v`
      with `prefixes` rows and Sp keys, and bool[prefixes, Sp] True at real tokens. Row r continues
      prefix r // (rows / prefixes); each of its queries attends to every real token of that
      prefix, then to its own keys as `mask_bts` says. "bskd" needs one prefix per row.
    query_chunk: most queries scored at once; 0 = all T. Results equal the unchunked ones up to
      float rounding, and T <= query_chunk (a decode step) runs the unchunked program. A prefix
      with a "bksd" cache never chunks.
    implementation: "xla", "cudnn" (GPU only), or "auto" (see `resolve_implementation`).

  Returns:
    [rows, T, q_heads, head_dim] in the dtype of `v`.

  Raises:
    ValueError: an unknown implementation or kv_layout (naming the choices), "cudnn" where cuDNN
      cannot run (saying why: the backend, dtype, head_dim or odd lengths), or a "bskd" prefix
      shared by several rows.
  """
  if kv_layout not in KV_LAYOUTS:
    raise ValueError(f"kv_layout={kv_layout!r}; expected one of {KV_LAYOUTS}.")
  name = resolve_implementation(implementation)
  if name == "cudnn":
    # Only the calls `_cudnn` hands to cuDNN are held to its limits; the backend always is.
    fused = not _cudnn_runs_xla(q_bthd, kv_layout, prefix)
    keys = mask_bts.shape[-1] + (prefix[0].shape[1] if prefix is not None else 0)
    why_not = cudnn_unsupported(q_bthd, k, keys) if fused else cudnn_unsupported(None, None, 0)
    if why_not and implementation == "auto":
      name = "xla"
    elif why_not:
      raise ValueError(f"model.attention='cudnn' cannot run here: {why_not}. Use "
                       f"model.attention='auto' (cuDNN where it can run, else XLA) or 'xla'.")
  return _KERNELS[name](q_bthd, k, v, mask_bts, kv_layout=kv_layout, prefix=prefix,
                        query_chunk=query_chunk)


def resolve_implementation(implementation: str, backend: str | None = None) -> str:
  """The kernel name `implementation` runs as on `backend` (default: JAX's default backend), before
  the shape checks: "auto" on a GPU names "cudnn", which `attention` still runs as "xla" where
  `cudnn_unsupported` objects.

  Raises:
    ValueError: `implementation` is not one of IMPLEMENTATIONS (naming them).
  """
  if implementation not in IMPLEMENTATIONS:
    raise ValueError(f"attention implementation={implementation!r}; expected one of "
                     f"{IMPLEMENTATIONS}.")
  if implementation != "auto":
    return implementation
  return _AUTO.get(backend or jax.default_backend(), "xla")


def cudnn_unsupported(q_bthd: jax.Array | None, k: jax.Array | None, keys: int,
                      backend: str | None = None) -> str | None:
  """Why cuDNN's fused attention cannot run these queries and keys (None: it can; q_bthd None:
  only the backend is checked).

  The conditions are those jax.nn.dot_product_attention(implementation="cudnn") checks (cuDNN
  flash attention with a bias): a GPU, bf16/fp16 inputs of one dtype, head_dim a multiple of 8 and
  at most 128 (256 from compute capability 9.0), and even T and S, which cuDNN needs for the
  backward pass with a bias (checked here for every call, since a forward pass may be
  differentiated later).
  """
  backend = backend or jax.default_backend()
  if backend != "gpu":
    return f"cuDNN runs on a GPU only, and JAX's backend here is {backend!r}"
  if q_bthd is None:  # the backend alone
    return None
  if q_bthd.dtype not in (jnp.bfloat16, jnp.float16) or k.dtype != q_bthd.dtype:
    return f"cuDNN needs bfloat16 or float16 queries and keys, not {q_bthd.dtype} / {k.dtype}"
  head_dim, most = q_bthd.shape[-1], _cudnn_max_head_dim()
  if head_dim % 8 or head_dim > most:
    return f"cuDNN needs head_dim a multiple of 8 and at most {most}, not {head_dim}"
  if q_bthd.shape[1] % 2 or keys % 2:
    return (f"cuDNN with a mask needs an even number of queries and keys, not "
            f"{q_bthd.shape[1]} x {keys}")
  return None


def kernel_choice(implementation: str, head_dim: int, dtype) -> str:
  """What attention runs on this backend for a model's head_dim and compute dtype, in words, for a
  benchmark's output: e.g. "cudnn (decode, grouped cache prefix: xla)" or "xla". An odd query or
  key count still falls back from "auto" to "xla" call by call."""
  name = resolve_implementation(implementation)
  if name != "cudnn":
    return name
  probe = jnp.zeros((1, 2, 1, head_dim), dtype)
  why_not = cudnn_unsupported(probe, probe, 2)
  if why_not and implementation == "auto":
    return f"xla (auto: {why_not})"
  return "cudnn (decode, grouped cache prefix: xla)"


def _cudnn_max_head_dim() -> int:
  """256 on Hopper (compute capability 9.0) and later, else 128 (as JAX's cuDNN wrapper checks)."""
  capability = getattr(jax.devices()[0], "compute_capability", "0.0")
  return 256 if tuple(map(int, str(capability).split(".")[:2])) >= (9, 0) else 128


def _xla(q_bthd, k, v, mask_bts, *, kv_layout, prefix, query_chunk):
  """`attention` as jnp programs: the plain, query-chunked and shared-prefix kernels below."""
  if prefix is not None and kv_layout == "bksd":
    return _grouped_prefix(q_bthd, *prefix, k, v, mask_bts)
  if prefix is not None:
    k, v, mask_bts = _prepend_prefix(k, v, mask_bts, *prefix)
  if query_chunk and q_bthd.shape[1] > query_chunk:
    return _query_chunked(q_bthd, k, v, mask_bts, kv_layout, query_chunk)
  return _plain(q_bthd, k, v, mask_bts, kv_layout)


def _cudnn(q_bthd, k, v, mask_bts, *, kv_layout, prefix, query_chunk, library="cudnn"):
  """`attention` through jax.nn.dot_product_attention(implementation=library): "cudnn" on a GPU;
  tests pass "xla" to run this function's own code on CPU.

  A decode step (one query over a head-major cache) and a cache shared through a prefix run as
  "xla": the fused call takes keys sequence-major, so a head-major cache would be transposed
  (copied) whole each step, more than the step reads, and the grouped prefix reads each prefix
  once per group, which one fused call over [prefix | row] keys cannot. query_chunk is unused:
  the fused kernel never holds [T, S] scores.
  """
  if _cudnn_runs_xla(q_bthd, kv_layout, prefix):
    return _xla(q_bthd, k, v, mask_bts, kv_layout=kv_layout, prefix=prefix, query_chunk=query_chunk)
  if prefix is not None:
    k, v, mask_bts = _prepend_prefix(k, v, mask_bts, *prefix)
  if kv_layout == "bksd":
    k, v = k.swapaxes(1, 2), v.swapaxes(1, 2)
  # A query with no key allowed (padding) attends to every key here and gets zeros below, as in
  # `_xla`. Left fully masked, its logsumexp underflows, and cuDNN's backward pass then gives NaN
  # for dQ (seen on an H200: every update of the 1.5 B bench non-finite; the same failure as
  # pytorch/pytorch#196678 for key counts = 64 mod 128), which the shared weights spread everywhere.
  keyless = ~mask_bts.any(-1)                                            # [rows, T]
  out = jax.nn.dot_product_attention(q_bthd, k, v, mask=(mask_bts | keyless[..., None])[:, None],
                                     implementation=library)
  return jnp.where(keyless[..., None, None], 0, out).astype(v.dtype)


def _cudnn_runs_xla(q_bthd, kv_layout: str, prefix) -> bool:
  """Whether "cudnn" runs this call as "xla": a decode step or a prefix over a head-major cache."""
  return kv_layout == "bksd" and (prefix is not None or q_bthd.shape[1] == 1)


# The kernels `attention` may run, by implementation name; a fused kernel is one more entry here
# with the same signature (and, if "auto" should pick it, a line in _AUTO).
_KERNELS: dict[str, Callable[..., jax.Array]] = {"xla": _xla, "cudnn": _cudnn}
IMPLEMENTATIONS = ("auto", *_KERNELS)
# What "auto" runs on each backend, before `cudnn_unsupported`'s shape checks.
_AUTO = {"cpu": "xla", "gpu": "cudnn", "tpu": "xla"}


def _plain(q_bthd: jax.Array, k: jax.Array, v: jax.Array, mask_bts: jax.Array,
           kv_layout: str) -> jax.Array:
  """All T queries at once: float32 scores [rows, kv_heads, group, T, S]."""
  b, t, h, d = q_bthd.shape
  kv_heads = k.shape[kv_layout.index("k")]
  q = q_bthd.reshape(b, t, kv_heads, h // kv_heads, d)
  scores = jnp.einsum(f"btkgd,{kv_layout}->bkgts", q, k, preferred_element_type=jnp.float32)
  probs = _masked_softmax(scores * (d ** -0.5), mask_bts[:, None, None, :, :]).astype(v.dtype)
  # Batch dims first in the output, then one small transpose: asking the dot for "btkgd" directly
  # made XLA:CPU's decode attention much slower (the size-1 T axis between batch dims).
  out = jnp.einsum(f"bkgts,{kv_layout}->bkgtd", probs, v, preferred_element_type=jnp.float32)
  return out.astype(probs.dtype).transpose(0, 3, 1, 2, 4).reshape(b, t, h, d)


def _query_chunked(q_bthd: jax.Array, k: jax.Array, v: jax.Array, mask_bts: jax.Array,
                   kv_layout: str, query_chunk: int) -> jax.Array:
  """`_plain` over consecutive chunks of at most `query_chunk` queries, one after another.

  Every chunk sees all S keys, so its plain softmax is exact: no running max or normaliser as in
  flash attention (arXiv:2205.14135 §3.1). The scores held at once shrink from [rows, heads, T, S]
  to [rows, heads, chunk, S] floats (SmolLM2, 8 rows of 4,096 tokens: 4.8 GB per copy at once,
  0.15 GB per chunk of 128). The T queries are split into n = ceil(T / query_chunk) chunks of
  equal length ceil(T / n), so padding adds fewer than n query rows (T = 513 runs as 2 x 257, not
  2 x 512); padded rows attend to no key and are dropped. Each chunk is rematerialised in the
  backward pass (one more score product per chunk): a scan otherwise keeps every chunk's
  probabilities for it, all [T, S] of them again (SmolLM2's remat gradient at 8 x 4,096 tokens in
  chunks of 512: 16.3 GB of XLA temporaries without it, 5.3 GB with it, 19.3 GB unchunked).
  """
  b, t, h, d = q_bthd.shape
  n = -(-t // query_chunk)
  c = -(-t // n)
  pad = n * c - t
  q = jnp.pad(q_bthd, ((0, 0), (0, pad), (0, 0), (0, 0)))
  mask = jnp.pad(mask_bts, ((0, 0), (0, pad), (0, 0)))  # False: padded queries see no key
  chunks = (q.reshape(b, n, c, h, d).swapaxes(0, 1),     # [n, rows, c, q_heads, head_dim]
            mask.reshape(b, n, c, -1).swapaxes(0, 1))    # [n, rows, c, S]
  attend_chunk = jax.checkpoint(lambda qm: _plain(qm[0], k, v, qm[1], kv_layout), prevent_cse=False)
  out = jax.lax.map(attend_chunk, chunks)                # [n, rows, c, q_heads, head_dim]
  return out.swapaxes(0, 1).reshape(b, n * c, h, d)[:, :t]


def _prepend_prefix(k_bskd: jax.Array, v_bskd: jax.Array, mask_bts: jax.Array, kp_bskd: jax.Array,
                    vp_bskd: jax.Array, prefix_mask_bs: jax.Array):
  """(keys, values, mask) of [prefix | row] for one prefix per row: every query sees the real
  prefix tokens, then the row's own keys as `mask_bts` says."""
  rows, t = mask_bts.shape[:2]
  if kp_bskd.shape[0] != rows:
    raise ValueError(f"a prefix with kv_layout 'bskd' is one per row: {kp_bskd.shape[0]} prefixes "
                     f"for {rows} rows.")
  mask = jnp.concatenate(
      [jnp.broadcast_to(prefix_mask_bs[:, None, :], (rows, t, kp_bskd.shape[1])), mask_bts], axis=-1)
  return (jnp.concatenate([kp_bskd, k_bskd], axis=1), jnp.concatenate([vp_bskd, v_bskd], axis=1),
          mask)


def _grouped_prefix(q_bthd: jax.Array, kp_bksd: jax.Array, vp_bksd: jax.Array,
                    prefix_mask_bs: jax.Array, k_bksd: jax.Array, v_bksd: jax.Array,
                    mask_bts: jax.Array) -> jax.Array:
  """Cached rows continuing shared prefixes: each group of G = rows / prefixes consecutive rows
  reads its prefix's keys and values once, then its own cache.

  Args:
    q_bthd: [rows, T, q_heads, head_dim]: one query per row for a decode step, or a row's T
      tokens after a batch-shared prefix (an evaluation batch's common instructions).
    kp_bksd, vp_bksd: [prefixes, kv_heads, Sp, head_dim]; row r continues prefix r // G.
    prefix_mask_bs: bool[prefixes, Sp], True at real prefix tokens.
    k_bksd, v_bksd: [rows, kv_heads, S, head_dim] the rows' own cache.
    mask_bts: bool[rows, T, S], True where query t may attend to the row's slot s.
  Returns:
    [rows, T, q_heads, head_dim] in the dtype of `v_bksd`.
  """
  n, t, h, d = q_bthd.shape
  p, kv_heads, sp, _ = kp_bksd.shape
  g, hg = n // p, h // kv_heads
  m = t * hg  # the queries of one (row, kv head): its T tokens' hg heads
  low = jnp.finfo(jnp.float32).min

  def by_prefix(x):  # [n, kv_heads, m, ...] -> [p, kv_heads, g * m, ...]
    x = x.reshape(p, g, kv_heads, m, *x.shape[3:]).swapaxes(1, 2)
    return x.reshape(p, kv_heads, g * m, *x.shape[4:])

  def by_row(x):  # the inverse of by_prefix
    x = x.reshape(p, kv_heads, g, m, *x.shape[3:]).swapaxes(1, 2)
    return x.reshape(n, kv_heads, m, *x.shape[4:])

  # The two key sets are scored apart and share one softmax through its max and normaliser, so
  # each dot reads its keys as stored: one [G * m, Sp] product per (prefix, kv head), which reads
  # the prefix once per group, and one [m, S] product per (row, kv head).
  q = q_bthd.reshape(n, t, kv_heads, hg, d).swapaxes(1, 2).reshape(n, kv_heads, m, d)
  s_p = jnp.einsum("pkmd,pksd->pkms", by_prefix(q), kp_bksd, preferred_element_type=jnp.float32)
  s_p = jnp.where(prefix_mask_bs[:, None, None, :], s_p * (d ** -0.5), low)
  s_c = jnp.einsum("nkmd,nksd->nkms", q, k_bksd, preferred_element_type=jnp.float32)
  own = jnp.broadcast_to(mask_bts[:, None, :, None, :], (n, 1, t, hg, mask_bts.shape[-1]))
  s_c = jnp.where(own.reshape(n, 1, m, -1), s_c * (d ** -0.5), low)
  top = jnp.maximum(by_row(jnp.max(s_p, axis=-1)), jnp.max(s_c, axis=-1))   # [n, kv_heads, m]
  e_p = jnp.exp(s_p - by_prefix(top)[..., None])
  e_c = jnp.exp(s_c - top[..., None])
  total = by_row(jnp.sum(e_p, axis=-1)) + jnp.sum(e_c, axis=-1)
  out = (by_row(jnp.einsum("pkms,pksd->pkmd", e_p.astype(vp_bksd.dtype), vp_bksd,
                           preferred_element_type=jnp.float32))
         + jnp.einsum("nkms,nksd->nkmd", e_c.astype(v_bksd.dtype), v_bksd,
                      preferred_element_type=jnp.float32))
  out = (out / total[..., None]).reshape(n, kv_heads, t, hg, d).swapaxes(1, 2)
  return out.reshape(n, t, h, d).astype(v_bksd.dtype)


def _masked_softmax(scores: jax.Array, mask: jax.Array) -> jax.Array:
  """softmax over the last axis of float32 scores where `mask` (broadcast) is True.

  A large finite negative (not -inf) fills masked entries, so fully masked rows (left-pad queries)
  stay finite.
  """
  return jax.nn.softmax(jnp.where(mask, scores, jnp.finfo(jnp.float32).min), axis=-1)
