"""The attention kernels of models/attention.py, each against an independent numpy reference, and
the model's kernel choice (ModelConfig.attention_implementation, attention_query_chunk).

Every implementation that runs on CPU is tested here: "xla" (plain, query-chunked, shared prefix as
projected and over a KV cache) and "auto", which resolves to "xla". "cudnn" runs only on a GPU: its
own code (layout transposes, prefix, the decode / grouped-prefix fallbacks) is checked here on CPU
with JAX's "xla" implementation of jax.nn.dot_product_attention in cuDNN's place, and cuDNN itself
by `test_cudnn_on_a_gpu_matches_xla`, skipped where no GPU is present.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from grounding_jax.models import ModelConfig, attention, load_pretrained

_INIT = dict(initializer_range=0.2)  # sharp attention, so a wrong mask or chunk moves logits by O(1)


def _left_padded_mask(lengths, t):
  """bool[len(lengths), t, t]: causal attention over each row's last lengths[i] tokens; a padded
  query row attends to nothing."""
  real = np.arange(t)[None, :] >= t - np.asarray(lengths)[:, None]
  return np.tril(np.ones((t, t), bool))[None] & real[:, None, :] & real[:, :, None]


def _qkv(t, seed=0, b=3, q_heads=4, kv_heads=2, d=8, s=None):
  rng = np.random.default_rng(seed)
  q = rng.normal(size=(b, t, q_heads, d))
  k, v = rng.normal(size=(2, b, t if s is None else s, kv_heads, d))
  return (jnp.asarray(2 * q, jnp.float32), jnp.asarray(2 * k, jnp.float32),
          jnp.asarray(v, jnp.float32))


def _reference(q, k_bskd, v_bskd, mask_bts):
  """Grouped-query softmax attention in float64 numpy: query head h reads kv head h // group. A
  query with no key allowed gets zeros (the kernels give finite values there; tests skip them)."""
  q, k, v = (np.asarray(a, np.float64) for a in (q, k_bskd, v_bskd))
  group = q.shape[2] // k.shape[2]
  k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
  scores = np.einsum("bthd,bshd->bhts", q, k) / np.sqrt(q.shape[-1])
  scores = np.where(np.asarray(mask_bts)[:, None], scores, -np.inf)
  top = np.max(scores, axis=-1, keepdims=True)
  e = np.exp(scores - np.where(np.isfinite(top), top, 0))
  probs = e / np.maximum(e.sum(-1, keepdims=True), 1e-300)
  return np.einsum("bhts,bshd->bthd", probs, v)


def _head_major(*arrays):
  """[batch, S, kv_heads, head_dim] -> the KVCache layout [batch, kv_heads, S, head_dim]."""
  return tuple(a.transpose(0, 2, 1, 3) for a in arrays)


def _assert_matches(got, want, mask_bts, atol=2e-6):
  """got == want at every query that sees at least one key (up to float32 rounding)."""
  live = np.asarray(mask_bts).any(-1)
  assert np.abs(want[live]).max() > 0.5  # sharp enough that a wrong key would show
  np.testing.assert_allclose(np.asarray(got)[live], want[live], atol=atol, rtol=0)


def _jaxpr(fn, *args) -> str:
  return str(jax.make_jaxpr(fn)(*args))


@pytest.mark.parametrize("kv_layout", ["bskd", "bksd"])
@pytest.mark.parametrize("chunk", [0, 4, 5, 13, 1])
def test_plain_and_query_chunked_attention_equal_numpy(kv_layout, chunk):
  t = 13
  q, k, v = _qkv(t)
  mask = _left_padded_mask([13, 6, 1], t)
  want = _reference(q, k, v, mask)
  if kv_layout == "bksd":
    k, v = _head_major(k, v)
  got = jax.jit(lambda q, k, v: attention.attention(q, k, v, mask, kv_layout=kv_layout,
                                                    query_chunk=chunk))(q, k, v)
  assert got.shape == q.shape and got.dtype == jnp.float32
  assert np.isfinite(np.asarray(got)).all()  # fully masked (left-pad) queries stay finite
  _assert_matches(got, want, mask)


@pytest.mark.parametrize("chunk", [0, 3])
def test_shared_prefix_as_projected_equals_whole_rows(chunk):
  """A continuation stream attending to its prefix (prefix=) equals the rows [prefix | continuation]
  attended whole, and the numpy reference."""
  sp, t = 6, 7
  qc, kc, vc = _qkv(t, seed=1)
  _, kp, vp = _qkv(sp, seed=2)
  prefix_mask = np.arange(sp)[None, :] >= np.array([0, 2, 5])[:, None]   # left-padded prefixes
  own = np.tril(np.ones((t, t), bool))[None] & (np.arange(t) < np.array([7, 4, 1])[:, None, None])
  whole_mask = np.concatenate([np.broadcast_to(prefix_mask[:, None, :], (3, t, sp)), own], -1)
  k_whole, v_whole = jnp.concatenate([kp, kc], 1), jnp.concatenate([vp, vc], 1)
  want = _reference(qc, k_whole, v_whole, whole_mask)
  got = jax.jit(lambda q, k, v: attention.attention(q, k, v, own, prefix=(kp, vp, prefix_mask),
                                                    query_chunk=chunk))(qc, kc, vc)
  whole = jax.jit(lambda q, k, v: attention.attention(q, k, v, whole_mask, query_chunk=chunk))(
      qc, k_whole, v_whole)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(whole))
  _assert_matches(got, want, whole_mask)


@pytest.mark.parametrize("t", [1, 3])  # a decode step; a prompt's tokens after a shared prefix
def test_shared_prefix_over_a_cache_equals_whole_rows(t):
  """G = 2 cached rows per prefix read the prefix once: the same as each row attending to
  [its group's prefix | its own cache slots], in numpy."""
  prefixes, g, sp, s = 2, 2, 5, 6
  rows = prefixes * g
  q, _, _ = _qkv(t, seed=3, b=rows)
  _, k, v = _qkv(s, seed=4, b=rows)
  _, kp, vp = _qkv(sp, seed=5, b=prefixes)
  prefix_mask = np.arange(sp)[None, :] >= np.array([0, 3])[:, None]
  slot = np.arange(s)[None, None, :] <= (s - t + np.arange(t))[None, :, None]   # causal in the cache
  own = slot & (np.arange(s)[None, None, :] >= np.array([0, 1, 2, 0])[:, None, None])
  group = np.arange(rows) // g
  whole_mask = np.concatenate([np.broadcast_to(prefix_mask[group][:, None, :], (rows, t, sp)), own],
                              -1)
  want = _reference(q, jnp.concatenate([kp[group], k], 1), jnp.concatenate([vp[group], v], 1),
                    whole_mask)
  (kp_c, vp_c), (k_c, v_c) = _head_major(kp, vp), _head_major(k, v)
  got = jax.jit(lambda q: attention.attention(q, k_c, v_c, own, kv_layout="bksd",
                                              prefix=(kp_c, vp_c, prefix_mask)))(q)
  assert got.shape == q.shape
  _assert_matches(got, want, whole_mask)


def test_decode_from_a_cache_equals_the_full_causal_attention():
  """Prefill T - 1 tokens into a head-major cache with spare slots, then one decode query: each
  equals its row of the full causal attention over all T tokens."""
  t, slots = 9, 12
  q, k, v = _qkv(t, seed=6)
  full = _reference(q, k, v, _left_padded_mask([9, 5, 2], t))
  real = np.arange(slots)[None, :] >= np.array([0, 4, 7])[:, None]  # the same left padding
  real[:, t:] = False
  cache_k, cache_v = (jnp.zeros((3, 2, slots, 8)).at[:, :, :t].set(a.transpose(0, 2, 1, 3))
                      for a in (k, v))
  causal = np.arange(slots)[None, None, :] <= np.arange(t)[None, :, None]
  mask = causal & real[:, None, :] & real[:, :t, None]
  prefill = attention.attention(q[:, :t - 1], cache_k, cache_v, mask[:, :t - 1], kv_layout="bksd")
  step = attention.attention(q[:, t - 1:], cache_k, cache_v, mask[:, t - 1:], kv_layout="bksd")
  got = np.concatenate([np.asarray(prefill), np.asarray(step)], axis=1)
  _assert_matches(got, full, mask)


def test_implementation_is_resolved_and_unknown_names_raise():
  assert attention.IMPLEMENTATIONS == ("auto", "xla", "cudnn")
  assert attention.resolve_implementation("auto", "cpu") == "xla"
  assert attention.resolve_implementation("auto", "tpu") == "xla"
  assert attention.resolve_implementation("auto", "gpu") == "cudnn"
  assert attention.resolve_implementation("xla") == "xla"
  q, k, v = _qkv(4)
  mask = _left_padded_mask([4, 4, 4], 4)
  np.testing.assert_array_equal(
      np.asarray(attention.attention(q, k, v, mask, implementation="auto")),
      np.asarray(attention.attention(q, k, v, mask, implementation="xla")))
  with pytest.raises(ValueError, match=r"implementation='flash'; expected one of "
                                       r"\('auto', 'xla', 'cudnn'\)"):
    attention.attention(q, k, v, mask, implementation="flash")
  with pytest.raises(ValueError, match=r"kv_layout='bhsd'; expected one of"):
    attention.attention(q, k, v, mask, kv_layout="bhsd")
  with pytest.raises(ValueError, match="one per row: 1 prefixes for 3 rows"):
    attention.attention(q, k, v, mask, prefix=(k[:1], v[:1], np.ones((1, 4), bool)))


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="checks the error off a GPU")
def test_cudnn_off_a_gpu_names_the_config_field():
  q, k, v = _qkv(4)
  with pytest.raises(ValueError, match=r"model.attention='cudnn' cannot run here: cuDNN runs on a "
                                       r"GPU only, and JAX's backend here is 'cpu'.*'auto'.*'xla'"):
    attention.attention(q, k, v, _left_padded_mask([4, 4, 4], 4), implementation="cudnn")


def test_cudnn_shape_checks_say_why():
  """What "auto" falls back from on a GPU, and what an explicit "cudnn" raises, one reason each."""
  q16, k16 = (jnp.zeros((1, 4, 2, 8), jnp.bfloat16),) * 2
  assert attention.cudnn_unsupported(q16, k16, 6, backend="gpu") is None
  assert "bfloat16 or float16" in attention.cudnn_unsupported(q16.astype(jnp.float32), k16, 6, "gpu")
  assert "head_dim a multiple of 8" in attention.cudnn_unsupported(q16[..., :6], k16[..., :6], 6,
                                                                    "gpu")
  assert "even number of queries and keys, not 4 x 7" in attention.cudnn_unsupported(q16, k16, 7,
                                                                                      "gpu")
  assert "JAX's backend here is 'tpu'" in attention.cudnn_unsupported(q16, k16, 6, "tpu")


def test_kernel_choice_in_words():
  """What the benchmarks print: "auto" is "xla" here; on a GPU, cuDNN or why not."""
  if jax.default_backend() != "gpu":
    assert attention.kernel_choice("auto", 64, "bfloat16") == "xla"
  else:
    assert attention.kernel_choice("auto", 64, "bfloat16").startswith("cudnn")
    assert attention.kernel_choice("auto", 64, "float32").startswith("xla (auto: cuDNN needs")
  assert attention.kernel_choice("xla", 64, "bfloat16") == "xla"


_LIBRARY_XLA = functools.partial(attention._cudnn, library="xla")


@pytest.mark.parametrize("kv_layout", ["bskd", "bksd"])
@pytest.mark.parametrize("t", [13, 1])   # a training pass or prefill; a decode step (bksd: xla)
def test_cudnn_kernel_code_on_cpu_equals_xla(kv_layout, t):
  """The "cudnn" kernel's code with JAX's XLA attention in cuDNN's place: the same outputs as ours
  (up to float32 rounding: a different program) for the plain and query-chunked paths, prefill and
  decode over a head-major cache (the decode step is our own program, bit for bit)."""
  s = 13
  q, k, v = _qkv(t, seed=7, s=s)
  mask = _left_padded_mask([13, 6, 1], s)[:, s - t:]
  if kv_layout == "bksd":
    k, v = _head_major(k, v)
  kw = dict(kv_layout=kv_layout, prefix=None)
  # Both jitted: an eager reference would be a different program (op by op), not bit for bit.
  ours = jax.jit(lambda q, k, v: attention._xla(q, k, v, mask, query_chunk=0, **kw))(q, k, v)
  for chunk in (0, 4):
    got = jax.jit(lambda q, k, v: _LIBRARY_XLA(q, k, v, mask, query_chunk=chunk, **kw))(q, k, v)
    assert got.shape == q.shape and got.dtype == jnp.float32
    if kv_layout == "bksd" and t == 1:
      np.testing.assert_array_equal(np.asarray(got), np.asarray(ours))
    else:
      _assert_matches(got, np.asarray(ours), mask)


def test_cudnn_kernel_code_on_cpu_shared_prefixes():
  """The packed shared-prefix update ([prefix | row] keys in one fused call) equals ours up to
  float32 rounding; a cache shared through a prefix (grouped prefix) runs our program exactly."""
  sp, t = 6, 7
  qc, kc, vc = _qkv(t, seed=8)
  _, kp, vp = _qkv(sp, seed=9)
  prefix_mask = np.arange(sp)[None, :] >= np.array([0, 2, 5])[:, None]
  own = np.tril(np.ones((t, t), bool))[None] & (np.arange(t) < np.array([7, 4, 1])[:, None, None])
  prefix = (kp, vp, prefix_mask)
  ours = attention._xla(qc, kc, vc, own, kv_layout="bskd", prefix=prefix, query_chunk=0)
  got = _LIBRARY_XLA(qc, kc, vc, own, kv_layout="bskd", prefix=prefix, query_chunk=3)
  _assert_matches(got, np.asarray(ours), own | prefix_mask.any(-1)[:, None, None])
  (kp_c, vp_c), (k_c, v_c) = _head_major(kp, vp), _head_major(kc, vc)
  cached = dict(kv_layout="bksd", prefix=(kp_c, vp_c, prefix_mask), query_chunk=0)
  np.testing.assert_array_equal(np.asarray(_LIBRARY_XLA(qc, k_c, v_c, own, **cached)),
                                np.asarray(attention._xla(qc, k_c, v_c, own, **cached)))


def test_dispatch_as_on_a_gpu(monkeypatch):
  """`attention`'s choices as a GPU backend would see them (the backend faked, cuDNN replaced by
  JAX's XLA attention): "auto" takes the fused kernel for bf16 at even lengths and falls back to
  ours otherwise; "cudnn" runs decode over a cache as ours, and raises for a dtype cuDNN lacks."""
  calls = []
  monkeypatch.setattr(attention.jax, "default_backend", lambda: "gpu")
  monkeypatch.setitem(attention._KERNELS, "cudnn",
                      lambda *a, **kw: calls.append(1) or _LIBRARY_XLA(*a, **kw))
  run = lambda *args, **kw: jax.jit(functools.partial(attention.attention, **kw))(*args)
  q, k, v = (a.astype(jnp.bfloat16) for a in _qkv(4, seed=11, b=1, d=8))
  mask = _left_padded_mask([3], 4)
  run(q, k, v, mask, implementation="auto")
  assert len(calls) == 1                                    # bf16, 4 x 4: fused
  run(q[:, :3], k[:, :3], v[:, :3], mask[:, :3, :3], implementation="auto")
  run(q.astype(jnp.float32), k, v, mask, implementation="auto")
  assert len(calls) == 1                                    # odd lengths, float32: ours
  k_c, v_c = _head_major(k, v)
  step = run(q[:, -1:], k_c, v_c, mask[:, -1:], kv_layout="bksd", implementation="cudnn")
  np.testing.assert_array_equal(np.asarray(step), np.asarray(run(    # decode: ours, exactly
      q[:, -1:], k_c, v_c, mask[:, -1:], kv_layout="bksd", implementation="xla")))
  with pytest.raises(ValueError, match=r"model.attention='cudnn' cannot run here: cuDNN needs "
                                       r"bfloat16 or float16 queries and keys, not float32"):
    run(q.astype(jnp.float32), k.astype(jnp.float32), v, mask, implementation="cudnn")


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN runs on a GPU only")
def test_cudnn_on_a_gpu_matches_xla():
  """cuDNN itself, bf16, prefill and a packed prefix with grads: close to our XLA kernel."""
  t = 16
  q, k, v = (a.astype(jnp.bfloat16) for a in _qkv(t, seed=10, d=64))
  mask = _left_padded_mask([16, 8, 2], t)
  loss = lambda impl: lambda q, k, v: attention.attention(
      q, k, v, mask, implementation=impl).astype(jnp.float32).sum()
  for impl_out, xla_out in zip(jax.value_and_grad(loss("cudnn"), (0, 1, 2))(q, k, v),
                               jax.value_and_grad(loss("xla"), (0, 1, 2))(q, k, v)):
    for a, b in zip(jax.tree.leaves(impl_out), jax.tree.leaves(xla_out)):
      np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32),
                                 atol=0.1, rtol=0.05)


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN runs on a GPU only")
@pytest.mark.parametrize("t", [192, 704])
def test_cudnn_gradients_are_finite_with_keyless_queries(t):
  """Left padding leaves queries that see no key. cuDNN's backward pass gave NaN there at key
  counts of 64 mod 128 (an H200, the 1.5 B GRPO bench: every update non-finite); those queries now
  attend to every key inside the kernel and get zeros, as in our XLA kernel."""
  q, k, v = (a.astype(jnp.bfloat16) for a in _qkv(t, seed=11, b=2, q_heads=12, kv_heads=2, d=128))
  mask = _left_padded_mask([t, t // 3], t)
  loss = lambda impl: lambda q, k, v: attention.attention(
      q, k, v, mask, implementation=impl).astype(jnp.float32).sum()
  got, want = (jax.value_and_grad(loss(impl), (0, 1, 2))(q, k, v) for impl in ("cudnn", "xla"))
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert np.isfinite(a).all()
    assert np.linalg.norm(a - b) <= 2e-2 * np.linalg.norm(b)  # bf16 operands: 1e-3 to 1e-2


def test_model_config_chooses_the_implementation(tiny_checkpoint):
  folder = tiny_checkpoint("llama")
  auto, xla = load_pretrained(folder), load_pretrained(folder, attention_implementation="xla")
  assert auto.config.attention_implementation == "auto"
  assert xla.config.attention_implementation == "xla"
  assert "attention_implementation" not in xla.config.to_hf_dict()
  ids, mask = np.ones((2, 5), np.int32), np.ones((2, 5), bool)
  assert _jaxpr(lambda: auto(ids, mask)) == _jaxpr(lambda: xla(ids, mask))  # "auto" runs "xla"
  with pytest.raises(ValueError, match=r"attention_implementation='flash'; expected one of"):
    load_pretrained(folder, attention_implementation="flash")
  with pytest.raises(ValueError, match=r"attention_implementation='flash'"):
    ModelConfig(model_type="llama", vocab_size=8, hidden_size=8, intermediate_size=8, num_layers=1,
                num_heads=2, num_kv_heads=1, head_dim=4, attention_implementation="flash")


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("chunk", [4, 5, 1])  # 13 queries: 4 x 4 (3 padded), 3 x 5 (2), 13 x 1
def test_chunked_attention_and_gradients_equal_one_block(cached, chunk):
  t = 13
  q, k, v = _qkv(t)
  mask = _left_padded_mask([13, 6, 1], t)  # rows 1 and 2: 7 and 12 fully masked queries
  kv = "bksd" if cached else "bskd"
  if cached:  # a KVCache holds head-major keys and values
    k, v = _head_major(k, v)
  attend = functools.partial(attention.attention, kv_layout=kv)

  def loss(fn, q, k, v):  # a non-linear read of every output, so every gradient path counts
    return jnp.sum(jnp.sin(fn(q, k, v)) * jnp.arange(q.shape[-1]))

  reference = lambda q, k, v: attention._plain(q, k, v, mask, kv)  # pylint: disable=protected-access
  chunked = jax.jit(lambda q, k, v: attend(q, k, v, mask, query_chunk=chunk))
  want, got = reference(q, k, v), chunked(q, k, v)
  assert got.shape == want.shape == q.shape
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-6, rtol=0)
  assert np.abs(np.asarray(want)).max() > 0.5
  grads_want = jax.grad(lambda *a: loss(reference, *a), argnums=(0, 1, 2))(q, k, v)
  grads_got = jax.jit(jax.grad(lambda *a: loss(chunked, *a), argnums=(0, 1, 2)))(q, k, v)
  for g_got, g_want in zip(grads_got, grads_want):
    scale = np.abs(np.asarray(g_want)).max()  # ~40: float32 rounding is ~1e-6 of it
    assert scale > 0.1
    np.testing.assert_allclose(np.asarray(g_got), np.asarray(g_want), atol=2e-6 * scale, rtol=0)


def test_at_most_chunk_queries_trace_the_one_block_program():
  """Decode (T = 1) and sequences no longer than the chunk trace exactly the unchunked program; only
  a longer one runs the chunk loop."""
  attend = attention.attention
  cached = functools.partial(attention.attention, kv_layout="bksd")
  for t in (1, 8):
    q, k, v = _qkv(t)
    k_cache, v_cache = (jnp.zeros((3, 2, 16, 8)),) * 2
    mask, mask_cache = _left_padded_mask([t, 1, 1], t), np.ones((3, t, 16), bool)
    for chunk in (8, 512):
      assert (_jaxpr(lambda q, k, v: attend(q, k, v, mask, query_chunk=chunk), q, k, v)
              == _jaxpr(lambda q, k, v: attend(q, k, v, mask), q, k, v))
      assert (_jaxpr(lambda q, k, v: cached(q, k, v, mask_cache, query_chunk=chunk),
                     q, k_cache, v_cache)
              == _jaxpr(lambda q, k, v: cached(q, k, v, mask_cache), q, k_cache, v_cache))
  q, k, v = _qkv(9)
  mask = _left_padded_mask([9, 1, 1], 9)
  assert "scan[" not in _jaxpr(lambda q, k, v: attend(q, k, v, mask), q, k, v)
  assert "scan[" in _jaxpr(lambda q, k, v: attend(q, k, v, mask, query_chunk=8), q, k, v)


def test_model_decode_step_and_short_prefill_programs_are_unchanged(tiny_checkpoint):
  folder = tiny_checkpoint("llama")
  plain = load_pretrained(folder, attention_query_chunk=0)
  chunked = load_pretrained(folder, attention_query_chunk=6)
  assert chunked.config.attention_query_chunk == 6 and plain.config.attention_query_chunk == 0

  def program(model, t):
    graphdef, state = nnx.split(model)
    cache = model.init_cache(2, 12)

    def run(state, ids):
      return nnx.merge(graphdef, state).decode(ids, jnp.zeros_like(ids), cache, jnp.int32(0),
                                               jnp.ones((2, 12), bool))
    return _jaxpr(run, state, jnp.zeros((2, t), jnp.int32))

  assert program(chunked, 1) == program(plain, 1)   # decode step
  assert program(chunked, 6) == program(plain, 6)   # prefill of at most one chunk
  assert program(chunked, 7) != program(plain, 7)   # a longer prefill runs in chunks


@pytest.mark.parametrize("scan_layers", [True, False])
def test_chunked_model_logits_and_remat_gradients_equal_unchunked(tiny_checkpoint, scan_layers):
  folder = tiny_checkpoint("llama", **_INIT)
  width = 30  # chunks of 8: 4 x 8 queries, 2 padded
  rng = np.random.default_rng(0)
  mask = np.arange(width)[None, :] >= width - np.array([30, 17, 2])[:, None]
  ids = np.where(mask, rng.integers(3, 96, (3, width)), 0).astype(np.int32)
  targets = rng.integers(3, 96, (3, width))

  def logits_and_grads(chunk):
    model = load_pretrained(folder, remat=True, scan_layers=scan_layers, attention_query_chunk=chunk)
    graphdef, state = nnx.split(model, nnx.Param)

    def loss(params):  # next-token log-likelihood of the real tokens, as the trainers use it
      logits = nnx.merge(graphdef, params)(ids, mask)
      logp = jnp.take_along_axis(jax.nn.log_softmax(logits), targets[..., None], -1)[..., 0]
      return -jnp.sum(jnp.where(mask, logp, 0.0)), logits
    (_, logits), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(state)
    return np.asarray(logits), jax.tree.leaves(grads)

  want_logits, want_grads = logits_and_grads(0)
  got_logits, got_grads = logits_and_grads(8)
  assert np.abs(want_logits[mask]).max() > 1.0
  np.testing.assert_allclose(got_logits[mask], want_logits[mask], atol=1e-5, rtol=0)
  assert len(got_grads) == len(want_grads)
  for g_got, g_want in zip(got_grads, want_grads):
    scale = np.abs(np.asarray(g_want)).max()
    np.testing.assert_allclose(np.asarray(g_got), np.asarray(g_want), atol=1e-5 * max(scale, 1.0),
                               rtol=0)
