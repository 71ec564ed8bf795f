"""The "cudnn" attention implementation (models/attention.py). It runs only on a GPU: its own code
(layout transposes, prefix, the decode / grouped-prefix fallbacks, queries that see no key) is
checked on CPU with JAX's "xla" implementation of jax.nn.dot_product_attention in cuDNN's place;
cuDNN itself, values and gradients against "xla", by the tests skipped where no GPU is present
(they passed on an H200, 2026-11-27)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax.models import attention

from attention_cases import left_padded_mask, qkv, head_major, assert_matches


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="checks the error off a GPU")
def test_cudnn_off_a_gpu_names_the_config_field():
  q, k, v = qkv(4)
  with pytest.raises(ValueError, match=r"model.attention='cudnn' cannot run here: cuDNN runs on a "
                                       r"GPU only, and JAX's backend here is 'cpu'.*'auto'.*'xla'"):
    attention.attention(q, k, v, left_padded_mask([4, 4, 4], 4), implementation="cudnn")


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
  q, k, v = qkv(t, seed=7, s=s)
  mask = left_padded_mask([13, 6, 1], s)[:, s - t:]
  if kv_layout == "bksd":
    k, v = head_major(k, v)
  kw = dict(kv_layout=kv_layout, prefix=None)
  # Both jitted: an eager reference would be a different program (op by op), not bit for bit.
  ours = jax.jit(lambda q, k, v: attention._xla(q, k, v, mask, query_chunk=0, **kw))(q, k, v)
  for chunk in (0, 4):
    got = jax.jit(lambda q, k, v: _LIBRARY_XLA(q, k, v, mask, query_chunk=chunk, **kw))(q, k, v)
    assert got.shape == q.shape and got.dtype == jnp.float32
    if kv_layout == "bksd" and t == 1:
      np.testing.assert_array_equal(np.asarray(got), np.asarray(ours))
    else:
      assert_matches(got, np.asarray(ours), mask)


def test_cudnn_kernel_code_on_cpu_shared_prefixes():
  """The packed shared-prefix update ([prefix | row] keys in one fused call) equals ours up to
  float32 rounding; a cache shared through a prefix (grouped prefix) runs our program exactly."""
  sp, t = 6, 7
  qc, kc, vc = qkv(t, seed=8)
  _, kp, vp = qkv(sp, seed=9)
  prefix_mask = np.arange(sp)[None, :] >= np.array([0, 2, 5])[:, None]
  own = np.tril(np.ones((t, t), bool))[None] & (np.arange(t) < np.array([7, 4, 1])[:, None, None])
  prefix = (kp, vp, prefix_mask)
  ours = attention._xla(qc, kc, vc, own, kv_layout="bskd", prefix=prefix, query_chunk=0)
  got = _LIBRARY_XLA(qc, kc, vc, own, kv_layout="bskd", prefix=prefix, query_chunk=3)
  assert_matches(got, np.asarray(ours), own | prefix_mask.any(-1)[:, None, None])
  (kp_c, vp_c), (k_c, v_c) = head_major(kp, vp), head_major(kc, vc)
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
  q, k, v = (a.astype(jnp.bfloat16) for a in qkv(4, seed=11, b=1, d=8))
  mask = left_padded_mask([3], 4)
  run(q, k, v, mask, implementation="auto")
  assert len(calls) == 1                                    # bf16, 4 x 4: fused
  run(q[:, :3], k[:, :3], v[:, :3], mask[:, :3, :3], implementation="auto")
  run(q.astype(jnp.float32), k, v, mask, implementation="auto")
  assert len(calls) == 1                                    # odd lengths, float32: ours
  k_c, v_c = head_major(k, v)
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
  q, k, v = (a.astype(jnp.bfloat16) for a in qkv(t, seed=10, d=64))
  mask = left_padded_mask([16, 8, 2], t)
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
  q, k, v = (a.astype(jnp.bfloat16) for a in qkv(t, seed=11, b=2, q_heads=12, kv_heads=2, d=128))
  mask = left_padded_mask([t, t // 3], t)
  loss = lambda impl: lambda q, k, v: attention.attention(
      q, k, v, mask, implementation=impl).astype(jnp.float32).sum()
  got, want = (jax.value_and_grad(loss(impl), (0, 1, 2))(q, k, v) for impl in ("cudnn", "xla"))
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert np.isfinite(a).all()
    assert np.linalg.norm(a - b) <= 2e-2 * np.linalg.norm(b)  # bf16 operands: 1e-3 to 1e-2
