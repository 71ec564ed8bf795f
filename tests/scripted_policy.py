"""A scripted policy for multi-turn tests: a tiny llama that follows a bigram table under greedy
decoding, and a deterministic dictionary tool (tests/sampling/test_multiturn.py, tests/rl)."""

import jax.numpy as jnp
import numpy as np

from grounding_jax import sampling
from grounding_jax.models import load_pretrained
from grounding_jax.sampling.tools import ToolFormat, ToolResult

# Every word below is one SmolLM2 token. The policy is a bigram table: greedy decoding from a
# prompt's last word follows it; the tool's answer (its last word) starts the next turn's chain.
# A call opens at any word ending in "x" and closes at " halt"; " finish" ends an answer.
NEXT = {" apple": " banana", " banana": " finish",                                  # no search
        " cherry": " box", " box": " mars", " mars": " halt", " lemon": " grape",   # one search
        " grape": " finish",
        " olive": " fox", " fox": " bean", " bean": " halt", " peach": " plum",     # two searches
        " plum": " six", " six": " kiwi", " kiwi": " halt", " wax": " finish"}
PROMPTS = [" apple", " cherry", " olive"]
FORMAT = ToolFormat(call_open="x", call_close=" halt", result_open=" info", result_close="",
                    separator="")
STOP = (" finish",)


class DictTool:
  """A deterministic retriever: query -> (passage text, its id); records every batch it serves."""

  def __init__(self):
    self.table = {"mars": (" lemon", "d1"), "bean": (" peach", "d2"), "kiwi": (" wax", "d3")}
    self.batches = []

  def __call__(self, queries):
    self.batches.append(list(queries))
    return [ToolResult(self.table[q][0], (self.table[q][1],)) if q in self.table
            else ToolResult("", (), error="unknown query") for q in queries]


def scripted_model(tiny_checkpoint, tokenizer):
  """A tiny llama whose greedy next token follows NEXT (embeddings: one axis per word, the head maps
  a word's axis to its successor with a margin of ~6 nats), while attention and the MLP add a
  small context-dependent term (default init), so log-probs depend on the whole cached context."""
  model = load_pretrained(tiny_checkpoint("llama", vocab_size=49152, tie_word_embeddings=False,
                                          bos_token_id=1, eos_token_id=2, pad_token_id=2))
  one = lambda w: tokenizer.encode(w, add_special_tokens=False)
  words = sorted(set(NEXT) | set(NEXT.values()) | {" info"})
  ids = {w: one(w) for w in words}
  assert all(len(v) == 1 for v in ids.values()), ids
  d = model.config.hidden_size
  rng = np.random.default_rng(0)
  embed = np.asarray(model.embed[...]) * 0.1
  head = rng.normal(0, 0.01, np.asarray(model.lm_head[...]).shape).astype(np.float32)
  for axis, w in enumerate(sorted(NEXT)):
    embed[ids[w][0]] = np.eye(d)[axis]
    head[axis, ids[NEXT[w]][0]] = 1.2  # after the final norm an axis is ~sqrt(d) ≈ 5.7 long
  model.embed[...] = jnp.asarray(embed)
  model.lm_head[...] = jnp.asarray(head)
  return model


def prompts(tokenizer):
  rows = [tokenizer.encode(" the story of" * (i + 1) + p, add_special_tokens=False)
          for i, p in enumerate(PROMPTS)]
  return sampling.left_pad(rows, 2)
