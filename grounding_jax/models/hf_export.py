"""A servable Hugging Face folder from a model: what `transformers.from_pretrained` and vLLM read.

  export_hf(model, "out/", tokenizer_from="base/", dtype=jnp.bfloat16)

writes config.json and model.safetensors (or shards + index) through `save_pretrained`, the tokenizer
files of `tokenizer_from` as they are (tokenizer.json, tokenizer_config.json, chat_template.jinja, …),
and generation_config.json with the model's bos / eos / pad ids. The folder is written beside the
output and renamed into place, so a failed export never leaves half a model where a server looks.
LoRA adapters are merged into the weights (W + alpha/r · A B); `export_peft` instead writes the
adapters alone as a PEFT folder (adapter_config.json + adapter_model.safetensors):

  export_peft(model, "adapter/", base_model="base/")   # PeftModel.from_pretrained(base, "adapter/")
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
from typing import Any

import jax
import numpy as np
from flax import nnx
from safetensors.numpy import save_file

from grounding_jax.models import lora
from grounding_jax.models.hf_io import TOKENIZER_FILES, _to_host, save_pretrained
from grounding_jax.models.tokenizer import load_tokenizer
from grounding_jax.models.transformer import Transformer

GENERATION_CONFIG = "generation_config.json"


def check_output_dir(folder: str | os.PathLike, *, overwrite: bool,
                     marker: str = "config.json") -> None:
  """Raises unless `folder` is absent or empty, or (with overwrite) holds only an earlier export.

  An earlier export is a folder with a `marker` file (config.json; a PEFT folder's
  adapter_config.json) and no sub-folders; anything else (a workdir, a home directory) is never
  replaced, even with overwrite.
  """
  folder = pathlib.Path(folder)
  if not folder.exists():
    return
  if not folder.is_dir():
    raise FileExistsError(f"{folder} is a file; give a folder for the HF export")
  entries = sorted(p.name for p in folder.iterdir())
  if not entries:
    return
  if not overwrite:
    shown = ", ".join(entries[:4]) + (", …" if len(entries) > 4 else "")
    raise FileExistsError(f"{folder} is not empty ({shown}); pass --overwrite to replace an earlier "
                          f"export, or choose a new folder")
  subfolders = [p.name for p in folder.iterdir() if p.is_dir()]
  has_config = (folder / marker).is_file()
  if subfolders or not has_config:
    raise FileExistsError(f"{folder} does not look like an earlier HF export (sub-folders "
                          f"{subfolders[:3]}{'' if has_config else f', no {marker}'}); refusing to "
                          f"replace it even with --overwrite")


def generation_config(model: Transformer, tokenizer_from: str | os.PathLike) -> dict[str, Any]:
  """generation_config.json: the base folder's (sampling defaults kept) with the model's token ids.

  eos is every end id that the model's config, the base generation config and the tokenizer name (chat
  models end a turn with the tokenizer's eos, e.g. SmolLM2's <|im_end|>, which a server must stop on).
  """
  base = pathlib.Path(tokenizer_from)
  out: dict[str, Any] = {}
  if (base / GENERATION_CONFIG).is_file():
    out = json.loads((base / GENERATION_CONFIG).read_text())
  tokenizer = load_tokenizer(base)
  c = model.config

  def ids(value):
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]

  eos = []
  for i in ids(c.eos_token_id) + ids(out.get("eos_token_id")) + ids(tokenizer.eos_token_id):
    if int(i) not in eos:
      eos.append(int(i))
  bos = c.bos_token_id if c.bos_token_id is not None else tokenizer.bos_token_id
  pad = c.pad_token_id if c.pad_token_id is not None else tokenizer.pad_token_id
  for key, value in (("bos_token_id", bos), ("eos_token_id", eos[0] if len(eos) == 1 else eos or None),
                     ("pad_token_id", pad)):
    if value is None:
      out.pop(key, None)
    else:
      out[key] = value
  out.setdefault("_from_model_config", False)
  return out


def export_hf(model: Transformer, folder: str | os.PathLike, *, tokenizer_from: str | os.PathLike,
              dtype=None, overwrite: bool = False) -> pathlib.Path:
  """Writes `model` as a servable HF folder; returns its path.

  Args:
    model: the Transformer (any sharding; every process of a multi-host run must call this); LoRA
      adapters are merged into their weights.
    folder: output folder; see `check_output_dir` for what may be replaced.
    tokenizer_from: an HF folder whose tokenizer files (and chat template) are copied.
    dtype: parameter dtype of the written tensors (e.g. jnp.bfloat16); None keeps the model's.
    overwrite: replace an earlier export in `folder`.
  Raises:
    FileExistsError: `folder` holds something else (see check_output_dir).
    FileNotFoundError: `tokenizer_from` has no tokenizer files.
  """
  folder = pathlib.Path(folder).absolute()
  check_output_dir(folder, overwrite=overwrite)
  source = pathlib.Path(tokenizer_from)
  if not any((source / f).is_file() for f in ("tokenizer.json", "tokenizer.model", "vocab.json")):
    raise FileNotFoundError(f"{source}: no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, …) to "
                            f"put beside the weights; an export without them cannot be served")
  model = lora.merged(model)  # W + (alpha / r) · A B: a plain model that any HF server loads
  if dtype is not None:
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    model = nnx.merge(graphdef, jax.tree.map(lambda x: x.astype(dtype), params), rest)
  partial = folder.parent / f".{folder.name}.partial"
  writer = jax.process_index() == 0
  if writer and partial.exists():
    shutil.rmtree(partial)
  save_pretrained(model, partial, tokenizer=str(source))
  if not writer:
    return folder
  (partial / GENERATION_CONFIG).write_text(
      json.dumps(generation_config(model, source), indent=2, sort_keys=True) + "\n")
  if folder.exists():
    shutil.rmtree(folder)  # check_output_dir allowed it: empty, or an earlier export
  partial.rename(folder)
  return folder


PEFT_CONFIG = "adapter_config.json"
PEFT_WEIGHTS = "adapter_model.safetensors"
_PEFT_MODULE = {"attn": "self_attn", "mlp": "mlp"}


def peft_tensors(model: Transformer) -> dict[str, np.ndarray]:
  """The adapters of `model` as PEFT names them in adapter_model.safetensors (host arrays).

  PEFT wraps each torch Linear (weight [out, in]) with lora_A (weight [r, in]) and lora_B (weight
  [out, r]); ours are A [in..., r] and B [r, out...] with heads in their own axes, flattened in the
  order HF flattens them (models/hf_io.py), so lora_A = A.reshape(in, r).T, lora_B = B.reshape(r,
  out).T. Names: base_model.model.<the HF weight's module>.lora_A.weight (no adapter name, as
  peft's get_peft_model_state_dict writes them).
  """
  out = {}
  for i, block in enumerate(model.unstacked().layers):
    for name, (part, n_in) in lora.TARGETS.items():
      adapter = getattr(getattr(block, part), name + lora.SUFFIX, None)
      if adapter is None:
        continue
      a, b = _to_host(adapter.a.get_value()), _to_host(adapter.b.get_value())
      r = a.shape[-1]
      prefix = f"base_model.model.model.layers.{i}.{_PEFT_MODULE[part]}.{name}"
      out[f"{prefix}.lora_A.weight"] = np.ascontiguousarray(a.reshape(-1, r).T)
      out[f"{prefix}.lora_B.weight"] = np.ascontiguousarray(b.reshape(r, -1).T)
  return out


def peft_config(config: lora.LoRAConfig, base_model: str) -> dict[str, Any]:
  """adapter_config.json of a LoraConfig (peft's documented fields) for `config`."""
  return {
      "peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": str(base_model),
      "r": config.rank, "lora_alpha": config.alpha, "lora_dropout": config.dropout,
      "target_modules": sorted(config.targets), "bias": "none", "fan_in_fan_out": False,
      "use_rslora": False, "use_dora": False, "init_lora_weights": True, "inference_mode": True,
      "modules_to_save": None, "layers_to_transform": None, "layers_pattern": None,
      "rank_pattern": {}, "alpha_pattern": {}, "revision": None,
  }


def export_peft(model: Transformer, folder: str | os.PathLike, *, base_model: str | os.PathLike,
                dtype=None, overwrite: bool = False) -> pathlib.Path:
  """Writes `model`'s LoRA adapters as a PEFT adapter folder; returns its path.

  `peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_model), folder)` (or
  transformers' `model.load_adapter(folder)`) then computes what `model` computes. The base
  model's tokenizer files are copied beside the adapter, as PEFT's save_pretrained does when given one.

  Args:
    model: a Transformer with adapters (models/lora.py).
    folder: output folder (check_output_dir's rules; an earlier PEFT folder may be replaced).
    base_model: the HF folder of the base weights (adapter_config's base_model_name_or_path).
    dtype: tensor dtype of the adapters (None: the model's).
    overwrite: replace an earlier export in `folder`.
  Raises:
    ValueError: `model` has no adapters.
  """
  config = lora.config_of(model)
  if config is None:
    raise ValueError("the model has no LoRA adapters to write as a PEFT folder; export it with "
                     "export_hf (a full HF folder) instead")
  folder = pathlib.Path(folder).absolute()
  check_output_dir(folder, overwrite=overwrite, marker=PEFT_CONFIG)
  tensors = peft_tensors(model)
  if jax.process_index() != 0:
    return folder
  if dtype is not None:
    tensors = {k: v.astype(dtype) for k, v in tensors.items()}
  partial = folder.parent / f".{folder.name}.partial"
  if partial.exists():
    shutil.rmtree(partial)
  partial.mkdir(parents=True)
  save_file(tensors, str(partial / PEFT_WEIGHTS), metadata={"format": "pt"})
  (partial / PEFT_CONFIG).write_text(
      json.dumps(peft_config(config, pathlib.Path(base_model).absolute()), indent=2, sort_keys=True)
      + "\n")
  for fname in TOKENIZER_FILES:
    if (pathlib.Path(base_model) / fname).is_file():
      shutil.copyfile(pathlib.Path(base_model) / fname, partial / fname)
  if folder.exists():
    shutil.rmtree(folder)
  partial.rename(folder)
  return folder
