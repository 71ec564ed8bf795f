"""models/layers.matmul: the same function on every backend, in the dot form each backend runs
fast. On CPU a bf16 dot emits float32 and is cast back; elsewhere it emits bf16, so its backward
dots stay bf16 (the float32 form ran them as TF32 GEMMs on a GPU: 37 % of the 1.5 B update)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax.models import layers


def _dots(fn, *args):
  """(input dtypes, output dtype) of every dot_general in fn's jaxpr, nested ones included."""
  found = []

  def walk(jaxpr):
    for eqn in jaxpr.eqns:
      if eqn.primitive.name == "dot_general":
        found.append((tuple(str(v.aval.dtype) for v in eqn.invars), str(eqn.outvars[0].aval.dtype)))
      for value in eqn.params.values():  # a jit inside (jnp.einsum is one): its ClosedJaxpr
        inner = getattr(value, "jaxpr", None)
        if inner is not None:
          walk(getattr(inner, "jaxpr", inner))
  walk(jax.make_jaxpr(fn)(*args).jaxpr)
  return found


@pytest.mark.parametrize("backend", ["cpu", "gpu", "tpu"])
def test_matmul_and_its_gradients_in_each_backends_form(monkeypatch, backend):
  monkeypatch.setattr(layers.jax, "default_backend", lambda: backend)
  rng = np.random.default_rng(0)
  x64, w64, g64 = rng.normal(size=(4, 6, 32)), rng.normal(size=(32, 48)), rng.normal(size=(4, 6, 48))
  x, w = jnp.asarray(x64, jnp.bfloat16), jnp.asarray(w64, jnp.float32)  # f32 master weights
  loss = lambda x, w: (layers.matmul("btd,df->btf", x, w).astype(jnp.float32) * g64).sum()
  out = layers.matmul("btd,df->btf", x, w)
  assert out.dtype == jnp.bfloat16
  dx, dw = jax.grad(loss, (0, 1))(x, w)
  assert dx.dtype == jnp.bfloat16 and dw.dtype == jnp.float32
  # float64 references on the bf16-rounded operands
  xr, wr = np.asarray(x, np.float64), np.asarray(w.astype(jnp.bfloat16), np.float64)
  for got, want in ((out, xr @ wr), (dx, g64 @ wr.T), (dw, np.einsum("btd,btf->df", xr, g64))):
    got = np.asarray(got, np.float64)
    assert np.linalg.norm(got - want) <= 1e-2 * np.linalg.norm(want)
  dots = _dots(jax.grad(loss, (0, 1)), x, w)
  assert len(dots) == 3  # forward, dx, dw
  if backend == "cpu":
    assert dots[0] == (("bfloat16", "bfloat16"), "float32")
  else:  # every dot, forward and backward, in bf16
    assert all(ins == ("bfloat16", "bfloat16") for ins, _ in dots), dots


def test_matmul_in_float32_is_one_plain_dot():
  x, w = jnp.ones((2, 3), jnp.float32), jnp.ones((3, 4), jnp.float32)
  assert _dots(lambda x, w: layers.matmul("ad,df->af", x, w), x, w) == [
      (("float32", "float32"), "float32")]
