"""Which model is M: an HF folder, a run's newest checkpoint, or workdir@step — and launch/export_hf.py
turning a checkpoint into a folder that transformers loads with our logits."""

import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors import safe_open

from grounding_jax import checkpoints
from grounding_jax import models
from grounding_jax.eval import model_ref
from grounding_jax.sft import data as sft_data
from grounding_jax.sft import trainer as sft

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _params(model):
  return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]


@pytest.fixture(scope="module")
def run(tiny_chat_model, tmp_path_factory):
  """An SFT workdir with checkpoints 1 and 2 and its run record; the parameters after each step."""
  workdir = tmp_path_factory.mktemp("run")
  c = sft.default_config()
  c.workdir, c.model.path = str(workdir), str(tiny_chat_model)
  c.batch_size, c.micro_batch_size, c.num_epochs = 4, 4, 1
  c.optimizer.learning_rate = 2e-2
  c.logging.console = False
  c.logprob_chunk_size = 48
  model_ref.write_run_config(workdir, c)
  rows = [sft_data.SFTRow(prompt=f"w{13 + i} w{40 + i}", target="w5 w6 w7") for i in range(8)]
  first = sft.SFTTrainer(c, rows=rows)
  first.train(max_steps=1)
  after_1 = _params(nnx.merge(first.graphdef, first.params, first.rest))
  second = sft.SFTTrainer(c, rows=rows)
  second.train()
  return workdir, after_1, _params(second.model)


def test_resolve_each_form(run, tiny_chat_model, smollm2_dir):
  workdir, _, _ = run
  ref = model_ref.resolve(str(tiny_chat_model))
  assert (ref.hf_folder, ref.workdir, ref.step) == (str(tiny_chat_model), None, None)
  assert model_ref.resolve("smollm2").hf_folder == str(smollm2_dir)
  ref = model_ref.resolve(str(workdir))
  assert (ref.hf_folder, ref.workdir, ref.step, ref.param_dtype) == (
      str(tiny_chat_model), str(workdir), 2, "float32")
  ref = model_ref.resolve(f"{workdir}@1")
  assert ref.step == 1 and ref.name == f"{workdir}@1"


def test_resolve_errors_are_one_line(run, tiny_chat_model, tmp_path):
  workdir, _, _ = run
  (tmp_path / "notes").mkdir()
  (tmp_path / "bare_run" / "checkpoints").mkdir(parents=True)
  cases = [
      (f"{workdir}@5", FileNotFoundError, r"no checkpoint for step 5 .*found steps \[1, 2\]"),
      (f"{workdir}@last", ValueError, "must be a non-negative integer or 'best'"),
      (f"{workdir}@best", FileNotFoundError, r"has no checkpoints_best/ .*checkpoint.best_metric"),
      (f"{tiny_chat_model}@3", ValueError, "is an HF folder, which has no steps"),
      (str(tmp_path / "notes"), ValueError, "neither an HF folder nor a workdir; expected an HF folder"),
      (str(tmp_path / "absent"), FileNotFoundError, "no such folder; expected an HF folder"),
      (str(tmp_path / "bare_run"), FileNotFoundError, "config.json is missing"),
  ]
  for spec, error, message in cases:
    with pytest.raises(error, match=message) as e:
      model_ref.resolve(spec)
    assert "\n" not in str(e.value)


def test_load_restores_the_policy_of_the_step(run):
  workdir, after_1, after_2 = run
  for spec, want in ((f"{workdir}@1", after_1), (str(workdir), after_2)):
    loaded = model_ref.load(spec)
    for a, b in zip(_params(loaded.model), want):
      np.testing.assert_array_equal(a, b)
  half = model_ref.load(str(workdir), dtype=jnp.bfloat16)
  assert {x.dtype for x in _params(half.model)} == {np.dtype(jnp.bfloat16)}
  np.testing.assert_array_equal(_params(half.model)[0], after_2[0].astype(jnp.bfloat16))
  assert half.tokenizer.chat_template


def test_run_record_is_kept_when_identical(run, tmp_path):
  c = sft.default_config()
  path = model_ref.write_run_config(tmp_path, c)
  stamp = path.stat().st_mtime_ns
  model_ref.write_run_config(tmp_path, c)
  assert path.stat().st_mtime_ns == stamp
  c.num_epochs = 7
  model_ref.write_run_config(tmp_path, c)
  assert model_ref.read_run_config(tmp_path)["num_epochs"] == 7


def _export(workdir, out, *flags):
  cmd = [sys.executable, str(ROOT / "launch" / "export_hf.py"), f"--workdir={workdir}",
         f"--output_dir={out}", *flags]
  return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_export_hf_loads_in_transformers_with_our_logits(run, tmp_path):
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  workdir, _, _ = run
  out = tmp_path / "export"
  proc = _export(workdir, out)
  assert proc.returncode == 0, proc.stderr[-3000:]
  ids = np.asarray([[90, 17, 40, 91, 92, 5, 6, 7]], np.int32)
  hf, info = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32,
                                                               output_loading_info=True)
  assert not any(info.values()), info  # no missing, unexpected or mismatched tensors
  with torch.no_grad():
    theirs = hf(torch.from_numpy(ids).long()).logits.numpy()
  ours = model_ref.load(str(workdir)).model(ids, np.ones_like(ids, bool))
  assert np.abs(np.asarray(ours) - theirs).max() <= 1e-4
  # What a server reads beside the weights: the tokenizer with its chat template, the stop ids.
  tok = transformers.AutoTokenizer.from_pretrained(out)
  assert tok.apply_chat_template([{"role": "user", "content": "w17"}], tokenize=False,
                                 add_generation_prompt=True) == "w90 w17 w91 w92"
  gen = transformers.GenerationConfig.from_pretrained(out)
  assert (gen.bos_token_id, gen.eos_token_id, gen.pad_token_id) == (1, 2, 0)
  with safe_open(out / "model.safetensors", framework="np") as f:
    assert f.metadata() == {"format": "pt"}

  # A non-empty folder is refused (one line, before any weights load) unless --overwrite.
  proc = _export(workdir, out, "--step=1")
  assert proc.returncode != 0
  assert proc.stderr.strip().splitlines()[-1].startswith(f"export_hf: {out} is not empty")
  proc = _export(workdir, out, "--step=1", "--dtype=bfloat16", "--overwrite")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"
  half = transformers.AutoModelForCausalLM.from_pretrained(out, dtype="auto")
  assert half.dtype == torch.bfloat16
  with torch.no_grad():
    half_logits = half(torch.from_numpy(ids).long()).logits.float().numpy()
  step_1 = np.asarray(model_ref.load(f"{workdir}@1").model(ids, np.ones_like(ids, bool)))
  assert np.abs(half_logits - step_1).max() < 0.05  # bfloat16 weights and activations


def test_export_hf_missing_step_names_the_steps(run, tmp_path):
  workdir, _, _ = run
  proc = _export(workdir, tmp_path / "export", "--step=7")
  assert proc.returncode != 0
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("export_hf: no checkpoint for step 7 ") and "(found steps [1, 2])" in last, last
  assert not (tmp_path / "export").exists()


def test_grpo_workdir_gives_its_policy_not_the_reference(tiny_chat_model, tmp_path):
  sys.path.insert(0, str(ROOT / "tests" / "rl"))
  import toy_task  # pylint: disable=g-import-not-at-top
  c = toy_task.toy_config(tmp_path, steps=1, lr=3e-2, prompts=2, group=2, new_tokens=3)
  c.model.path = str(tiny_chat_model)
  c.loss.kl_coef = 0.1  # the checkpoint then also holds ref_params (the step-0 policy)
  trainer = toy_task.make_trainer(tiny_chat_model, tmp_path, c)
  trainer.train()
  model_ref.write_run_config(tmp_path, c)
  meta = checkpoints.Checkpointer(tmp_path / "checkpoints").read_meta()
  assert any(p.startswith("['ref_params']") for p in meta["leaf_paths"])
  loaded = model_ref.load(str(tmp_path))
  assert loaded.ref.step == 1
  base = _params(models.load_pretrained(tiny_chat_model))
  trained = _params(trainer.model)
  assert any(not np.array_equal(a, b) for a, b in zip(trained, base))
  for a, b in zip(_params(loaded.model), trained):
    np.testing.assert_array_equal(a, b)
