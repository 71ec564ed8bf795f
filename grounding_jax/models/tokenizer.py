"""Tokenizers and chat templates through transformers' AutoTokenizer, from local folders only."""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Mapping, Sequence

import transformers

from grounding_jax.models import config as config_lib


def _direct_class(folder: pathlib.Path):
  """transformers.TokenizersBackend when AutoTokenizer would build exactly that class for `folder`,
  else None (then AutoTokenizer decides).

  Why: importing AutoTokenizer's module imports every model's config and, through them, torch,
  which costs each run's start far more than the tokenizer itself (docs/benchmarks.md). The rule follows transformers 5's AutoTokenizer.from_pretrained:
  a folder whose tokenizer_config.json names "TokenizersBackend" (what transformers 5 writes for a
  tokenizer.json tokenizer, e.g. SmolLM2's converted folder), without remote code ("auto_map"), of a
  model type this package loads (none of them is in AutoTokenizer's list of hub classes it
  overrides), gets TokenizersBackend.from_pretrained(folder).
  """
  try:
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    model_config = json.loads((folder / "config.json").read_text()) \
        if (folder / "config.json").is_file() else {}
  except (OSError, ValueError):
    return None
  model_type = model_config.get("model_type")  # none: AutoTokenizer goes by tokenizer_class alone
  if (tok_config.get("tokenizer_class") != "TokenizersBackend" or "auto_map" in tok_config
      or "auto_map" in model_config or not (folder / "tokenizer.json").is_file()
      or model_type not in (None, *config_lib.SUPPORTED_MODEL_TYPES)):
    return None
  return transformers.TokenizersBackend


def load_tokenizer(path: str | os.PathLike) -> transformers.PreTrainedTokenizerBase:
  """Loads the tokenizer in an HF model folder, set up for batched generation.

  Padding goes on the LEFT (prompts end where generation starts, as the sampler and
  `Transformer.__call__` expect); a tokenizer without a pad token pads with its eos token.

  Raises:
    FileNotFoundError: the folder does not exist or holds no tokenizer files.
  """
  folder = pathlib.Path(path)
  if not folder.is_dir():
    raise FileNotFoundError(f"{folder}: tokenizer folder does not exist.")
  if not any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json",
                                              "tokenizer.model", "vocab.json")):
    raise FileNotFoundError(f"{folder}: no tokenizer files (tokenizer.json / tokenizer_config.json).")
  tokenizer_class = _direct_class(folder) or transformers.AutoTokenizer
  tokenizer = tokenizer_class.from_pretrained(str(folder), local_files_only=True)
  tokenizer.padding_side = "left"
  if tokenizer.pad_token is None:
    if tokenizer.eos_token is None:
      raise ValueError(f"{folder}: tokenizer has neither a pad nor an eos token to pad with.")
    tokenizer.pad_token = tokenizer.eos_token
  return tokenizer


def render_chat(tokenizer: transformers.PreTrainedTokenizerBase,
                messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
                enable_thinking: bool | None = None) -> str:
  """Renders chat messages ([{"role": ..., "content": ...}]) with the tokenizer's chat template.

  Args:
    tokenizer: a tokenizer with a chat template.
    messages: the conversation so far.
    add_generation_prompt: end with the assistant header, ready for the model to answer.
    enable_thinking: passed to templates that support it (Qwen3); None leaves the template default.

  Returns:
    The prompt text (not tokenized).
  """
  if not getattr(tokenizer, "chat_template", None):
    raise ValueError(f"tokenizer {tokenizer.name_or_path!r} has no chat template.")
  kwargs = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
  return tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                       add_generation_prompt=add_generation_prompt, **kwargs)
