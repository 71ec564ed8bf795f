"""Stop strings across token boundaries, EOS and truncation flags (SmolLM2's byte-level tokenizer)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax import sampling
from grounding_jax.models import load_pretrained
from grounding_jax.sampling import stopping


@pytest.mark.parametrize("text,stops", [
    ("The answer: <answer>Paris</answer>\nmore text", ("</answer>",)),
    ("<reason>r</reason><extract>a quote here</extract> tail", ("</extract>", "</answer>")),
    ("日本語のテキストです", ("本語の",)),          # multi-byte characters split across tokens
    ("misunderstanding everything", ("stand",)),   # the stop string lies inside one token
])
def test_device_stop_matches_decoded_text(tokenizer, text, stops):
  ids = tokenizer.encode(text, add_special_tokens=False)
  pieces = stopping.token_bytes(tokenizer)
  assert b"".join(pieces[i] for i in ids) == tokenizer.decode(ids).encode("utf-8")
  # Reference: the first token after which the decoded prefix contains a stop string.
  expected = next(k for k in range(len(ids))
                  if any(s in tokenizer.decode(ids[:k + 1]) for s in stops))
  tables = stopping.build_stop_tables(tokenizer, stops)
  tail = stopping.initial_tail(1, tables)
  step = jax.jit(stopping.stop_step)
  hits = []
  for i in ids:
    hit, tail = step(tail, jnp.array([i], jnp.int32), tables)
    hits.append(bool(hit[0]))
  assert hits.index(True) == expected
  text_cut, keep = stopping.truncate_at_stop(tokenizer, ids, stops)
  assert keep == expected + 1
  end = min(text.find(s) + len(s) for s in stops if s in text)
  assert text_cut == text[:end]


@pytest.fixture(scope="module")
def vocab_model(tiny_checkpoint):
  """A tiny random llama with SmolLM2's vocabulary size, so SmolLM2's tokenizer can drive it."""
  return load_pretrained(tiny_checkpoint("llama", vocab_size=49152, initializer_range=0.3,
                                         bos_token_id=1, eos_token_id=2, pad_token_id=2))


PROMPTS = ["Where is Paris?", "A much longer prompt that has quite a few more tokens in it.", "Hi"]


def _ascii_token(tokenizer, i):
  s = tokenizer.decode([i])
  return s if len(s) >= 2 and s.isascii() and i not in tokenizer.all_special_ids else None


def test_stop_string_eos_and_truncation_end_to_end(tokenizer, vocab_model):
  kw = dict(max_new_tokens=32, eos_ids=[])
  free = sampling.generate(vocab_model, tokenizer, PROMPTS, **kw)
  assert free.truncated.all() and (free.lengths == 32).all()
  assert free.texts == [tokenizer.decode(r, skip_special_tokens=True) for r in free.token_ids]

  # A stop string made of the end of token k and the start of token k + 1 of row 0.
  row = free.token_ids[0].tolist()
  for k in range(2, 30):
    a, b = _ascii_token(tokenizer, row[k]), _ascii_token(tokenizer, row[k + 1])
    stop = (a or "")[-2:] + (b or "")[:2]
    if a and b and stop not in tokenizer.decode(row[:k + 1]):
      break
  else:
    pytest.fail("no two neighbouring ASCII tokens in the greedy continuation")
  stopped = sampling.generate(vocab_model, tokenizer, PROMPTS, stop=(stop,), **kw)
  assert stopped.lengths[0] == k + 2 and not stopped.truncated[0]
  np.testing.assert_array_equal(stopped.token_ids[0, :k + 2], free.token_ids[0, :k + 2])
  assert (stopped.token_ids[0, k + 2:] == tokenizer.pad_token_id).all()
  assert not stopped.completion_mask[0, k + 2:].any() and (stopped.logprobs[0, k + 2:] == 0).all()
  full = free.texts[0]
  assert stopped.texts[0] == full[:full.find(stop) + len(stop)]
  for r in (1, 2):  # rows without the stop string are untouched
    if stop not in free.texts[r]:
      np.testing.assert_array_equal(stopped.token_ids[r], free.token_ids[r])
      assert stopped.truncated[r]

  # EOS: a token of row 1 ends every row at its first occurrence (EOS kept, padding after).
  row1 = free.token_ids[1].tolist()
  eos = row1[5]
  ended = sampling.generate(vocab_model, tokenizer, PROMPTS, **dict(kw, eos_ids=[eos]))
  for r in range(3):
    tokens = free.token_ids[r].tolist()
    if eos in tokens:
      n = tokens.index(eos) + 1
      assert ended.lengths[r] == n and not ended.truncated[r]
      np.testing.assert_array_equal(ended.token_ids[r, :n], free.token_ids[r, :n])
      assert (ended.token_ids[r, n:] == tokenizer.pad_token_id).all()
    else:
      assert ended.lengths[r] == 32 and ended.truncated[r]
