"""generate_ids on tiny random models: greedy parity with transformers, log-probs, distributions, groups."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from scipy import stats

from grounding_jax import sampling
from grounding_jax.models import load_pretrained
from grounding_jax.sampling import engine
from sampling_reference import random_prompts, reference_probs, torch_single_thread

# Weights large enough (std 0.3 instead of 0.02) that greedy continuations vary instead of repeating.
_VARIED = dict(initializer_range=0.3)
_LENGTHS = (5, 11, 3, 8)  # a padded batch of different prompt lengths


@pytest.fixture(scope="module")
def tiny_llama(tiny_checkpoint):
  path = tiny_checkpoint("llama", **_VARIED)
  return path, load_pretrained(path)


@pytest.fixture(scope="module")
def small_logit_llama(tiny_checkpoint):
  """Default init (std 0.02): logits of size ~0.1, so float32 rounding stays far below 1e-5.

  With the std-0.3 model, logits reach ~10 and the cached decode and the full forward pass (different
  summation orders) differ by ~3e-6 relative, i.e. ~1e-5 in a log-prob: rounding, not a bug.
  """
  return load_pretrained(tiny_checkpoint("llama"))


# The configuration shared by the log-prob, no-recompile and sharding tests (one compiled program).
SAMPLED = dict(max_new_tokens=12, eos_ids=[2], pad_id=0, temperature=0.7, top_k=20, num_samples=3)


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_greedy_matches_transformers(tiny_checkpoint, tiny_llama, family):
  path = tiny_llama[0] if family == "llama" else tiny_checkpoint(family, **_VARIED)
  model = tiny_llama[1] if family == "llama" else load_pretrained(path)
  ids, mask = random_prompts(_LENGTHS, 96)
  gen = sampling.generate_ids(model, ids, mask, max_new_tokens=24, eos_ids=[2], pad_id=0)

  hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
  with torch_single_thread():
    out = hf.generate(torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask),
                      max_new_tokens=24, do_sample=False, eos_token_id=[2], pad_token_id=0)
  expected = out[:, ids.shape[1]:].numpy()
  expected = np.pad(expected, ((0, 0), (0, 24 - expected.shape[1])))  # HF stops early if all end
  np.testing.assert_array_equal(gen.token_ids, expected)
  ended = np.array([2 in row for row in expected])
  np.testing.assert_array_equal(gen.truncated, ~ended)
  np.testing.assert_array_equal(gen.completion_mask.sum(1), gen.lengths)
  assert gen.texts == []  # no tokenizer given


def _forward_logprobs(model, gen, num_samples, temperature):
  """Log-probs of each completion token from one plain forward pass over prompt + completion."""
  prompt_ids = np.repeat(gen.prompt_ids, num_samples, axis=0)
  prompt_mask = np.repeat(gen.prompt_mask, num_samples, axis=0)
  ids = jnp.asarray(np.concatenate([prompt_ids, gen.token_ids], axis=1))
  mask = jnp.asarray(np.concatenate([prompt_mask, gen.completion_mask], axis=1))
  logits = model(ids, mask)[:, prompt_ids.shape[1] - 1:-1]  # position i predicts token i + 1
  logp = jax.nn.log_softmax(logits / temperature, axis=-1)
  return np.take_along_axis(np.asarray(logp), gen.token_ids[..., None], axis=-1)[..., 0]


def test_logprobs_match_forward_pass_and_group_shares_prefill(small_logit_llama, monkeypatch):
  model = small_logit_llama
  calls = []
  real_prefill = engine.prefill

  def counting_prefill(graphdef, state, ids, mask):
    calls.append(ids.shape)
    return real_prefill(graphdef, state, ids, mask)

  monkeypatch.setattr(engine, "prefill", counting_prefill)
  ids, mask = random_prompts(_LENGTHS, 96, seed=1)
  gen = sampling.generate_ids(model, ids, mask, seed=jax.random.key(7), **SAMPLED)
  assert [c[0] for c in calls] == [len(_LENGTHS)], "the prompts must be prefilled once, not per sample"
  assert gen.token_ids.shape == (len(_LENGTHS) * 3, 12)
  expected = _forward_logprobs(model, gen, 3, 0.7)
  m = gen.completion_mask
  np.testing.assert_allclose(gen.logprobs[m], expected[m], atol=1e-5, rtol=0)
  assert np.all(gen.logprobs[~m] == 0) and np.all(gen.token_ids[~m] == 0)
  # Samples of one prompt differ from each other (independent draws from a shared prefill).
  assert len({tuple(r) for r in gen.token_ids[:3]}) > 1


def test_greedy_group_rows_identical(tiny_llama):
  _, model = tiny_llama
  ids, mask = random_prompts(_LENGTHS, 96)
  one = sampling.generate_ids(model, ids, mask, max_new_tokens=24, eos_ids=[2], pad_id=0)
  group = sampling.generate_ids(model, ids, mask, max_new_tokens=24, eos_ids=[2], pad_id=0,
                                num_samples=3)
  np.testing.assert_array_equal(group.token_ids, np.repeat(one.token_ids, 3, axis=0))
  # (A group reads its shared prompt cache in another layout than single rows: float32 sums in
  # another order, ~1e-6 apart.)
  np.testing.assert_allclose(group.logprobs, np.repeat(one.logprobs, 3, axis=0), atol=1e-5)
  # Greedy log-probs are untempered: log_softmax(logits). (Relative tolerance: this model's logits
  # reach ~10, see small_logit_llama; the 1e-5 absolute check is in the test above.)
  expected = _forward_logprobs(model, one, 1, 1.0)
  np.testing.assert_allclose(one.logprobs[one.completion_mask], expected[one.completion_mask],
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("settings", [dict(max_new_tokens=12, eos_ids=[2], pad_id=0), SAMPLED])
def test_prefill_in_query_chunks_samples_as_one_block_does(tiny_checkpoint, settings):
  """A prompt longer than attention_query_chunk is prefilled in query chunks; the decode after it,
  one row per prompt (greedy) or a group sharing the prompt's cache (sampled), gives the tokens and
  log-probs of the one-block prefill."""
  path = tiny_checkpoint("llama", **_VARIED)
  ids, mask = random_prompts((21, 9, 1), 96, seed=4)  # bucket 24 > 5: 5 chunks of 5 (1 padded)
  key = jax.random.key(5)
  plain, chunked = (sampling.generate_ids(load_pretrained(path, attention_query_chunk=chunk), ids,
                                          mask, seed=key, **settings) for chunk in (0, 5))
  assert sampling.last_stats()["prompt_bucket"] == 24
  np.testing.assert_array_equal(chunked.token_ids, plain.token_ids)
  np.testing.assert_array_equal(chunked.lengths, plain.lengths)
  np.testing.assert_allclose(chunked.logprobs, plain.logprobs, atol=1e-5, rtol=0)


def test_batch_shared_prefix_generates_as_whole_prompts(tiny_llama):
  """Prompts that all begin with the same tokens (a recipe's instructions), prefilled once for the
  batch and read once per decode step, give the whole prompts' greedy tokens and log-probs, and so
  do groups of sampled completions (the prefix joined to each prompt's cache); a batch whose common
  prefix is shorter than the minimum runs whole prompts."""
  _, model = tiny_llama
  rest, rest_mask = random_prompts((4, 9, 1, 6), 96, seed=3)
  common = np.random.default_rng(8).integers(3, 96, 13).astype(np.int32)
  ids, mask = sampling.left_pad([np.concatenate([common, r[m]]) for r, m in zip(rest, rest_mask)], 0)
  settings = dict(max_new_tokens=16, eos_ids=[2], pad_id=0)
  plain = sampling.generate_ids(model, ids, mask, **settings)
  shared = sampling.generate_ids(model, ids, mask, shared_prefix_min_tokens=8, **settings)
  # The common prefix ends where the shortest prompt's last token begins (13 + 1 - 1 tokens).
  assert sampling.last_stats()["shared_prefix_bucket"] == sampling.bucket_length(13)
  np.testing.assert_array_equal(shared.token_ids, plain.token_ids)
  np.testing.assert_array_equal(shared.lengths, plain.lengths)
  np.testing.assert_allclose(shared.logprobs, plain.logprobs, atol=1e-5, rtol=0)
  np.testing.assert_array_equal(shared.prompt_ids, plain.prompt_ids)
  sampling.generate_ids(model, ids, mask, shared_prefix_min_tokens=14, **settings)
  assert sampling.last_stats()["shared_prefix_bucket"] == 0
  groups = dict(num_samples=3, temperature=1.0, seed=jax.random.key(2), **settings)
  plain = sampling.generate_ids(model, ids, mask, **groups)
  shared = sampling.generate_ids(model, ids, mask, shared_prefix_min_tokens=8, **groups)
  stats = sampling.last_stats()
  assert stats["shared_prefix_bucket"] == sampling.bucket_length(13)
  assert stats["shared_prefix_copies"] == 4  # joined to each prompt's cache
  np.testing.assert_array_equal(shared.token_ids, plain.token_ids)
  np.testing.assert_allclose(shared.logprobs, plain.logprobs, atol=1e-5, rtol=0)
  assert len(set(map(tuple, plain.token_ids[:3]))) > 1  # the group's samples differ


# (top-p alone is covered at the selection level in test_selection.py; each case here is a compile.)
@pytest.mark.parametrize("temperature,top_k,top_p", [(0.8, 0, 1.0), (1.2, 6, 0.8)])
def test_next_token_distribution_matches_analytic(tiny_checkpoint, temperature, top_k, top_p):
  path = tiny_checkpoint("llama", vocab_size=16, **_VARIED)
  model = load_pretrained(path)
  ids, mask = random_prompts((4, 9), 16, seed=3)
  samples = 3000
  gen = sampling.generate_ids(model, ids, mask, max_new_tokens=1, eos_ids=[], pad_id=0,
                              temperature=temperature, top_k=top_k, top_p=top_p,
                              num_samples=samples, seed=jax.random.key(11))
  last_logits = np.asarray(model(jnp.asarray(ids), jnp.asarray(mask))[:, -1])
  for p in range(2):
    probs = reference_probs(last_logits[p], temperature, top_k, top_p)
    counts = np.bincount(gen.token_ids[p * samples:(p + 1) * samples, 0], minlength=16)
    assert np.all(counts[probs == 0] == 0), f"prompt {p}: a filtered-out token was sampled"
    keep = probs > 0
    _, pvalue = stats.chisquare(counts[keep], probs[keep] * samples)
    assert pvalue > 1e-3, (p, counts, probs * samples)


def test_repeated_calls_do_not_recompile(small_logit_llama):
  model = small_logit_llama
  ids, mask = random_prompts(_LENGTHS, 96, seed=4)
  first = sampling.generate_ids(model, ids, mask, seed=1, **SAMPLED)
  counts = sampling.trace_counts()
  # Another key, temperature, top-p and prompt lengths inside the same bucket: same programs.
  ids2, mask2 = random_prompts((12, 2, 7, 16), 96, seed=5)
  second = sampling.generate_ids(model, ids2, mask2, seed=jax.random.key(2),
                                 **dict(SAMPLED, temperature=0.5, top_p=1.0))
  assert sampling.trace_counts() == counts
  assert not np.array_equal(first.token_ids, second.token_ids)


def test_bad_arguments_raise(tiny_llama):
  _, model = tiny_llama
  ids, mask = random_prompts((3, 5), 96)
  with pytest.raises(ValueError, match="top_p"):
    sampling.generate_ids(model, ids, mask, max_new_tokens=4, top_p=0.0)
  with pytest.raises(ValueError, match="LEFT-padded"):
    sampling.generate_ids(model, ids, mask[:, ::-1], max_new_tokens=4)
  with pytest.raises(ValueError, match="tokenizer"):
    sampling.generate_ids(model, ids, mask, max_new_tokens=4, stop=("</a>",))


def test_bucket_length():
  assert [sampling.bucket_length(n) for n in (1, 16, 17, 25, 33, 100, 129, 200, 270, 300)] == [
      16, 16, 20, 28, 40, 112, 160, 224, 320, 320]
