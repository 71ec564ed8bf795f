"""A random GRPO update batch for the tiny llama, and what one jitted update (rl/update.py) computes
from it: the cases test_update.py and test_update_guard.py compare against."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from grounding_jax import models
from grounding_jax import parallel
from grounding_jax.rl import losses
from grounding_jax.rl import update

N, LP, L = 8, 6, 5  # rows, prompt width, completion width


def random_batch(vocab, seed=0):
  """An update batch of N rows: left-padded prompts [N, LP], completions and their loss masks [N, L],
  advantages [N], old and reference log-probs [N, L] (numpy)."""
  rng = np.random.default_rng(seed)
  prompt_mask = np.ones((N, LP), bool)
  for i in range(N):
    prompt_mask[i, :rng.integers(0, 3)] = False  # left padding
  loss_mask = np.zeros((N, L), bool)
  for i in range(N):
    loss_mask[i, :rng.integers(1, L + 1)] = True
  return dict(
      prompt_ids=rng.integers(3, vocab, (N, LP)).astype(np.int32), prompt_mask=prompt_mask,
      completion_ids=rng.integers(3, vocab, (N, L)).astype(np.int32), loss_mask=loss_mask,
      advantages=rng.normal(size=N).astype(np.float32),
      old_logp=np.log(rng.uniform(0.005, 0.05, (N, L))).astype(np.float32),
      ref_logp=np.log(rng.uniform(0.005, 0.05, (N, L))).astype(np.float32))


def micro_batches(batch, n_micro):
  """The batch as n_micro micro-batches: each array [n_micro, N / n_micro, ...] (jax)."""
  return {k: jnp.asarray(v).reshape(n_micro, N // n_micro, *v.shape[1:]) for k, v in batch.items()}


SETTINGS = update.UpdateSettings(  # every loss option on at once
    loss=losses.PolicyLossConfig(clip_eps_high=0.28, dual_clip=3.0, kl_coef=0.1, kl_estimator="k3",
                                 entropy_coef=0.01, aggregation="seq_mean_token_mean"),
    temperature=0.8, chunk_size=48, remat=True)


def grad_capture():
  # An "optimizer" whose state is the last gradient: the step hands back exactly what it computed.
  return optax.GradientTransformation(lambda p: jax.tree.map(jnp.zeros_like, p),
                                      lambda g, s, p=None: (jax.tree.map(jnp.zeros_like, g), g))


def update_grads(model, batch, n_micro, mesh=None, settings=SETTINGS, packed_width=None,
                 shared_prefix=0):
  """(gradient, metrics) of one jitted train step on `batch` in n_micro micro-batches, on `mesh` if
  given (the batch sharded over its batch axes)."""
  graphdef, params, rest = update.split_model(model)
  opt = grad_capture()
  step = update.make_train_step(graphdef, opt, settings)
  mb = micro_batches(batch, n_micro)
  if mesh is None:
    _, grads, metrics = step(params, rest, opt.init(params), mb, packed_width=packed_width,
                              shared_prefix=shared_prefix)
  else:
    mb = {k: jax.device_put(v, parallel.logical_sharding((None, "batch") + (None,) * (v.ndim - 2),
                                                          v.shape, mesh)) for k, v in mb.items()}
    with parallel.use_mesh(mesh):
      _, grads, metrics = step(params, rest, opt.init(params), mb, packed_width=packed_width,
                              shared_prefix=shared_prefix)
  return jax.device_get(grads), jax.device_get(metrics)


def assert_same_update(got, want):
  """Two (gradient, metrics) pairs agree to float32 rounding."""
  g_grads, g_metrics = got
  w_grads, w_metrics = want
  for name in ("loss", "kl", "entropy", "clip_frac", "ratio_mean", "ratio_min", "ratio_max",
               "grad_norm"):
    np.testing.assert_allclose(g_metrics[name], w_metrics[name], rtol=1e-5, err_msg=name)
  for a, b in zip(jax.tree.leaves(g_grads), jax.tree.leaves(w_grads)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


def reference_update(model_dir):
  """(batch, gradient, metrics) of one update of the model in `model_dir`: 1 device, 2 micro-batches."""
  batch = random_batch(96)
  return batch, *update_grads(models.load_pretrained(model_dir), batch, 2)
