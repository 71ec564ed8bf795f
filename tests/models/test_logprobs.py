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


def _dot_operand_dtypes(jaxpr) -> list[tuple[str, ...]]:
  """The operand dtypes of every dot_general in a (closed) jaxpr, nested calls and scans included."""
  found = []
  for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
    if eqn.primitive.name == "dot_general":
      found.append(tuple(str(v.aval.dtype) for v in eqn.invars))
    for param in eqn.params.values():
      for sub in param if isinstance(param, (tuple, list)) else (param,):
        if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
          found += _dot_operand_dtypes(sub)
  return found


@pytest.mark.parametrize("remat", [True, False])
def test_bf16_hidden_states_run_the_heads_backward_in_bf16(remat):
  """A bf16 model's LM-head GEMMs are bf16 both ways (no float32 operand, forward or backward), and
  the gradients stay within bf16 rounding of the float32 computation's."""
  rng = np.random.default_rng(0)
  hidden = jnp.asarray(rng.normal(size=(2, 6, 16)), jnp.bfloat16)
  kernel = jnp.asarray(rng.normal(size=(16, 40)) * 0.3, jnp.float32)  # master weights: float32
  targets = jnp.asarray(rng.integers(0, 40, size=(2, 6)))

  def loss(h, k):
    a, e = logprobs.token_logprobs(h, k, targets, chunk_size=16, with_entropy=True, remat=remat)
    return jnp.sum(a * 0.3) + jnp.sum(e * 0.1)

  grad = jax.grad(loss, argnums=(0, 1))
  dtypes = _dot_operand_dtypes(jax.make_jaxpr(grad)(hidden, kernel))
  assert len(dtypes) >= 3 and all(d == ("bfloat16", "bfloat16") for d in dtypes), dtypes
  got = jax.jit(grad)(hidden, kernel)
  want = jax.jit(grad)(hidden.astype(jnp.float32), kernel)
  assert got[0].dtype == jnp.bfloat16 and got[1].dtype == jnp.float32
  for a, b in zip(got, want):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    np.testing.assert_allclose(a, b, atol=0.03 * np.abs(b).max())
