"""load_tokenizer / render_chat on the SmolLM2 folder (its own tokenizer and chat template)."""

import json
import shutil

import pytest
import transformers

from grounding_jax.models import load_tokenizer
from grounding_jax.models import tokenizer as tokenizer_lib
from grounding_jax.models.tokenizer import render_chat


def test_left_padding_and_chat_template(smollm2_dir):
  tokenizer = load_tokenizer(smollm2_dir)
  assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None
  text = render_chat(tokenizer, [{"role": "user", "content": "Hi there"}])
  # SmolLM2's ChatML template: the user turn, then an open assistant turn for generation.
  assert text.endswith("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n")
  batch = tokenizer(["a", "a much longer prompt than the first"], padding=True)
  assert batch["attention_mask"][0][0] == 0 and batch["attention_mask"][0][-1] == 1


def test_pad_falls_back_to_eos(smollm2_dir, tmp_path):
  for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(smollm2_dir / name, tmp_path / name)
  config = json.loads((tmp_path / "tokenizer_config.json").read_text())
  config.pop("pad_token", None)
  (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
  tokenizer = load_tokenizer(tmp_path)
  assert tokenizer.pad_token == tokenizer.eos_token


def test_missing_folder_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="no tokenizer files"):
    load_tokenizer(tmp_path)


@pytest.mark.parametrize("folder", ["smollm2", "tiny_chat"])
def test_direct_load_equals_autotokenizer(folder, smollm2_dir, tiny_chat_model):
  """Folders transformers 5 wrote (SmolLM2's converted one, a saved PreTrainedTokenizerFast) load
  without AutoTokenizer's module (it imports torch; ~2 s of a run's start) into what AutoTokenizer
  builds: same class, special tokens, ids and chat rendering."""
  path = {"smollm2": smollm2_dir, "tiny_chat": tiny_chat_model}[folder]
  assert tokenizer_lib._direct_class(path) is transformers.TokenizersBackend
  ours = load_tokenizer(path)
  auto = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
  assert type(ours) is type(auto)
  assert (ours.bos_token, ours.eos_token, ours.unk_token) == (auto.bos_token, auto.eos_token,
                                                              auto.unk_token)
  texts = ["w5 w17 w40", "Where was Ada Lovelace born? [1] London, 1815.", "<|im_start|>user\nhi"]
  assert ours(texts)["input_ids"] == auto(texts)["input_ids"]
  if auto.chat_template:
    chat = [{"role": "user", "content": "w7 w9"}]
    assert render_chat(ours, chat) == auto.apply_chat_template(chat, tokenize=False,
                                                               add_generation_prompt=True)


def test_other_folders_go_through_autotokenizer(smollm2_dir, tmp_path):
  """A tokenizer_config naming another class, remote code, or an unknown model type: AutoTokenizer."""
  for change in ({"tokenizer_class": "GPT2Tokenizer"}, {"auto_map": {"AutoTokenizer": ["x.Y", None]}},
                 {"model_type": "bert"}):
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
      shutil.copy(smollm2_dir / name, tmp_path / name)
    target = "config.json" if "model_type" in change else "tokenizer_config.json"
    config = json.loads((tmp_path / target).read_text())
    (tmp_path / target).write_text(json.dumps({**config, **change}))
    assert tokenizer_lib._direct_class(tmp_path) is None, change
