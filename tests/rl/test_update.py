"""The jitted update on a tiny model: finite-difference gradients, exact micro-batching, 8-device parity."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from grounding_jax import models
from grounding_jax import parallel
from grounding_jax.rl import logprobs
from grounding_jax.rl import losses
from grounding_jax.rl import update

N, LP, L = 8, 6, 5


def _batch(vocab, seed=0):
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


def _micro(batch, n_micro):
  return {k: jnp.asarray(v).reshape(n_micro, N // n_micro, *v.shape[1:]) for k, v in batch.items()}


SETTINGS = update.UpdateSettings(  # every loss option on at once
    loss=losses.PolicyLossConfig(clip_eps_high=0.28, dual_clip=3.0, kl_coef=0.1, kl_estimator="k3",
                                 entropy_coef=0.01, aggregation="seq_mean_token_mean"),
    temperature=0.8, chunk_size=48, remat=True)


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
  return tiny_checkpoint("llama")


def _grad_capture():
  # An "optimizer" whose state is the last gradient: the step hands back exactly what it computed.
  return optax.GradientTransformation(lambda p: jax.tree.map(jnp.zeros_like, p),
                                      lambda g, s, p=None: (jax.tree.map(jnp.zeros_like, g), g))


def _grads(model, batch, n_micro, mesh=None, settings=SETTINGS, packed_width=None):
  graphdef, params, rest = update.split_model(model)
  opt = _grad_capture()
  step = update.make_train_step(graphdef, opt, settings)
  mb = _micro(batch, n_micro)
  if mesh is None:
    _, grads, metrics = step(params, rest, opt.init(params), mb, packed_width=packed_width)
  else:
    mb = {k: jax.device_put(v, parallel.logical_sharding((None, "batch") + (None,) * (v.ndim - 2),
                                                          v.shape, mesh)) for k, v in mb.items()}
    with parallel.use_mesh(mesh):
      _, grads, metrics = step(params, rest, opt.init(params), mb, packed_width=packed_width)
  return jax.device_get(grads), jax.device_get(metrics)


@pytest.fixture(scope="module")
def reference(tiny):
  """Gradient and metrics of one update: 1 device, 2 micro-batches."""
  batch = _batch(96)
  return batch, *_grads(models.load_pretrained(tiny), batch, 2)


def test_gradient_matches_finite_differences(tiny, reference):
  batch, grads, metrics = reference
  model = models.load_pretrained(tiny)
  graphdef, params, rest = update.split_model(model)
  batch = _micro(batch, 2)

  @jax.jit
  def loss_at(p):
    m = nnx.merge(graphdef, p, rest)
    s_tot, d_tot = 0.0, 0.0
    for i in range(2):
      mb = {k: v[i] for k, v in batch.items()}
      lp, ent = logprobs.completion_logprobs(m, mb["prompt_ids"], mb["prompt_mask"],
                                             mb["completion_ids"], mb["loss_mask"], temperature=0.8,
                                             with_entropy=True)
      s, d, _ = losses.policy_loss(lp, mb["old_logp"], mb["advantages"], mb["loss_mask"],
                                   SETTINGS.loss, ref_logp=mb["ref_logp"], entropy=ent)
      s_tot, d_tot = s_tot + s, d_tot + d
    return s_tot / d_tot

  rng = np.random.default_rng(1)
  direction = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape), x.dtype), params)
  h = 3e-4  # 1e-3 left an O(h^2) error of ~5 % along some directions
  plus = jax.tree.map(lambda p, v: p + h * v, params, direction)
  minus = jax.tree.map(lambda p, v: p - h * v, params, direction)
  values = jax.device_get([loss_at(params), loss_at(plus), loss_at(minus)])
  np.testing.assert_allclose(metrics["loss"], values[0], rtol=1e-5)
  fd = (float(values[1]) - float(values[2])) / (2 * h)
  analytic = sum(float(np.vdot(g, v)) for g, v in zip(jax.tree.leaves(grads), jax.tree.leaves(direction)))
  np.testing.assert_allclose(analytic, fd, rtol=2e-2, atol=1e-4)


def _assert_same(got, want):
  g_grads, g_metrics = got
  w_grads, w_metrics = want
  for name in ("loss", "kl", "entropy", "clip_frac", "ratio_mean", "ratio_min", "ratio_max",
               "grad_norm"):
    np.testing.assert_allclose(g_metrics[name], w_metrics[name], rtol=1e-5, err_msg=name)
  for a, b in zip(jax.tree.leaves(g_grads), jax.tree.leaves(w_grads)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


def test_micro_batching_is_exact(tiny, reference):
  batch, grads, metrics = reference
  _assert_same(_grads(models.load_pretrained(tiny), batch, 1), (grads, metrics))


def test_8_device_sharded_update_equals_1_device(tiny, reference):
  batch, grads, metrics = reference
  mesh = parallel.make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
  _assert_same(_grads(models.load_pretrained(tiny, mesh=mesh), batch, 2, mesh=mesh), (grads, metrics))


def test_logprob_fn_matches_sampler_convention(tiny):
  model = models.load_pretrained(tiny)
  graphdef, params, rest = update.split_model(model)
  batch = _batch(96, seed=4)
  fn = update.make_logprob_fn(graphdef, SETTINGS)
  got = fn(params, rest, _micro(batch, 2)).reshape(N, L)
  ids = np.concatenate([batch["prompt_ids"], batch["completion_ids"]], 1)
  mask = np.concatenate([batch["prompt_mask"], batch["loss_mask"]], 1)
  logits = np.asarray(model(jnp.asarray(ids), jnp.asarray(mask)), np.float64)[:, LP - 1:LP - 1 + L] / 0.8
  logits -= logits.max(-1, keepdims=True)
  ref = np.take_along_axis(logits - np.log(np.exp(logits).sum(-1, keepdims=True)),
                           batch["completion_ids"][..., None], -1)[..., 0]
  np.testing.assert_allclose(np.where(batch["loss_mask"], got, 0), np.where(batch["loss_mask"], ref, 0),
                             rtol=1e-4, atol=1e-5)


def test_trimming_padding_columns_is_exact(tiny, reference):
  """Extra left padding on prompts and all-masked completion columns, trimmed back by
  content_widths/trim_batch, give the reference update (and the widths are the content's)."""
  batch, grads, metrics = reference
  padded = dict(batch)
  for k, fill in (("prompt_ids", 0), ("prompt_mask", False)):
    padded[k] = np.concatenate([np.full((N, 4), fill, batch[k].dtype), batch[k]], axis=1)
  for k in ("completion_ids", "loss_mask", "old_logp", "ref_logp"):
    padded[k] = np.concatenate([batch[k], np.zeros((N, 3), batch[k].dtype)], axis=1)
  lp, lc = update.content_widths(padded)
  assert (lp, lc) == (batch["prompt_mask"].sum(1).max(), np.flatnonzero(batch["loss_mask"].any(0))[-1] + 1)
  assert update.round_up(lc, 4) == 8 and update.round_up(0, 32) == 32
  trimmed = update.trim_batch(padded, lp, lc)
  assert trimmed["prompt_ids"].shape == (N, lp) and trimmed["old_logp"].shape == (N, lc)
  n_padded = {k: v.shape[1] for k, v in padded.items() if v.ndim == 2}
  assert n_padded["prompt_ids"] == LP + 4
  _assert_same(_grads(models.load_pretrained(tiny), trimmed, 2), (grads, metrics))


@pytest.mark.parametrize("policy", ["full", "save_dots"])
def test_remat_policies_give_the_same_update(tiny, reference, policy):
  """The reference runs without rematerialisation; recomputing in the backward pass must not change
  the math, whatever the layer keeps."""
  batch, grads, metrics = reference
  model = models.load_pretrained(tiny, remat=True, remat_policy=policy)
  _assert_same(_grads(model, batch, 2), (grads, metrics))


def test_unknown_remat_policy_is_a_clear_error(tiny):
  with pytest.raises(ValueError, match="remat_policy='dots'"):
    models.load_pretrained(tiny, remat=True, remat_policy="dots")


def test_logprob_fn_on_a_rematerialised_model(tiny):
  """The reference / old log-prob pass runs the model inside lax.map; with remat on it once raised
  flax's TraceContextError (nnx.remat wrote block state back across trace levels)."""
  batch = _micro({k: v for k, v in _batch(96, seed=5).items()}, 2)
  out = []
  for remat in (False, True):
    graphdef, params, rest = update.split_model(models.load_pretrained(tiny, remat=remat))
    out.append(np.asarray(update.make_logprob_fn(graphdef, SETTINGS)(params, rest, batch)))
  np.testing.assert_allclose(out[1], out[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("group_size,mesh_axes,tight", [
    (4, None, True),                                  # one group per micro-batch, tightly packed
    (2, {"data": 2, "fsdp": 2, "tensor": 2}, False),  # 2 groups per micro-batch over 4 batch shards
])
def test_shared_prompt_update_equals_per_row(tiny, group_size, mesh_axes, tight):
  """Running each group's prompt once with its completions packed after it (UpdateSettings.group_size)
  gives the per-row update and the per-row reference log-probs, also when the groups do not divide
  the mesh's batch shards."""
  batch = _batch(96, seed=6)
  for k in ("prompt_ids", "prompt_mask"):  # rows in groups of `group_size` share a prompt
    batch[k] = np.repeat(batch[k][::group_size], group_size, axis=0)
  batch["loss_mask"][1, 1] = False  # a hole inside a completion stays attended
  want = _grads(models.load_pretrained(tiny), batch, 2)  # the update donates the model's params
  shared = dataclasses.replace(SETTINGS, group_size=group_size)
  width = update.packed_width(batch, group_size) if tight else None
  if tight:
    assert width < group_size * L and width == max(
        sum(np.flatnonzero(batch["loss_mask"][r])[-1] + 1 for r in range(i, i + group_size))
        for i in range(0, N, group_size))
  mesh = parallel.make_mesh(mesh_axes) if mesh_axes else None
  _assert_same(_grads(models.load_pretrained(tiny, mesh=mesh), batch, 2, mesh=mesh, settings=shared,
                      packed_width=width), want)
  graphdef, params, rest = update.split_model(models.load_pretrained(tiny, mesh=mesh))
  lps = [np.asarray(update.make_logprob_fn(graphdef, s)(params, rest, _micro(batch, 2),
                                                        packed_width=w))
         for s, w in ((SETTINGS, None), (shared, width))]
  real = _micro(batch, 2)["loss_mask"]  # values after a row's last loss token are arbitrary
  np.testing.assert_allclose(np.where(real, lps[1], 0), np.where(real, lps[0], 0), rtol=1e-5,
                             atol=1e-5)


def test_buckets_cover_their_inputs_with_few_values():
  """Every width fits in its bucket, and a run's widths fall in a small fixed set: per prompt
  bucket, 3 completion widths x 4 packed widths (G = 4, 128 new tokens, multiple 32)."""
  completion = {min(update.completion_bucket(n, 32), 128) for n in range(1, 129)}
  assert completion == {32, 64, 128}
  for g, count in ((2, 2), (4, 4), (8, 6), (16, 8)):
    for length in (32, 128):
      widths = {update.packed_bucket(need, length, g) for need in range(1, g * length + 1)}
      assert len(widths) == count and max(widths) == g * length
      assert all(update.packed_bucket(need, length, g) >= need for need in range(1, g * length + 1))
  assert all(update.completion_bucket(n, 32) >= n for n in range(1, 600))
  prompts = {update.prompt_bucket(n) for n in range(200, 1001)}
  assert len(prompts) == 10 and all(update.prompt_bucket(n) >= n for n in range(1, 1001))


def test_bucketed_widths_give_the_exact_update(tiny):
  """Widened to their buckets by HostBatches (prompt and completion columns, packed widths), the
  shared-prompt update equals the per-row update of the unpadded batch."""
  from grounding_jax.rl import host_batch  # pylint: disable=g-import-not-at-top
  group_size = 4
  batch = _batch(96, seed=7)
  for k in ("prompt_ids", "prompt_mask"):
    batch[k] = np.repeat(batch[k][::group_size], group_size, axis=0)
  want = _grads(models.load_pretrained(tiny), batch, 2)
  padded = dict(batch)
  for k in ("prompt_ids", "prompt_mask"):
    padded[k] = np.concatenate([np.zeros((N, 4), batch[k].dtype), batch[k]], axis=1)
  for k in ("completion_ids", "loss_mask", "old_logp", "ref_logp"):
    padded[k] = np.concatenate([batch[k], np.zeros((N, 5), batch[k].dtype)], axis=1)
  hosts = host_batch.HostBatches(None)
  trimmed = hosts.trim(padded, 4)
  assert trimmed["prompt_ids"].shape[1] == LP + 4  # the prompt bucket (16) is wider than the array
  assert trimmed["loss_mask"].shape[1] == 8  # 5 content columns -> completion bucket 4 * 2
  widths = hosts.packed_widths(trimmed, N // 2, group_size)
  tight = [update.packed_width({"loss_mask": trimmed["loss_mask"][i:i + N // 2]}, group_size)
           for i in (0, N // 2)]
  assert all(w % 8 == 0 and w >= t for w, t in zip(widths, tight)) and widths != tight
  shared = dataclasses.replace(SETTINGS, group_size=group_size)
  _assert_same(_grads(models.load_pretrained(tiny), trimmed, 2, settings=shared,
                      packed_width=widths), want)
