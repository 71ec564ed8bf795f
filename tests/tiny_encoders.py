"""Tiny random retrieval models saved as HF folders with transformers, for parity and pipeline tests.

  build_qwen3_embedding(path)  a Qwen3Model (tensors without the "model." prefix, as Qwen3-Embedding
                               ships) + a word-level tokenizer that appends <|endoftext|> + a
                               config_sentence_transformers.json holding the query prompt
  build_xlmr_reranker(path)    an XLMRobertaForSequenceClassification with one label (as
                               bge-reranker-v2-m3) + an XLM-R tokenizer over a small vocabulary

Tests import this module by name (pytest puts tests/ on sys.path for the root conftest).
"""

import json
import pathlib

WORDS = ("the capital of veltria is orsk who founded tannex mara quell salt mines river dun flows "
         "bicycles lamps baker lives in and a was by what which city sea north cold").split()
QUERY_PROMPT = "Instruct: find passages\nQuery:"


def _perturb(model, scale=0.05):
  import torch
  with torch.no_grad():
    for p in model.parameters():
      p.add_(scale * torch.randn_like(p))
  return model.eval()


def build_qwen3_embedding(path, *, seed=0, max_shard_size=None) -> pathlib.Path:
  import tokenizers
  import torch
  import transformers

  path = pathlib.Path(path)
  vocab = {"<|endoftext|>": 0, "[UNK]": 1, "?": 2, ".": 3, ":": 4, **{w: i + 5 for i, w in enumerate(WORDS)}}
  vocab.update({w.capitalize(): len(vocab) + i for i, w in enumerate(("instruct", "query", "find", "passages"))})
  tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
  tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
  # Qwen3-Embedding's tokenizer appends <|endoftext|>; its hidden state is the embedding.
  tok.post_processor = tokenizers.processors.TemplateProcessing(
      single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", 0)])
  fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>",
                                              eos_token="<|endoftext|>", unk_token="[UNK]")
  fast.save_pretrained(path)
  config = transformers.AutoConfig.for_model(
      model_type="qwen3", vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
      rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
      pad_token_id=0, eos_token_id=0)
  torch.manual_seed(seed)
  model = _perturb(transformers.AutoModel.from_config(config, dtype=torch.float32))  # Qwen3Model
  kw = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
  model.save_pretrained(path, safe_serialization=True, **kw)
  (path / "config_sentence_transformers.json").write_text(
      json.dumps({"prompts": {"query": QUERY_PROMPT, "document": ""}, "default_prompt_name": None}))
  return path


def build_xlmr_reranker(path, *, seed=0, num_labels=1) -> pathlib.Path:
  import torch
  import transformers

  path = pathlib.Path(path)
  pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
  pieces += [("▁" + w, -1.0) for w in WORDS] + [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz?."]
  pieces.append(("<mask>", 0.0))
  transformers.XLMRobertaTokenizer(vocab=pieces).save_pretrained(path)
  config = transformers.XLMRobertaConfig(
      vocab_size=len(pieces), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
      intermediate_size=48, max_position_embeddings=1026, type_vocab_size=1, pad_token_id=1,
      bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5, num_labels=num_labels)
  torch.manual_seed(seed)
  _perturb(transformers.XLMRobertaForSequenceClassification(config)).save_pretrained(
      path, safe_serialization=True)
  return path
