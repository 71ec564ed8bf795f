"""The jitted update on a tiny model: finite-difference gradients, exact micro-batching, 8-device parity,
padding trims, remat, shared prompts, a prompt prefix run once, bucketed widths, ARENA's log-prob
temperature and per-micro-batch token means. The non-finite guard: test_update_guard.py."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from grounding_jax import models
from grounding_jax import parallel
from grounding_jax.models import logprobs
from grounding_jax.rl import config as rl_config
from grounding_jax.rl import losses
from grounding_jax.rl import update
from update_cases import (L, LP, N, SETTINGS, assert_same_update, micro_batches, random_batch,
                          reference_update, update_grads)


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
  return tiny_checkpoint("llama")


@pytest.fixture(scope="module")
def reference(tiny):
  return reference_update(tiny)


def test_gradient_matches_finite_differences(tiny, reference):
  batch, grads, metrics = reference
  model = models.load_pretrained(tiny)
  graphdef, params, rest = update.split_model(model)
  batch = micro_batches(batch, 2)

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


def test_micro_batching_is_exact(tiny, reference):
  batch, grads, metrics = reference
  assert_same_update(update_grads(models.load_pretrained(tiny), batch, 1), (grads, metrics))


def test_8_device_sharded_update_equals_1_device(tiny, reference):
  batch, grads, metrics = reference
  mesh = parallel.make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
  assert_same_update(update_grads(models.load_pretrained(tiny, mesh=mesh), batch, 2, mesh=mesh), (grads, metrics))


def test_logprob_fn_matches_sampler_convention(tiny):
  model = models.load_pretrained(tiny)
  graphdef, params, rest = update.split_model(model)
  batch = random_batch(96, seed=4)
  fn = update.make_logprob_fn(graphdef, SETTINGS)
  got = fn(params, rest, micro_batches(batch, 2)).reshape(N, L)
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
  assert_same_update(update_grads(models.load_pretrained(tiny), trimmed, 2), (grads, metrics))


@pytest.mark.parametrize("policy", ["full", "save_dots"])
def test_remat_policies_give_the_same_update(tiny, reference, policy):
  """The reference runs without rematerialisation; recomputing in the backward pass must not change
  the math, whatever the layer keeps."""
  batch, grads, metrics = reference
  model = models.load_pretrained(tiny, remat=True, remat_policy=policy)
  assert_same_update(update_grads(model, batch, 2), (grads, metrics))


def test_unknown_remat_policy_is_a_clear_error(tiny):
  with pytest.raises(ValueError, match="remat_policy='dots'"):
    models.load_pretrained(tiny, remat=True, remat_policy="dots")


def test_logprob_fn_on_a_rematerialised_model(tiny):
  """The reference / old log-prob pass runs the model inside lax.map; with remat on it once raised
  flax's TraceContextError (nnx.remat wrote block state back across trace levels)."""
  batch = micro_batches({k: v for k, v in random_batch(96, seed=5).items()}, 2)
  out = []
  for remat in (False, True):
    graphdef, params, rest = update.split_model(models.load_pretrained(tiny, remat=remat))
    out.append(np.asarray(update.make_logprob_fn(graphdef, SETTINGS)(params, rest, batch)))
  np.testing.assert_allclose(out[1], out[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("rows_per_prompt,mesh_axes,tight", [
    (4, None, True),                                  # one group per micro-batch, tightly packed
    (2, {"data": 2, "fsdp": 2, "tensor": 2}, False),  # 2 groups per micro-batch over 4 batch shards
])
def test_shared_prompt_update_equals_per_row(tiny, rows_per_prompt, mesh_axes, tight):
  """Running each group's prompt once with its completions packed after it (UpdateSettings.rows_per_prompt)
  gives the per-row update and the per-row reference log-probs, also when the groups do not divide
  the mesh's batch shards."""
  batch = random_batch(96, seed=6)
  for k in ("prompt_ids", "prompt_mask"):  # rows in groups of `rows_per_prompt` share a prompt
    batch[k] = np.repeat(batch[k][::rows_per_prompt], rows_per_prompt, axis=0)
  batch["loss_mask"][1, 1] = False  # a hole inside a completion stays attended
  want = update_grads(models.load_pretrained(tiny), batch, 2)  # the update donates the model's params
  shared = dataclasses.replace(SETTINGS, rows_per_prompt=rows_per_prompt)
  width = update.packed_width(batch, rows_per_prompt) if tight else None
  if tight:
    assert width < rows_per_prompt * L and width == max(
        sum(np.flatnonzero(batch["loss_mask"][r])[-1] + 1 for r in range(i, i + rows_per_prompt))
        for i in range(0, N, rows_per_prompt))
  mesh = parallel.make_mesh(mesh_axes) if mesh_axes else None
  assert_same_update(update_grads(models.load_pretrained(tiny, mesh=mesh), batch, 2, mesh=mesh, settings=shared,
                      packed_width=width), want)
  graphdef, params, rest = update.split_model(models.load_pretrained(tiny, mesh=mesh))
  lps = [np.asarray(update.make_logprob_fn(graphdef, s)(params, rest, micro_batches(batch, 2),
                                                        packed_width=w))
         for s, w in ((SETTINGS, None), (shared, width))]
  real = micro_batches(batch, 2)["loss_mask"]  # values after a row's last loss token are arbitrary
  np.testing.assert_allclose(np.where(real, lps[1], 0), np.where(real, lps[0], 0), rtol=1e-5,
                             atol=1e-5)


def _common_prefix_batch(rows_per_prompt: int, common: int, seed: int):
  """random_batch with longer prompts [N, LP + 6]: each group of `rows_per_prompt` rows has its
  own prompt of `common`..LP + 6 real tokens (left-padded), all of them beginning with the same
  `common` tokens."""
  batch = random_batch(96, seed=seed)
  rng = np.random.default_rng(seed)
  width = LP + 6
  shared = rng.integers(3, 96, common)
  ids, mask = np.zeros((N, width), np.int32), np.zeros((N, width), bool)
  for g in range(0, N, rows_per_prompt):
    n = int(rng.integers(common + (g == 0), width + 1))  # one prompt of exactly `common` tokens
    prompt = np.concatenate([shared, rng.integers(3, 96, n - common)])
    ids[g:g + rows_per_prompt, width - n:], mask[g:g + rows_per_prompt, width - n:] = prompt, True
  batch.update(prompt_ids=ids, prompt_mask=mask)
  return batch


@pytest.mark.parametrize("n_micro,mesh_axes", [
    (1, None),                                  # 4 groups of 2 in one micro-batch
    (2, {"data": 2, "fsdp": 2, "tensor": 2}),   # 2 groups per micro-batch over 4 batch shards
])
def test_a_common_prefix_run_once_gives_the_per_row_update(tiny, n_micro, mesh_axes):
  """The leading tokens all prompts share, run once per micro-batch before each group's
  [rest of prompt | packed completions] (shared_prefix), give the per-row update and reference
  log-probs; the host measures that prefix (update.common_prefix). A prefix the prompts do not
  share gives other log-probs (the promise is what makes it exact)."""
  rows_per_prompt, common = 2, 4
  batch = _common_prefix_batch(rows_per_prompt, common, seed=8)
  assert update.common_prefix(batch, minimum=2, multiple=2) == common
  assert update.common_prefix(batch, minimum=2, multiple=3) == 3
  assert update.common_prefix(batch, minimum=5, multiple=1) == 0
  want = update_grads(models.load_pretrained(tiny), batch, n_micro)
  shared = dataclasses.replace(SETTINGS, rows_per_prompt=rows_per_prompt)
  width = update.packed_width(batch, rows_per_prompt)
  mesh = parallel.make_mesh(mesh_axes) if mesh_axes else None
  got = update_grads(models.load_pretrained(tiny, mesh=mesh), batch, n_micro, mesh=mesh,
                     settings=shared, packed_width=width, shared_prefix=common)
  assert_same_update(got, want)
  graphdef, params, rest = update.split_model(models.load_pretrained(tiny))
  lps = [np.asarray(update.make_logprob_fn(graphdef, s)(params, rest, micro_batches(batch, n_micro),
                                                        packed_width=w, shared_prefix=c))
         for s, w, c in ((SETTINGS, None, 0), (shared, width, common), (shared, width, common + 1))]
  real = micro_batches(batch, n_micro)["loss_mask"]
  lps = [np.where(real, lp, 0) for lp in lps]
  np.testing.assert_allclose(lps[1], lps[0], rtol=1e-5, atol=1e-5)
  assert np.abs(lps[2] - lps[0]).max() > 1e-3


def _arena_like_config(**loss):
  c = rl_config.default_config()
  c.rollout.temperature = 0.9
  c.update_loop.micro_batch_size = 4
  c.loss.update(dict(kl_coef=0.04, kl_estimator="k2", **loss))
  return c


def test_logprob_temperature_option():
  assert update.settings_from_config(_arena_like_config()).temperature == pytest.approx(0.9)
  assert update.settings_from_config(_arena_like_config(logprob_temperature=1.0)).temperature == 1.0
  with pytest.raises(ValueError, match="logprob_temperature"):
    update.settings_from_config(_arena_like_config(logprob_temperature="raw"))
  c = _arena_like_config(logprob_temperature=1.0)
  c.update_loop.update(dict(num_iterations=2, old_logprobs="sampler"))
  with pytest.raises(ValueError, match="old_logprobs='recompute'"):
    update.settings_from_config(c)
  with pytest.raises(ValueError, match="micro_batch_rows=3"):
    update.settings_from_config(_arena_like_config(aggregation="micro_token_mean", micro_batch_rows=3))


def test_arena_update_raw_logits_and_per_micro_batch_token_means(tiny):
  # ARENA's authors (their TRL code for arXiv:2505.13258, App. E): log-probs of the raw logits
  # while sampling at 0.9, and the loss of each group of rows its own token mean, the group losses
  # averaged; re-derived here in numpy from the model's temperature-1 log-probs.
  model = models.load_pretrained(tiny)
  batch = {k: v for k, v in random_batch(96, seed=4).items() if k != "old_logp"}  # on-policy: μ = 1
  settings = update.settings_from_config(
      _arena_like_config(logprob_temperature=1.0, aggregation="micro_token_mean", micro_batch_rows=2))
  assert settings.on_policy and settings.temperature == 1.0 and settings.loss.micro_batch_rows == 2
  lp, _ = logprobs.completion_logprobs(model, batch["prompt_ids"], batch["prompt_mask"],
                                       batch["completion_ids"], batch["loss_mask"], temperature=1.0)
  lp = np.asarray(lp, np.float64)
  mask = batch["loss_mask"].astype(np.float64)
  tok = -batch["advantages"][:, None] + 0.04 * 0.5 * (batch["ref_logp"] - lp) ** 2  # ratio ≡ 1
  want = np.mean([(tok[i:i + 2] * mask[i:i + 2]).sum() / mask[i:i + 2].sum() for i in range(0, N, 2)])
  for n_micro in (1, 2):  # the update donates the parameters: a fresh model each time
    _, metrics = update_grads(models.load_pretrained(tiny), batch, n_micro, settings=settings)
    np.testing.assert_allclose(metrics["loss"], want, rtol=1e-5)
  sampling = update.settings_from_config(
      _arena_like_config(aggregation="micro_token_mean", micro_batch_rows=2))
  _, metrics = update_grads(models.load_pretrained(tiny), batch, 2, settings=sampling)
  assert abs(float(metrics["loss"]) - want) > 1e-5  # T = 0.9 log-probs give another KL term


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
  rows_per_prompt = 4
  batch = random_batch(96, seed=7)
  for k in ("prompt_ids", "prompt_mask"):
    batch[k] = np.repeat(batch[k][::rows_per_prompt], rows_per_prompt, axis=0)
  want = update_grads(models.load_pretrained(tiny), batch, 2)
  padded = dict(batch)
  for k in ("prompt_ids", "prompt_mask"):
    padded[k] = np.concatenate([np.zeros((N, 4), batch[k].dtype), batch[k]], axis=1)
  for k in ("completion_ids", "loss_mask", "old_logp", "ref_logp"):
    padded[k] = np.concatenate([batch[k], np.zeros((N, 5), batch[k].dtype)], axis=1)
  hosts = host_batch.HostBatches(None)
  trimmed = hosts.trim(padded, 4)
  assert trimmed["prompt_ids"].shape[1] == LP + 4  # the prompt bucket (16) is wider than the array
  assert trimmed["loss_mask"].shape[1] == 8  # 5 content columns -> completion bucket 4 * 2
  widths = hosts.packed_widths(trimmed, N // 2, rows_per_prompt)
  tight = [update.packed_width({"loss_mask": trimmed["loss_mask"][i:i + N // 2]}, rows_per_prompt)
           for i in (0, N // 2)]
  assert all(w % 8 == 0 and w >= t for w, t in zip(widths, tight)) and widths != tight
  shared = dataclasses.replace(SETTINGS, rows_per_prompt=rows_per_prompt)
  assert_same_update(update_grads(models.load_pretrained(tiny), trimmed, 2, settings=shared,
                      packed_width=widths), want)


def test_gspo_with_rollout_correction_micro_batches_exactly(tiny):
  # The sequence ratio and the TIS weight read whole rows, and a micro-batch holds whole rows.
  batch = random_batch(96, seed=3)
  rng = np.random.default_rng(3)
  batch["sampler_logp"] = (batch["old_logp"] + rng.normal(scale=0.5, size=(N, L))).astype(np.float32)
  settings = dataclasses.replace(SETTINGS, loss=dataclasses.replace(
      SETTINGS.loss, ratio_level="sequence", rollout_correction="tis", rollout_correction_cap=1.5))
  got = [update_grads(models.load_pretrained(tiny), batch, n, settings=settings) for n in (1, 4)]
  assert_same_update(*got)
  metrics = got[0][1]
  assert 0 < metrics["rollout_is/capped_frac"] < 1
  plain = update_grads(models.load_pretrained(tiny), batch, 1, settings=dataclasses.replace(
      settings, loss=dataclasses.replace(settings.loss, rollout_correction="none")))
  assert abs(float(plain[1]["loss"]) - float(metrics["loss"])) > 1e-4  # the weights changed the loss


def test_rollout_correction_needs_the_trainers_old_logprobs():
  from grounding_jax.rl.config import checks  # pylint: disable=import-outside-toplevel
  c = _arena_like_config(rollout_correction="tis", logprob_temperature="sampling")
  assert update.settings_from_config(c).loss.rollout_correction == "tis"  # on-policy: the loss pass's
  c.update_loop.update(dict(num_minibatches=2, old_logprobs="sampler"))
  for call in (update.settings_from_config, lambda c: checks.check_config(c, need_model_path=False)):
    with pytest.raises(ValueError, match=r"loss.rollout_correction='tis'.*old_logprobs='recompute'"):
      call(c)
  c.update_loop.old_logprobs = "recompute"
  c.loss.logprob_temperature = 1.0  # the sampler's log-probs are at 0.9
  with pytest.raises(ValueError, match="logprob_temperature='sampling'"):
    update.settings_from_config(c)


def test_gpu_gemm_option_is_a_real_xla_option_and_only_on_gpus():
  options = update.gemm_compiler_options("cublas", backend="gpu")
  assert options == {"xla_gpu_enable_triton_gemm": False}
  assert update.gemm_compiler_options("xla", backend="gpu") is None
  assert update.gemm_compiler_options("cublas", backend="cpu") is None
  # XLA rejects an option it does not know: this one compiles (the field is backend-independent).
  f = jax.jit(lambda a, b: a @ b, compiler_options=options)
  x = jnp.ones((4, 4))
  np.testing.assert_allclose(f(x, x), 4 * np.ones((4, 4)))
  with pytest.raises(Exception):
    jax.jit(lambda a: a, compiler_options={"xla_gpu_enable_tritn_gemm": False})(x)
  assert update.settings_from_config(rl_config.default_config()).gpu_gemm == "cublas"
