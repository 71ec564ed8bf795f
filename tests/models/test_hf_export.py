"""export_hf writes a complete folder (weights, tokenizer, chat template, generation config) and never
replaces anything but an earlier export."""

import json
import shutil

import pytest

from grounding_jax import models
from grounding_jax.models import hf_export


def test_folder_is_complete_and_stop_ids_include_the_tokenizers_eos(tiny_chat_model, tmp_path):
  base = tmp_path / "base"
  shutil.copytree(tiny_chat_model, base)
  config = json.loads((base / "config.json").read_text())
  (base / "config.json").write_text(json.dumps({**config, "eos_token_id": 3}))  # ≠ tokenizer eos 2
  out = hf_export.export_hf(models.load_pretrained(base), tmp_path / "out", tokenizer_from=base)
  names = {p.name for p in out.iterdir()}
  assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
          "chat_template.jinja", "generation_config.json"} <= names, names
  assert not list(tmp_path.glob(".out.partial"))
  gen = json.loads((out / "generation_config.json").read_text())
  assert (gen["bos_token_id"], gen["eos_token_id"], gen["pad_token_id"]) == (1, [3, 2], 0)


def test_only_an_earlier_export_is_replaced(tiny_chat_model, tmp_path):
  model = models.load_pretrained(tiny_chat_model)
  out = tmp_path / "out"
  hf_export.export_hf(model, out, tokenizer_from=tiny_chat_model)
  with pytest.raises(FileExistsError, match="is not empty .*pass --overwrite"):
    hf_export.export_hf(model, out, tokenizer_from=tiny_chat_model)
  (out / "stale.txt").write_text("from an earlier export")
  hf_export.export_hf(model, out, tokenizer_from=tiny_chat_model, overwrite=True)
  assert not (out / "stale.txt").exists()
  workdir = tmp_path / "workdir"
  (workdir / "checkpoints").mkdir(parents=True)
  (workdir / "config.json").write_text("{}")
  with pytest.raises(FileExistsError, match=r"not look like an earlier HF export \(sub-folders \['checkp"):
    hf_export.export_hf(model, workdir, tokenizer_from=tiny_chat_model, overwrite=True)
  assert (workdir / "checkpoints").is_dir()
  (tmp_path / "no_tokenizer").mkdir()
  with pytest.raises(FileNotFoundError, match="no tokenizer files"):
    hf_export.export_hf(model, tmp_path / "out2", tokenizer_from=tmp_path / "no_tokenizer")
