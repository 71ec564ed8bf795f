"""bfloat16 compute with float32 master weights: one GRPO update stays close to the float32 one.

Two Trainers load the same tiny checkpoint from config (model.param_dtype = "float32",
model.compute_dtype = "float32" / "bfloat16") and apply their own jitted update to the same fixed
batch (prompts, completions, masks, group advantages), from the same parameters.
"""

import jax
import jax.numpy as jnp
import numpy as np

import toy_task
from grounding_jax.rl import setup
from grounding_jax.rl import trainer as trainer_lib
from grounding_jax.rl import update as update_lib

_LR = 1e-2
_EPS = 1.0  # Adam epsilon far above |g| (after clipping to norm 1): see test docstring


def _trainer(checkpoint, workdir, compute_dtype):
  c = toy_task.toy_config(workdir, steps=1, lr=_LR)
  c.model.path = str(checkpoint)
  c.model.compute_dtype = compute_dtype
  c.optimizer.eps = _EPS
  return trainer_lib.Trainer(c, tokenizer=toy_task.make_tokenizer(),
                             reward_functions=[("toy", 1.0, toy_task.TargetShareReward())],
                             datasets={"toy": toy_task.make_examples(8)},
                             prompt_fn=toy_task.prompt_fn)


def _batch(rows=16, group=4, prompt_len=6, completion_len=8, vocab=96):
  rng = np.random.default_rng(0)
  # One prompt per group of `group` rows, as in a GRPO batch.
  prompt_mask = np.repeat(np.arange(prompt_len)[None] >= rng.integers(0, 4, size=(rows // group, 1)),
                          group, axis=0)
  lengths = rng.integers(2, completion_len + 1, size=rows)
  rewards = rng.random(rows).reshape(-1, group)
  advantages = ((rewards - rewards.mean(1, keepdims=True)) / rewards.std(1, keepdims=True))
  prompt_ids = np.repeat(rng.integers(3, vocab, (rows // group, prompt_len)), group, axis=0)
  return dict(prompt_ids=np.where(prompt_mask, prompt_ids, 0).astype(np.int32),
              prompt_mask=prompt_mask,
              completion_ids=rng.integers(3, vocab, (rows, completion_len)).astype(np.int32),
              loss_mask=np.arange(completion_len)[None] < lengths[:, None],
              advantages=advantages.reshape(-1).astype(np.float32))


def _update(tr, batch):
  """(params before, params after, optimizer state after, metrics) of one jitted update."""
  view = setup.stage_config(tr.config, tr.config.stages[0])
  optimizer, key = setup.optimizer(view, tr.config.stages[0].num_steps)
  settings = update_lib.settings_from_config(view)
  train_step, _ = setup.programs(tr.graphdef, optimizer, key, settings)
  before = jax.tree.map(lambda x: np.asarray(x), tr.params)
  params = jax.tree.map(jnp.copy, tr.params)  # train_step donates its inputs
  mini = tr.hosts.device_batch(batch, tr.config.update_loop.micro_batch_size)
  params, opt_state, metrics = train_step(params, tr.rest, optimizer.init(params), mini)
  return before, params, opt_state, jax.device_get(metrics)


def test_bf16_compute_update_close_to_float32(tiny_checkpoint, tmp_path):
  """With eps = 1 >> |g|, Adam's first step is lr * g / (|g| + eps) ~ (lr / eps) * g: the update is
  the gradient, so comparing updates compares gradients. (With eps = 1e-8 the first step is
  lr * sign(g) and bf16 noise flips the sign of near-zero gradient entries: not a useful measure.)

  Tolerance: bfloat16 keeps 8 significant bits (unit round-off 2^-8 ~ 0.4%); the gradient passes
  ~10 bf16 matmuls / norms forward and back through 2 layers, each adding that much relative error,
  up to a few percent is plausible (measured: 0.6%, cosine 0.99998). We require the update's relative
  L2 error < 5% and cosine > 0.995; a real bug (a cast that drops a term, a wrong sign) is far off.
  """
  ckpt = tiny_checkpoint("llama")
  batch = _batch()
  runs = {}
  for dtype in ("float32", "bfloat16"):
    tr = _trainer(ckpt, tmp_path / dtype, dtype)
    assert tr.model.compute_dtype == jnp.dtype(dtype)
    runs[dtype] = _update(tr, batch)
  (b32, p32, _, m32), (b16, p16, o16, m16) = runs["float32"], runs["bfloat16"]

  # Master weights and optimizer moments stay float32 under bf16 compute.
  for leaf in jax.tree.leaves(p16):
    assert leaf.dtype == jnp.float32, leaf.dtype
  floats = [x for x in jax.tree.leaves(o16) if jnp.issubdtype(x.dtype, jnp.floating)]
  assert floats and all(x.dtype == jnp.float32 for x in floats), {x.dtype for x in floats}

  flat = lambda t: np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(t)])
  np.testing.assert_array_equal(flat(b16), flat(b32))  # same starting point
  d32, d16 = flat(p32) - flat(b32), flat(p16) - flat(b16)
  rel = np.linalg.norm(d16 - d32) / np.linalg.norm(d32)
  cos = d16 @ d32 / (np.linalg.norm(d16) * np.linalg.norm(d32))
  assert np.linalg.norm(d32) > 1e-4  # the update is not trivially zero
  assert rel < 5e-2 and cos > 0.995, (rel, cos)
  assert rel > 1e-4  # bf16 really ran (float32 re-orderings alone differ by ~1e-7)
  np.testing.assert_allclose(m16["entropy"], m32["entropy"], rtol=2e-2)
  np.testing.assert_allclose(m16["grad_norm"], m32["grad_norm"], rtol=5e-2)
