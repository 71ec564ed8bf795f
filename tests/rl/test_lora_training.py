"""GRPO with LoRA adapters (config.model.lora): only adapters train and are checkpointed, the KL
reference is the base model (KL 0 at step 0) without a second copy of the weights, a run resumes
exactly, and its workdir loads (model_ref) as the policy it trained."""

import re

import numpy as np
from flax import nnx

import toy_task
from grounding_jax import checkpoints
from grounding_jax.eval import model_ref
from grounding_jax.models import lora
from grounding_jax.rl.config import checks as config_checks
from grounding_jax.rl import setup


def _config(ckpt, workdir, steps=2):
  c = toy_task.toy_config(workdir, steps=steps, lr=1e-2)
  c.model.path = str(ckpt)
  c.model.lora.update(dict(rank=4, alpha=8.0, dropout=0.1, targets=("q_proj", "v_proj", "down_proj")))
  c.loss.kl_coef = 0.04
  return c


def _trainer(ckpt, workdir, c):
  return toy_task.make_trainer(ckpt, workdir, c)


def _base(state):
  return {k: np.asarray(v) for k, v in nnx.to_flat_state(nnx.filter_state(state, nnx.Param))}


def test_only_adapters_train_kl_starts_at_zero_and_a_run_resumes(tiny_chat_model, tmp_path):
  ckpt = tiny_chat_model  # a tiny llama with tokenizer files: its workdir loads with model_ref
  c = _config(ckpt, tmp_path / "straight")
  tr = _trainer(ckpt, tmp_path / "straight", c)
  assert lora.has_adapters(tr.model)
  flat = lambda s: {k: np.asarray(v) for k, v in nnx.to_flat_state(s)}
  adapters0, base0 = flat(tr.params), _base(tr.rest)
  assert all("_lora" in "/".join(map(str, k)) for k in adapters0)  # params = the adapters alone
  history = tr.train()
  # KL against the reference (the base: B = 0) is exactly 0 before the first update.
  assert history[0]["kl"] == 0.0 and history[1]["kl"] > 0.0
  # the base weights never moved; the adapters did
  after = flat(tr.params)
  for k, v in _base(tr.rest).items():
    np.testing.assert_array_equal(v, base0[k])
  assert any(np.abs(after[k] - adapters0[k]).max() > 0 for k in after)
  # checkpoints hold adapters only (params, optimizer state, reference): no base weight
  meta = checkpoints.Checkpointer(tmp_path / "straight" / "checkpoints").read_meta()
  assert any(p.startswith("['ref_params']") for p in meta["leaf_paths"])
  base_names = re.compile(r"\['(embed|lm_head|scale|[qkvo]_proj|gate_proj|up_proj|down_proj)'\]")
  assert not [p for p in meta["leaf_paths"] if base_names.search(p)]
  assert sum("_lora" in p for p in meta["leaf_paths"]) > 0

  # kill-free resume: one step, then a new trainer continues to the same metrics
  c2 = _config(ckpt, tmp_path / "resumed")
  first = _trainer(ckpt, tmp_path / "resumed", c2).train(max_steps=1)
  second = _trainer(ckpt, tmp_path / "resumed", c2).train()
  assert [h["step"] for h in first + second] == [1, 2]
  for key in ("loss", "kl", "reward/mean", "grad_norm"):
    np.testing.assert_allclose(second[0][key], history[1][key], rtol=1e-5, atol=1e-7, err_msg=key)

  # the workdir loads as the trained policy (base from model.path + the checkpoint's adapters)
  model_ref.write_run_config(tmp_path / "straight", c)
  loaded = model_ref.load(str(tmp_path / "straight"))
  assert loaded.ref.lora.rank == 4
  ids = np.array([[3, 5, 7, 9]], np.int32)
  mask = np.ones_like(ids, bool)
  np.testing.assert_allclose(np.asarray(loaded.model(ids, mask)),
                             np.asarray(tr.policy()(ids, mask)), atol=1e-6)


def test_save_base_checkpoints_the_frozen_weights_too(tiny_checkpoint, tmp_path):
  ckpt = tiny_checkpoint("llama")
  c = _config(ckpt, tmp_path, steps=1)
  c.model.lora.save_base = True
  c.loss.kl_coef = 0.0
  _trainer(ckpt, tmp_path, c).train()
  paths = checkpoints.Checkpointer(tmp_path / "checkpoints").read_meta()["leaf_paths"]
  assert any(p.startswith("['base']") and "embed" in p for p in paths)
  assert not any(p.startswith("['ref_params']") for p in paths)


def test_lora_fields_are_checked_before_a_model_loads(tmp_path):
  c = toy_task.toy_config(tmp_path)
  c.model.lora.update(dict(rank=-1, alpha=0.0, dropout=1.0, targets=("q_proj", "lm_head")))
  try:
    setup.check_config(c, read_data=False, need_model_path=False)
  except config_checks.ConfigError as e:
    text = str(e)
  else:
    raise AssertionError("bad model.lora values were accepted")
  for field in ("model.lora.rank=-1", "model.lora.alpha=0.0", "model.lora.dropout=1.0",
                "model.lora.targets=('q_proj', 'lm_head')"):
    assert f"config.{field}" in text, text
  assert "unknown ['lm_head']" in text
