"""A group's packed completions attended as rows, in blocks or as one masked stream
(models/packed.py): the rows' layout, the choice between the three, and log-probs and gradients
equal to the unpacked per-row model in each, with a prompt prefix all groups share, and on an
8-device mesh."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from grounding_jax import parallel
from grounding_jax.models import logprobs, packed
from grounding_jax.models.config import ModelConfig
from grounding_jax.models.transformer import Transformer

G, L, GROUPS, LP, COMMON = 3, 6, 2, 10, 4
CONFIG = ModelConfig(model_type="llama", vocab_size=64, hidden_size=32, intermediate_size=64,
                     num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8)


def _batch():
  """GROUPS prompts of 7 and 10 tokens (left-padded to LP, all beginning with the same COMMON
  tokens), each repeated G times, and completions of 0..L tokens (one empty, one full)."""
  rng = np.random.default_rng(0)
  p_ids, p_mask = np.zeros((GROUPS, LP), np.int32), np.zeros((GROUPS, LP), bool)
  for g, n in enumerate((7, LP)):
    p_ids[g, LP - n:] = np.concatenate([[5, 6, 7, 8], rng.integers(3, 64, n - COMMON)])
    p_mask[g, LP - n:] = True
  lengths = np.array([3, L, 0, 1, 4, 2])
  c_mask = np.arange(L)[None] < lengths[:, None]
  c_ids = np.where(c_mask, rng.integers(3, 64, (G * GROUPS, L)), 0).astype(np.int32)
  return np.repeat(p_ids, G, 0), np.repeat(p_mask, G, 0), c_ids, c_mask


def _logp_and_grads(model, batch, **kwargs):
  """Completion log-probs and the gradient of their weighted sum (weights fixed, random)."""
  p_ids, p_mask, c_ids, c_mask = batch
  weights = np.random.default_rng(1).normal(size=c_ids.shape).astype(np.float32) * c_mask

  def loss(m):
    logp, _ = logprobs.completion_logprobs(m, p_ids, p_mask, c_ids, c_mask, **kwargs)
    return jnp.sum(jnp.where(c_mask, logp, 0) * weights), logp

  (_, logp), grads = nnx.jit(nnx.value_and_grad(loss, has_aux=True))(model)
  return np.where(c_mask, np.asarray(logp), 0), jax.tree.leaves(nnx.state(grads))


@pytest.fixture(scope="module")
def per_row():
  """The unpacked model's answer: each row [prompt | completion] on its own."""
  return _logp_and_grads(Transformer(CONFIG, rngs=nnx.Rngs(0)), _batch())


@pytest.mark.parametrize("mode", ["rows", "blocks", "stream"])
@pytest.mark.parametrize("common", [0, COMMON])
def test_packed_completions_give_the_per_row_logprobs_and_gradients(per_row, mode, common):
  model = Transformer(dataclasses.replace(CONFIG, packed_attention=mode), rngs=nnx.Rngs(0))
  logp, grads = _logp_and_grads(model, _batch(), rows_per_prompt=G, shared_prefix=common)
  np.testing.assert_allclose(logp, per_row[0], atol=2e-6)
  for got, want in zip(grads, per_row[1]):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("mode", ["rows", "blocks"])
def test_on_an_8_device_mesh_equal_one_device(per_row, mode):
  """Groups split over data and fsdp, heads over tensor: the layouts' gathers and scatters."""
  mesh = parallel.make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
  with parallel.use_mesh(mesh):
    model = Transformer(dataclasses.replace(CONFIG, packed_attention=mode), rngs=nnx.Rngs(0))
    p_ids, p_mask, c_ids, c_mask = _batch()
    rows = parallel.logical_sharding(("batch", None), c_ids.shape, mesh)
    batch = [jax.device_put(x, rows) for x in (p_ids, p_mask, c_ids, c_mask)]
    logp, grads = _logp_and_grads(model, batch, rows_per_prompt=G, shared_prefix=COMMON)
  np.testing.assert_allclose(logp, per_row[0], atol=2e-6)
  for got, want in zip(grads, per_row[1]):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_layout_names_each_completion_tokens_stream_column():
  s = packed.SHARED_SEGMENT
  # Group 0: a rest of 2, completions of 2, 0 and 3 tokens, padding; group 1: no rest, 1, 3, 1.
  segment = np.array([[s, s, 0, 0, 2, 2, 2, -1, -1],
                      [0, 1, 1, 1, 2, -1, -1, -1, -1]], np.int32)
  rows = packed.layout(jnp.asarray(segment), rows_per_group=3, width=4, shared=3)
  p = segment.shape[1]
  want_cols = np.full((2, 3, 4), p)
  for g in range(2):
    for i in range(3):
      where = np.flatnonzero(segment[g] == i)
      want_cols[g, i, :len(where)] = where
  np.testing.assert_array_equal(rows.cols, want_cols.reshape(2, 12))
  np.testing.assert_array_equal(rows.valid, want_cols.reshape(2, 12) < p)
  np.testing.assert_array_equal(rows.shared, [[True, True, False], [False, False, False]])
  assert (rows.rows_per_group, rows.width) == (3, 4)


def test_auto_attends_whichever_layout_scores_fewest_pairs():
  """models/packed.py's example: 8 completions of 256 tokens after a 400-token prompt."""
  sizes = dict(prefix=400, shared=0, rows_per_group=8, width=256)
  full, short = dict(sizes, stream=2048), dict(sizes, stream=512)
  assert packed.pairs("stream", **full) == 2048 * 2448
  assert packed.pairs("rows", **full) == 8 * 256 * 656
  assert packed.pairs("blocks", **full) == 2048 * (400 + 64 + 256)
  assert packed.choose("auto", **full) == "rows"
  assert packed.choose("auto", **short) == "blocks"    # 512 · 720 < 512 · 912 < 8 · 256 · 656
  # A stream no longer than a block and its window: one mask over it scores fewest.
  assert packed.choose("auto", prefix=100, stream=16, shared=0, rows_per_group=4, width=16) == "stream"
  assert packed.choose("stream", **full) == "stream" and packed.choose("rows", **short) == "rows"
  with pytest.raises(ValueError, match=r"packed_attention='dense'.*'auto', 'rows', 'blocks', 'stream'"):
    packed.choose("dense", **full)
  with pytest.raises(ValueError, match="packed_attention='dense'"):
    dataclasses.replace(CONFIG, packed_attention="dense")
