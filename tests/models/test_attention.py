"""The attention kernels of models/attention.py, each against an independent numpy reference, and
the model's kernel choice (ModelConfig.attention_implementation, attention_query_chunk).

Every implementation that runs on CPU is tested here: "xla" (plain, query-chunked, shared prefix as
projected and over a KV cache) and "auto", which resolves to "xla". "cudnn" is tested in
test_attention_cudnn.py.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from grounding_jax.models import ModelConfig, attention, load_pretrained

from attention_cases import left_padded_mask, qkv, reference, head_major, assert_matches

_INIT = dict(initializer_range=0.2)  # sharp attention, so a wrong mask or chunk moves logits by O(1)


def _jaxpr(fn, *args) -> str:
  return str(jax.make_jaxpr(fn)(*args))


@pytest.mark.parametrize("kv_layout", ["bskd", "bksd"])
@pytest.mark.parametrize("chunk", [0, 4, 5, 13, 1])
def test_plain_and_query_chunked_attention_equal_numpy(kv_layout, chunk):
  t = 13
  q, k, v = qkv(t)
  mask = left_padded_mask([13, 6, 1], t)
  want = reference(q, k, v, mask)
  if kv_layout == "bksd":
    k, v = head_major(k, v)
  got = jax.jit(lambda q, k, v: attention.attention(q, k, v, mask, kv_layout=kv_layout,
                                                    query_chunk=chunk))(q, k, v)
  assert got.shape == q.shape and got.dtype == jnp.float32
  assert np.isfinite(np.asarray(got)).all()  # fully masked (left-pad) queries stay finite
  assert_matches(got, want, mask)


@pytest.mark.parametrize("chunk", [0, 3])
def test_shared_prefix_as_projected_equals_whole_rows(chunk):
  """A continuation stream attending to its prefix (prefix=) equals the rows [prefix | continuation]
  attended whole, and the numpy reference."""
  sp, t = 6, 7
  qc, kc, vc = qkv(t, seed=1)
  _, kp, vp = qkv(sp, seed=2)
  prefix_mask = np.arange(sp)[None, :] >= np.array([0, 2, 5])[:, None]   # left-padded prefixes
  own = np.tril(np.ones((t, t), bool))[None] & (np.arange(t) < np.array([7, 4, 1])[:, None, None])
  whole_mask = np.concatenate([np.broadcast_to(prefix_mask[:, None, :], (3, t, sp)), own], -1)
  k_whole, v_whole = jnp.concatenate([kp, kc], 1), jnp.concatenate([vp, vc], 1)
  want = reference(qc, k_whole, v_whole, whole_mask)
  got = jax.jit(lambda q, k, v: attention.attention(q, k, v, own, prefix=(kp, vp, prefix_mask),
                                                    query_chunk=chunk))(qc, kc, vc)
  whole = jax.jit(lambda q, k, v: attention.attention(q, k, v, whole_mask, query_chunk=chunk))(
      qc, k_whole, v_whole)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(whole))
  assert_matches(got, want, whole_mask)


@pytest.mark.parametrize("t", [1, 3])  # a decode step; a prompt's tokens after a shared prefix
def test_shared_prefix_over_a_cache_equals_whole_rows(t):
  """G = 2 cached rows per prefix read the prefix once: the same as each row attending to
  [its group's prefix | its own cache slots], in numpy."""
  prefixes, g, sp, s = 2, 2, 5, 6
  rows = prefixes * g
  q, _, _ = qkv(t, seed=3, b=rows)
  _, k, v = qkv(s, seed=4, b=rows)
  _, kp, vp = qkv(sp, seed=5, b=prefixes)
  prefix_mask = np.arange(sp)[None, :] >= np.array([0, 3])[:, None]
  slot = np.arange(s)[None, None, :] <= (s - t + np.arange(t))[None, :, None]   # causal in the cache
  own = slot & (np.arange(s)[None, None, :] >= np.array([0, 1, 2, 0])[:, None, None])
  group = np.arange(rows) // g
  whole_mask = np.concatenate([np.broadcast_to(prefix_mask[group][:, None, :], (rows, t, sp)), own],
                              -1)
  want = reference(q, jnp.concatenate([kp[group], k], 1), jnp.concatenate([vp[group], v], 1),
                    whole_mask)
  (kp_c, vp_c), (k_c, v_c) = head_major(kp, vp), head_major(k, v)
  got = jax.jit(lambda q: attention.attention(q, k_c, v_c, own, kv_layout="bksd",
                                              prefix=(kp_c, vp_c, prefix_mask)))(q)
  assert got.shape == q.shape
  assert_matches(got, want, whole_mask)


def test_decode_from_a_cache_equals_the_full_causal_attention():
  """Prefill T - 1 tokens into a head-major cache with spare slots, then one decode query: each
  equals its row of the full causal attention over all T tokens."""
  t, slots = 9, 12
  q, k, v = qkv(t, seed=6)
  full = reference(q, k, v, left_padded_mask([9, 5, 2], t))
  real = np.arange(slots)[None, :] >= np.array([0, 4, 7])[:, None]  # the same left padding
  real[:, t:] = False
  cache_k, cache_v = (jnp.zeros((3, 2, slots, 8)).at[:, :, :t].set(a.transpose(0, 2, 1, 3))
                      for a in (k, v))
  causal = np.arange(slots)[None, None, :] <= np.arange(t)[None, :, None]
  mask = causal & real[:, None, :] & real[:, :t, None]
  prefill = attention.attention(q[:, :t - 1], cache_k, cache_v, mask[:, :t - 1], kv_layout="bksd")
  step = attention.attention(q[:, t - 1:], cache_k, cache_v, mask[:, t - 1:], kv_layout="bksd")
  got = np.concatenate([np.asarray(prefill), np.asarray(step)], axis=1)
  assert_matches(got, full, mask)


def test_implementation_is_resolved_and_unknown_names_raise():
  assert attention.IMPLEMENTATIONS == ("auto", "xla", "cudnn")
  assert attention.resolve_implementation("auto", "cpu") == "xla"
  assert attention.resolve_implementation("auto", "tpu") == "xla"
  assert attention.resolve_implementation("auto", "gpu") == "cudnn"
  assert attention.resolve_implementation("xla") == "xla"
  q, k, v = qkv(4)
  mask = left_padded_mask([4, 4, 4], 4)
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
  q, k, v = qkv(t)
  mask = left_padded_mask([13, 6, 1], t)  # rows 1 and 2: 7 and 12 fully masked queries
  kv = "bksd" if cached else "bskd"
  if cached:  # a KVCache holds head-major keys and values
    k, v = head_major(k, v)
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
    q, k, v = qkv(t)
    k_cache, v_cache = (jnp.zeros((3, 2, 16, 8)),) * 2
    mask, mask_cache = left_padded_mask([t, 1, 1], t), np.ones((3, t, 16), bool)
    for chunk in (8, 512):
      assert (_jaxpr(lambda q, k, v: attend(q, k, v, mask, query_chunk=chunk), q, k, v)
              == _jaxpr(lambda q, k, v: attend(q, k, v, mask), q, k, v))
      assert (_jaxpr(lambda q, k, v: cached(q, k, v, mask_cache, query_chunk=chunk),
                     q, k_cache, v_cache)
              == _jaxpr(lambda q, k, v: cached(q, k, v, mask_cache), q, k_cache, v_cache))
  q, k, v = qkv(9)
  mask = left_padded_mask([9, 1, 1], 9)
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
