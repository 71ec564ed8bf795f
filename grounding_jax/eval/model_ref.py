"""Which model is M: an HF folder, a training or SFT workdir (its newest checkpoint), or `workdir@step`.

  ref = resolve("/runs/grace@200")        # cheap: reads <workdir>/config.json and checkpoint metadata
  loaded = load(ref)                      # LoadedModel(model, tokenizer, ref); ref.step == 200

A workdir holds `checkpoints/` (the trainers' Checkpointer) and `config.json`, the run record that
launch/train.py and launch/sft.py write (`write_run_config`): its `model.path` names the HF folder
whose architecture and tokenizer the checkpoints belong to, `model.param_dtype` the dtype they hold.
Only the policy parameters ("['params']") are read from a checkpoint, not the optimizer state.

This sits at the eval layer because evaluation and export are its callers and it reads what both
trainers write; it resolves the "smollm2" preset name with `models.gguf_convert.resolve_model_path`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
from typing import Any, Optional

import jax
import ml_collections
from flax import nnx

from grounding_jax import checkpoints
from grounding_jax import models
from grounding_jax.models import gguf_convert
from grounding_jax.models import lora as lora_lib

RUN_CONFIG = "config.json"      # <workdir>/config.json: the resolved run config (ml_collections JSON)
CHECKPOINTS = "checkpoints"     # <workdir>/checkpoints: where both trainers save
BEST_CHECKPOINTS = "checkpoints_best"  # <workdir>/checkpoints_best: GRPO's best validation step
                                       # (checkpoint.best_metric, rl/validate.py); read as workdir@best
PARAMS = "['params']"           # key path of the policy parameters in a saved training state
BASE = "['base']"               # a LoRA run's frozen base weights (model.lora.save_base)
_EXPECTED = ("an HF folder (config.json + model.safetensors), a training or SFT workdir (checkpoints/ + "
             "config.json), workdir@step or workdir@best")


def write_run_config(workdir: str | os.PathLike, config: ml_collections.ConfigDict) -> pathlib.Path:
  """Writes the resolved run config to <workdir>/config.json (process 0; an identical file is kept).

  Call it with the config as the run will use it (model.path resolved to a folder), so the workdir
  alone says which base model and dtype its checkpoints belong to.
  """
  path = pathlib.Path(workdir) / RUN_CONFIG
  text = config.to_json(indent=2, sort_keys=True) + "\n"
  if jax.process_index() != 0 or (path.is_file() and path.read_text() == text):
    return path
  path.parent.mkdir(parents=True, exist_ok=True)
  partial = path.with_suffix(".json.partial")
  partial.write_text(text)
  partial.replace(path)
  return path


def read_run_config(workdir: str | os.PathLike) -> dict[str, Any]:
  """The run record of a workdir as a dict. Raises FileNotFoundError naming what wrote it."""
  path = pathlib.Path(workdir) / RUN_CONFIG
  if not path.is_file():
    raise FileNotFoundError(f"{path} is missing: a workdir's run record is written by launch/train.py "
                            f"and launch/sft.py; without it the base model of {workdir} is unknown")
  return json.loads(path.read_text())


@dataclasses.dataclass(frozen=True)
class ModelRef:
  """A resolved model reference.

  Attributes:
    spec: what the user wrote.
    hf_folder: the weights (checkpoint None) or the base model whose architecture and tokenizer the
      checkpoint belongs to.
    workdir: the run's folder, or None for an HF folder.
    step: the checkpoint step, or None for an HF folder.
    param_dtype: dtype of the stored weights ("float32", "bfloat16", …).
    checkpoints: the workdir's checkpoint folder (CHECKPOINTS, or BEST_CHECKPOINTS for workdir@best).
    scan_layers: the run's layer layout (model.scan_layers; a checkpoint restores into its own).
    lora: the run's LoRA adapters (model.lora with rank > 0), whose checkpoints hold the adapters
      (and, with lora_save_base, the frozen base weights); None = full parameters.
  """
  spec: str
  hf_folder: str
  workdir: Optional[str] = None
  step: Optional[int] = None
  param_dtype: str = "float32"
  checkpoints: str = CHECKPOINTS
  scan_layers: bool = True
  lora: Optional[lora_lib.LoRAConfig] = None
  lora_save_base: bool = False

  @property
  def name(self) -> str:
    """A short label for tables: the folder, or workdir@step (workdir@best:step)."""
    if self.workdir is None:
      return self.hf_folder
    return f"{self.workdir}@{'best:' if self.checkpoints == BEST_CHECKPOINTS else ''}{self.step}"


@dataclasses.dataclass
class LoadedModel:
  """What `load` returns: the model (its checkpoint's parameters), its tokenizer, and where it came from."""
  model: models.Transformer
  tokenizer: Any
  ref: ModelRef


def _is_hf_folder(path: pathlib.Path) -> bool:
  return (path / "config.json").is_file() and any(
      (path / f).is_file() for f in ("model.safetensors", "model.safetensors.index.json"))


def resolve(spec: str) -> ModelRef:
  """Resolves M without loading weights; every error is one line naming the value and what was expected.

  Args:
    spec: an HF folder, "smollm2" (the offline SmolLM2 preset), a workdir (newest checkpoint),
      "workdir@step", or "workdir@best" (the step kept by checkpoint.best_metric).
  Raises:
    FileNotFoundError: no such folder, no such step (the message lists the steps there are), a missing
      run record or base model folder.
    ValueError: a folder that is neither an HF folder nor a workdir; a step that is not an integer.
  """
  spec = str(spec)
  if spec == gguf_convert.SMOLLM2:
    return ModelRef(spec, gguf_convert.resolve_model_path(spec))
  path, step, kept = spec, None, CHECKPOINTS
  match = re.fullmatch(r"(.+)@([^@/]*)", spec)
  if match and not pathlib.Path(spec).exists():
    path, step_text = match.groups()
    if step_text == "best":
      kept = BEST_CHECKPOINTS
      if not (pathlib.Path(path) / BEST_CHECKPOINTS).is_dir():
        raise FileNotFoundError(f"{spec}: {path} has no {BEST_CHECKPOINTS}/ (a run keeps one when "
                                "checkpoint.best_metric is set and validation has run)")
    elif not step_text.isdigit():
      raise ValueError(f"{spec}: the step after '@' must be a non-negative integer or 'best', e.g. "
                       f"{path}@100")
    else:
      step = int(step_text)
  folder = pathlib.Path(path)
  if not folder.is_dir():
    raise FileNotFoundError(f"{path}: no such folder; expected {_EXPECTED}")
  if not (folder / CHECKPOINTS).is_dir() and _is_hf_folder(folder):
    if step is not None or kept != CHECKPOINTS:
      raise ValueError(f"{spec}: {path} is an HF folder, which has no steps; '@step' picks a "
                       f"checkpoint of a workdir")
    return ModelRef(spec, str(folder.absolute()))
  if not (folder / CHECKPOINTS).is_dir():
    raise ValueError(f"{path}: neither an HF folder nor a workdir; expected {_EXPECTED}")
  record = read_run_config(folder)
  base = pathlib.Path(gguf_convert.resolve_model_path(record.get("model", {}).get("path", "")))
  if not _is_hf_folder(base):
    raise FileNotFoundError(f"{base} (model.path in {folder / RUN_CONFIG}) is not an HF folder; the "
                            f"checkpoints of {path} need its config.json and tokenizer")
  checkpointer = checkpoints.Checkpointer(folder / kept)
  try:
    step = checkpointer.read_meta(step)["step"]
  finally:
    checkpointer.close()
  return ModelRef(spec, str(base.absolute()), workdir=str(folder.absolute()), step=int(step),
                  param_dtype=record["model"].get("param_dtype", "float32"), checkpoints=kept,
                  scan_layers=bool(record["model"].get("scan_layers", False)),
                  **_lora_fields(record["model"].get("lora")))


def _lora_fields(section) -> dict:
  """ModelRef's lora fields from a run record's model.lora (absent or rank 0: full parameters)."""
  if not section or not int(section.get("rank", 0)):
    return {}
  return dict(lora=lora_lib.LoRAConfig.from_config(ml_collections.ConfigDict(section)),
              lora_save_base=bool(section.get("save_base", False)))


def load(ref: ModelRef | str, *, dtype=None, compute_dtype=None, mesh=None, rules=None,
         attention_implementation: str | None = None) -> LoadedModel:
  """Loads the model and tokenizer of `ref` (a ModelRef or a spec for `resolve`).

  Args:
    ref: what to load.
    dtype: parameter dtype; None = as stored (the run's model.param_dtype; float32 for HF folders).
    compute_dtype: activation dtype; None = `dtype`.
    mesh, rules: place parameters sharded by logical axis names (see models.load_pretrained).
    attention_implementation: the attention kernel (models/attention.py); None = the model's default.
  """
  if not isinstance(ref, ModelRef):
    ref = resolve(ref)
  dtype = models.DTYPES[ref.param_dtype] if dtype is None else dtype
  # The base folder gives the architecture, the tokenizer and arrays with the right shardings, which
  # the checkpoint's parameters then replace (read and cast by orbax straight into those shardings).
  model = models.load_pretrained(ref.hf_folder, dtype=dtype, compute_dtype=compute_dtype, mesh=mesh,
                                 rules=rules, scan_layers=ref.scan_layers,
                                 attention_implementation=attention_implementation)
  tokenizer = models.load_tokenizer(ref.hf_folder)
  if ref.workdir is None:
    return LoadedModel(model, tokenizer, ref)
  if ref.lora is not None:  # the run trained adapters: its checkpoints' params are theirs
    model = lora_lib.add_adapters(model, ref.lora, jax.random.key(0))
  graphdef, params, rest = lora_lib.split(model)
  checkpointer = checkpoints.Checkpointer(pathlib.Path(ref.workdir) / ref.checkpoints)
  try:
    params, _ = checkpoints.restore_subtree(checkpointer, params, PARAMS, step=ref.step)
    if ref.lora_save_base:  # the run kept its base weights: those, not model.path's current ones
      base, _ = checkpoints.restore_subtree(checkpointer, nnx.filter_state(rest, nnx.Param), BASE,
                                            step=ref.step)
      rest = nnx.merge_state(rest, base)
  finally:
    checkpointer.close()
  model = nnx.merge(graphdef, params, rest)
  model.source_path = ref.hf_folder  # where its tokenizer files are (save_pretrained copies them)
  return LoadedModel(model, tokenizer, ref)
