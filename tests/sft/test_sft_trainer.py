"""SFT: completion-only loss equals a dense re-derivation, and training drives it down."""

import os
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "rl"))
import toy_task  # noqa: E402

from grounding_jax import models  # noqa: E402
from grounding_jax.models import lora  # noqa: E402
from grounding_jax.sft import data as sft_data  # noqa: E402
from grounding_jax.sft import trainer as sft  # noqa: E402


def _pairs(n=16):
  rng = np.random.default_rng(0)
  return [(" ".join(f"w{t}" for t in rng.integers(13, 96, 3)), "w5 w6 w7 w5") for _ in range(n)]


def test_loss_is_completion_only_nll(tiny_checkpoint):
  model = models.load_pretrained(tiny_checkpoint("llama"))
  tok = toy_task.make_tokenizer()
  data = sft_data.tokenize_pairs(tok, _pairs(4), max_prompt_tokens=16, max_completion_tokens=8)
  s, n = sft.nll_sum(model, {k: jnp.asarray(v) for k, v in data.items()}, chunk_size=40)
  ids = np.concatenate([data["prompt_ids"], data["completion_ids"]], 1)
  mask = np.concatenate([data["prompt_mask"], data["loss_mask"]], 1)
  logits = np.asarray(model(jnp.asarray(ids), jnp.asarray(mask)), np.float64)
  lp = logits - logits.max(-1, keepdims=True)
  lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
  lp_next = np.take_along_axis(lp[:, :-1], ids[:, 1:, None], -1)[..., 0]  # predicts token t+1
  start = data["prompt_ids"].shape[1]
  comp = lp_next[:, start - 1:]
  ref = -(comp * data["loss_mask"]).sum()
  assert int(n) == data["loss_mask"].sum() == 4 * 5  # 4 words + EOS each
  np.testing.assert_allclose(s, ref, rtol=1e-5)


def test_sft_learns_and_checkpoints(tiny_checkpoint, tmp_path):
  c = sft.default_config()
  c.workdir = str(tmp_path)
  c.batch_size, c.micro_batch_size, c.num_epochs = 8, 4, 4
  c.optimizer.learning_rate = 2e-2
  c.optimizer.schedule = "constant"
  c.optimizer.warmup_ratio = 0.0
  c.logging.console = False
  c.logprob_chunk_size = 48
  tr = sft.SFTTrainer(c, model=models.load_pretrained(tiny_checkpoint("llama")),
                      tokenizer=toy_task.make_tokenizer(),
                      rows=[sft_data.SFTRow(prompt=p, target=t) for p, t in _pairs()])
  hist = tr.train()
  assert len(hist) == 8
  assert hist[-1]["loss"] < 0.6 * hist[0]["loss"], [round(h["loss"], 3) for h in hist]
  assert tr.checkpointer.latest_step() == 8


def test_resume_continues_exactly(tiny_checkpoint, tmp_path):
  def trainer(workdir):
    c = sft.default_config()
    c.workdir = str(workdir)
    c.batch_size, c.micro_batch_size, c.num_epochs = 8, 4, 3  # 2 steps an epoch: the order reshuffles
    c.optimizer.learning_rate = 1e-2
    c.checkpoint.every_steps = 100  # only the stop (and the end) checkpoint
    c.logging.console = False
    c.logprob_chunk_size = 48
    return sft.SFTTrainer(c, model=models.load_pretrained(tiny_checkpoint("llama")),
                          tokenizer=toy_task.make_tokenizer(),
                          rows=[sft_data.SFTRow(prompt=p, target=t) for p, t in _pairs()])

  whole = trainer(tmp_path / "whole").train()
  first = trainer(tmp_path / "split").train(max_steps=3)
  resumed = trainer(tmp_path / "split")
  rest = resumed.train()
  assert [h["step"] for h in first] == [1, 2, 3] and [h["step"] for h in rest] == [4, 5, 6]
  np.testing.assert_allclose([h["loss"] for h in first + rest], [h["loss"] for h in whole], rtol=1e-6)
  assert resumed.checkpointer.all_steps() == [3, 6]


_HEAD = "w9 w10 w11 w12 w9"  # an instruction every prompt begins with


def _prefixed_pairs(n=8):
  """Prompts `_HEAD` + 0-4 words (one is the head alone), completions of 1-5 words."""
  rng = np.random.default_rng(1)
  words = lambda k: " ".join(f"w{t}" for t in rng.integers(13, 96, k))
  return [(f"{_HEAD} {words(i % 5)}".strip(), words(1 + i % 5)) for i in range(n)]


def test_shared_prefix_length():
  tok = toy_task.make_tokenizer()
  data = lambda pairs: sft_data.tokenize_pairs(tok, pairs, max_prompt_tokens=16, max_completion_tokens=8)
  assert sft.shared_prefix_length(data(_prefixed_pairs())) == 5
  assert sft.shared_prefix_length(data([("w9 w10 w11", "w5"), ("w9 w10", "w6")])) == 2
  assert sft.shared_prefix_length(data([("w9 w10", "w5"), ("w10 w10", "w6")])) == 0


def test_packed_loss_and_gradient_equal_whole_rows(tiny_checkpoint):
  """Each micro-batch's prefix run once, the rows packed after it: the same loss and gradient."""
  model = models.load_pretrained(tiny_checkpoint("llama"))
  data = sft_data.tokenize_pairs(toy_task.make_tokenizer(), _prefixed_pairs(), max_prompt_tokens=16,
                            max_completion_tokens=8)
  idx = np.array([3, 0, 5, 7, 1, 2, 6, 4])  # row 0 and row 5 are the head alone
  packed = sft.pack_micro_batches(data, idx, 4, sft.shared_prefix_length(data), width_multiple=8)
  assert packed["ids"].shape[:2] == (2, 1) and packed["ids"].shape[2] % 8 == 0
  graphdef, params, rest = lora.split(model)

  def loss(p, batch, fn):
    return fn(nnx.merge(graphdef, p, rest), batch, 40)

  # Jitted: op by op, the two gradients took ~40 s on a cold compilation cache (CI).
  grad = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=2)
  for m in range(2):
    rows = {k: jnp.asarray(v[idx[4 * m:4 * m + 4]]) for k, v in data.items()}
    (s_ref, n_ref), g_ref = grad(params, rows, sft.nll_sum)
    (s, n), g = grad(params, {k: jnp.asarray(v[m]) for k, v in packed.items()}, sft.packed_nll_sum)
    assert int(n) == int(n_ref) == data["loss_mask"][idx[4 * m:4 * m + 4]].sum()
    np.testing.assert_allclose(s, s_ref, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_ref)):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_trainer_shares_the_prefix_with_the_same_losses(tiny_checkpoint, tmp_path):
  def run(min_tokens):
    c = sft.default_config()
    c.workdir = str(tmp_path / str(min_tokens))
    c.batch_size, c.micro_batch_size, c.num_epochs = 4, 2, 2
    c.optimizer.learning_rate = 1e-2
    c.shared_prefix_min_tokens = min_tokens
    c.logging.console = False
    c.logprob_chunk_size = 48
    tr = sft.SFTTrainer(c, model=models.load_pretrained(tiny_checkpoint("llama")),
                        tokenizer=toy_task.make_tokenizer(),
                        rows=[sft_data.SFTRow(prompt=p, target=t) for p, t in _prefixed_pairs()])
    return tr.prefix_len, [h["loss"] for h in tr.train()]

  (shared, packed), (none, whole), (short, _) = run(3), run(0), run(6)
  assert (shared, none, short) == (5, 0, 0)  # 5 shared tokens: below 6 rows run whole
  np.testing.assert_allclose(packed, whole, rtol=1e-5)


def test_bad_shared_prefix_setting_is_named_before_the_model_loads(tmp_path):
  c = sft.default_config()
  c.workdir = str(tmp_path)
  c.model.path = str(tmp_path / "no_model_here")
  c.shared_prefix_min_tokens = -1
  with pytest.raises(ValueError, match="shared_prefix_min_tokens=-1"):
    sft.SFTTrainer(c, rows=[sft_data.SFTRow(prompt=p, target=t) for p, t in _pairs()])


def test_bad_attention_kernel_is_named_before_the_model_loads(tmp_path):
  c = sft.default_config()
  c.workdir = str(tmp_path)
  c.model.path = str(tmp_path / "no_model_here")
  c.model.attention = "flash"
  with pytest.raises(ValueError, match=r"model.attention='flash': expected one of \('auto', 'xla', 'cudnn'\)"):
    sft.SFTTrainer(c, rows=[sft_data.SFTRow(prompt=p, target=t) for p, t in _pairs()])


def test_packing_pays_for_long_shared_prefixes_only():
  """SmolLM2's shapes: 4 rows of ~400 tokens sharing 236 pack (~0.5x the FLOPs); 8 rows of 1,500
  sharing 300 do not (~2.3x: every packed token attends to all 9,600 others)."""
  smollm2 = types.SimpleNamespace(hidden_size=576, intermediate_size=1536, num_heads=9,
                                  num_kv_heads=3, head_dim=64)

  def rows(n, prompt, completion, width_p, width_c):
    return {"prompt_ids": np.zeros((n, width_p), np.int32),
            "prompt_mask": np.arange(width_p)[None].repeat(n, 0) >= width_p - prompt,
            "completion_ids": np.zeros((n, width_c), np.int32),
            "loss_mask": np.arange(width_c)[None].repeat(n, 0) < completion}

  assert sft.packing_pays(smollm2, rows(8, 354, 43, 377, 68), 236, 4)
  assert not sft.packing_pays(smollm2, rows(8, 1400, 100, 1400, 100), 300, 8)
