"""Inputs and references the attention tests share (test_attention.py, test_attention_cudnn.py):
queries / keys / values, left-padded causal masks, a float64 numpy attention, layout helpers."""

import jax.numpy as jnp
import numpy as np


def left_padded_mask(lengths, t):
  """bool[len(lengths), t, t]: causal attention over each row's last lengths[i] tokens; a padded
  query row attends to nothing."""
  real = np.arange(t)[None, :] >= t - np.asarray(lengths)[:, None]
  return np.tril(np.ones((t, t), bool))[None] & real[:, None, :] & real[:, :, None]


def qkv(t, seed=0, b=3, q_heads=4, kv_heads=2, d=8, s=None):
  rng = np.random.default_rng(seed)
  q = rng.normal(size=(b, t, q_heads, d))
  k, v = rng.normal(size=(2, b, t if s is None else s, kv_heads, d))
  return (jnp.asarray(2 * q, jnp.float32), jnp.asarray(2 * k, jnp.float32),
          jnp.asarray(v, jnp.float32))


def reference(q, k_bskd, v_bskd, mask_bts):
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


def head_major(*arrays):
  """[batch, S, kv_heads, head_dim] -> the KVCache layout [batch, kv_heads, S, head_dim]."""
  return tuple(a.transpose(0, 2, 1, 3) for a in arrays)


def assert_matches(got, want, mask_bts, atol=2e-6):
  """got == want at every query that sees at least one key (up to float32 rounding)."""
  live = np.asarray(mask_bts).any(-1)
  assert np.abs(want[live]).max() > 0.5  # sharp enough that a wrong key would show
  np.testing.assert_allclose(np.asarray(got)[live], want[live], atol=atol, rtol=0)
