"""models/layers.matmul: the same function on every backend, in the dot form each backend runs
fast. On CPU a bf16 dot emits float32 and is cast back; elsewhere it emits bf16, so its backward
dots stay bf16 (the float32 form ran them as TF32 GEMMs on a GPU: 37 % of the 1.5 B update).

fuse_projections: a layer's q/k/v and gate/up weights concatenated compute what the separate ones
do (GQA, Qwen2's biases, Qwen3's q/k norms), and stay separate where that would not be exact or
local (a LoRA adapter, a heads or mlp axis split over devices)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax.models import layers, load_pretrained, lora
from grounding_jax.parallel import make_mesh


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


def random_qkv_biases(model, seed=0):
  """Draws Qwen2's q/k/v biases at random, in place (transformers initialises them to zero, which
  would leave the fused bias untested); returns `model`."""
  rng = np.random.default_rng(seed)
  attn = model.layers.attn if model.scan_layers else None
  for a in [attn] if attn is not None else [b.attn for b in model.layers]:
    for name in ("q_bias", "k_bias", "v_bias"):
      w = getattr(a, name)
      w.set_value(jnp.asarray(0.5 * rng.normal(size=w[...].shape), w[...].dtype))
  return model


def _batch(vocab_size, seed=0):
  rng = np.random.default_rng(seed)
  mask = np.arange(9)[None, :] >= np.array([[0], [3], [6]])  # left padding
  return jnp.asarray(rng.integers(3, vocab_size, (3, 9)), jnp.int32), jnp.asarray(mask)


@pytest.mark.parametrize("family", ["qwen2", "llama", "qwen3"])
def test_fused_projections_compute_what_the_separate_ones_do(tiny_checkpoint, family):
  model = load_pretrained(tiny_checkpoint(family, initializer_range=0.3)).unstacked()
  if family == "qwen2":
    random_qkv_biases(model)
  assert model.config.num_kv_heads < model.config.num_heads  # GQA
  fused = model.fused_projections()
  assert fused.projections_fused() and not model.projections_fused()
  attn, mlp = fused.layers[0].attn, fused.layers[0].mlp
  c = model.config
  assert attn.qkv_proj[...].shape == (c.hidden_size, c.num_heads + 2 * c.num_kv_heads, c.head_dim)
  assert mlp.gate_up_proj[...].shape == (c.hidden_size, 2 * c.intermediate_size)
  assert not hasattr(attn, "q_proj") and not hasattr(mlp, "up_proj")  # the copy holds fused only
  assert hasattr(model.layers[0].attn, "q_proj")  # the argument is unchanged
  assert hasattr(attn, "qkv_proj_bias") == (family == "qwen2")
  ids, mask = _batch(c.vocab_size)
  # float32 sums over the same products in another blocking: rounding (logits reach ~10 here)
  np.testing.assert_allclose(np.asarray(fused(ids, mask)), np.asarray(model(ids, mask)),
                             rtol=1e-5, atol=1e-5)


def test_lora_adapted_projections_stay_separate(tiny_checkpoint):
  model = load_pretrained(tiny_checkpoint("qwen2"), scan_layers=False)
  lora.add_adapters(model, lora.LoRAConfig(rank=2, targets=("k_proj",)), jax.random.key(0))
  for _, _, adapter in lora.adapters(model):  # B = 0 would make the adapter a no-op
    adapter.b.set_value(jnp.full(adapter.b[...].shape, 0.3, adapter.b[...].dtype))
  fused = model.fused_projections()
  assert not fused.projections_fused()
  assert all(hasattr(b.attn, "q_proj") and not hasattr(b.attn, "qkv_proj") for b in fused.layers)
  assert all(hasattr(b.mlp, "gate_up_proj") for b in fused.layers)  # the MLP has no adapter
  ids, mask = _batch(model.config.vocab_size)
  np.testing.assert_allclose(np.asarray(fused(ids, mask)), np.asarray(model(ids, mask)),
                             rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="unstacked"):
    load_pretrained(tiny_checkpoint("qwen2")).fused_projections()


def test_projections_split_over_devices_stay_separate(tiny_checkpoint):
  """Heads and mlp over a tensor axis: concatenating the shards would interleave them, so they stay
  separate; over fsdp alone (the embed axis) they fuse."""
  path = tiny_checkpoint("llama")
  tensor = load_pretrained(path, mesh=make_mesh({"data": 2, "fsdp": 2, "tensor": 2}))
  assert not tensor.unstacked().fused_projections().projections_fused()
  fsdp = load_pretrained(path, mesh=make_mesh({"data": 2, "fsdp": 4, "tensor": 1}))
  assert fsdp.unstacked().fused_projections().projections_fused()
