"""Vocabulary-chunked log-probs / entropy equal the full log_softmax, values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax.models import logprobs


def _full(hidden, kernel, targets, temperature):
  logits = np.einsum("btd,dv->btv", hidden.astype(np.float64), kernel.astype(np.float64)) / temperature
  m = logits.max(-1, keepdims=True)
  lse = m[..., 0] + np.log(np.exp(logits - m).sum(-1))
  logp_all = logits - lse[..., None]
  p = np.exp(logp_all)
  ent = -(p * logp_all).sum(-1)
  return np.take_along_axis(logp_all, targets[..., None], -1)[..., 0], ent


@pytest.mark.parametrize("chunk,temperature,remat", [(7, 1.0, True), (16, 0.7, False), (50, 0.0, True)])
def test_chunked_equals_full(chunk, temperature, remat):
  rng = np.random.default_rng(0)
  hidden = rng.normal(size=(3, 5, 8)).astype(np.float32)
  kernel = rng.normal(size=(8, 50)).astype(np.float32)  # 50 is not a multiple of 7 or 16: padded chunk
  targets = rng.integers(0, 50, size=(3, 5))
  fwd = jax.jit(lambda h, k, y: logprobs.token_logprobs(h, k, y, temperature=temperature,
                                                         chunk_size=chunk, with_entropy=True, remat=remat))
  lp, ent = fwd(jnp.asarray(hidden), jnp.asarray(kernel), jnp.asarray(targets))
  t = 1.0 if temperature == 0 else temperature
  ref_lp, ref_ent = _full(hidden, kernel, targets, t)
  np.testing.assert_allclose(lp, ref_lp, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ent, ref_ent, rtol=1e-5, atol=1e-5)

  # Gradients (through logp and entropy) equal those of the dense computation.
  def chunked(h, k):
    a, e = logprobs.token_logprobs(h, k, jnp.asarray(targets), temperature=temperature,
                                   chunk_size=chunk, with_entropy=True, remat=remat)
    return jnp.sum(a * 0.3) + jnp.sum(e * 0.1)

  def dense(h, k):
    lg = jax.nn.log_softmax(jnp.einsum("btd,dv->btv", h, k) / t)
    a = jnp.take_along_axis(lg, jnp.asarray(targets)[..., None], -1)[..., 0]
    e = -jnp.sum(jnp.exp(lg) * lg, -1)
    return jnp.sum(a * 0.3) + jnp.sum(e * 0.1)

  g1 = jax.jit(jax.grad(chunked, argnums=(0, 1)))(jnp.asarray(hidden), jnp.asarray(kernel))
  g2 = jax.grad(dense, argnums=(0, 1))(jnp.asarray(hidden), jnp.asarray(kernel))
  for a, b in zip(g1, g2):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
