"""Query-chunked attention (ModelConfig.attention_query_chunk) against the one-block attention it
replaces for long sequences: values, gradients, the full model, and the programs it leaves alone."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from grounding_jax.models import layers, load_pretrained

_INIT = dict(initializer_range=0.2)  # sharp attention, so a wrong mask or chunk moves logits by O(1)


def _left_padded_mask(lengths, t):
  """bool[len(lengths), t, t]: causal attention over each row's last lengths[i] tokens; a padded
  query row attends to nothing."""
  real = np.arange(t)[None, :] >= t - np.asarray(lengths)[:, None]
  return np.tril(np.ones((t, t), bool))[None] & real[:, None, :] & real[:, :, None]


def _qkv(t, seed=0, b=3, q_heads=4, kv_heads=2, d=8):
  rng = np.random.default_rng(seed)
  q = rng.normal(size=(b, t, q_heads, d))
  k, v = rng.normal(size=(2, b, t, kv_heads, d))
  return (jnp.asarray(2 * q, jnp.float32), jnp.asarray(2 * k, jnp.float32),
          jnp.asarray(v, jnp.float32))


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("chunk", [4, 5, 1])  # 13 queries: 4 x 4 (3 padded), 3 x 5 (2), 13 x 1
def test_chunked_attention_and_gradients_equal_one_block(cached, chunk):
  t = 13
  q, k, v = _qkv(t)
  mask = _left_padded_mask([13, 6, 1], t)  # rows 1 and 2: 7 and 12 fully masked queries
  if cached:  # attend_cached reads head-major keys and values
    k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
  attend = layers.attend_cached if cached else layers.attend
  kv = "bksd" if cached else "bskd"

  def loss(fn, q, k, v):  # a non-linear read of every output, so every gradient path counts
    return jnp.sum(jnp.sin(fn(q, k, v)) * jnp.arange(q.shape[-1]))

  reference = lambda q, k, v: layers._gqa_block(q, k, v, mask, kv)  # pylint: disable=protected-access
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


def _jaxpr(fn, *args) -> str:
  return str(jax.make_jaxpr(fn)(*args))


def test_at_most_chunk_queries_trace_the_one_block_program():
  """Decode (T = 1) and sequences no longer than the chunk trace exactly the unchunked program; only
  a longer one runs the chunk loop."""
  for t in (1, 8):
    q, k, v = _qkv(t)
    k_cache, v_cache = (jnp.zeros((3, 2, 16, 8)),) * 2
    mask, mask_cache = _left_padded_mask([t, 1, 1], t), np.ones((3, t, 16), bool)
    for chunk in (8, 512):
      assert (_jaxpr(lambda q, k, v: layers.attend(q, k, v, mask, query_chunk=chunk), q, k, v)
              == _jaxpr(lambda q, k, v: layers.attend(q, k, v, mask), q, k, v))
      assert (_jaxpr(lambda q, k, v: layers.attend_cached(q, k, v, mask_cache, query_chunk=chunk),
                     q, k_cache, v_cache)
              == _jaxpr(lambda q, k, v: layers.attend_cached(q, k, v, mask_cache), q, k_cache,
                        v_cache))
  q, k, v = _qkv(9)
  mask = _left_padded_mask([9, 1, 1], 9)
  assert "scan[" not in _jaxpr(lambda q, k, v: layers.attend(q, k, v, mask), q, k, v)
  assert "scan[" in _jaxpr(lambda q, k, v: layers.attend(q, k, v, mask, query_chunk=8), q, k, v)


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
