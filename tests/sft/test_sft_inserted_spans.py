"""SFT on traces with tool results: the text a tool inserted carries no loss (exactly zero gradient at
its logits), the policy's own tokens keep theirs, and a target without tool results trains exactly
as before."""

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "rl"))
import toy_task  # noqa: E402

from grounding_jax import models  # noqa: E402
from grounding_jax.recipes import get_recipe  # noqa: E402
from grounding_jax.sft import data as sft_data  # noqa: E402
from grounding_jax.sft import trainer as sft  # noqa: E402

_HEAD = "w9 w10 w11 w12 w9"  # a shared instruction, so the rows can be packed


def _spans(target, *inserted):
  return tuple((target.index(x), target.index(x) + len(x)) for x in inserted)


# (target, inserted spans): "w30 w31", "w40 w41 w42", ... stand for a tool's results.
_TARGETS = [(t, _spans(t, *x)) for t, x in (("w5 w6 w30 w31 w7 w8", ["w30 w31"]),
                                            ("w5 w40 w41 w42 w6 w43 w44", ["w40 w41 w42", "w43 w44"]),
                                            ("w5 w6 w7", []),
                                            ("w8 w50 w51", ["w50 w51"]))]


def _rows():
  return [sft_data.SFTRow(prompt=f"{_HEAD} w{20 + i}", target=t, inserted_spans=spans)
          for i, (t, spans) in enumerate(_TARGETS)]


def _config(tmp_path, shared_prefix_min_tokens=0):
  c = sft.default_config()
  c.workdir = str(tmp_path)
  c.batch_size = c.micro_batch_size = 4
  c.shared_prefix_min_tokens = shared_prefix_min_tokens
  c.logging.console = False
  c.logprob_chunk_size = 48
  return c


@pytest.fixture(scope="module")
def model(tiny_checkpoint):
  return models.load_pretrained(tiny_checkpoint("llama"))


def test_inserted_tokens_leave_the_loss_mask_and_the_rest_is_unchanged():
  tok = toy_task.make_tokenizer()
  pairs = [(r.prompt, r.target) for r in _rows()]
  data = sft_data.tokenize_pairs(tok, pairs, max_prompt_tokens=16, max_completion_tokens=16,
                            inserted_spans=[r.inserted_spans for r in _rows()])
  before = sft_data.tokenize_pairs(tok, pairs, max_prompt_tokens=16, max_completion_tokens=16)
  for k in ("prompt_ids", "prompt_mask", "completion_ids"):  # word-level: the same tokens
    np.testing.assert_array_equal(data[k], before[k])
  words = lambda r, m: tok.decode(data["completion_ids"][r][m[r]], skip_special_tokens=True)
  inserted = data["completion_ids"].astype(bool) & ~data["loss_mask"] & before["loss_mask"]
  assert [words(r, inserted) for r in range(4)] == ["w30 w31", "w40 w41 w42 w43 w44", "", "w50 w51"]
  assert [words(r, data["loss_mask"]) for r in range(4)] == ["w5 w6 w7 w8", "w5 w6", "w5 w6 w7", "w8"]
  np.testing.assert_array_equal(data["loss_mask"][2], before["loss_mask"][2])  # no spans: as before
  assert sft.attended_lengths(data["loss_mask"]).tolist() == [7, 8, 4, 4]  # the last loss token: EOS
  # A trailing hole (a result cut by max_completion_tokens) conditions nothing: it is not run.
  assert sft.attended_lengths(np.array([[1, 0, 0], [0, 0, 0], [0, 1, 0]], bool)).tolist() == [1, 0, 2]
  with pytest.raises(ValueError, match=r"inserted span \(3, 1\)"):
    sft_data.target_tokens(tok, "w5 w6", ((3, 1),))


def test_loss_gradient_and_packing_skip_inserted_tokens_exactly(model, tmp_path):
  """The trainer's rows: the SFT loss is the dense re-derivation over the policy's tokens only (the
  inserted ones attended as context); jax.grad of it with respect to the hidden states that give
  each completion position's logits is exactly 0 at an inserted token, non-zero elsewhere; and
  shared-prefix packing keeps the inserted tokens as context: the same loss (its gradient's
  equality is test_sft_trainer.py's, on rows without holes)."""
  tr = sft.SFTTrainer(_config(tmp_path), model=model, tokenizer=toy_task.make_tokenizer(),
                      rows=_rows())
  data, lp = tr.data, tr.data["prompt_ids"].shape[1]
  batch = {k: jnp.asarray(v) for k, v in data.items()}
  ids = np.concatenate([data["prompt_ids"], data["completion_ids"]], 1)
  attended = np.arange(data["loss_mask"].shape[1])[None] < sft.attended_lengths(data["loss_mask"])[:, None]
  logits = np.asarray(model(jnp.asarray(ids), jnp.asarray(np.concatenate(
      [data["prompt_mask"], attended], 1))), np.float64)
  logp = logits - logits.max(-1, keepdims=True)
  logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
  per_token = np.take_along_axis(logp[:, :-1], ids[:, 1:, None], -1)[..., 0][:, lp - 1:]

  class Shifted:  # the model, `delta` added to its final hidden states
    def __init__(self, delta):
      self.delta = delta

    def hidden_states(self, ids, mask):
      return model.hidden_states(ids, mask) + self.delta

    def lm_head_kernel(self):
      return model.lm_head_kernel()

  nll = lambda d, b: sft.nll_sum(Shifted(d), b, chunk_size=40)
  (s, n), grad = jax.jit(jax.value_and_grad(nll, has_aux=True))(
      jnp.zeros((*ids.shape, model.config.hidden_size)), batch)
  assert int(n) == data["loss_mask"].sum() == 4 + 2 + 3 + 1 + 4  # policy words + one EOS each
  np.testing.assert_allclose(s, -(per_token * data["loss_mask"]).sum(), rtol=1e-5)
  per_position = np.abs(np.asarray(grad)).sum(-1)[:, lp - 1:-1]  # predicts completion token t
  inserted = attended & ~data["loss_mask"]
  assert inserted.sum() == 2 + 5 + 2
  assert np.all(per_position[inserted] == 0.0)
  assert np.all(per_position[data["loss_mask"]] > 0.0)

  packed = sft.pack_micro_batches(data, np.arange(4), 4, sft.shared_prefix_length(data),
                                  width_multiple=8)
  assert packed["target_mask"].sum() == data["loss_mask"].sum()
  assert (packed["segment"] >= 0).sum() == data["prompt_mask"].sum() - 4 * 5 + attended.sum()
  s_packed, n_packed = jax.jit(sft.packed_nll_sum, static_argnums=2)(
      model, {k: jnp.asarray(v[0]) for k, v in packed.items()}, 40)
  assert int(n_packed) == int(n)
  np.testing.assert_allclose(s_packed, s, rtol=1e-5)  # an inserted token out of the context: differs


def test_search_gold_traces_mask_the_results_other_recipes_none(smollm2_dir):
  """A search recipe's SFT rows: the masked text is exactly the result blocks the rollout would
  insert (separators and tags included); the thinking, the queries and the answer carry loss. A
  recipe without a tool (TruthRL) has no spans: its rows tokenise as before."""
  tok = models.load_tokenizer(smollm2_dir)
  c = sft.default_config()
  c.data.update(dict(kind="recipe", recipe="search_grounded", source="synthetic", num_examples=4,
                     seed=1))
  rows = sft_data.load_rows(c.data)
  fmt = get_recipe("search_grounded").tool_format
  data = sft_data.tokenize_pairs(tok, sft_data.render(rows, tok), max_prompt_tokens=1024,
                            max_completion_tokens=1024, inserted_spans=[r.inserted_spans for r in rows])
  for r, row in enumerate(rows):
    assert row.inserted_spans and row.inserted_spans == tuple(fmt.inserted_spans(row.target))
    n = sft.attended_lengths(data["loss_mask"])[r]
    ids, loss = data["completion_ids"][r][:n], data["loss_mask"][r][:n]
    blocks = [row.target[s:e] for s, e in row.inserted_spans]
    assert all(b.startswith("\n\n<information>") and b.endswith("</information>\n\n") for b in blocks)
    policy = row.target
    for b in blocks:
      policy = policy.replace(b, "", 1)
    assert tok.decode(ids[~loss]) == "".join(blocks)
    assert tok.decode(ids[loss], skip_special_tokens=True) == policy
    assert "<search>" in policy and policy.endswith("</answer>")
  c.data.recipe = "truthrl"
  assert all(r.inserted_spans == () for r in sft_data.load_rows(c.data))
